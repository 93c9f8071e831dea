"""World-model fidelity statistics any track uses: honest isotonic calibration of (task, predicted, real).

Why: every claim WMRL makes rests on the world model's error r̂ − r having a correctable structure (a
monotone bias plus bounded noise), and the way to see what Online Debiasing does to that error is to
calibrate the predictions with the very map training uses, without letting a task see its own real
rewards. That needs nothing but a task id, a predicted and a real reward per pair, so it is written
once here for every track: :func:`cross_fitted_calibration` (fit on half of the tasks, apply to the
other half) and :func:`prequential_calibration` (each task through the map fitted on the tasks before
it, as training runs it). The first argument is named ``competition_ids`` for compatibility; any
track's task ids fit.

:func:`within_group_agreement` measures the one number that says what a world model is worth to the
gradient: the correlation of real and predicted rewards after GRPO's own within-group
standardisation, with a jackknife standard error over groups, and the within-group pairwise accuracy.
:class:`~wmrl_algos.power.ExpectedEffect` turns it into the expected variance and execution savings.

The Kaggle harness that used to live here (executing solutions, predicting them, the metrics table
and plots) is in :mod:`wmrl_envs.kaggle.fidelity`. Its names still resolve from this module, with a
:class:`DeprecationWarning` naming the new path, until the shims go (see :mod:`wmrl_envs._moved`);
they are imported only when asked for, so importing this module imports nothing of the Kaggle track.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmrl_algos.debias import OnlineDebiaser
from wmrl_algos.errors import ConfigError
from wmrl_envs._moved import reexport

__all__ = [
    "WithinGroupAgreement",
    "cross_fitted_calibration",
    "prequential_calibration",
    "within_group_agreement",
]

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


@dataclass(frozen=True)
class WithinGroupAgreement:
    """How well predicted rewards order and scale the real ones within groups, as GRPO sees them.

    Attributes:
        correlation: Pearson correlation of the within-group standardised real and predicted rewards,
            pooled over groups (Σ z_real z_pred / √(Σ z_real² Σ z_pred²)); a side that is constant in a
            group has advantage 0 there, as in GRPO, so a model constant in every group scores 0 (its
            advantages carry nothing). This is ρ of :class:`~wmrl_algos.power.ExpectedEffect`.
        correlation_se: jackknife standard error over groups (groups are the independent units);
            ``None`` with fewer than two groups or when leaving one out leaves nothing to correlate.
        pairwise_accuracy: share of within-group pairs with different real rewards that the prediction
            orders the same way (a tie in the prediction counts a half); ``None`` without such pairs.
        n_groups: groups that entered (two known pairs or more, not constant on both sides).
        n_pairs: (predicted, real) pairs in those groups.
    """

    correlation: float
    correlation_se: float | None
    pairwise_accuracy: float | None
    n_groups: int
    n_pairs: int


def within_group_agreement(
    group_ids: Sequence[str],
    predicted: Sequence[float | None],
    real: Sequence[float | None],
) -> WithinGroupAgreement | None:
    """The within-group agreement of predicted and real rewards (a pair with a side unknown is left out).

    Args:
        group_ids: the group of each pair (a task: GRPO compares rollouts of one prompt).
        predicted: the world model's reward per pair (``None`` or NaN: it could not say).
        real: the real reward per pair (``None`` or NaN: unknown).

    Returns:
        The agreement, or ``None`` when the real rewards are constant in every group with two known
        pairs (GRPO has no signal there, so there is nothing to agree with).

    Raises:
        ConfigError: the three sequences differ in length.

    >>> agreement = within_group_agreement(["a"] * 3 + ["b"] * 3, [1, 2, 3, 3, 2, 1], [0, 1, 2, 0, 1, 2])
    >>> agreement.correlation, agreement.pairwise_accuracy, agreement.n_groups
    (0.0, 0.5, 2)
    """
    _require_one_each(group_ids, predicted, real)
    by_group: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for group, p, r in zip(group_ids, predicted, real, strict=True):
        if p is not None and r is not None and math.isfinite(p) and math.isfinite(r):
            by_group[group].append((float(p), float(r)))
    sums: list[tuple[float, float, float]] = []
    concordant, ordered, n_pairs = 0.0, 0, 0
    for pairs in by_group.values():
        values = np.asarray(pairs)
        if len(values) < 2 or (np.ptp(values[:, 0]) == 0 and np.ptp(values[:, 1]) == 0):
            continue
        z_predicted, z_real = _standardised(values[:, 0]), _standardised(values[:, 1])
        sums.append((float(z_real @ z_predicted), float(z_real @ z_real), float(z_predicted @ z_predicted)))
        n_pairs += len(values)
        real_order = np.sign(values[:, 1][:, None] - values[:, 1][None, :])
        predicted_order = np.sign(values[:, 0][:, None] - values[:, 0][None, :])
        upper = np.triu(real_order != 0, k=1)
        ordered += int(upper.sum())
        concordant += float((real_order == predicted_order)[upper].sum()) + 0.5 * float(
            (predicted_order == 0)[upper].sum()
        )
    correlation = _pooled_correlation(sums)
    if correlation is None:
        return None
    return WithinGroupAgreement(
        correlation=correlation,
        correlation_se=_jackknife_se(sums),
        pairwise_accuracy=concordant / ordered if ordered else None,
        n_groups=len(sums),
        n_pairs=n_pairs,
    )


def _standardised(values: np.ndarray) -> np.ndarray:
    """GRPO's within-group advantage: (x − mean) / std, and 0 for a constant group.

    Constant means equal values (``ptp == 0``), not ``std == 0``: the mean of equal floats can be off
    by one ulp, and dividing that residue by its own tiny std would make noise of unit size.
    """
    if np.ptp(values) == 0:
        return np.zeros_like(values)
    centred = values - values.mean()
    return centred / float(values.std())


def _pooled_correlation(sums: Sequence[tuple[float, float, float]]) -> float | None:
    """Σ z_real z_pred / √(Σ z_real² Σ z_pred²): 0 for a model constant in every group, None if reality is."""
    cross, real_square, predicted_square = np.asarray(sums, dtype=float).reshape(-1, 3).sum(axis=0)
    if real_square <= 0:
        return None
    if predicted_square <= 0:
        return 0.0
    return float(np.clip(cross / np.sqrt(real_square * predicted_square), -1.0, 1.0))


def _jackknife_se(sums: Sequence[tuple[float, float, float]]) -> float | None:
    """Leave-one-group-out standard error of the pooled correlation."""
    if len(sums) < 2:
        return None
    left_out = [_pooled_correlation([*sums[:index], *sums[index + 1 :]]) for index in range(len(sums))]
    if any(value is None for value in left_out):
        return None
    estimates = np.array(left_out, dtype=float)
    return float(np.sqrt((len(sums) - 1) / len(sums) * np.sum((estimates - estimates.mean()) ** 2)))


def _require_one_each(
    competition_ids: Sequence[str], predicted: Sequence[float | None], real: Sequence[float | None]
) -> None:
    if not len(competition_ids) == len(predicted) == len(real):
        raise ConfigError(
            f"{len(competition_ids)} competition ids, {len(predicted)} predictions and {len(real)} real "
            "rewards; pass one of each per case"
        )
