"""A frozen, cheap, static-analysis world model for the Kaggle env: gates, then a hand-set quality prior.

Why it exists: WMRL needs a world model that costs microseconds, runs anywhere (no GPU, no LLM) and is
wrong in the way real world models are wrong, so that the corrections (Online Debiasing, Inverse-Variance
Denoising) have something real to correct. The rubric reads the solution (never runs it) and predicts:

1. **Deterministic gates**, in the order the real sandbox would hit them: a Python solution exists
   (else ``malformed``); it compiles (else ``syntax_error``); it reads only files the inventory lists,
   names only columns the context mentions, and does not fit a classifier to a regression target (else
   ``runtime_error``); it writes ``submission.csv`` (else ``no_submission``). Otherwise ``valid``.
2. **A quality estimate** for valid solutions: the best model family's fixed prior (gradient boosting >
   random forest > linear > ... > constant baseline), plus fixed bonuses for validation (cross-validation,
   holdout), tuning, preprocessing and ensembling, adjusted for the task's modality (a text task without a
   text vectoriser is penalised) and metric (a ranking metric fed hard labels instead of probabilities is
   penalised). The estimate is read as a leaderboard position in [0, 1], mapped through the
   :class:`~wmrl_envs.kaggle.outcome.RewardLadder`, and rendered as a sandbox log with
   :func:`~wmrl_envs.kaggle.feedback.format_feedback` (the public score is the leaderboard score at that
   position), so an agent reading a simulated log sees the real env's format.

**It is biased and noisy by construction, on purpose.** The priors ignore the data: a random forest
gets the same position on a 300-row task where it overfits as on a 30,000-row task where it shines; a
runtime error the code would hit on real data (a dtype, a missing value) is invisible to it; two
solutions with the same recipe but different feature engineering get the same score. That is a
systematic, task-dependent bias b(τ) plus an unstructured residual ξ(τ) — exactly the error model
r̂ = r + b + ξ of docs/method.md that Online Debiasing and Inverse-Variance Denoising exist to correct.
An optional hashed jitter (``noise_std``) adds controlled, reproducible noise for experiments.

Example:
    >>> from wmrl_envs.kaggle.outcome import KaggleContext
    >>> from wmrl_envs.world_model import WorldModelQuery
    >>> context = KaggleContext(
    ...     competition_id="toy", overview="", inventory="train.csv: x, y", metric="rmse",
    ...     higher_is_better=False, task_type="regression", target="y", id_column="id",
    ...     feature_columns=("x",), leaderboard=(1.0, 2.0, 3.0))
    >>> model = RubricWorldModel()
    >>> [prediction] = model.predict([WorldModelQuery(context, "no code here")])
    >>> prediction.reward, prediction.info["status"]
    (0.0, 'malformed')
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmrl_algos.errors import ConfigError
from wmrl_envs.kaggle.feedback import format_feedback
from wmrl_envs.kaggle.outcome import ExecutionStatus, KaggleContext, Outcome, RewardLadder
from wmrl_envs.kaggle.world_models.features import (
    MODEL_FAMILIES,
    CodeFeatures,
    ModelFamily,
    analyze_solution,
    extract_code,
)
from wmrl_envs.world_model import Prediction, WorldModelQuery

__all__ = [
    "DEFAULT_FAMILY_PRIORS",
    "RubricConfig",
    "RubricAssessment",
    "RubricWorldModel",
    "score_at_position",
]

DEFAULT_FAMILY_PRIORS: Mapping[ModelFamily, float] = {
    "gbm": 0.62,
    "forest": 0.52,
    "linear": 0.42,
    "neural": 0.40,
    "svm": 0.38,
    "naive_bayes": 0.32,
    "knn": 0.28,
    "tree": 0.25,
    "constant": 0.03,
}
"""Fixed leaderboard-position priors per model family: the rubric's deliberate, data-blind bias."""

_RANKING_METRICS = ("roc_auc", "auc", "log_loss", "logloss", "gini", "average_precision")


