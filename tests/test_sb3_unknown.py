"""Stable-Baselines3's real PPO on a wrapped env whose world model sometimes cannot say.

The user's finding: a world model that returns ``reward=None`` once in 200 steps made the wrapper hand
SB3 a NaN reward, and PPO died on ``Expected parameter loc ... found invalid values``. Here the world
model is unknown on one query in 20; PPO (real SB3, real torch, CPU) learns for a few hundred steps;
a recording wrapper outside :class:`~wmrl_envs.wrapper.WorldModelWrapper` sees every reward and
observation SB3 sees, and the ledger must count every unknown step as a real one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from wmrl_envs.toy import CostlyToyEnv, ToyWorldModel
from wmrl_envs.world_model import Prediction, WorldModelQuery
from wmrl_envs.wrapper import WorldModelWrapper

sb3 = pytest.importorskip("stable_baselines3", reason="the SB3 loop needs stable-baselines3 (dev extra)")

TIMESTEPS = 320
UNKNOWN_PERIOD = 20


class UnknownEvery:
    """Wraps a world model; every ``period``-th query it is asked (across calls) comes back unknown."""

    def __init__(self, inner: Any, period: int) -> None:
        self.inner, self.period, self.name = inner, period, f"unknown-every-{period}"
        self.queries = 0
        self.unknown = 0

    def predict(self, queries: Sequence[WorldModelQuery]) -> list[Prediction]:
        answers = []
        for prediction in self.inner.predict(queries):
            self.queries += 1
            if self.queries % self.period == 0:
                self.unknown += 1
                prediction = Prediction(None, observation=prediction.observation)
            answers.append(prediction)
        return answers


class PendulumReward:
    """A world model for Pendulum's reward in score mode: the real cost formula of the observation."""

    name = "pendulum-reward"

    def predict(self, queries: Sequence[WorldModelQuery]) -> list[Prediction]:
        predictions = []
        for query in queries:
            cos, sin, speed = (float(v) for v in query.context)
            torque = float(np.clip(query.action, -2.0, 2.0)[0])
            theta = float(np.arctan2(sin, cos))
            predictions.append(Prediction(-(theta**2 + 0.1 * speed**2 + 0.001 * torque**2)))
        return predictions


class Recorder(gym.Wrapper[Any, Any, Any, Any]):
    """Records every observation, reward and wrapper info block handed to the RL library."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.observations: list[np.ndarray] = []
        self.rewards: list[float] = []
        self.blocks: list[dict[str, Any]] = []

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self.observations.append(np.asarray(obs, dtype=float))
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.observations.append(np.asarray(obs, dtype=float))
        self.rewards.append(float(reward))
        self.blocks.append(dict(info["wmrl"]))
        return obs, reward, terminated, truncated, info


def _learn(wrapped: WorldModelWrapper[Any, Any]) -> Recorder:
    recorder = Recorder(wrapped)
    model = sb3.PPO("MlpPolicy", recorder, n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=TIMESTEPS)
    return recorder


@pytest.mark.parametrize("anchor_fraction", [0.0, 0.1])
def test_ppo_never_sees_a_nan_when_the_world_model_is_unknown_in_simulate_mode(
    anchor_fraction: float,
) -> None:
    world_model = UnknownEvery(ToyWorldModel(bias=0.1, noise=0.05), UNKNOWN_PERIOD)
    wrapped = WorldModelWrapper(
        CostlyToyEnv(dim=2, max_turns=8), world_model, mode="simulate", anchor_fraction=anchor_fraction
    )
    recorder = _learn(wrapped)
    assert len(recorder.rewards) >= TIMESTEPS and world_model.unknown >= TIMESTEPS // UNKNOWN_PERIOD // 2
    assert np.isfinite(recorder.rewards).all() and np.isfinite(np.stack(recorder.observations)).all()
    ledger = wrapped.ledger
    assert ledger.unknown_predictions == world_model.unknown
    # A non-anchor step is simulated unless its prediction was unknown: then it was a real step.
    fallbacks = [b for b in recorder.blocks if not b["anchor"] and b["predicted"] is None]
    anchored = [b for b in recorder.blocks if b["anchor"]]
    assert len(fallbacks) > 0 and all(b["source"] == "real" and b["real"] is not None for b in fallbacks)
    assert ledger.real_steps == ledger.rewards_real == len(fallbacks) + len(anchored)
    assert ledger.rewards_world_model == len(recorder.rewards) - len(fallbacks) - len(anchored)
    if anchor_fraction == 0.0:
        assert not anchored and ledger.real_steps == world_model.unknown


def test_ppo_never_sees_a_nan_when_the_world_model_is_unknown_in_score_mode_on_pendulum() -> None:
    world_model = UnknownEvery(PendulumReward(), UNKNOWN_PERIOD)
    pendulum = gym.make("Pendulum-v1", max_episode_steps=40)
    wrapped = WorldModelWrapper(pendulum, world_model, mode="score", anchor_fraction=0.0)
    recorder = _learn(wrapped)
    assert np.isfinite(recorder.rewards).all() and np.isfinite(np.stack(recorder.observations)).all()
    ledger = wrapped.ledger
    assert world_model.unknown >= TIMESTEPS // UNKNOWN_PERIOD
    assert ledger.real_steps == len(recorder.rewards)  # score mode: the real env runs every step
    assert ledger.rewards_real == world_model.unknown == ledger.unknown_predictions
    assert sum(b["source"] == "real" for b in recorder.blocks) == world_model.unknown
    assert ledger.rewards_world_model == len(recorder.rewards) - world_model.unknown
