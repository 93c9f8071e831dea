"""World-model fidelity statistics any track uses: honest isotonic calibration of (task, predicted, real).

Why: every claim WMRL makes rests on the world model's error r̂ − r having a correctable structure (a
monotone bias plus bounded noise), and the way to see what Online Debiasing does to that error is to
calibrate the predictions with the very map training uses, without letting a task see its own real
rewards. That needs nothing but a task id, a predicted and a real reward per pair, so it is written
once here for every track: :func:`cross_fitted_calibration` (fit on half of the tasks, apply to the
other half) and :func:`prequential_calibration` (each task through the map fitted on the tasks before
it, as training runs it). The first argument is named ``competition_ids`` for compatibility; any
track's task ids fit.

The Kaggle harness that used to live here (executing solutions, predicting them, the metrics table
and plots) is in :mod:`wmrl_envs.kaggle.fidelity`. Its names still resolve from this module, with a
:class:`DeprecationWarning` naming the new path, until the shims go (see :mod:`wmrl_envs._moved`);
they are imported only when asked for, so importing this module imports nothing of the Kaggle track.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from wmrl_algos.debias import OnlineDebiaser
from wmrl_algos.errors import ConfigError
from wmrl_envs._moved import reexport

__all__ = ["cross_fitted_calibration", "prequential_calibration"]

_KAGGLE_HARNESS = "wmrl_envs.kaggle.fidelity"
_MOVED_TO_KAGGLE = frozenset(
    {
        "CaseSource",
        "ExecutionCache",
        "ExecutionStats",
        "Executor",
        "FidelityCase",
        "FidelityMetrics",
        "FidelityResult",
        "PredictionRun",
        "RealRecord",
        "evaluate_world_model",
        "execute_cases",
        "fidelity_metrics",
        "plot_calibration",
        "plot_reliability",
        "predict_cases",
        "predicted_status",
        "write_table",
    }
)
"""The public names this module had before the Kaggle harness moved out of it."""


def __getattr__(name: str) -> Any:
    """Resolve a name of the moved Kaggle harness: warn with its new path, then give the same object."""
    if name not in _MOVED_TO_KAGGLE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    reexport(f"{__name__}.{name}", _KAGGLE_HARNESS, globals())
    return globals()[name]


def cross_fitted_calibration(
    competition_ids: Sequence[str],
    predicted: Sequence[float | None],
    real: Sequence[float | None],
    *,
    seed: int = 0,
    min_pairs: int = 8,
) -> list[float | None]:
    """Out-of-fold isotonic calibration: fit on half of the tasks, apply to the other half.

    Uses :class:`~wmrl_algos.debias.OnlineDebiaser` (the map training uses). Tasks are split into two
    halves by a seeded permutation; each half is calibrated by the map fitted on the other half's
    (predicted, real) pairs. A half whose other half has fewer than ``min_pairs`` pairs stays
    uncalibrated (the identity, as in training before enough anchors exist).

    Args:
        competition_ids: the task of each pair (a competition id on the Kaggle track).
        predicted: the world model's reward per pair (``None``: it could not say).
        real: the real reward per pair (``None``: unknown).
        seed: seeds the split of the tasks into halves.
        min_pairs: pairs the map needs before it departs from the identity.

    Returns:
        The calibrated prediction per case (``None`` stays ``None``).

    Raises:
        ConfigError: the three sequences differ in length.

    >>> ids, predicted, real = ["a", "a", "b", "b"], [0.1, 0.9, 0.1, 0.9], [0.0, 1.0, 0.0, 1.0]
    >>> cross_fitted_calibration(ids, predicted, real, min_pairs=2)
    [0.0, 1.0, 0.0, 1.0]
    """
    _require_one_each(competition_ids, predicted, real)
    tasks = sorted(set(competition_ids))
    order = np.random.default_rng(seed).permutation(len(tasks))
    half_of = {tasks[task]: int(rank % 2) for rank, task in enumerate(order)}
    calibrated: list[float | None] = list(predicted)
    for half in (0, 1):
        debiaser = OnlineDebiaser(capacity=max(min_pairs, len(predicted)), min_pairs=min_pairs, refit_every=1)
        fit = [index for index, task in enumerate(competition_ids) if half_of[task] != half]
        debiaser.push([predicted[index] for index in fit], [real[index] for index in fit])
        debiaser.refit()
        apply = [index for index, task in enumerate(competition_ids) if half_of[task] == half]
        mapped = debiaser.apply([predicted[index] for index in apply])
        for index, value in zip(apply, mapped, strict=True):
            calibrated[index] = value
    return calibrated


def prequential_calibration(
    competition_ids: Sequence[str],
    predicted: Sequence[float | None],
    real: Sequence[float | None],
    *,
    min_pairs: int = 8,
) -> list[float | None]:
    """Online Debiasing as training runs it: each task is calibrated by the map fitted on earlier tasks.

    Tasks are visited in first-appearance order; a task's predictions go through the current map
    (the identity until ``min_pairs`` pairs exist), then its (predicted, real) pairs are pushed. Its
    running error answers "how fast does the bias shrink as anchors arrive" for a frozen world model,
    next to a learning one evaluated prequentially.

    >>> prequential_calibration(["a", "a", "b", "b"], [0.2, 0.8, 0.2, 0.8], [0.0, 1.0, 0.0, 1.0], min_pairs=2)
    [0.2, 0.8, 0.0, 1.0]
    """
    _require_one_each(competition_ids, predicted, real)
    by_task: dict[str, list[int]] = defaultdict(list)
    for index, task in enumerate(competition_ids):
        by_task[task].append(index)
    debiaser = OnlineDebiaser(capacity=max(min_pairs, len(predicted)), min_pairs=min_pairs, refit_every=1)
    calibrated: list[float | None] = list(predicted)
    for indices in by_task.values():
        mapped = debiaser.apply([predicted[index] for index in indices])
        for index, value in zip(indices, mapped, strict=True):
            calibrated[index] = value
        debiaser.push([predicted[index] for index in indices], [real[index] for index in indices])
    return calibrated


def _require_one_each(
    competition_ids: Sequence[str], predicted: Sequence[float | None], real: Sequence[float | None]
) -> None:
    if not len(competition_ids) == len(predicted) == len(real):
        raise ConfigError(
            f"{len(competition_ids)} competition ids, {len(predicted)} predictions and {len(real)} real "
            "rewards; pass one of each per case"
        )
