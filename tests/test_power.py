"""The expected effect of a world model's agreement: the variance formula against a simulated estimator.

The simulation is the prediction-powered GRPO step itself, not the formula rewritten: N groups of G
trajectories with correlated Gaussian real and predicted rewards, GRPO's within-group standardisation,
a per-trajectory score ∇log π independent of the rewards, random anchor subsets and the optimal λ.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from wmrl_algos.errors import ConfigError
from wmrl_algos.power import ExpectedEffect, variance_ratio

REPLICATES = 40_000
GROUP_SIZE = 8


def _standardised(values: np.ndarray) -> np.ndarray:
    return (values - values.mean(-1, keepdims=True)) / values.std(-1, keepdims=True)


def simulate_step(rho: float, groups: int, anchors: int, seed: int) -> dict[str, np.ndarray | float]:
    """Per-replicate gradients of the prediction-powered, anchors-only and all-real GRPO steps."""
    rng = np.random.default_rng(seed)
    shape = (REPLICATES, groups, GROUP_SIZE)
    real = rng.standard_normal(shape)
    predicted = rho * real + math.sqrt(1.0 - rho**2) * rng.standard_normal(shape)
    real_advantage, predicted_advantage = _standardised(real), _standardised(predicted)
    score = rng.standard_normal(shape)
    real_term = (real_advantage * score).mean(-1)
    predicted_term = (predicted_advantage * score).mean(-1)
    order = rng.random((REPLICATES, groups)).argsort(axis=1)
    anchor = order < anchors
    measured = float((real_advantage * predicted_advantage).mean())
    coefficient = min(max(measured, 0.0), 1.0)
    powered = (
        coefficient * predicted_term.mean(-1)
        + ((real_term - coefficient * predicted_term) * anchor).sum(-1) / anchors
    )
    return {
        "measured": measured,
        "powered": powered,
        "anchors_only": (real_term * anchor).sum(-1) / anchors,
        "all_real": real_term.mean(-1),
    }


@pytest.mark.parametrize(("rho", "groups", "anchors"), [(0.62, 8, 1), (0.9, 8, 2), (0.3, 4, 1), (-0.5, 8, 1)])
def test_the_variance_ratio_matches_a_simulation_of_the_prediction_powered_step(
    rho: float, groups: int, anchors: int
) -> None:
    step = simulate_step(rho, groups, anchors, seed=groups + anchors)
    effect = ExpectedEffect(correlation=step["measured"], anchor_fraction=anchors / groups)
    anchors_only_variance = 1.0 / (anchors * GROUP_SIZE)  # Σ z² = G exactly, score variance 1
    squared = step["powered"] ** 2
    se = squared.std() / math.sqrt(REPLICATES)
    assert abs(squared.mean() - effect.variance_ratio * anchors_only_variance) < 4 * se
    anchors_only = step["anchors_only"] ** 2
    assert abs(anchors_only.mean() - anchors_only_variance) < 4 * anchors_only.std() / math.sqrt(REPLICATES)
    all_real_variance = np.mean(step["all_real"] ** 2)
    assert squared.mean() / all_real_variance == pytest.approx(effect.all_real_steps_ratio, rel=0.05)


def test_the_simulation_can_tell_the_formula_from_one_that_ignores_the_anchors_being_a_subset() -> None:
    step = simulate_step(0.9, groups=8, anchors=2, seed=1)
    rho = step["measured"]
    squared = step["powered"] ** 2
    se = squared.std() / math.sqrt(REPLICATES)
    anchors_only_variance = 1.0 / (2 * GROUP_SIZE)
    assert abs(squared.mean() - variance_ratio(rho, 0.25) * anchors_only_variance) < 4 * se
    assert abs(squared.mean() - (1.0 - rho**2) * anchors_only_variance) > 10 * se


@pytest.mark.parametrize("fraction", [0.125, 0.25, 0.5])
def test_a_useless_model_leaves_the_variance_of_anchors_only_and_a_perfect_one_that_of_all_real(
    fraction: float,
) -> None:
    useless = ExpectedEffect(correlation=0.0, anchor_fraction=fraction)
    perfect = ExpectedEffect(correlation=1.0, anchor_fraction=fraction)
    assert useless.variance_ratio == 1.0 and useless.speedup == 1.0 and useless.verdict == "no_gain"
    assert perfect.variance_ratio == pytest.approx(
        fraction
    ) and perfect.all_real_steps_ratio == pytest.approx(1)
    assert perfect.effective_anchor_fraction == pytest.approx(1.0)


def test_a_negative_correlation_predicts_no_gain_because_the_coefficient_is_clipped_at_zero() -> None:
    effect = ExpectedEffect(correlation=-0.4, anchor_fraction=0.125, correlation_se=0.05, n_groups=12)
    assert effect.variance_ratio == 1.0 and effect.variance_ratio_interval == (1.0, 1.0)
    summary = effect.summary()
    assert "will not help" in summary and "anchors alone" in summary and "r = -0.40 ± 0.05 on 12" in summary


def test_the_summary_states_the_ratio_its_interval_the_saving_and_the_assumption() -> None:
    effect = ExpectedEffect(correlation=0.62, anchor_fraction=0.125, correlation_se=0.05, n_groups=40)
    low, high = effect.variance_ratio_interval or (0.0, 0.0)
    assert low < effect.variance_ratio < high
    assert (low, high) == pytest.approx(
        (variance_ratio(0.62 + 0.05 * 1.959964, 0.125), variance_ratio(0.62 - 0.05 * 1.959964, 0.125)),
        rel=1e-6,
    )
    summary = effect.summary()
    expected = (
        f"within-group r = 0.62 ± 0.05 on 40 groups), the prediction-powered gradient's variance is "
        f"{100 * effect.variance_ratio:.0f} % ({100 * low:.0f}–{100 * high:.0f} %) of anchors-only's at "
        f"1 anchor group in 8: expected ≈ {1 / effect.variance_ratio:.1f}× fewer executions"
    )
    assert expected in summary and summary.endswith("(variance-limited regime)")
    assert effect.as_dict()["power/variance_ratio"] == effect.variance_ratio


def test_a_small_positive_correlation_is_called_negligible_and_an_uncertain_one_says_so() -> None:
    assert "too little to matter" in ExpectedEffect(correlation=0.15, anchor_fraction=0.125).summary()
    uncertain = ExpectedEffect(correlation=0.4, anchor_fraction=0.125, correlation_se=0.3, n_groups=3)
    assert uncertain.verdict == "gain" and "the interval includes no gain at all" in uncertain.summary()
    assert "on 3 groups, too few for a firm interval" in uncertain.summary()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"correlation": 1.2}, "correlation=1.2 is outside"),
        ({"correlation": -1.01}, "correlation=-1.01 is outside"),
        ({"correlation": math.nan}, "correlation=nan is NaN"),
        ({"correlation": "high"}, "correlation='high' is not a number"),
        ({"anchor_fraction": 0.0}, "anchor_fraction=0.0 is outside"),
        ({"anchor_fraction": 1.5}, "anchor_fraction=1.5 is outside"),
        ({"anchor_fraction": math.nan}, "anchor_fraction=nan is NaN"),
        ({"correlation_se": -0.1}, "correlation_se=-0.1"),
        ({"n_groups": 0}, "n_groups=0"),
        ({"confidence": 1.0}, "confidence=1.0"),
    ],
)
def test_bad_inputs_are_rejected_with_the_value_and_the_fix(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ExpectedEffect(**{"correlation": 0.5, "anchor_fraction": 0.125, **kwargs})


def test_the_pure_formula_rejects_what_the_dataclass_rejects() -> None:
    with pytest.raises(ConfigError, match="anchor_fraction=-0.1"):
        variance_ratio(0.5, -0.1)
    with pytest.raises(ConfigError, match="groups_per_step=0"):
        ExpectedEffect(correlation=0.5, anchor_fraction=0.125).effective_anchor_groups(0)
