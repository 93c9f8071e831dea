"""Tests of the contextual bandit and its synthetic world model (benchmarks/toy_bandit.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from wmrl_algos.errors import ConfigError

BENCHMARKS = str(Path(__file__).resolve().parents[1] / "benchmarks")
if BENCHMARKS not in sys.path:
    sys.path.append(BENCHMARKS)  # benchmarks/ is no package: its scripts import the fixture by name

from toy_bandit import (  # noqa: E402
    BanditConfig,
    ContextualBandit,
    SyntheticWorldModel,
    WorldModelErrorConfig,
    policy_shift,
    sample_actions,
)


def test_outcomes_average_to_the_known_mean_reward_and_stay_in_the_unit_interval() -> None:
    bandit = ContextualBandit(BanditConfig(n_contexts=3, n_actions=4, n_ambitious=1, seed=2))
    rng = np.random.default_rng(0)
    contexts = np.repeat(np.arange(3), 4)
    actions = np.tile(np.arange(4), 3)[:, None].repeat(20_000, axis=1)
    outcomes = bandit.sample_outcomes(contexts, actions, rng)
    assert outcomes.min() >= 0.0 and outcomes.max() <= 1.0
    np.testing.assert_allclose(outcomes.mean(axis=1), bandit.mean_reward.ravel(), atol=0.01)


def test_ambitious_actions_have_a_wide_spread_and_safe_ones_a_narrow_one() -> None:
    bandit = ContextualBandit(BanditConfig(seed=0))
    assert bandit.ambitious.sum(axis=1).tolist() == [3] * 16
    assert bandit.spread[bandit.ambitious].min() >= 0.30 - 1e-12
    assert bandit.spread[~bandit.ambitious].max() <= 0.05


def test_expected_reward_is_exact_for_the_optimal_and_the_uniform_policy() -> None:
    bandit = ContextualBandit(BanditConfig(seed=3))
    optimal = np.eye(bandit.n_actions)[bandit.mean_reward.argmax(axis=1)]
    uniform = np.full((bandit.n_contexts, bandit.n_actions), 1 / bandit.n_actions)
    assert bandit.expected_reward(optimal) == pytest.approx(bandit.optimal_reward())
    assert bandit.expected_reward(uniform) == pytest.approx(bandit.mean_reward.mean())
    assert bandit.expected_reward(uniform) < bandit.optimal_reward()


def test_distortion_is_monotone_and_not_affine_and_the_identity_without_curvature() -> None:
    grid = np.linspace(0.0, 1.0, 11)
    distorted = SyntheticWorldModel(WorldModelErrorConfig(curvature=3.0)).distort(grid, 0.0)
    assert np.all(np.diff(distorted) > 0)
    assert np.all(np.diff(distorted, n=2) > 0), "a convex distortion is what GRPO cannot standardise away"
    assert distorted[0] == pytest.approx(0.0) and distorted[-1] == pytest.approx(1.0)
    flat = SyntheticWorldModel(WorldModelErrorConfig(curvature=0.0, curvature_drift=0.0))
    np.testing.assert_allclose(flat.distort(grid, 0.7), grid)


def test_the_monotone_bias_reorders_actions_so_the_world_model_argmax_is_worse() -> None:
    world_model = SyntheticWorldModel()
    floors = []
    for seed in range(5):
        bandit = ContextualBandit(BanditConfig(seed=seed))
        floors.append(
            bandit.optimal_reward() - bandit.greedy_reward(world_model.expected_prediction(bandit, 0.9))
        )
    assert min(floors) > 0.05


def test_without_ambitious_actions_the_bias_floor_almost_vanishes() -> None:
    world_model = SyntheticWorldModel()
    for seed in range(5):
        bandit = ContextualBandit(BanditConfig(n_ambitious=0, seed=seed))
        floor = bandit.optimal_reward() - bandit.greedy_reward(world_model.expected_prediction(bandit, 0.9))
        assert floor < 0.01


def test_expected_prediction_matches_the_average_of_sampled_predictions() -> None:
    bandit = ContextualBandit(BanditConfig(n_contexts=2, n_actions=3, n_ambitious=1, seed=1))
    world_model = SyntheticWorldModel(WorldModelErrorConfig(noise_std=0.2))
    rng = np.random.default_rng(5)
    contexts = np.repeat(np.arange(2), 3)
    actions = np.tile(np.arange(3), 2)[:, None].repeat(40_000, axis=1)
    predicted = world_model.predict(bandit.sample_outcomes(contexts, actions, rng), 0.4, rng)
    np.testing.assert_allclose(
        predicted.mean(axis=1), world_model.expected_prediction(bandit, 0.4).ravel(), atol=0.01
    )


def test_error_drifts_as_the_policy_moves_away_from_its_start() -> None:
    world_model = SyntheticWorldModel(
        WorldModelErrorConfig(curvature=3.0, curvature_drift=2.0, noise_drift=1.0)
    )
    assert world_model.curvature(0.5) == pytest.approx(4.0)
    assert world_model.noise_std(1.0) == pytest.approx(2 * world_model.noise_std(0.0))
    with pytest.raises(ConfigError, match=r"shift=1\.5"):
        world_model.curvature(1.5)


def test_policy_shift_is_the_mean_total_variation_distance() -> None:
    initial = np.full((2, 4), 0.25)
    moved = np.array([[1.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]])
    assert policy_shift(initial, initial) == 0.0
    assert policy_shift(moved, initial) == pytest.approx(0.375)


def test_sampled_actions_follow_the_policy_of_their_context() -> None:
    probabilities = np.array([[0.7, 0.2, 0.1], [0.0, 0.0, 1.0]])
    actions = sample_actions(probabilities, np.array([0, 1]), 30_000, np.random.default_rng(0))
    assert actions.shape == (2, 30_000)
    np.testing.assert_allclose(np.bincount(actions[0], minlength=3) / 30_000, probabilities[0], atol=0.01)
    assert set(actions[1].tolist()) == {2}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_contexts": 0}, "n_contexts=0"),
        ({"n_actions": 1}, "n_actions=1"),
        ({"n_actions": 4, "n_ambitious": 4}, "n_ambitious=4"),
    ],
)
def test_invalid_bandit_shapes_are_rejected_with_the_value(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BanditConfig(**kwargs)


@pytest.mark.parametrize("name", ["curvature", "curvature_drift", "noise_std", "noise_drift"])
def test_negative_or_nan_error_sizes_are_rejected(name: str) -> None:
    for value in (-0.1, float("nan")):
        with pytest.raises(ConfigError, match=name):
            WorldModelErrorConfig(**{name: value})
