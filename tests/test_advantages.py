"""Tests of group advantages: unknown rewards, masking, scaling, anchor weights and their fusion."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wmrl_algos.advantages import group_advantages
from wmrl_algos.errors import ConfigError


def test_ungraded_rollouts_are_excluded_not_zeroed() -> None:
    (with_unknown,) = group_advantages([[1.0, 0.5, None]], [False], scale="none")
    assert with_unknown.values.tolist() == [0.25, -0.25, 0.0]
    assert with_unknown.mask.tolist() == [True, True, False]
    assert np.isnan(with_unknown.rewards[2])
    (zeroed,) = group_advantages([[1.0, 0.5, 0.0]], [False], scale="none")
    assert zeroed.values[0] != pytest.approx(with_unknown.values[0])


def test_group_with_fewer_than_two_graded_members_is_masked_out() -> None:
    single, empty = group_advantages([[None, 0.7, None], [None, None]], [False, False])
    for advantages in (single, empty):
        assert not advantages.mask.any()
        assert advantages.values.tolist() == [0.0] * advantages.values.size


def test_std_scale_standardises_and_none_scale_only_centres() -> None:
    rewards = [0.0, 1.0, 2.0, 5.0]
    (standardised,) = group_advantages([rewards], [False], eps=0.0)
    (centred,) = group_advantages([rewards], [False], scale="none")
    assert standardised.values.mean() == pytest.approx(0.0, abs=1e-12)
    assert standardised.values.std() == pytest.approx(1.0)
    np.testing.assert_allclose(centred.values, np.array(rewards) - 2.0)


def test_all_equal_rewards_give_zero_advantage_but_stay_masked_in() -> None:
    (advantages,) = group_advantages([[0.5, 0.5, 0.5]], [False])
    assert advantages.values.tolist() == [0.0, 0.0, 0.0]
    assert advantages.mask.all()


def test_anchor_groups_are_multiplied_by_the_anchor_weight() -> None:
    rewards = [[0.0, 1.0], [0.0, 1.0]]
    anchor_group, world_model_group = group_advantages(rewards, [True, False], anchor_weight=3.0)
    assert anchor_group.weight == 3.0 and world_model_group.weight == 1.0
    np.testing.assert_allclose(anchor_group.values, 3.0 * world_model_group.values)


def test_normalised_weights_average_to_one_over_groups_with_a_signal() -> None:
    rewards = [[0.0, 1.0], [0.2, 0.4], [0.3, 0.9], [None, 0.5]]
    result = group_advantages(rewards, [True, False, False, True], anchor_weight=4.0, normalise_weights=True)
    weights = np.array([a.weight for a in result])
    assert weights[:3].mean() == pytest.approx(1.0)
    assert weights[0] / weights[1] == pytest.approx(4.0)


def test_normalised_weights_compute_the_papers_fusion() -> None:
    rng = np.random.default_rng(0)
    rho = 2.5
    rewards = [rng.uniform(0, 1, 8).tolist() for _ in range(8)]
    anchor = [True, False, False, True, False, False, False, False]
    per_group_gradient = rng.normal(size=(8, 8))
    unweighted = group_advantages(rewards, anchor, 1.0)
    weighted = group_advantages(rewards, anchor, rho, normalise_weights=True)

    def group_terms(result: list) -> np.ndarray:
        return np.array([(a.values * g).sum() for a, g in zip(result, per_group_gradient, strict=True)])

    plain = group_terms(unweighted)
    anchor_array = np.array(anchor)
    paper = (rho * plain[anchor_array].sum() + plain[~anchor_array].sum()) / (
        rho * anchor_array.sum() + (~anchor_array).sum()
    )
    assert group_terms(weighted).mean() == pytest.approx(paper)


@settings(max_examples=50, deadline=None)
@given(
    group=st.lists(
        st.one_of(st.none(), st.floats(min_value=-10, max_value=10, allow_nan=False)), min_size=0, max_size=10
    ),
    scale=st.sampled_from(["std", "none"]),
)
def test_advantages_sum_to_zero_over_graded_members_and_are_zero_elsewhere(
    group: list[float | None], scale: str
) -> None:
    (advantages,) = group_advantages([group], [False], scale=scale)  # type: ignore[arg-type]
    assert advantages.values[~advantages.mask].tolist() == [0.0] * int((~advantages.mask).sum())
    assert abs(advantages.values[advantages.mask].sum()) < 1e-6 * (1 + np.abs(advantages.values).sum())
    graded = np.array([score is not None for score in group], dtype=bool)
    assert advantages.mask.tolist() == (graded & (graded.sum() >= 2)).tolist()


@settings(max_examples=50, deadline=None)
@given(group=st.lists(st.floats(min_value=-10, max_value=10, allow_nan=False), min_size=2, max_size=10))
def test_advantages_preserve_the_order_of_rewards(group: list[float]) -> None:
    (advantages,) = group_advantages([group], [False])
    rewards = np.array(group)
    order = np.argsort(rewards, kind="stable")
    assert np.all(np.diff(advantages.values[order]) >= -1e-9)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"anchor": [True]}, "2 groups of rewards but 1 anchor flags"),
        ({"anchor_weight": 0.0}, "anchor_weight=0.0"),
        ({"anchor_weight": float("nan")}, "anchor_weight=nan"),
        ({"scale": "mad"}, "scale='mad'"),
        ({"eps": -1.0}, "eps=-1.0"),
    ],
)
def test_invalid_arguments_raise_config_error_naming_the_value(kwargs: dict, match: str) -> None:
    arguments = {"rewards": [[0.0, 1.0], [0.5, 0.6]], "anchor": [True, False]} | kwargs
    with pytest.raises(ConfigError, match=match):
        group_advantages(**arguments)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_nan_or_inf_rewards_are_rejected_naming_the_position(bad: float) -> None:
    with pytest.raises(ConfigError, match=r"rewards\[1\]\[0\]"):
        group_advantages([[0.0, 1.0], [bad, 0.5]], [False, False])