@dataclass(frozen=True)
class RubricConfig:
    """How the rubric turns a solution's features into a predicted position.

    Attributes:
        family_priors: position prior per model family (the best family of a solution counts). Every
            family of :data:`~wmrl_envs.kaggle.world_models.features.MODEL_FAMILIES` needs a value in [0, 1].
        cross_validation_bonus: added when the solution cross-validates (it can select what generalises).
        holdout_bonus: added when it holds out a validation split (and does not cross-validate).
        tuning_bonus: added when it searches hyperparameters.
        preprocessing_bonus: added per distinct preprocessing tool (scalers, encoders, imputers), up to
            ``max_preprocessing_steps`` of them.
        max_preprocessing_steps: cap on how many preprocessing tools earn the bonus.
        ensemble_bonus: added when it combines several models.
        text_vectoriser_bonus: added on text tasks when it vectorises the text.
        text_ignored_penalty: subtracted on text tasks when it does not (it throws the signal away).
        hard_labels_penalty: subtracted on ranking metrics (ROC AUC, log loss) when a classifier's hard
            labels are submitted instead of probabilities.
        noise_std: std of a reproducible jitter added to the position (hash of competition and code,
            salted by ``seed``). 0 keeps the rubric a pure function of the code; > 0 simulates a noisier
            world model for experiments.
        seed: salt of the jitter.
        ladder: the reward ladder predicted statuses and positions are mapped through.
    """

    family_priors: Mapping[ModelFamily, float] = field(default_factory=lambda: dict(DEFAULT_FAMILY_PRIORS))
    cross_validation_bonus: float = 0.06
    holdout_bonus: float = 0.03
    tuning_bonus: float = 0.05
    preprocessing_bonus: float = 0.02
    max_preprocessing_steps: int = 3
    ensemble_bonus: float = 0.05
    text_vectoriser_bonus: float = 0.10
    text_ignored_penalty: float = 0.20
    hard_labels_penalty: float = 0.25
    noise_std: float = 0.0
    seed: int = 0
    ladder: RewardLadder = field(default_factory=RewardLadder)

    def __post_init__(self) -> None:
        missing = [family for family in MODEL_FAMILIES if family not in self.family_priors]
        if missing:
            raise ConfigError(
                f"family_priors lacks {missing}; give a position prior in [0, 1] for every family of "
                f"{list(MODEL_FAMILIES)}"
            )
        for family, prior in self.family_priors.items():
            if not 0.0 <= prior <= 1.0:
                raise ConfigError(
                    f"family_priors[{family!r}]={prior} is outside [0, 1]; positions live in [0, 1]"
                )
        if self.noise_std < 0:
            raise ConfigError(f"noise_std={self.noise_std} is negative; use 0 for no jitter")
        if self.max_preprocessing_steps < 0:
            raise ConfigError(
                f"max_preprocessing_steps={self.max_preprocessing_steps} is negative; "
                "use 0 to disable the bonus"
            )


@dataclass(frozen=True)
class RubricAssessment:
    """What the rubric read from one solution.

    Attributes:
        features: the static features of the solution.
        status: the predicted execution status.
        gate: why a gate failed (``""`` when the solution is predicted valid).
        position: the predicted leaderboard position in [0, 1] (``None`` unless valid).
    """

    features: CodeFeatures
    status: ExecutionStatus
    gate: str
    position: float | None


def score_at_position(position: float, leaderboard: Sequence[float], higher_is_better: bool) -> float:
    """A metric value whose leaderboard position score is ``position`` (the inverse of ``position_score``).

    Used to print a plausible public score in a simulated log. With an empty leaderboard the position
    itself is returned.

    >>> board = (0.95, 0.9, 0.8, 0.7)
    >>> score_at_position(0.75, board, higher_is_better=True)
    0.9
    >>> from wmrl_envs.kaggle.outcome import position_score
    >>> position_score(score_at_position(0.0, board, True), board, True)
    0.0
    """
    if not leaderboard:
        return float(position)
    board = sorted(leaderboard, reverse=higher_is_better)
    n = len(board)
    p = int(round(n + 1 - float(np.clip(position, 0.0, 1.0)) * n))
    if p <= n:
        return float(board[p - 1])
    spread = (max(board) - min(board)) or abs(board[-1]) or 1.0
    margin = 0.05 * spread
    return float(board[-1] - margin if higher_is_better else board[-1] + margin)


