"""The evaluation metrics of the Kaggle suite, each with its direction and the prediction kind it grades.

Why a registry instead of passing functions around: a competition is stored on disk (a JSON manifest,
an MLE-bench ``config.yaml``) and must name its metric by a string; the grader, the leaderboard builder
and the world-model context all need the same three facts about it: how to compute it, whether higher
is better, and what a valid prediction looks like (a probability, a class label or a number). The
submission validator uses the last one to reject malformed files before any score is computed.

Example:
    >>> get_metric("rmse").higher_is_better
    False
    >>> round(get_metric("accuracy").compute(["a", "b", "b"], ["a", "b", "a"]), 4)
    0.6667
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from wmrl_algos.errors import ConfigError, DataError

__all__ = ["PredictionKind", "Metric", "METRICS", "get_metric", "metric_from_alias"]

PredictionKind = Literal["probability", "label", "number"]
"""``probability``: a number in [0, 1], the probability of the positive class (binary tasks).
``label``: one of the training set's class labels. ``number``: any finite real number."""


def _roc_auc(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y_true.astype(int), y_pred.astype(float)))


def _log_loss(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    probability = np.clip(y_pred.astype(float), 1e-15, 1 - 1e-15)
    positive = y_true.astype(int) == 1
    return float(-np.mean(np.where(positive, np.log(probability), np.log(1 - probability))))


def _accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(np.mean(y_true.astype(str) == y_pred.astype(str)))


def _macro_f1(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    from sklearn.metrics import f1_score

    return float(f1_score(y_true.astype(str), y_pred.astype(str), average="macro"))


def _rmse(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(np.sqrt(np.mean((y_true.astype(float) - y_pred.astype(float)) ** 2)))


def _mae(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(np.mean(np.abs(y_true.astype(float) - y_pred.astype(float))))


def _rmsle(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    truth = np.log1p(np.maximum(y_true.astype(float), 0.0))
    prediction = np.log1p(np.maximum(y_pred.astype(float), 0.0))
    return float(np.sqrt(np.mean((truth - prediction) ** 2)))


@dataclass(frozen=True)
class Metric:
    """One evaluation metric.

    Attributes:
        name: the registry key, e.g. ``"roc_auc"``.
        higher_is_better: the metric's direction.
        kind: what each submitted prediction must be (see :data:`PredictionKind`).
        function: ``(y_true, y_pred) -> score`` on numpy arrays.

    Example:
        >>> Metric("mae", False, "number", _mae).compute([1.0, 2.0], [1.5, 2.5])
        0.5
    """

    name: str
    higher_is_better: bool
    kind: PredictionKind
    function: Callable[[np.ndarray, np.ndarray], float]

    def compute(self, y_true: Sequence[Any] | np.ndarray, y_pred: Sequence[Any] | np.ndarray) -> float:
        """The metric on aligned answers and predictions.

        Raises:
            DataError: the arrays differ in length or are empty.
        """
        truth, prediction = np.asarray(y_true), np.asarray(y_pred)
        if truth.shape != prediction.shape or truth.size == 0:
            raise DataError(
                f"cannot compute {self.name}: {truth.size} answers vs {prediction.size} predictions; "
                "both must be non-empty and aligned row by row"
            )
        return self.function(truth, prediction)


METRICS: dict[str, Metric] = {
    metric.name: metric
    for metric in (
        Metric("roc_auc", True, "probability", _roc_auc),
        Metric("log_loss", False, "probability", _log_loss),
        Metric("accuracy", True, "label", _accuracy),
        Metric("macro_f1", True, "label", _macro_f1),
        Metric("rmse", False, "number", _rmse),
        Metric("mae", False, "number", _mae),
        Metric("rmsle", False, "number", _rmsle),
    )
}
"""Every metric a competition may name."""

_ALIASES = {
    "auc": "roc_auc",
    "roc-auc": "roc_auc",
    "auc-roc": "roc_auc",
    "area_under_roc_curve": "roc_auc",
    "logloss": "log_loss",
    "log-loss": "log_loss",
    "binary_log_loss": "log_loss",
    "categorization-accuracy": "accuracy",
    "classification_accuracy": "accuracy",
    "f1-macro": "macro_f1",
    "macro-f1": "macro_f1",
    "f1_macro": "macro_f1",
    "root_mean_squared_error": "rmse",
    "mean_absolute_error": "mae",
    "root_mean_squared_log_error": "rmsle",
}


def get_metric(name: str) -> Metric:
    """The registered metric called ``name``.

    Raises:
        ConfigError: unknown name; the message lists the known ones.
    """
    try:
        return METRICS[name]
    except KeyError:
        raise ConfigError(
            f"unknown metric {name!r}; use one of {sorted(METRICS)} (or add it to wmrl_envs.kaggle.metrics)"
        ) from None


def metric_from_alias(name: str) -> Metric:
    """Resolve a metric name as written by MLE-bench or MLE-Dojo (``"auc"``, ``"RMSE"``, ``"logloss"``).

    Raises:
        ConfigError: the name matches no registered metric or alias.
    """
    key = name.strip().lower().replace(" ", "_")
    return get_metric(_ALIASES.get(key, key))
