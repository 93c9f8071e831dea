"""The embodied track: LIBERO and robosuite envs, and progress scorers as world models.

The Kaggle track (:mod:`wmrl_envs.kaggle`) and this one sit side by side, each with the world models that
only make sense for it; the generic protocol, wrapper and rollouts (:mod:`wmrl_envs.world_model`,
:mod:`wmrl_envs.wrapper`, :mod:`wmrl_envs.rollouts`) sit above both. Importing this package registers the
embodied Gymnasium ids (``wmrl/Libero10-v0``, ``wmrl/RobosuiteLift-v0``, ...) and imports nothing heavy:
the simulator runs in a worker under the embodied stack's own interpreter (``bash scripts/embodied.sh``
builds it; see docs/embodied.md).
"""

from __future__ import annotations

from wmrl_envs.embodied.envs import (
    LIBERO_SUITES,
    ROBOSUITE_TASKS,
    EmbodiedEnv,
    LiberoEnv,
    RobosuiteEnv,
    embodied_env_ids,
    register_embodied_envs,
)
from wmrl_envs.embodied.hackable import ApproachProgressScorer, StaleApproachProgressScorer
from wmrl_envs.embodied.progress import (
    ProgressCurve,
    ProgressInput,
    ProgressScorer,
    ProgressWorldModel,
    SimStateProgressScorer,
    collapse_progress,
    max_progress,
    potential_progress,
    progress_input,
)
from wmrl_envs.embodied.stack import (
    RenderingUnavailableError,
    SimulatorError,
    SimulatorProcess,
    embodied_python,
)

register_embodied_envs()

__all__ = [
    "LIBERO_SUITES",
    "ROBOSUITE_TASKS",
    "ApproachProgressScorer",
    "EmbodiedEnv",
    "LiberoEnv",
    "ProgressCurve",
    "ProgressInput",
    "ProgressScorer",
    "ProgressWorldModel",
    "RenderingUnavailableError",
    "RobosuiteEnv",
    "SimStateProgressScorer",
    "StaleApproachProgressScorer",
    "SimulatorError",
    "SimulatorProcess",
    "collapse_progress",
    "embodied_env_ids",
    "embodied_python",
    "max_progress",
    "potential_progress",
    "progress_input",
    "register_embodied_envs",
]
