"""How an embodied training episode ended: the policy's failure, a success, or an outcome nobody knows.

Why a wrapper: GRPO compares the episodes of a group, so two early ends must not be confused. An action
the env rejects (NaN, infinite, the wrong shape: ``gymnasium.error.InvalidAction``) is the policy's doing:
a real failure, scored 0 like any failure, or a policy could learn to escape bad episodes by emitting
NaN. A simulator that breaks after a valid action (a NaN state, a MuJoCo error, a worker that died) says
nothing about the policy: its outcome is unknown, ``None``, left out of every baseline, never 0.
:class:`EpisodeOutcomes` turns both into what the generic rollout machinery already understands, so
that :class:`~wmrl_envs.rollouts.GroupedRollout` and :class:`~wmrl_envs.wrapper.WorldModelWrapper`
run the embodied track like any user's env: the rejected action ends the episode as terminated with
reward 0.0; the simulator's error becomes a NaN reward, which the wrapper reads as an unknown real
outcome (no label, and under ``scoring="episode"`` no world-model score either).

Each such end is named under one info key (``info["outcome"]`` by default, :data:`Outcome`);
:func:`episode_outcome` reads any finished episode's last info, and :func:`outcome_success` turns the
outcome into the success label: 1.0, 0.0 or ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium.error import InvalidAction, ResetNeeded

from wmrl_algos.errors import ConfigError
from wmrl_envs.embodied.stack import SimulatorError

__all__ = ["OUTCOME_KEY", "EpisodeOutcomes", "Outcome", "episode_outcome", "outcome_success"]

Outcome = Literal["success", "failure", "policy_error", "sim_error", "worker_crash"]
"""``success`` and ``failure`` (including ``policy_error``: the env rejected the policy's action) are
real outcomes; ``sim_error`` and ``worker_crash`` are unknown ones."""

OUTCOME_KEY = "outcome"
_WORKER_FAILED = "the simulator worker failed"
"""How :class:`~wmrl_envs.embodied.envs.EmbodiedEnv` starts ``info["sim_error"]`` when its worker died."""


def episode_outcome(info: Mapping[str, Any], *, info_key: str = OUTCOME_KEY) -> Outcome:
    """The outcome of an episode from its last info (an episode cut at its step limit is a failure).

    Example:
        >>> episode_outcome({"success": True}), episode_outcome({"success": False})
        ('success', 'failure')
        >>> episode_outcome({"success": False, "outcome": "worker_crash"})
        'worker_crash'
    """
    named = info.get(info_key)
    if named is not None:
        return named  # type: ignore[no-any-return]
    return "success" if info.get("success") else "failure"


def outcome_success(outcome: Outcome) -> float | None:
    """The success label of an outcome: 1.0, 0.0 (a rejected action too), ``None`` when unknown.

    Example:
        >>> [outcome_success(o) for o in ("success", "policy_error", "sim_error")]
        [1.0, 0.0, None]
    """
    if outcome in ("sim_error", "worker_crash"):
        return None
    return 1.0 if outcome == "success" else 0.0


class EpisodeOutcomes(gym.Wrapper[dict[str, Any], np.ndarray, dict[str, Any], np.ndarray]):
    """End an embodied episode with a real or an unknown outcome instead of an exception (see the module).

    Args:
        env: an embodied env (:class:`~wmrl_envs.embodied.envs.LiberoEnv`,
            :class:`~wmrl_envs.embodied.envs.RobosuiteEnv`) or any env with ``info["success"]`` and
            ``info["sim_error"]``.
        info_key: the info key naming an early end (:data:`Outcome`).

    Raises:
        ConfigError: ``info_key`` is empty.

    Example:
        >>> env = EpisodeOutcomes(RobosuiteEnv("Lift", cameras=()))  # doctest: +SKIP
        >>> obs, info = env.reset(seed=0)  # doctest: +SKIP
        >>> obs, reward, terminated, truncated, info = env.step(np.full(7, np.nan))  # doctest: +SKIP
        >>> reward, terminated, info["outcome"]  # doctest: +SKIP
        (0.0, True, 'policy_error')
    """

    def __init__(self, env: gym.Env[dict[str, Any], np.ndarray], *, info_key: str = OUTCOME_KEY) -> None:
        if not isinstance(info_key, str) or not info_key:
            raise ConfigError(f"info_key={info_key!r}; pass a non-empty key, e.g. {OUTCOME_KEY!r}")
        super().__init__(env)
        self._info_key = info_key
        self._last: tuple[dict[str, Any], dict[str, Any]] | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Reset; a reset the simulator fails is tried once more (the env restarts a worker that died).

        Raises:
            SimulatorError: the second reset failed too (the simulator cannot start an episode).
        """
        try:
            obs, info = self.env.reset(seed=seed, options=options)
        except SimulatorError:
            obs, info = self.env.reset(seed=seed, options=options)
        self._last = (obs, dict(info))
        return obs, info

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], SupportsFloat, bool, bool, dict[str, Any]]:
        """Step; a rejected action terminates with reward 0.0, a simulator error gives a NaN reward.

        Raises:
            gymnasium.error.ResetNeeded: before :meth:`reset` or after the episode ended.
            ConfigError: the env already writes this wrapper's info key.
        """
        if self._last is None:
            raise ResetNeeded("call reset() before step(), and again after an episode ends")
        try:
            obs, reward, terminated, truncated, info = self.env.step(action)
        except InvalidAction:
            last_obs, last_info = self._last
            self._last = None
            return last_obs, 0.0, True, False, {**last_info, "success": False, self._info_key: "policy_error"}
        if self._info_key in info:
            raise ConfigError(
                f"{type(self.env.unwrapped).__name__} already writes info[{self._info_key!r}]; pass "
                "EpisodeOutcomes(env, info_key=...) with a key the env does not use"
            )
        error = info.get("sim_error")
        if error is not None:
            kind = "worker_crash" if str(error).startswith(_WORKER_FAILED) else "sim_error"
            info = {**info, self._info_key: kind}
            reward = float("nan")
        self._last = None if terminated or truncated or error is not None else (obs, dict(info))
        return obs, reward, terminated, truncated, info
