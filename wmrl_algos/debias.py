"""Online Debiasing (OD): a monotone map from world-model scores to real scores, refit as pairs arrive.

Why isotonic: GRPO standardises rewards within each group, so any *affine* correction
``a * r_hat + b`` (with ``a > 0``) cancels out exactly and changes nothing. A world model's bias is
rarely affine (it over-rates mediocre solutions and under-rates the best, say); a non-decreasing
piecewise-linear map fitted by isotonic regression straightens that curve, and it survives the
standardisation. Being monotone it never reorders the trajectories of a group: it can only change
*how far apart* they are, never which one is better, so a wrong map cannot flip a gradient's sign.

Why online with a bounded buffer: the policy moves, and with it the region of solution space the world
model is asked about; old pairs age out (FIFO) so the map tracks that drift. Before ``min_pairs`` pairs
exist the map is the identity, so training starts as plain world-model GRPO and nothing is guessed.
Pairs where either score is unknown (``None``) are skipped, never read as 0.

Where this departs from the authors' reference (``docs/method.md``): the fit is the exact pool-adjacent-
violators solution on every distinct predicted score (ties pooled), not PAV on binned scores, so there
is no bin width to tune; the price is variance when pairs are few, which is why the world model's
quality is measured out of sample (on pairs the current map was not fitted on). The first fit waits for
``min_pairs`` (16: two groups of 8) and the buffer keeps the last ``capacity`` pairs (FIFO).

Multi-turn trajectories: pairs may be per execution (``ScoredGroup.pairs``) while the trajectory's
return is its best execution; the map is monotone, so ``f(max r_hat) = max f(r_hat)`` and calibrating the
trajectory's best prediction calibrates the best of its calibrated predictions.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np

from wmrl_algos.denoise import centred_residual
from wmrl_algos.errors import CheckpointError, ConfigError
from wmrl_algos.types import Score, as_score_array

__all__ = ["IsotonicMap", "fit_isotonic", "OnlineDebiaser"]


@dataclass(frozen=True)
class IsotonicMap:
    """A fitted non-decreasing piecewise-linear map, constant (clipped) outside the seen range.

    Attributes:
        knots: sorted distinct world-model scores seen while fitting.
        values: the fitted real score at each knot (non-decreasing).

    Example:
        >>> isotonic_map = fit_isotonic(np.array([0.0, 1.0, 2.0]), np.array([0.0, 0.0, 3.0]))
        >>> isotonic_map(np.array([-5.0, 1.5, 9.0])).tolist()
        [0.0, 1.5, 3.0]
    """

    knots: tuple[float, ...]
    values: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.knots or len(self.knots) != len(self.values):
            raise ConfigError(
                f"an isotonic map needs as many values as knots and at least one knot, got "
                f"{len(self.knots)} knots and {len(self.values)} values; build it with fit_isotonic()"
            )
        if np.any(np.diff(self.knots) <= 0) or np.any(np.diff(self.values) < 0):
            raise ConfigError(
                "isotonic map knots must be strictly increasing and values non-decreasing; "
                "build it with fit_isotonic()"
            )

    def __call__(self, scores: np.ndarray) -> np.ndarray:
        """Map an array of scores; NaN (unknown) stays NaN."""
        scores = np.asarray(scores, dtype=float)
        mapped = np.interp(scores, self.knots, self.values)
        return np.where(np.isnan(scores), np.nan, mapped)


def _pool_adjacent_violators(targets: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted least-squares non-decreasing fit of ``targets`` (already ordered by their inputs)."""
    block_means: list[float] = []
    block_weights: list[float] = []
    block_sizes: list[int] = []
    for target, weight in zip(targets.tolist(), weights.tolist(), strict=True):
        block_means.append(target)
        block_weights.append(weight)
        block_sizes.append(1)
        while len(block_means) > 1 and block_means[-2] > block_means[-1]:
            mean, weight_sum, size = block_means.pop(), block_weights.pop(), block_sizes.pop()
            merged_weight = block_weights[-1] + weight_sum
            block_means[-1] = (block_means[-1] * block_weights[-1] + mean * weight_sum) / merged_weight
            block_weights[-1] = merged_weight
            block_sizes[-1] += size
    return np.repeat(np.asarray(block_means), block_sizes)


