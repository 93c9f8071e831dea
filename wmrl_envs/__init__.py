"""wmrl_envs: the Gymnasium side of World Model RL."""

from wmrl_envs.world_model import Prediction, SimulatableEnv, WorldModel, WorldModelQuery

__all__ = ["Prediction", "SimulatableEnv", "WorldModel", "WorldModelQuery"]
