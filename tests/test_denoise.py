"""Tests of Inverse-Variance Denoising: the centred residual, warmup, the anchor weight, resume."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from wmrl_algos.denoise import InverseVarianceWeighter, centred_residual
from wmrl_algos.errors import CheckpointError, ConfigError


def test_centred_residual_ignores_a_constant_offset() -> None:
    real = [0.1, 0.4, 0.8]
    assert centred_residual([r + 0.5 for r in real], real) == pytest.approx(0.0, abs=1e-12)


def test_centred_residual_is_normalised_by_the_real_variance() -> None:
    real = np.array([0.0, 1.0, 2.0, 3.0])
    noise = np.array([0.1, -0.2, 0.3, -0.2])
    small = centred_residual((real + noise).tolist(), real.tolist())
    large = centred_residual((10 * real + 10 * noise).tolist(), (10 * real).tolist())
    assert small == pytest.approx(large)
    assert small == pytest.approx(np.mean((noise - noise.mean()) ** 2) / np.var(real))


def test_ungraded_members_are_skipped_not_zeroed() -> None:
    with_unknown = centred_residual([0.2, None, 0.6, 0.9], [0.1, 0.5, None, 1.0])
    assert with_unknown == pytest.approx(centred_residual([0.2, 0.9], [0.1, 1.0]))


@pytest.mark.parametrize(
    ("calibrated", "real"),
    [([0.5, None], [0.5, 0.7]), ([0.1], [0.2]), ([0.1, 0.9, 0.4], [0.5, 0.5, 0.5])],
)
def test_residual_is_none_when_it_cannot_be_measured(
    calibrated: list[float | None], real: list[float]
) -> None:
    assert centred_residual(calibrated, real) is None


def test_unnormalised_residual_is_defined_for_constant_real_scores() -> None:
    assert centred_residual([0.0, 1.0], [0.5, 0.5], normalise=False) == pytest.approx(0.25)


def test_residual_rejects_nan_and_mismatched_lengths() -> None:
    with pytest.raises(ConfigError, match="use None"):
        centred_residual([float("nan"), 0.1], [0.2, 0.3])
    with pytest.raises(ConfigError, match="2 calibrated scores but 1 real"):
        centred_residual([0.1, 0.2], [0.1])


def test_anchor_weight_is_exactly_one_before_calibration() -> None:
    weighter = InverseVarianceWeighter(warmup_steps=3)
    assert weighter.anchor_weight == 1.0
    for _ in range(2):
        weighter.update([[0.0, 1.0, 0.2]], [[1.0, 0.0, 0.5]])
        assert weighter.anchor_weight == 1.0 and not weighter.is_calibrated
    weighter.update([[0.0, 1.0, 0.2]], [[1.0, 0.0, 0.5]])
    assert weighter.is_calibrated and weighter.anchor_weight == pytest.approx(2.0)


def test_steps_without_a_measurement_do_not_count_towards_warmup() -> None:
    weighter = InverseVarianceWeighter(warmup_steps=2)
    assert weighter.update([], []) is None
    assert weighter.update([[0.1, None]], [[0.2, 0.3]]) is None
    weighter.update([[0.1, 0.3]], [[0.2, 0.5]])
    assert not weighter.is_calibrated
    weighter.update([[0.1, 0.3]], [[0.2, 0.5]])
    assert weighter.is_calibrated


def test_update_returns_this_steps_measurement_and_eta2_averages_the_window() -> None:
    weighter = InverseVarianceWeighter(warmup_steps=1, window=2, disagreement="variance")
    real = [0.0, 1.0]
    first = weighter.update([[0.0, 1.0], [0.5, 0.5]], [real, real])
    assert first == pytest.approx(0.5)
    second = weighter.update([[0.0, 2.0]], [real])
    assert second == pytest.approx(1.0)
    assert weighter.eta2 == pytest.approx((0.0 + 1.0 + 1.0) / 3)
    weighter.update([[0.0, 1.0]], [real])
    assert weighter.eta2 == pytest.approx((1.0 + 0.0) / 2)


def test_useless_world_model_raises_anchor_weight() -> None:
    rng = np.random.default_rng(0)

    def run(drift_to_useless: bool) -> float:
        weighter = InverseVarianceWeighter(warmup_steps=5, w_max=10.0, window=8)
        for step in range(40):
            real = [rng.uniform(0, 1, 8) for _ in range(2)]
            useless = drift_to_useless and step >= 10
            calibrated = [rng.uniform(0, 1, 8) if useless else r + rng.normal(0, 0.05, 8) for r in real]
            weighter.update([c.tolist() for c in calibrated], [r.tolist() for r in real])
        return weighter.anchor_weight

    stays_good, becomes_useless = run(False), run(True)
    assert stays_good < 3.0
    assert becomes_useless > 5.0
    assert becomes_useless > stays_good


def test_anchor_weight_is_clipped_to_w_max_and_one() -> None:
    weighter = InverseVarianceWeighter(warmup_steps=1, w_max=4.0, window=1)
    weighter.update([[0.1, 0.9]], [[0.0, 1.0]])
    weighter.update([[1.0, 0.0]], [[0.0, 1.0]])
    assert weighter.anchor_weight == 4.0
    weighter.update([[0.0, 1.0]], [[0.0, 1.0]])
    assert weighter.anchor_weight == 1.0


def test_perfect_world_model_during_warmup_keeps_weight_one_until_it_disagrees() -> None:
    weighter = InverseVarianceWeighter(warmup_steps=1, w_max=6.0, window=1)
    weighter.update([[0.0, 1.0]], [[0.0, 1.0]])
    assert weighter.eta2_cal == 0.0 and weighter.anchor_weight == 1.0
    weighter.update([[1.0, 0.0]], [[0.0, 1.0]])
    assert weighter.anchor_weight == 6.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"warmup_steps": 0}, "warmup_steps=0"),
        ({"w_max": 0.5}, "w_max=0.5"),
        ({"w_max": float("inf")}, "w_max=inf"),
        ({"window": 0}, "window=0"),
    ],
)
def test_invalid_arguments_raise_config_error_naming_the_value(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        InverseVarianceWeighter(**kwargs)  # type: ignore[arg-type]


def test_mismatched_group_counts_raise() -> None:
    with pytest.raises(ConfigError, match="1 calibrated groups but 2 real"):
        InverseVarianceWeighter().update([[0.1, 0.2]], [[0.1, 0.2], [0.3, 0.4]])


def test_restored_weighter_gives_the_same_weights() -> None:
    rng = np.random.default_rng(3)
    original = InverseVarianceWeighter(warmup_steps=3, window=4)

    def step_groups() -> tuple[list[list[float]], list[list[float]]]:
        real = rng.uniform(0, 1, 8)
        return [(real + rng.normal(0, rng.uniform(0.01, 0.3), 8)).tolist()], [real.tolist()]

    for _ in range(4):
        original.update(*step_groups())
    restored = InverseVarianceWeighter()
    restored.load_state_dict(pickle.loads(pickle.dumps(original.state_dict())))
    assert restored.anchor_weight == original.anchor_weight
    for _ in range(10):
        calibrated, real = step_groups()
        assert original.update(calibrated, real) == restored.update(calibrated, real)
        assert original.anchor_weight == restored.anchor_weight
        assert original.eta2 == restored.eta2 and original.eta2_cal == restored.eta2_cal


def test_corrupt_state_raises_checkpoint_error() -> None:
    with pytest.raises(CheckpointError, match="inverse-variance state"):
        InverseVarianceWeighter().load_state_dict({"warmup_steps": 5})


def test_raw_disagreement_does_not_grow_when_only_the_real_variance_shrinks() -> None:
    """Same absolute world-model error, shrinking real spread: normalised eta2 grows, raw eta2 does not."""
    error = [0.02, -0.02, 0.02, -0.02]
    weights = {}
    for mode in ("variance", "raw"):
        weighter = InverseVarianceWeighter(warmup_steps=1, w_max=100.0, window=1, disagreement=mode)
        for spread in (1.0, 0.5, 0.25, 0.1):
            real = [spread * x for x in (0.0, 1.0, 0.2, 0.8)]
            weighter.update([[r + e for r, e in zip(real, error, strict=True)]], [real])
        weights[mode] = weighter.anchor_weight
    assert weights["raw"] == pytest.approx(2.0)
    assert weights["variance"] > 10.0


def test_unknown_disagreement_mode_raises_naming_the_value() -> None:
    with pytest.raises(ConfigError, match="'stddev'"):
        InverseVarianceWeighter(disagreement="stddev")  # type: ignore[arg-type]


def test_disagreement_mode_survives_a_state_round_trip() -> None:
    original = InverseVarianceWeighter(warmup_steps=1, disagreement="raw")
    restored = InverseVarianceWeighter()
    restored.load_state_dict(original.state_dict())
    assert restored.disagreement == "raw"
