"""Gymnasium registration of the environments wmrl ships, done once on ``import wmrl_envs``.

Why register: ``gymnasium.make("wmrl/CostlyToy-v0")`` is how the rest of the ecosystem (vector envs,
training scripts, ``check_env``) asks for an environment, and it records a spec that
:class:`~wmrl_envs.wrapper.WorldModelWrapper` reads for its step limit. Entry points are strings, so
registering imports nothing heavy; an environment module is imported only when it is made.
"""

from __future__ import annotations

import gymnasium as gym

__all__ = ["COSTLY_TOY_ID", "KAGGLE_ID", "register_envs", "registered_ids"]

COSTLY_TOY_ID = "wmrl/CostlyToy-v0"
"""The small costly tuning task, :class:`wmrl_envs.toy.CostlyToyEnv`."""

KAGGLE_ID = "wmrl/Kaggle-v0"
"""The Kaggle-style AutoResearch env, :class:`wmrl_envs.kaggle.env.KaggleEnv`:
``gymnasium.make("wmrl/Kaggle-v0", competition="titanic")``."""


def register_envs() -> tuple[str, ...]:
    """Register every environment wmrl ships with Gymnasium (idempotent).

    Returns:
        The ids registered by wmrl (already registered ones included).
    """
    _register(COSTLY_TOY_ID, "wmrl_envs.toy:CostlyToyEnv")
    _register(KAGGLE_ID, "wmrl_envs.kaggle.env:KaggleEnv")
    from wmrl_envs.embodied.envs import register_embodied_envs

    register_embodied_envs()
    return registered_ids()


def registered_ids() -> tuple[str, ...]:
    """The Gymnasium ids under the ``wmrl/`` namespace, sorted."""
    return tuple(sorted(env_id for env_id in gym.registry if env_id.startswith("wmrl/")))


def _register(env_id: str, entry_point: str) -> None:
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=entry_point)
