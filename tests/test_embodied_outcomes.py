"""Tests of wmrl_envs/embodied/outcomes.py: how a training episode ended, without the simulator.

The env here is a stand-in with the embodied envs' contract (``InvalidAction`` for a non-finite action,
``info["sim_error"]`` and a truncation when the simulator breaks, ``info["success"]``): these rules are
about that contract, so they are checked on every machine; tests/test_embodied_train.py runs the same
wrapper on the real simulator, with a NaN policy and a killed worker.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import InvalidAction, ResetNeeded

from wmrl_algos.errors import ConfigError
from wmrl_envs.embodied.outcomes import EpisodeOutcomes, episode_outcome, outcome_success
from wmrl_envs.embodied.stack import SimulatorError
from wmrl_envs.rollouts import GroupedRollout, RolloutConfig, RolloutTask
from wmrl_envs.world_model import Prediction


class _Contract(gym.Env[dict[str, Any], np.ndarray]):
    """The embodied envs' contract; ``breaks`` says at which step the simulator fails, and how."""

    observation_space = gym.spaces.Dict({"proprio": gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)})
    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def __init__(self, breaks: tuple[int, str] | None = None, resets_failing: int = 0, extra=None) -> None:
        self.breaks, self.resets_failing, self.extra, self.steps = breaks, resets_failing, extra or {}, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if self.resets_failing:
            self.resets_failing -= 1
            raise SimulatorError("the simulator worker died during reset")
        self.steps = 0
        return {"proprio": np.zeros(2)}, {"success": False}

    def step(self, action):
        if not np.isfinite(np.asarray(action, dtype=float)).all():
            raise InvalidAction(f"action {action!r} has a non-finite value")
        self.steps += 1
        obs, info = {"proprio": np.full(2, float(self.steps))}, {"success": False, **self.extra}
        if self.breaks is not None and self.steps == self.breaks[0]:
            return obs, 0.0, False, True, {**info, "sim_error": self.breaks[1]}
        return obs, 0.0, False, False, info


def test_a_rejected_action_ends_the_episode_as_the_policys_real_failure():
    env = EpisodeOutcomes(_Contract())
    first, _ = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(np.full(2, np.nan))
    assert (reward, terminated, truncated) == (0.0, True, False)
    assert obs is first and info["outcome"] == "policy_error" and not info["success"]
    assert outcome_success(episode_outcome(info)) == 0.0, "a failure the policy caused, not an unknown"
    with pytest.raises(ResetNeeded):
        env.step(np.zeros(2))


@pytest.mark.parametrize(
    ("error", "outcome"),
    [("MuJoCo: NaN in qacc", "sim_error"), ("the simulator worker failed: EOF", "worker_crash")],
)
def test_a_simulator_error_after_a_valid_action_is_an_unknown_outcome_with_a_nan_reward(error, outcome):
    env = EpisodeOutcomes(_Contract(breaks=(2, error)))
    env.reset(seed=0)
    env.step(np.zeros(2))
    _, reward, _, truncated, info = env.step(np.zeros(2))
    assert truncated and math.isnan(reward) and info["outcome"] == outcome
    assert outcome_success(episode_outcome(info)) is None, "unknown, never 0"


def test_an_episode_ended_by_its_step_limit_is_a_failure_and_a_success_is_a_success():
    assert episode_outcome({"success": False}) == "failure"
    assert outcome_success(episode_outcome({"success": True})) == 1.0


def test_a_failed_reset_is_tried_once_more_and_a_second_failure_is_raised():
    env = EpisodeOutcomes(_Contract(resets_failing=1))
    obs, _ = env.reset(seed=0)
    assert obs["proprio"].tolist() == [0.0, 0.0]
    with pytest.raises(SimulatorError, match="during reset"):
        EpisodeOutcomes(_Contract(resets_failing=2)).reset(seed=0)


def test_an_env_that_writes_the_outcome_key_itself_is_refused_naming_the_fix():
    env = EpisodeOutcomes(_Contract(extra={"outcome": "mine"}))
    env.reset(seed=0)
    with pytest.raises(ConfigError, match=r"already writes info\['outcome'\].*info_key="):
        env.step(np.zeros(2))
    with pytest.raises(ConfigError, match="info_key=''"):
        EpisodeOutcomes(_Contract(), info_key="")


class _Half:
    """A world model that says 0.5 for every trajectory, counting what it is asked."""

    name = "half"

    def __init__(self) -> None:
        self.queries = 0

    def predict(self, queries):
        self.queries += len(queries)
        return [Prediction(0.5) for _ in queries]


def test_under_grouped_rollout_a_broken_episode_is_neither_labelled_nor_scored():
    """The generic machinery reads the wrapper's ends: no label and no score for the unknown one."""

    class Policy:
        def act(self, observations, infos, contexts):
            return [np.full(2, np.nan) if c.index == 0 else np.zeros(2) for c in contexts]

    model = _Half()
    config = RolloutConfig(group_size=2, mode="score", scoring="episode", max_turns=3, check_actions=False)
    rollout = GroupedRollout(lambda: EpisodeOutcomes(_Contract(breaks=(2, "NaN state"))), model, config)
    with rollout:
        [group] = rollout.run([RolloutTask("lift", seed=0)], Policy(), anchors=[True])
    outcomes = [episode_outcome(t.infos[-1]) for t in group.trajectories]
    assert outcomes == ["policy_error", "sim_error"]
    assert group.real == (0.0, None) and group.predicted == (0.5, None)
    assert model.queries == 1
