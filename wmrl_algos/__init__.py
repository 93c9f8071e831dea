"""wmrl_algos: the learning side of World Model RL (anchors, online debiasing, inverse-variance
denoising, residual correction, the prediction-powered estimator, group advantages, the correction
loop, the algorithms of the comparison, GRPO losses). It never looks inside a trajectory, except
through a residual correction's featurizer when one is passed.

The GRPO losses (:mod:`wmrl_algos.grpo`) need torch; they are imported on first use so that the
corrections themselves load with numpy alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wmrl_algos.advantages import AdvantageScale, centre_and_scale, group_advantages
from wmrl_algos.algorithms import ALGORITHMS, Algo, Algorithm, RealGroups, algorithm
from wmrl_algos.anchors import AnchorScheduler
from wmrl_algos.debias import IsotonicMap, OnlineDebiaser, fit_isotonic
from wmrl_algos.denoise import InverseVarianceWeighter, WeightRule, centred_residual
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
from wmrl_algos.loop import CorrectionConfig, CorrectionLoop, Scorer
from wmrl_algos.ppi import PoweredAdvantages, PowerTuner, power_coefficient, powered_advantages
from wmrl_algos.residual import ResidualCorrection, RidgeResidual
from wmrl_algos.types import GroupAdvantages, Score, ScoredGroup, StepResult, as_score_array

if TYPE_CHECKING:
    from wmrl_algos.grpo import GRPOConfig, LossType, grpo_loss, grpo_update

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
    "as_score_array",
    "AnchorScheduler",
    "IsotonicMap",
    "fit_isotonic",
    "OnlineDebiaser",
    "centred_residual",
    "InverseVarianceWeighter",
    "WeightRule",
    "ResidualCorrection",
    "RidgeResidual",
    "PoweredAdvantages",
    "PowerTuner",
    "power_coefficient",
    "powered_advantages",
    "AdvantageScale",
    "centre_and_scale",
    "group_advantages",
    "Scorer",
    "ALGORITHMS",
    "Algo",
    "Algorithm",
    "RealGroups",
    "algorithm",
    "CorrectionConfig",
    "CorrectionLoop",
    "GRPOConfig",
    "LossType",
    "grpo_loss",
    "grpo_update",
]

_LAZY_GRPO = frozenset({"GRPOConfig", "LossType", "grpo_loss", "grpo_update"})


def __getattr__(name: str) -> Any:
    if name in _LAZY_GRPO:
        from wmrl_algos import grpo

        return getattr(grpo, name)
    raise AttributeError(f"module 'wmrl_algos' has no attribute {name!r}")
