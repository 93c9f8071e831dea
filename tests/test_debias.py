"""Tests of Online Debiasing: the isotonic fit, the online buffer, calibration metrics, resume."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wmrl_algos.advantages import group_advantages
from wmrl_algos.debias import IsotonicMap, OnlineDebiaser, fit_isotonic
from wmrl_algos.errors import CheckpointError, ConfigError

finite = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False)


def test_fit_matches_scikit_learn_isotonic_regression() -> None:
    from sklearn.isotonic import IsotonicRegression

    rng = np.random.default_rng(0)
    predicted = np.round(rng.uniform(0, 1, 300), 2)
    real = np.clip(predicted**2 + rng.normal(0, 0.1, 300), 0, 1)
    reference = IsotonicRegression(out_of_bounds="clip").fit(predicted, real)
    queries = np.linspace(-0.5, 1.5, 101)
    np.testing.assert_allclose(fit_isotonic(predicted, real)(queries), reference.predict(queries), atol=1e-9)


def test_map_clips_outside_the_seen_range() -> None:
    isotonic_map = fit_isotonic(np.array([0.2, 0.4, 0.8]), np.array([0.1, 0.5, 0.7]))
    assert isotonic_map(np.array([-10.0, 0.0, 1.0, 10.0])).tolist() == [0.1, 0.1, 0.7, 0.7]


def test_fit_drops_unknown_pairs_and_keeps_nan_as_nan() -> None:
    isotonic_map = fit_isotonic(np.array([0.0, np.nan, 1.0, 0.5]), np.array([0.0, 5.0, 1.0, np.nan]))
    assert isotonic_map.knots == (0.0, 1.0)
    out = isotonic_map(np.array([np.nan, 0.5]))
    assert np.isnan(out[0]) and out[1] == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("predicted", "real", "match"),
    [
        ([0.0, 1.0], [0.0], "2 predicted scores but 1 real"),
        ([np.nan], [1.0], "no pair"),
        ([np.inf, 0.0], [1.0, 0.0], "infinite"),
    ],
)
def test_fit_rejects_bad_input(predicted: list[float], real: list[float], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        fit_isotonic(np.array(predicted), np.array(real))


def test_isotonic_map_rejects_decreasing_values() -> None:
    with pytest.raises(ConfigError, match="non-decreasing"):
        IsotonicMap(knots=(0.0, 1.0), values=(1.0, 0.0))


@settings(max_examples=60, deadline=None)
@given(
    pairs=st.lists(st.tuples(finite, finite), min_size=1, max_size=60),
    group=st.lists(finite, min_size=2, max_size=12),
)
def test_map_is_monotone_and_never_reorders_a_group(
    pairs: list[tuple[float, float]], group: list[float]
) -> None:
    predicted, real = (np.array(side) for side in zip(*pairs, strict=True))
    isotonic_map = fit_isotonic(predicted, real)
    scores = np.array(group)
    mapped = isotonic_map(scores)
    order = np.argsort(scores, kind="stable")
    assert np.all(np.diff(mapped[order]) >= -1e-9)
    assert mapped.min() >= real.min() - 1e-9 and mapped.max() <= real.max() + 1e-9


@settings(max_examples=40, deadline=None)
@given(pairs=st.lists(st.tuples(finite, finite), min_size=2, max_size=40))
def test_isotonic_fit_is_no_worse_than_the_best_constant(pairs: list[tuple[float, float]]) -> None:
    predicted, real = (np.array(side) for side in zip(*pairs, strict=True))
    fitted = fit_isotonic(predicted, real)(predicted)
    assert np.sum((fitted - real) ** 2) <= np.sum((real - real.mean()) ** 2) + 1e-6 * (1 + np.sum(real**2))


def test_isotonic_map_survives_group_standardisation_where_affine_does_not() -> None:
    rng = np.random.default_rng(0)
    real_train = rng.uniform(0, 1, 2000)
    predicted_train = real_train**3
    isotonic_map = fit_isotonic(predicted_train, real_train)
    slope, intercept = np.polyfit(predicted_train, real_train, 1)

    real_group = np.array([0.1, 0.3, 0.5, 0.7, 0.9])
    predicted_group = real_group**3
    target = group_advantages([real_group.tolist()], [False])[0].values

    def advantages_of(scores: np.ndarray) -> np.ndarray:
        return group_advantages([scores.tolist()], [False])[0].values

    raw = advantages_of(predicted_group)
    affine = advantages_of(slope * predicted_group + intercept)
    isotonic = advantages_of(isotonic_map(predicted_group))
    np.testing.assert_allclose(affine, raw, atol=1e-5)
    assert np.abs(raw - target).max() > 0.2
    assert np.abs(isotonic - target).max() < 0.02


def test_identity_before_min_pairs() -> None:
    debiaser = OnlineDebiaser(min_pairs=16, refit_every=1)
    debiaser.push([0.1] * 8, [0.9] * 8)
    debiaser.push([0.2] * 7, [0.95] * 7)
    assert not debiaser.is_fitted and debiaser.n_pairs == 15
    assert debiaser.apply(0.1) == 0.1
    assert debiaser.apply([0.1, None, 0.3]) == [0.1, None, 0.3]
    debiaser.push([0.3], [1.0])
    assert debiaser.is_fitted
    assert debiaser.apply(0.1) == pytest.approx(0.9)


def test_refit_waits_for_refit_every_new_pairs() -> None:
    debiaser = OnlineDebiaser(min_pairs=4, refit_every=8)
    debiaser.push([0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 2.0, 3.0])
    assert not debiaser.is_fitted
    debiaser.push([4.0, 5.0, 6.0, 7.0], [4.0, 5.0, 6.0, 7.0])
    assert debiaser.is_fitted
    debiaser.push([8.0] * 7, [100.0] * 7)
    assert debiaser.apply(8.0) == pytest.approx(7.0)
    debiaser.push([8.0], [100.0])
    assert debiaser.apply(8.0) == pytest.approx(100.0)


def test_ungraded_pairs_are_skipped_not_zeroed() -> None:
    debiaser = OnlineDebiaser(min_pairs=2, refit_every=1)
    debiaser.push([0.5, 0.5, None, 0.9], [None, 0.8, 0.0, 1.0])
    assert debiaser.n_pairs == 2
    assert debiaser.apply(0.5) == pytest.approx(0.8)


def test_old_pairs_age_out_so_the_map_tracks_drift() -> None:
    debiaser = OnlineDebiaser(capacity=16, min_pairs=16, refit_every=8)
    grid = np.linspace(0, 1, 8).tolist()
    for _ in range(2):
        debiaser.push(grid, [0.2 * x for x in grid])
    assert debiaser.apply(1.0) == pytest.approx(0.2)
    for _ in range(2):
        debiaser.push(grid, [0.9 * x for x in grid])
    assert debiaser.n_pairs == 16
    assert debiaser.apply(1.0) == pytest.approx(0.9)


def test_apply_keeps_the_container_kind() -> None:
    debiaser = OnlineDebiaser(min_pairs=2, refit_every=2)
    debiaser.push([0.0, 1.0], [0.0, 2.0])
    assert debiaser.apply(None) is None
    assert isinstance(debiaser.apply(0.5), float) and debiaser.apply(0.5) == pytest.approx(1.0)
    array = debiaser.apply(np.array([0.5, np.nan]))
    assert isinstance(array, np.ndarray) and array[0] == pytest.approx(1.0) and np.isnan(array[1])
    assert debiaser.apply((0.5, None)) == [pytest.approx(1.0), None]


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nan_or_inf_scores_are_rejected(bad: float) -> None:
    debiaser = OnlineDebiaser()
    with pytest.raises(ConfigError, match="use None"):
        debiaser.push([bad], [0.0])
    with pytest.raises(ConfigError, match="use None"):
        debiaser.apply([0.1, bad])
    with pytest.raises(ConfigError, match="use None"):
        debiaser.apply(bad)


def test_infinite_array_scores_are_rejected_but_nan_means_unknown() -> None:
    debiaser = OnlineDebiaser(min_pairs=2, refit_every=2)
    debiaser.push([0.0, 1.0], [0.0, 2.0])
    with pytest.raises(ConfigError, match="infinite"):
        debiaser.apply(np.array([0.5, np.inf]))
    assert np.isnan(debiaser.apply(np.array([np.nan]))[0])


def test_mismatched_group_lengths_raise() -> None:
    with pytest.raises(ConfigError, match="2 predicted scores but 1 real"):
        OnlineDebiaser().push([0.1, 0.2], [0.1])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"capacity": 0}, "capacity=0"),
        ({"capacity": 8, "min_pairs": 9}, "min_pairs=9"),
        ({"min_pairs": 0}, "min_pairs=0"),
        ({"refit_every": 0}, "refit_every=0"),
    ],
)
def test_invalid_arguments_raise_config_error_naming_the_value(kwargs: dict[str, int], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        OnlineDebiaser(**kwargs)


def test_residuals_show_calibration_removes_a_monotone_bias() -> None:
    rng = np.random.default_rng(1)
    debiaser = OnlineDebiaser(min_pairs=16, refit_every=8)
    for _ in range(40):
        real = rng.uniform(0, 1, 8)
        debiaser.push((real**4).tolist(), real.tolist())
    real_groups = [rng.uniform(0, 1, 8) for _ in range(10)]
    before, after = debiaser.residuals(
        [(r**4).tolist() for r in real_groups], [r.tolist() for r in real_groups]
    )
    assert before is not None and after is not None
    assert after < 0.1 * before


def test_residuals_are_none_without_a_usable_group() -> None:
    assert OnlineDebiaser().residuals([[0.1, None]], [[0.2, 0.3]]) == (None, None)


def test_restored_debiaser_makes_the_same_maps() -> None:
    rng = np.random.default_rng(2)
    original = OnlineDebiaser(capacity=40, min_pairs=16, refit_every=8)
    for _ in range(9):
        real = rng.uniform(0, 1, 8)
        original.push(np.sqrt(real).tolist(), real.tolist())
    original.push([0.5] * 3, [0.1] * 3)
    restored = OnlineDebiaser()
    restored.load_state_dict(pickle.loads(pickle.dumps(original.state_dict())))
    queries = np.linspace(0, 1, 21)
    np.testing.assert_array_equal(original.apply(queries), restored.apply(queries))
    for _ in range(5):
        real = rng.uniform(0, 1, 8)
        original.push(real.tolist(), real.tolist())
        restored.push(real.tolist(), real.tolist())
        np.testing.assert_array_equal(original.apply(queries), restored.apply(queries))


def test_corrupt_state_raises_checkpoint_error() -> None:
    state = OnlineDebiaser().state_dict()
    state["map"] = {"knots": [0.0, 1.0], "values": [1.0, 0.0]}
    with pytest.raises(CheckpointError, match="online debiasing state"):
        OnlineDebiaser().load_state_dict(state)


def test_fitted_map_pickles() -> None:
    isotonic_map = fit_isotonic(np.array([0.0, 1.0]), np.array([0.0, 1.0]))
    assert pickle.loads(pickle.dumps(isotonic_map)) == isotonic_map