def fit_isotonic(predicted: np.ndarray, real: np.ndarray) -> IsotonicMap:
    """Fit the least-squares non-decreasing map from predicted to real scores.

    Pairs with a NaN on either side (unknown) are dropped. Ties in ``predicted`` are pooled first.

    Args:
        predicted: world-model scores.
        real: real scores of the same trajectories.

    Returns:
        The fitted :class:`IsotonicMap` (frozen, picklable).

    Raises:
        ConfigError: the arrays differ in length, contain an infinity, or no pair has both scores.
    """
    predicted = np.asarray(predicted, dtype=float).ravel()
    real = np.asarray(real, dtype=float).ravel()
    if predicted.shape != real.shape:
        raise ConfigError(
            f"{predicted.size} predicted scores but {real.size} real scores; pass one pair per trajectory"
        )
    if np.isinf(predicted).any() or np.isinf(real).any():
        raise ConfigError("a score is infinite; scores must be finite, use NaN (or None) for unknown")
    known = ~np.isnan(predicted) & ~np.isnan(real)
    if not known.any():
        raise ConfigError("no pair has both a predicted and a real score; nothing to fit an isotonic map on")
    knots, inverse, counts = np.unique(predicted[known], return_inverse=True, return_counts=True)
    mean_real = np.bincount(inverse, weights=real[known]) / counts
    values = _pool_adjacent_violators(mean_real, counts.astype(float))
    return IsotonicMap(knots=tuple(knots.tolist()), values=tuple(np.maximum.accumulate(values).tolist()))