class RubricWorldModel:
    """Static-analysis world model: deterministic gates, then a fixed per-family quality prior.

    Queries must carry a :class:`~wmrl_envs.kaggle.outcome.KaggleContext` as ``context`` and the agent's
    message (with one Python solution, fenced or bare) as ``action``. Every prediction has a reward
    (the rubric never abstains), the simulated log as ``observation``, and ``info`` with the predicted
    ``status``, ``position``, ``public_score`` and the failed ``gate`` (if any).

    Args:
        config: priors and bonuses; see :class:`RubricConfig`.
        name: the world model's name in logs and reports.

    Raises:
        ConfigError: from :meth:`predict`, for a query whose context is not a ``KaggleContext``.

    Example:
        >>> from wmrl_envs.kaggle.outcome import KaggleContext
        >>> from wmrl_envs.world_model import WorldModelQuery
        >>> context = KaggleContext(
        ...     competition_id="toy", overview="", inventory="train.csv: id, x, y", metric="rmse",
        ...     higher_is_better=False, task_type="regression", target="y", id_column="id",
        ...     feature_columns=("x",), leaderboard=(1.0, 2.0, 3.0))
        >>> code = ("import pandas as pd\\nfrom sklearn.ensemble import RandomForestRegressor\\n"
        ...         "df = pd.read_csv('input/train.csv')\\n"
        ...         "m = RandomForestRegressor().fit(df[['x']], df['y'])\\n"
        ...         "df[['id']].assign(y=m.predict(df[['x']])).to_csv('submission.csv', index=False)\\n")
        >>> [prediction] = RubricWorldModel().predict([WorldModelQuery(context, code)])
        >>> prediction.info["status"], round(prediction.reward, 3)
        ('valid', 0.76)
    """

    def __init__(self, config: RubricConfig | None = None, *, name: str = "rubric") -> None:
        self.config = config if config is not None else RubricConfig()
        self.name = name

    def predict(self, queries: Sequence[WorldModelQuery]) -> list[Prediction]:
        """Predict the outcome of every query (pure, deterministic; microseconds per query)."""
        return [self._predict_one(query) for query in queries]

    def assess(self, query: WorldModelQuery) -> RubricAssessment:
        """The rubric's reading of one query: features, predicted status, failed gate and position."""
        context = _context_of(query)
        features = analyze_solution(extract_code(query.action), context)
        status, gate = self._gates(features, context)
        position = self._position(features, context, query) if status == "valid" else None
        return RubricAssessment(features=features, status=status, gate=gate, position=position)

    def _gates(self, features: CodeFeatures, context: KaggleContext) -> tuple[ExecutionStatus, str]:
        if not features.has_code:
            return "malformed", "no Python solution in the message"
        if not features.compiles:
            return "syntax_error", "the solution does not compile"
        if features.unknown_files:
            return "runtime_error", f"reads files not in the inventory: {', '.join(features.unknown_files)}"
        if features.unknown_columns:
            return "runtime_error", f"names unknown columns: {', '.join(features.unknown_columns[:5])}"
        if (
            context.task_type == "regression"
            and features.constructs_classifier
            and not features.constructs_regressor
        ):
            return "runtime_error", "fits a classifier to a continuous target"
        if not features.writes_submission:
            return "no_submission", "never writes submission.csv"
        return "valid", ""

    def _position(self, features: CodeFeatures, context: KaggleContext, query: WorldModelQuery) -> float:
        config = self.config
        position = max(config.family_priors[family] for family in features.model_families)
        if features.uses_cross_validation:
            position += config.cross_validation_bonus
        elif features.uses_holdout:
            position += config.holdout_bonus
        if features.uses_tuning:
            position += config.tuning_bonus
        position += config.preprocessing_bonus * min(
            features.preprocessing_steps, config.max_preprocessing_steps
        )
        if features.uses_ensemble:
            position += config.ensemble_bonus
        if context.text_columns:
            if features.uses_text_vectoriser:
                position += config.text_vectoriser_bonus
            else:
                position -= config.text_ignored_penalty
        ranking_metric = context.metric.lower() in _RANKING_METRICS
        if ranking_metric and features.constructs_classifier and not features.uses_predict_proba:
            position -= config.hard_labels_penalty
        if config.noise_std > 0:
            position += config.noise_std * _hashed_normal(
                config.seed, context.competition_id, str(query.action)
            )
        return float(np.clip(position, 0.0, 1.0))

    def _predict_one(self, query: WorldModelQuery) -> Prediction:
        context = _context_of(query)
        assessment = self.assess(query)
        features, status, gate, position = (
            assessment.features,
            assessment.status,
            assessment.gate,
            assessment.position,
        )
        public_score = (
            score_at_position(position, context.leaderboard, context.higher_is_better)
            if position is not None
            else None
        )
        outcome = Outcome(
            status=status,
            score=public_score,
            public_score=public_score,
            position=position,
            exit_code=0
            if status in ("valid", "no_submission")
            else (1 if status == "runtime_error" else None),
            detail=gate,
        )
        info: dict[str, Any] = {
            "status": status,
            "position": position,
            "public_score": public_score,
            "gate": gate,
            "families": features.model_families,
        }
        return Prediction(
            reward=self.config.ladder.reward(status, position),
            observation=format_feedback(outcome),
            terminated=None,
            info=info,
        )


def _context_of(query: WorldModelQuery) -> KaggleContext:
    if not isinstance(query.context, KaggleContext):
        raise ConfigError(
            "RubricWorldModel needs a KaggleContext as the query context, "
            f"got {type(query.context).__name__}; "
            "build queries from KaggleEnv.world_model_context()"
        )
    return query.context


def _hashed_normal(seed: int, competition_id: str, action: str) -> float:
    digest = hashlib.sha256(f"{seed}\0{competition_id}\0{action}".encode()).digest()
    return float(np.random.default_rng(int.from_bytes(digest[:8], "little")).standard_normal())
