"""Tests of Inverse-Variance Denoising: the centred residual, the agreement and paper rules, resume."""

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


def _stream(rng: np.random.Generator, quality: str, groups: int) -> list[tuple[list[float], list[float]]]:
    """``groups`` anchor groups of 8: an accurate (small noise) or a useless (independent) world model."""
    out = []
    for _ in range(groups):
        real = rng.uniform(0, 1, 8)
        calibrated = rng.uniform(0, 1, 8) if quality == "useless" else real + rng.normal(0, 0.1, 8)
        out.append((calibrated.tolist(), real.tolist()))
    return out


def _feed(weighter: InverseVarianceWeighter, stream: list[tuple[list[float], list[float]]]) -> list[float]:
    weights = []
    for calibrated, real in stream:
        weighter.update([calibrated], [real])
        weights.append(weighter.world_model_weight)
    return weights


def test_agreement_rule_gives_a_useless_world_model_about_zero_weight() -> None:
    weights = _feed(InverseVarianceWeighter(), _stream(np.random.default_rng(0), "useless", 300))
    assert np.mean(weights[32:]) < 0.02 and max(weights[100:]) < 0.1


def test_agreement_rule_gives_an_accurate_world_model_nearly_an_anchors_weight() -> None:
    weighter = InverseVarianceWeighter()
    weights = _feed(weighter, _stream(np.random.default_rng(1), "accurate", 200))
    assert min(weights[32:]) > 0.8
    assert weighter.agreement is not None and weighter.agreement > 0.9
    assert weighter.anchor_weight == 1.0


def test_agreement_rule_does_not_trust_before_evidence_and_its_caution_shrinks_with_evidence() -> None:
    cautious, point = InverseVarianceWeighter(), InverseVarianceWeighter(confidence=0.0)
    assert cautious.world_model_weight == 0.0 and cautious.slope_stderr == float("inf")
    stream = _stream(np.random.default_rng(2), "accurate", 40)
    gaps = [p - c for p, c in zip(_feed(point, stream), _feed(cautious, stream), strict=True)]
    assert all(gap >= 0.0 for gap in gaps)
    assert gaps[-1] < 0.5 * gaps[0]


def test_world_model_weight_follows_the_formula() -> None:
    weighter = InverseVarianceWeighter(confidence=0.0)
    _feed(weighter, _stream(np.random.default_rng(3), "accurate", 5))
    slope, r = weighter.slope, weighter.agreement
    assert slope is not None and r is not None
    assert weighter.world_model_weight == pytest.approx(min(1.0, slope) / (2.0 - r**2))


def test_moving_average_weights_a_group_half_after_half_life_groups() -> None:
    weighter = InverseVarianceWeighter(half_life_groups=2.0)
    weighter.update([[0.0, 1.0]], [[0.0, 1.0]])  # residual 0
    weighter.update([[1.0, 0.0]], [[0.0, 1.0]])  # residual 1
    weighter.update([[1.0, 0.0]], [[0.0, 1.0]])
    decay = 2**-0.5
    expected = (1 + decay) / (1 + decay + decay**2)
    assert weighter.eta2 == pytest.approx(expected)


def test_paper_rule_weight_is_exactly_one_during_warmup_then_one_plus_ratio() -> None:
    weighter = InverseVarianceWeighter(rule="paper", warmup_groups=3)
    for _ in range(2):
        weighter.update([[0.0, 1.0, 0.2]], [[1.0, 0.0, 0.5]])
        assert weighter.anchor_weight == 1.0 and not weighter.is_calibrated
    weighter.update([[0.0, 1.0, 0.2]], [[1.0, 0.0, 0.5]])
    assert weighter.is_calibrated and weighter.anchor_weight == pytest.approx(2.0)
    assert weighter.world_model_weight == 1.0


def test_paper_rule_pins_the_anchor_weight_near_two_whatever_the_quality() -> None:
    """The flaw the agreement rule fixes: eta2_cal is measured on the same world model."""
    finals = {}
    for quality in ("useless", "accurate"):
        weighter = InverseVarianceWeighter(rule="paper")
        _feed(weighter, _stream(np.random.default_rng(4), quality, 300))
        finals[quality] = weighter.anchor_weight
    assert 1.5 < finals["useless"] < 2.6 and 1.5 < finals["accurate"] < 2.6


def test_paper_rule_anchor_weight_is_clipped_to_w_max() -> None:
    weighter = InverseVarianceWeighter(rule="paper", warmup_groups=1, w_max=4.0, half_life_groups=0.01)
    weighter.update([[0.0, 1.0]], [[0.0, 1.0]])
    assert weighter.eta2_cal == 0.0 and weighter.anchor_weight == 1.0
    weighter.update([[1.0, 0.0]], [[0.0, 1.0]])
    assert weighter.anchor_weight == 4.0


def test_groups_without_two_known_members_are_skipped_not_counted() -> None:
    weighter = InverseVarianceWeighter(rule="paper", warmup_groups=2)
    assert weighter.update([], []) is None
    assert weighter.update([[0.1, None]], [[0.2, 0.3]]) is None
    assert weighter.measured_groups == 0
    weighter.update([[0.1, 0.3]], [[0.2, 0.5]])
    assert weighter.measured_groups == 1 and not weighter.is_calibrated


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rule": "magic"}, "rule='magic'"),
        ({"scale": "rank"}, "scale='rank'"),
        ({"half_life_groups": 0.0}, "half_life_groups=0.0"),
        ({"warmup_groups": 0}, "warmup_groups=0"),
        ({"w_max": 0.5}, "w_max=0.5"),
        ({"w_max": float("inf")}, "w_max=inf"),
        ({"confidence": -1.0}, "confidence=-1.0"),
    ],
)
def test_invalid_arguments_raise_config_error_naming_the_value(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        InverseVarianceWeighter(**kwargs)  # type: ignore[arg-type]


def test_mismatched_group_counts_raise() -> None:
    with pytest.raises(ConfigError, match="1 calibrated groups but 2 real"):
        InverseVarianceWeighter().update([[0.1, 0.2]], [[0.1, 0.2], [0.3, 0.4]])


@pytest.mark.parametrize("rule", ["agreement", "paper"])
def test_restored_weighter_gives_the_same_weights(rule: str) -> None:
    rng = np.random.default_rng(3)
    original = InverseVarianceWeighter(rule=rule, warmup_groups=3)  # type: ignore[arg-type]
    stream = _stream(rng, "accurate", 14)
    _feed(original, stream[:4])
    restored = InverseVarianceWeighter()
    restored.load_state_dict(pickle.loads(pickle.dumps(original.state_dict())))
    assert restored.rule == rule
    for calibrated, real in stream[4:]:
        assert original.update([calibrated], [real]) == restored.update([calibrated], [real])
        assert original.anchor_weight == restored.anchor_weight
        assert original.world_model_weight == restored.world_model_weight
        assert original.eta2 == restored.eta2 and original.eta2_cal == restored.eta2_cal


def test_corrupt_state_raises_checkpoint_error() -> None:
    with pytest.raises(CheckpointError, match="inverse-variance state"):
        InverseVarianceWeighter().load_state_dict({"rule": "agreement"})
    state = InverseVarianceWeighter().state_dict()
    with pytest.raises(CheckpointError, match="inverse-variance state"):
        InverseVarianceWeighter().load_state_dict({**state, "rule": "magic"})