class OnlineDebiaser:
    """FIFO buffer of (predicted, real) anchor pairs and the isotonic map refit on it.

    :meth:`push` adds one anchor group's pairs and refits when ``refit_every`` new pairs arrived since the
    last fit and the buffer holds at least ``min_pairs``; :meth:`apply` maps world-model scores (the
    identity until the first fit).

    Args:
        capacity: most recent pairs kept; older ones age out.
        min_pairs: pairs needed before the first fit (the map is the identity until then).
        refit_every: new pairs between refits.

    Raises:
        ConfigError: a count below 1, or ``min_pairs > capacity`` (the map could never be fitted).

    Example:
        >>> debiaser = OnlineDebiaser(min_pairs=4, refit_every=4)
        >>> debiaser.apply(0.5)
        0.5
        >>> debiaser.push([0.1, 0.2, 0.6, 0.9], [0.0, 0.1, 0.9, 1.0])
        >>> debiaser.is_fitted, debiaser.apply(0.6), debiaser.apply(None)
        (True, 0.9, None)
    """

    def __init__(self, capacity: int = 2048, min_pairs: int = 16, refit_every: int = 8) -> None:
        if capacity < 1:
            raise ConfigError(f"capacity={capacity!r}; pass >= 1 pairs to keep (default 2048)")
        if min_pairs < 1 or min_pairs > capacity:
            raise ConfigError(
                f"min_pairs={min_pairs!r} with capacity={capacity!r}; pass 1 <= min_pairs <= capacity, "
                "or the map would never be fitted"
            )
        if refit_every < 1:
            raise ConfigError(f"refit_every={refit_every!r}; pass >= 1 new pairs between refits")
        self.capacity = int(capacity)
        self.min_pairs = int(min_pairs)
        self.refit_every = int(refit_every)
        self._pairs: deque[tuple[float, float]] = deque(maxlen=self.capacity)
        self._new_since_fit = 0
        self._map: IsotonicMap | None = None

    def push(self, predicted: Sequence[Score], real: Sequence[Score]) -> None:
        """Add one anchor group's (predicted, real) pairs, skipping pairs with an unknown side.

        Raises:
            ConfigError: the sequences differ in length, or a score is NaN or infinite.
        """
        if len(predicted) != len(real):
            raise ConfigError(
                f"{len(predicted)} predicted scores but {len(real)} real scores; an anchor group needs "
                "both for every trajectory (None where unknown)"
            )
        predicted_array = as_score_array(predicted, name="predicted")
        real_array = as_score_array(real, name="real")
        known = ~np.isnan(predicted_array) & ~np.isnan(real_array)
        self._pairs.extend(zip(predicted_array[known].tolist(), real_array[known].tolist(), strict=True))
        self._new_since_fit += int(known.sum())
        if self._new_since_fit >= self.refit_every and len(self._pairs) >= self.min_pairs:
            self.refit()

    def refit(self) -> bool:
        """Refit the map on the buffer now, if it holds at least ``min_pairs`` pairs.

        Returns:
            True if the map was refit.
        """
        if len(self._pairs) < self.min_pairs:
            return False
        pairs = np.asarray(self._pairs, dtype=float)
        self._map = fit_isotonic(pairs[:, 0], pairs[:, 1])
        self._new_since_fit = 0
        return True

    @overload
    def apply(self, scores: None) -> None: ...
    @overload
    def apply(self, scores: float) -> float: ...
    @overload
    def apply(self, scores: np.ndarray) -> np.ndarray: ...
    @overload
    def apply(self, scores: Sequence[Score]) -> list[Score]: ...

    def apply(self, scores: Score | np.ndarray | Sequence[Score]) -> Score | np.ndarray | list[Score]:
        """Calibrate world-model scores (the identity before the first fit).

        Args:
            scores: a float, ``None``, a float array (NaN = unknown) or a sequence of scores.

        Returns:
            The same kind: float for a float, ``None`` for ``None``, an array (NaN kept) for an array,
            a list with ``None`` kept for a sequence.

        Raises:
            ConfigError: a float or sequence item is NaN or infinite (unknown must be ``None``), or an
                array item is infinite.
        """
        if scores is None:
            return None
        if isinstance(scores, np.ndarray):
            values = np.asarray(scores, dtype=float)
            if np.isinf(values).any():
                raise ConfigError(
                    "a score in the array is infinite; scores must be finite, use NaN in arrays (None in "
                    "sequences) for an unknown score"
                )
            return values.copy() if self._map is None else self._map(values)
        if isinstance(scores, (int, float, np.floating, np.integer)):
            value = float(as_score_array([float(scores)])[0])
            return value if self._map is None else float(self._map(np.array([value]))[0])
        values = as_score_array(scores)
        mapped = values if self._map is None else self._map(values)
        return [None if np.isnan(value) else float(value) for value in mapped]

    @property
    def is_fitted(self) -> bool:
        """False while the map is the identity (fewer than ``min_pairs`` pairs seen so far)."""
        return self._map is not None

    @property
    def n_pairs(self) -> int:
        """Pairs currently in the buffer."""
        return len(self._pairs)

    @property
    def map(self) -> IsotonicMap | None:
        """The current map, ``None`` while it is the identity."""
        return self._map

    def residuals(
        self, predicted_groups: Sequence[Sequence[Score]], real_groups: Sequence[Sequence[Score]]
    ) -> tuple[float | None, float | None]:
        """Within-group centred mean squared residual against real scores, before and after calibration.

        Each group counts once (mean over groups with at least two members known on both sides).

        Returns:
            ``(before, after)``; ``(None, None)`` when no group is usable.

        Raises:
            ConfigError: the two lists or a group's two sides differ in length.
        """
        if len(predicted_groups) != len(real_groups):
            raise ConfigError(
                f"{len(predicted_groups)} predicted groups but {len(real_groups)} real groups; pass the "
                "same anchor groups on both sides"
            )
        before: list[float] = []
        after: list[float] = []
        for predicted, real in zip(predicted_groups, real_groups, strict=True):
            raw = centred_residual(predicted, real, normalise=False)
            if raw is None:
                continue
            calibrated = centred_residual(self.apply(list(predicted)), real, normalise=False)
            before.append(raw)
            after.append(raw if calibrated is None else calibrated)
        if not before:
            return None, None
        return float(np.mean(before)), float(np.mean(after))

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly where this debiaser is (plain Python values)."""
        return {
            "capacity": self.capacity,
            "min_pairs": self.min_pairs,
            "refit_every": self.refit_every,
            "pairs": [list(pair) for pair in self._pairs],
            "new_since_fit": self._new_since_fit,
            "map": (
                None
                if self._map is None
                else {"knots": list(self._map.knots), "values": list(self._map.values)}
            ),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a state produced by :meth:`state_dict`.

        Raises:
            CheckpointError: a key is missing or a value is unreadable.
        """
        try:
            capacity, min_pairs = int(state["capacity"]), int(state["min_pairs"])
            refit_every, new_since_fit = int(state["refit_every"]), int(state["new_since_fit"])
            pairs = [(float(p), float(r)) for p, r in state["pairs"]]
            saved_map = state["map"]
            fitted = (
                None
                if saved_map is None
                else IsotonicMap(
                    knots=tuple(float(v) for v in saved_map["knots"]),
                    values=tuple(float(v) for v in saved_map["values"]),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(
                f"online debiasing state is incomplete or corrupt ({exc!r}); the calibration cannot "
                "resume, pass a state produced by OnlineDebiaser.state_dict()"
            ) from exc
        self.capacity, self.min_pairs, self.refit_every = capacity, min_pairs, refit_every
        self._pairs = deque(pairs, maxlen=capacity)
        self._new_since_fit, self._map = new_since_fit, fitted
