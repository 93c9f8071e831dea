"""Tests of wmrl_algos.ppi: the prediction-powered estimator's invariants, alone and inside CorrectionLoop.

The claims: λ = 0 is exactly GRPO on the anchor groups alone (same gradient, real torch); a useless
world model drives λ to ~0; for a deliberately biased world model the mean step over random anchor draws
is the all-real GRPO gradient (within its standard error) while the world model's own gradient is far
from it; the variance is 1 − ρ²(1 − n/N) of anchors-only's; the coefficient is cross-fitted; the state
resumes exactly. The policy gradients are real torch gradients of ``grpo_loss`` on a tabular softmax.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from wmrl_algos.advantages import group_advantages
from wmrl_algos.errors import CheckpointError, ConfigError
from wmrl_algos.grpo import grpo_loss
from wmrl_algos.loop import CorrectionConfig, CorrectionLoop
from wmrl_algos.ppi import PowerTuner, power_coefficient, powered_advantages
from wmrl_algos.types import ScoredGroup

N_GROUPS, GROUP_SIZE, N_ACTIONS = 8, 8, 6


def _policy_gradient(actions: np.ndarray, advantages: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The gradient of grpo_loss for a one-context softmax policy over N_ACTIONS (one step, ratio 1)."""
    logits = torch.zeros(N_ACTIONS, dtype=torch.float64, requires_grad=True)
    taken = torch.log_softmax(logits, dim=0)[torch.as_tensor(actions)].unsqueeze(1)
    loss, _ = grpo_loss(
        taken,
        taken.detach(),
        torch.as_tensor(advantages, dtype=torch.float64),
        torch.as_tensor(mask, dtype=torch.float64).unsqueeze(1),
    )
    loss.backward()
    assert logits.grad is not None
    return logits.grad.numpy().copy()


