"""Residual correction: what a global monotone map cannot fix, learned from trajectory features.

Why: Online Debiasing fits one non-decreasing map from predicted to real scores for *all* trajectories.
A world model that over-rates one strategy and under-rates another (arm- or strategy-specific bias) has
no single monotone inverse: the same predicted 0.7 means 0.5 for one strategy and 0.8 for the other.
The anchors still see both, so a model of the residual ``real - calibrated`` conditioned on the
trajectory's features can learn it, and with its uncertainty it can tell the anchor scheduler which
groups are worth executing (:class:`~wmrl_algos.anchors.AnchorScheduler` ``priority``).

The contract (:class:`ResidualCorrection`) is small: features are computed from the opaque trajectory
payload by the implementation, ``predict`` returns a mean residual and its standard deviation per
trajectory, ``update`` learns from one anchor group. :class:`RidgeResidual` is the one shipped: Bayesian
linear regression on a user-given feature vector with exponential forgetting (the policy and the world
model drift), whose posterior gives the uncertainty in closed form. With one-hot features of a
strategy id it is a per-strategy shrunken mean residual.

What it cannot do: it learns only where anchors go. A strategy the policy never tries before the
world model's bias on it matters is corrected only after anchors reach it; the posterior standard
deviation stays at its prior there, which is exactly what uncertainty-driven anchor selection uses.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from wmrl_algos.errors import CheckpointError, ConfigError

__all__ = ["ResidualCorrection", "RidgeResidual"]


@runtime_checkable
class ResidualCorrection(Protocol):
    """Predicts ``real - calibrated`` for trajectories from their features, with uncertainty."""

    def predict(self, trajectories: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        """Mean residual and its standard deviation per trajectory (arrays of ``len(trajectories)``)."""
        ...

    def update(self, trajectories: Sequence[Any], calibrated: np.ndarray, real: np.ndarray) -> None:
        """Learn from one anchor group (NaN on either side: that trajectory is skipped)."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume (plain Python values)."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a state produced by :meth:`state_dict`."""
        ...


class RidgeResidual:
    """Bayesian ridge regression of the residual on trajectory features, with forgetting.

    Posterior precision ``A = l2 * I + sum_t decay^age x_t x_t^T`` and ``b = sum_t decay^age x_t y_t``; the
    mean residual is ``x^T A^-1 b`` and its standard deviation ``sigma * sqrt(x^T A^-1 x)``, with
    ``sigma^2`` a moving average of the squared out-of-sample error (``prior_std^2`` before any data).

    Args:
        featurize: trajectory payload -> feature vector of length ``dim``.
        dim: number of features.
        l2: prior precision (> 0): how strongly the residual is shrunk towards 0.
        half_life: anchor trajectories after which an observation's weight halves (> 0).
        prior_std: residual standard deviation assumed before any observation (> 0).

    Raises:
        ConfigError: a bound out of range.

    Example:
        >>> residual = RidgeResidual(lambda arm: np.eye(2)[arm], dim=2, l2=1.0)
        >>> residual.update([0, 0, 1, 1], np.array([0.5, 0.5, 0.5, 0.5]), np.array([0.7, 0.7, 0.3, 0.3]))
        >>> mean, std = residual.predict([0, 1])
        >>> mean.round(2).tolist(), bool(std[0] > 0)
        ([0.13, -0.13], True)
    """

    def __init__(
        self,
        featurize: Callable[[Any], np.ndarray],
        dim: int,
        *,
        l2: float = 1.0,
        half_life: float = 2048.0,
        prior_std: float = 0.3,
    ) -> None:
        if dim < 1:
            raise ConfigError(f"dim={dim!r}; pass the length of the feature vector (>= 1)")
        for name, value in (("l2", l2), ("half_life", half_life), ("prior_std", prior_std)):
            if not (np.isfinite(value) and value > 0.0):
                raise ConfigError(f"{name}={value!r}; pass a finite value > 0")
        self.featurize = featurize
        self.dim = int(dim)
        self.l2 = float(l2)
        self.half_life = float(half_life)
        self.prior_std = float(prior_std)
        self._gram = np.zeros((self.dim, self.dim))
        self._moment = np.zeros(self.dim)
        self._error_sum = 0.0
        self._error_weight = 0.0
        self._posterior: tuple[np.ndarray, np.ndarray] | None = None

    def _features(self, trajectories: Sequence[Any]) -> np.ndarray:
        features = np.zeros((len(trajectories), self.dim))
        for index, trajectory in enumerate(trajectories):
            vector = np.asarray(self.featurize(trajectory), dtype=float).ravel()
            if vector.shape != (self.dim,) or not np.isfinite(vector).all():
                raise ConfigError(
                    f"featurize returned shape {vector.shape} (or a NaN) for trajectory {index}; it must "
                    f"return {self.dim} finite numbers"
                )
            features[index] = vector
        return features

    @property
    def noise_std(self) -> float:
        """Moving average of the out-of-sample residual error (``prior_std`` before any observation)."""
        if self._error_weight <= 0.0:
            return self.prior_std
        return math.sqrt(self._error_sum / self._error_weight)

    def predict(self, trajectories: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        """Mean residual and its posterior standard deviation per trajectory."""
        if not trajectories:
            return np.zeros(0), np.zeros(0)
        features = self._features(trajectories)
        covariance, coefficients = self._solved()
        spread = np.einsum("ij,ij->i", features @ covariance, features)
        return features @ coefficients, self.noise_std * np.sqrt(np.maximum(spread, 0.0))

    def _solved(self) -> tuple[np.ndarray, np.ndarray]:
        """``A^-1`` and ``A^-1 b``, computed once per update (prediction is the hot path)."""
        if self._posterior is None:
            covariance = np.linalg.inv(self._gram + self.l2 * np.eye(self.dim))
            self._posterior = (covariance, covariance @ self._moment)
        return self._posterior

    def update(self, trajectories: Sequence[Any], calibrated: np.ndarray, real: np.ndarray) -> None:
        """Learn from one anchor group: ``y = real - calibrated`` where both are known.

        Raises:
            ConfigError: lengths differ, or ``featurize`` breaks its contract.
        """
        calibrated, real = np.asarray(calibrated, dtype=float), np.asarray(real, dtype=float)
        if not (len(trajectories) == calibrated.size == real.size):
            raise ConfigError(
                f"{len(trajectories)} trajectories, {calibrated.size} calibrated and {real.size} real "
                "scores; pass one of each per trajectory of the anchor group"
            )
        known = ~np.isnan(calibrated) & ~np.isnan(real)
        if not known.any():
            return
        chosen = [trajectory for trajectory, keep in zip(trajectories, known.tolist(), strict=True) if keep]
        features = self._features(chosen)
        targets = (real - calibrated)[known]
        predicted, _ = self.predict(chosen)
        decay = 2.0 ** (-features.shape[0] / self.half_life)
        self._error_sum = decay * self._error_sum + float(((targets - predicted) ** 2).sum())
        self._error_weight = decay * self._error_weight + float(targets.size)
        self._gram = decay * self._gram + features.T @ features
        self._moment = decay * self._moment + features.T @ targets
        self._posterior = None

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly where this model is (plain Python values)."""
        return {
            "dim": self.dim,
            "gram": self._gram.tolist(),
            "moment": self._moment.tolist(),
            "error_sum": self._error_sum,
            "error_weight": self._error_weight,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a state produced by :meth:`state_dict` into a model built with the same ``dim``.

        Raises:
            CheckpointError: a key is missing, a value is unreadable, or the dimension differs.
        """
        try:
            gram = np.asarray(state["gram"], dtype=float)
            moment = np.asarray(state["moment"], dtype=float)
            error_sum, error_weight = float(state["error_sum"]), float(state["error_weight"])
            if gram.shape != (self.dim, self.dim) or moment.shape != (self.dim,):
                raise ValueError(f"saved dim {state['dim']!r}, this model has {self.dim}")
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(
                f"residual-correction state is incomplete, corrupt or of another dimension ({exc!r}); pass a "
                "state produced by RidgeResidual.state_dict() with the same features"
            ) from exc
        self._gram, self._moment, self._posterior = gram, moment, None
        self._error_sum, self._error_weight = error_sum, error_weight
