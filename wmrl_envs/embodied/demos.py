"""Demonstrations from a scripted controller with privileged state: the data of the SFT stage.

Why scripted and noisy: the paper starts RL from a supervised (SFT) policy, one that succeeds sometimes
and fails for reasons RL can fix. A scripted controller that reads the object's pose from the simulator
(:class:`~wmrl_envs.embodied.policies.ScriptedLiftPolicy`) is the cheapest expert there is. Cloning its
clean trajectories alone gives a policy that has never seen a state off the expert's path, so the
rollouts here execute the expert's action plus Gaussian noise while recording the expert's clean action
as the label (DART, Laskey et al. 2017): the demonstrations cover the states a slightly-wrong policy
visits and say how to recover from them. Only episodes the expert finished successfully are kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from wmrl_algos.errors import ConfigError

__all__ = ["Demonstrations", "collect_demonstrations"]


@dataclass(frozen=True)
class Demonstrations:
    """State-action pairs of the kept (successful) demonstration episodes.

    Attributes:
        observations: one observation dict per recorded step.
        actions: ``(N, 7)`` expert (clean) actions, one per observation.
        episodes: demonstration episodes run.
        successes: how many of them succeeded (only those are recorded).
        steps: simulator steps run in all (kept and discarded episodes).

    Example:
        >>> demos = Demonstrations([{"proprio": np.zeros(9)}], np.zeros((1, 7), np.float32), 2, 1, 40)
        >>> len(demos), demos.success_rate
        (1, 0.5)
    """

    observations: Sequence[Mapping[str, Any]]
    actions: np.ndarray
    episodes: int
    successes: int
    steps: int

    def __len__(self) -> int:
        return len(self.actions)

    @property
    def success_rate(self) -> float:
        """Share of demonstration episodes the (noisy) expert solved."""
        return self.successes / self.episodes if self.episodes else 0.0


def collect_demonstrations(
    env: gym.Env[Any, Any],
    expert: Any,
    *,
    episodes: int,
    horizon: int,
    noise: float = 0.1,
    seed: int = 0,
    reset_options: Mapping[str, Any] | None = None,
    tasks: Sequence[int] | None = None,
) -> Demonstrations:
    """Run the expert with noisy execution; record (observation, clean action) of successful episodes.

    Args:
        env: an embodied env whose observations the expert reads (e.g. Lift with ``object_states``).
        expert: a batched policy (``act(observations, infos) -> actions``) using privileged state.
        episodes: demonstration episodes; episode ``i`` resets with seed ``seed + i``.
        horizon: step limit of an episode.
        noise: standard deviation of the Gaussian noise added to the executed action (DART).
        seed: seeds the resets and the noise.
        reset_options: passed to every ``reset`` (e.g. ``{"task_id": 3}``).
        tasks: LIBERO task ids taken in turn (episode ``i`` resets with ``task_id = tasks[i % len]``);
            ``None``: the ``task_id`` of ``reset_options``, if any.

    Raises:
        ConfigError: a non-positive ``episodes``/``horizon``, a negative ``noise`` or an empty ``tasks``.

    Example:
        >>> from wmrl_envs.embodied import RobosuiteEnv  # doctest: +SKIP
        >>> from wmrl_envs.embodied.policies import ScriptedLiftPolicy  # doctest: +SKIP
        >>> demos = collect_demonstrations(RobosuiteEnv("Lift", cameras=()), ScriptedLiftPolicy(),
        ...                                episodes=10, horizon=60)  # doctest: +SKIP
    """
    if episodes < 1 or horizon < 1 or not noise >= 0:
        raise ConfigError(
            f"episodes={episodes!r}, horizon={horizon!r}, noise={noise!r}; pass positive counts, noise >= 0"
        )
    if tasks is not None and not len(tasks):
        raise ConfigError("tasks=[]; pass at least one task id, or None for the reset options' task")
    generator = np.random.default_rng(seed)
    observations: list[Mapping[str, Any]] = []
    actions: list[np.ndarray] = []
    successes = steps = 0
    for episode in range(episodes):
        options = dict(reset_options or {})
        if tasks is not None:
            options["task_id"] = int(tasks[episode % len(tasks)])
        obs, info = env.reset(seed=seed + episode, options=options)
        episode_obs, episode_actions, success = [], [], False
        for _ in range(horizon):
            clean = np.asarray(expert.act([obs], [info])[0], dtype=np.float32)
            episode_obs.append(obs)
            episode_actions.append(clean)
            executed = np.clip(clean + generator.normal(0.0, noise, clean.shape), -1.0, 1.0)
            obs, _, terminated, truncated, info = env.step(executed.astype(np.float32))
            steps += 1
            if terminated or truncated:
                success = bool(info.get("success"))
                break
        if success:
            successes += 1
            observations.extend(episode_obs)
            actions.extend(episode_actions)
    stacked = np.stack(actions).astype(np.float32) if actions else np.zeros((0, 7), np.float32)
    return Demonstrations(observations, stacked, episodes, successes, steps)
