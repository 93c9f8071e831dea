"""wmrl_algos: the learning side of World Model RL (anchors, online debiasing, inverse-variance
denoising, group advantages, the correction loop, GRPO losses). It never looks inside a trajectory."""

from wmrl_algos.errors import (
    BackendUnavailableError,
    CheckpointError,
    ConfigError,
    DataError,
    IsolationUnavailableError,
    MissingDependencyError,
    SandboxError,
    WMRLError,
    WorldModelError,
)
from wmrl_algos.types import GroupAdvantages, Score, ScoredGroup, StepResult

__all__ = [
    "BackendUnavailableError",
    "CheckpointError",
    "ConfigError",
    "DataError",
    "IsolationUnavailableError",
    "MissingDependencyError",
    "SandboxError",
    "WMRLError",
    "WorldModelError",
    "GroupAdvantages",
    "Score",
    "ScoredGroup",
    "StepResult",
]