def _step(rng: np.random.Generator, bias: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Actions, real scores and predicted scores of one step (N_GROUPS x GROUP_SIZE)."""
    actions = rng.integers(0, N_ACTIONS, (N_GROUPS, GROUP_SIZE))
    real = actions / N_ACTIONS + rng.normal(0.0, 0.2, actions.shape)
    predicted = real + bias * (actions % 2) + rng.normal(0.0, 0.2, actions.shape)
    return actions, real, predicted


def _scores(row: np.ndarray) -> list[float | None]:
    return [None if np.isnan(value) else float(value) for value in row]


def _groups(mask: np.ndarray, real: np.ndarray, predicted: np.ndarray) -> list[ScoredGroup]:
    return [
        ScoredGroup(
            index,
            anchor=bool(anchor),
            predicted=tuple(_scores(predicted[index])),
            real=tuple(_scores(real[index])) if anchor else None,
        )
        for index, anchor in enumerate(mask)
    ]


def _powered_loop(coefficient: float | None = None, seed: int = 0) -> CorrectionLoop:
    tuner = PowerTuner()
    if coefficient is not None:
        tuner.load_state_dict({**tuner.state_dict(), "coefficient": coefficient})
    config = CorrectionConfig(anchor_fraction=0.25, seed=seed, debias=False)
    return CorrectionLoop(config, power=tuner)


def test_zero_coefficient_is_exactly_grpo_on_the_anchor_groups_alone() -> None:
    rng = np.random.default_rng(0)
    actions, real, predicted = _step(rng, bias=0.5)
    loop = _powered_loop(coefficient=0.0)
    mask = loop.plan(N_GROUPS)
    result = loop.correct(_groups(mask, real, predicted))
    advantages, trained = result.flat()
    anchored = [group for group, anchor in enumerate(mask) if anchor]
    alone = group_advantages([real[group].tolist() for group in anchored], [True] * len(anchored))
    expected = _policy_gradient(
        actions[anchored].ravel(),
        np.concatenate([a.values for a in alone]),
        np.concatenate([a.mask for a in alone]),
    )
    np.testing.assert_allclose(_policy_gradient(actions.ravel(), advantages, trained), expected, atol=1e-12)
    assert not trained[~np.repeat(mask, GROUP_SIZE)].any(), "world-model groups carry no term at λ = 0"
    assert result.metrics["wmrl/power_coefficient"] == 0.0


def test_useless_world_model_gets_a_coefficient_near_zero_and_the_step_of_anchors_only() -> None:
    rng = np.random.default_rng(1)
    loop = CorrectionLoop(CorrectionConfig(anchor_fraction=0.125, seed=1), power=PowerTuner())
    for _ in range(150):
        actions, real, _ = _step(rng)
        mask = loop.plan(N_GROUPS)
        loop.correct(_groups(mask, real, rng.uniform(0.0, 1.0, real.shape)))
    assert loop.power is not None and loop.power.coefficient < 0.05
    actions, real, _ = _step(rng)
    mask = loop.plan(N_GROUPS)
    advantages, trained = loop.correct(_groups(mask, real, rng.uniform(0.0, 1.0, real.shape))).flat()
    anchored = np.flatnonzero(mask)
    alone = group_advantages([real[group].tolist() for group in anchored], [True] * len(anchored))
    expected = _policy_gradient(
        actions[anchored].ravel(),
        np.concatenate([a.values for a in alone]),
        np.concatenate([a.mask for a in alone]),
    )
    gradient = _policy_gradient(actions.ravel(), advantages, trained)
    assert np.linalg.norm(gradient - expected) <= 0.1 * np.linalg.norm(expected)


def test_mean_step_over_random_anchor_draws_is_the_all_real_gradient_for_a_biased_world_model() -> None:
    rng = np.random.default_rng(2)
    actions, real, predicted = _step(rng, bias=1.0)  # odd actions over-rated by a full score unit
    predicted[0, :3] = np.nan  # unknown predictions
    predicted[5, :7] = np.nan  # a group the world model cannot rank at all
    real[3, 1] = np.nan  # an execution whose outcome is unknown
    everything = group_advantages([_scores(row) for row in real], [True] * N_GROUPS)
    all_real = _policy_gradient(
        actions.ravel(),
        np.concatenate([a.values for a in everything]),
        np.concatenate([a.mask for a in everything]),
    )
    model = group_advantages([_scores(row) for row in predicted], [False] * N_GROUPS)
    world_model_only = _policy_gradient(
        actions.ravel(),
        np.concatenate([a.values for a in model]),
        np.concatenate([a.mask for a in model]),
    )
    # the loss is linear in the advantages: one real gradient per trajectory, then each draw is a product
    size = actions.size
    basis = np.stack([_policy_gradient(actions.ravel(), np.eye(size)[i], np.ones(size)) for i in range(size)])
    draws = []
    for seed in range(600):
        loop = _powered_loop(0.7, seed)
        advantages, trained = loop.correct(_groups(loop.plan(N_GROUPS), real, predicted)).flat()
        assert not advantages[~trained].any()
        draws.append(advantages @ basis)
    draws = np.stack(draws)
    stderr = draws.std(axis=0, ddof=1) / np.sqrt(len(draws))
    assert np.all(np.abs(draws.mean(axis=0) - all_real) <= 4.0 * stderr + 1e-12), (
        draws.mean(axis=0),
        all_real,
        stderr,
    )
    assert np.max(np.abs(world_model_only - all_real) / stderr) > 20.0, "the bias is large enough to see"


def test_variance_at_the_tuned_coefficient_is_one_minus_rho_squared_of_anchors_only() -> None:
    rng = np.random.default_rng(3)
    n_anchor, trials = 2, 4000
    shape = (trials, N_GROUPS, GROUP_SIZE)
    real = rng.normal(0.0, 1.0, shape)
    predicted = real + rng.normal(0.0, 0.6, shape)
    scores = rng.normal(0.0, 1.0, shape)  # each trajectory's score function (one parameter)
    y, f = (
        (values - values.mean(axis=2, keepdims=True)) / values.std(axis=2, keepdims=True)
        for values in (real, predicted)
    )
    u, v = (y * scores).sum(axis=2).ravel(), (f * scores).sum(axis=2).ravel()  # per-group gradients
    coefficient = float(np.mean(u * v) / np.mean(v * v))
    rho = float(np.mean(u * v) / np.sqrt(np.mean(u * u) * np.mean(v * v)))
    anchors_only, powered = [], []
    for trial in range(trials):
        chosen = rng.choice(N_GROUPS, n_anchor, replace=False)
        anchors_only.append(float((y[trial, chosen] * scores[trial, chosen]).mean()))
        real_rows = [y[trial, group] if group in chosen else None for group in range(N_GROUPS)]
        out = powered_advantages(real_rows, list(f[trial]), coefficient)
        powered.append(float((np.stack([group.values for group in out]) * scores[trial]).mean()))
    ratio = np.var(powered, ddof=1) / np.var(anchors_only, ddof=1)
    expected = 1.0 - rho**2 * (1.0 - n_anchor / N_GROUPS)
    stderr = ratio * np.sqrt(4.0 / trials)
    assert ratio < 1.0 and abs(ratio - expected) <= 3.0 * stderr, (ratio, expected, stderr, rho)
    assert abs(np.mean(powered) - np.mean(anchors_only)) < 0.05, "same mean (both unbiased for zero)"


def test_each_step_uses_the_coefficient_fitted_on_earlier_steps_only() -> None:
    rng = np.random.default_rng(4)
    loop = CorrectionLoop(CorrectionConfig(anchor_fraction=0.25, seed=4), power=PowerTuner(prior_pairs=0))
    for _ in range(5):
        _, real, predicted = _step(rng)
        loop.correct(_groups(loop.plan(N_GROUPS), real, predicted))
    state = loop.state_dict()
    _, real, predicted = _step(rng)
    mask = loop.plan(N_GROUPS)
    before = loop.power.coefficient if loop.power is not None else None
    first = loop.correct(_groups(mask, real, predicted))
    loop.load_state_dict(state)
    loop.plan(N_GROUPS)
    flipped = np.where(np.repeat(mask[:, None], GROUP_SIZE, axis=1), -real, real)
    second = loop.correct(_groups(mask, flipped, predicted))
    assert first.metrics["wmrl/power_coefficient"] == before == second.metrics["wmrl/power_coefficient"]
    for index in np.flatnonzero(~mask):
        np.testing.assert_array_equal(first.advantages[index].values, second.advantages[index].values)


def test_an_unknown_prediction_counts_with_no_control_term() -> None:
    real, predicted = np.array([1.0, -1.0]), np.array([np.nan, 0.5])
    anchor, model = powered_advantages([real, None], [predicted, np.array([np.nan, -0.5])], 0.5)
    np.testing.assert_allclose(anchor.values, [2.0 * 1.0, 0.25 + 2.0 * (-1.0 - 0.25)])
    assert model.values.tolist() == [0.0, -0.25] and model.mask.tolist() == [False, True]


def test_a_step_without_anchor_groups_trains_on_nothing() -> None:
    out = powered_advantages([None, None], [np.array([1.0, -1.0])] * 2, 1.0)
    assert all(not group.mask.any() and not group.values.any() for group in out)


def test_coefficient_shrinks_with_few_pairs_and_is_clipped() -> None:
    assert power_coefficient(10.0, 10.0, pairs=8, prior_pairs=32) == pytest.approx(0.2)
    assert power_coefficient(10.0, 10.0, pairs=3200, prior_pairs=32) == pytest.approx(0.99, abs=1e-3)
    assert power_coefficient(-5.0, 10.0, pairs=100, prior_pairs=0) == 0.0
    assert power_coefficient(50.0, 10.0, pairs=100, prior_pairs=0) == 1.0
    assert power_coefficient(1.0, 0.0, pairs=100, prior_pairs=0) == 0.0


def test_tuner_and_loop_state_round_trip_resumes_exactly() -> None:
    rng = np.random.default_rng(5)
    config = CorrectionConfig(anchor_fraction=0.25, seed=5, min_pairs=8, refit_every=8)
    loop = CorrectionLoop(config, power=PowerTuner(half_life_pairs=64))
    steps = [_step(rng) for _ in range(8)]
    for _, real, predicted in steps[:4]:
        loop.correct(_groups(loop.plan(N_GROUPS), real, predicted))
    resumed = CorrectionLoop(config, power=PowerTuner(half_life_pairs=64))
    resumed.load_state_dict(loop.state_dict())
    for _, real, predicted in steps[4:]:
        one = loop.correct(_groups(loop.plan(N_GROUPS), real, predicted))
        two = resumed.correct(_groups(resumed.plan(N_GROUPS), real, predicted))
        np.testing.assert_array_equal(one.flat()[0], two.flat()[0])
        assert one.metrics == two.metrics
    assert loop.power is not None and loop.power.coefficient > 0.0
    with pytest.raises(CheckpointError, match="without a power tuner"):
        CorrectionLoop(config, power=PowerTuner()).load_state_dict(CorrectionLoop(config).state_dict())
    with pytest.raises(CheckpointError, match="half_life_pairs"):
        PowerTuner(half_life_pairs=32).load_state_dict(PowerTuner().state_dict())
    with pytest.raises(CheckpointError, match="outside"):
        PowerTuner().load_state_dict({**PowerTuner().state_dict(), "coefficient": 2.0})


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"anchor_selection": "uncertainty"}, "uniform random sample"),
        ({"anchor_fraction": 0.0, "min_anchor_groups": 0, "denoise": False}, "min_anchor_groups=0"),
        ({"train_anchor_on": "calibrated"}, "train_anchor_on='calibrated'"),
    ],
)
def test_settings_that_break_unbiasedness_are_refused(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        CorrectionLoop(CorrectionConfig(**settings), power=PowerTuner())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: PowerTuner(half_life_pairs=0.0), "half_life_pairs=0.0"),
        (lambda: PowerTuner(prior_pairs=-1.0), "prior_pairs=-1.0"),
        (lambda: powered_advantages([None], [np.zeros(2)], 1.5), "coefficient=1.5"),
        (lambda: powered_advantages([None], [], 0.5), "1 groups of real"),
        (lambda: powered_advantages([np.zeros(3)], [np.zeros(2)], 0.5), "3 real advantages but 2"),
        (lambda: PowerTuner().push(np.zeros(2), np.array([np.inf, 0.0])), "infinite"),
    ],
)
def test_invalid_arguments_are_refused_with_the_value(call: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        call()  # type: ignore[operator]
