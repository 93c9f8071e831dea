"""wmrl_envs: the Gymnasium side of World Model RL.

Importing the package registers its environments with Gymnasium (``wmrl/CostlyToy-v0``,
``wmrl/Kaggle-v0``), so ``gymnasium.make("wmrl/Kaggle-v0")`` works after ``import wmrl_envs``.
"""

from __future__ import annotations

from wmrl_envs.ledger import CostLedger
from wmrl_envs.registration import register_envs
from wmrl_envs.rollouts import (
    GroupedRollout,
    Policy,
    RolloutConfig,
    RolloutTask,
    Trajectory,
    TurnContext,
    best_return,
    episode_return,
)
from wmrl_envs.toy import CachedWorldModel, CostlyToyEnv, ToyWorldModel
from wmrl_envs.world_model import Prediction, SimulatableEnv, WorldModel, WorldModelQuery
from wmrl_envs.wrapper import StepInfo, WorldModelWrapper, predict_batch, read_vector_info

register_envs()

__all__ = [
    "CachedWorldModel",
    "CostLedger",
    "CostlyToyEnv",
    "GroupedRollout",
    "Policy",
    "Prediction",
    "RolloutConfig",
    "RolloutTask",
    "SimulatableEnv",
    "StepInfo",
    "ToyWorldModel",
    "Trajectory",
    "TurnContext",
    "WorldModel",
    "WorldModelQuery",
    "WorldModelWrapper",
    "best_return",
    "episode_return",
    "predict_batch",
    "read_vector_info",
    "register_envs",
]
