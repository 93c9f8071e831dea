"""The prediction-powered (control-variate) estimator: world-model advantages that cannot bias the step.

Why: the fusion weights of :mod:`wmrl_algos.denoise` treat the world model's error as noise. An error
that is systematic per strategy, or that follows the policy (a judge that prefers what the policy
already does), does not average out, and any positive weight on the world-model groups makes the policy
optimise part of that error. Prediction-powered inference (PPI++, Angelopoulos, Duchi and Zrnic 2023)
uses the predictions differently: as a *control variate*. With ``N`` groups of which the ``n`` anchor
groups are a uniform random sample, ``Y`` the real GRPO advantage and ``f`` the world model's,

    g(λ) = λ · mean_{all trajectories} f ∇logπ  +  mean_{anchor trajectories} (Y − λ f) ∇logπ.

The anchors are a random sample of the groups, so the anchor mean of ``λ f ∇logπ`` is unbiased for its
all-groups mean and the two cancel in expectation: ``E g(λ) = mean_all Y ∇logπ``, the all-real GRPO
gradient, for **any** world-model error, as long as ``λ`` and ``f`` do not depend on which groups are
anchors. Its variance is ``Var(Y)/n + (λ² Var f − 2 λ Cov(Y, f)) (1/n − 1/N)``, smallest at
``λ* = Cov(Y, f) / Var(f)`` where it is ``1 − ρ² (1 − n/N)`` of anchors-only's (``ρ``: correlation of
real and predicted advantages on the policy's own rollouts). ``λ = 0`` is GRPO on the anchor groups
alone, exactly: a useless world model costs nothing but the estimate of ``λ``.

Layers: pure functions (:func:`powered_advantages`, :func:`power_coefficient`), then
:class:`PowerTuner`, which keeps the running sums of the anchor pairs and the coefficient (push / refit
/ apply). The coefficient a step uses is fitted on *earlier* steps' anchors only (cross-fitted), so it
is fixed before the step's anchors are drawn and the step stays unbiased; it is shrunk towards 0 while
pairs are few and clipped to ``[0, 1]``. It sees advantages only, never a trajectory.
:class:`~wmrl_algos.loop.CorrectionLoop` composes it with Online Debiasing (calibrated predictions
raise ``ρ``) when passed ``power=PowerTuner()``; ``docs/method.md`` has the derivation.

Unknown scores: a trajectory without a prediction has ``f = 0`` (no λ-term), and one without a real
score has ``Y = 0``, which is what all-real GRPO gives it (advantage 0, :mod:`wmrl_algos.advantages`).
Both are fixed before the anchors are drawn, so the cancellation above still holds: unknown predictions
cost variance reduction (``ρ`` falls with the share of unknowns), never bias.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmrl_algos.errors import CheckpointError, ConfigError

__all__ = ["PoweredAdvantages", "powered_advantages", "power_coefficient", "PowerTuner"]


@dataclass(frozen=True)
class PoweredAdvantages:
    """One group's effective advantages under the prediction-powered estimator.

    Attributes:
        values: the effective advantage of each trajectory (0.0 where ``mask`` is False).
        mask: True where the trajectory carries a term (a known real advantage on an anchor group, or a
            known predicted advantage with ``λ > 0``).
        scale: the factor of the group's real term: ``B / B_anchor`` (all trajectories over anchor
            trajectories) for an anchor group, 0.0 for a world-model group.
    """

    values: np.ndarray
    mask: np.ndarray
    scale: float


def _advantage_array(values: np.ndarray | Sequence[float], name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1:
        raise ConfigError(f"{name} has shape {array.shape}; pass one advantage per trajectory (1-D)")
    if np.isinf(array).any():
        raise ConfigError(f"{name} holds an infinite advantage; pass finite values, NaN where unknown")
    return array


def powered_advantages(
    real: Sequence[np.ndarray | None], predicted: Sequence[np.ndarray], coefficient: float
) -> list[PoweredAdvantages]:
    """Per-trajectory advantages whose mean-over-the-step gradient is the prediction-powered estimate.

    With ``B`` trajectories in the step, ``B_S`` of them in anchor groups and a loss that averages over
    all ``B`` trajectories (``loss_type="grpo"``), a world-model trajectory gets ``λ f`` and an anchor
    trajectory ``λ f + (B / B_S)(Y − λ f)``. Then the loss's gradient is ``g(λ)`` of the module doc:
    with ``λ = 0`` exactly GRPO on the anchor groups alone (same gradient, same scale), and with equal
    group sizes (GRPO's case) an unbiased estimate of all-real GRPO's for every ``λ``. Unknown values
    (NaN) contribute 0. A step without an anchor group has no unbiased estimate: every value is 0.

    Args:
        real: the real advantages of each anchor group (NaN where unknown), ``None`` for a world-model
            group.
        predicted: the world model's advantages of every group, formed exactly as the real ones (same
            centring and scaling), NaN where unknown.
        coefficient: ``λ`` in ``[0, 1]``, fixed before this step's anchors were drawn.

    Returns:
        One :class:`PoweredAdvantages` per group, in order.

    Raises:
        ConfigError: mismatched lengths, an infinite advantage, or ``coefficient`` outside ``[0, 1]``.

    Example:
        >>> out = powered_advantages([np.array([1.0, -1.0]), None], [np.array([0.5, -0.5])] * 2, 0.5)
        >>> [group.values.tolist() for group in out]
        [[1.75, -1.75], [0.25, -0.25]]
    """
    if len(real) != len(predicted):
        raise ConfigError(
            f"{len(real)} groups of real advantages but {len(predicted)} of predicted ones; pass one entry "
            "per group (None as the real entry of a world-model group)"
        )
    if not (math.isfinite(coefficient) and 0.0 <= coefficient <= 1.0):
        raise ConfigError(f"coefficient={coefficient!r}; pass λ in [0, 1] (0 = GRPO on the anchors alone)")
    predicted_arrays = [_advantage_array(values, f"predicted[{i}]") for i, values in enumerate(predicted)]
    real_arrays: list[np.ndarray | None] = []
    for index, (values, guess) in enumerate(zip(real, predicted_arrays, strict=True)):
        if values is None:
            real_arrays.append(None)
            continue
        array = _advantage_array(values, f"real[{index}]")
        if array.shape != guess.shape:
            raise ConfigError(
                f"group {index}: {array.size} real advantages but {guess.size} predicted; every trajectory "
                "of an anchor group needs both (NaN where unknown)"
            )
        real_arrays.append(array)
    total = sum(guess.size for guess in predicted_arrays)
    anchored = sum(array.size for array in real_arrays if array is not None)
    if anchored == 0:
        return [
            PoweredAdvantages(np.zeros(guess.size), np.zeros(guess.size, dtype=bool), 0.0)
            for guess in predicted_arrays
        ]
    scale = total / anchored
    result = []
    for truth, guess in zip(real_arrays, predicted_arrays, strict=True):
        has_guess = ~np.isnan(guess) & (coefficient > 0.0)
        control = coefficient * np.where(has_guess, guess, 0.0)
        if truth is None:
            result.append(PoweredAdvantages(np.where(has_guess, control, 0.0), has_guess, 0.0))
            continue
        has_truth = ~np.isnan(truth)
        values = control + scale * (np.where(has_truth, truth, 0.0) - control)
        mask = has_truth | has_guess
        result.append(PoweredAdvantages(np.where(mask, values, 0.0), mask, scale))
    return result


def power_coefficient(
    sum_real_predicted: float, sum_predicted_squared: float, pairs: float, prior_pairs: float
) -> float:
    """The power-tuned ``λ`` from anchor pairs: ``Cov(Y, f) / Var(f)``, shrunk and clipped to ``[0, 1]``.

    Advantages are centred within their group, so the moments are plain sums:
    ``λ̂ = Σ Y f / Σ f²``. It is multiplied by ``pairs / (pairs + prior_pairs)`` (few pairs: towards 0,
    i.e. towards GRPO on the anchors alone) and clipped to ``[0, 1]``; 0 without pairs or without
    predicted spread.

    Args:
        sum_real_predicted: ``Σ Y f`` over the pairs.
        sum_predicted_squared: ``Σ f²`` over the pairs.
        pairs: the (effective) number of pairs, >= 0.
        prior_pairs: pairs at which the estimate counts half, >= 0.

    Raises:
        ConfigError: a negative count or a non-finite sum.

    Example:
        >>> round(power_coefficient(30.0, 50.0, pairs=96, prior_pairs=32), 6)
        0.45
    """
    sums = (("sum_real_predicted", sum_real_predicted), ("sum_predicted_squared", sum_predicted_squared))
    for name, value in sums:
        if not math.isfinite(value):
            raise ConfigError(f"{name}={value!r}; pass a finite sum of anchor-pair products")
    if not (math.isfinite(pairs) and pairs >= 0.0 and math.isfinite(prior_pairs) and prior_pairs >= 0.0):
        raise ConfigError(f"pairs={pairs!r}, prior_pairs={prior_pairs!r}; pass finite counts >= 0")
    if pairs == 0.0 or sum_predicted_squared <= 0.0:
        return 0.0
    slope = sum_real_predicted / sum_predicted_squared
    return float(min(1.0, max(0.0, slope * pairs / (pairs + prior_pairs))))


class PowerTuner:
    """The power-tuned coefficient of the prediction-powered estimator, learned from anchor pairs.

    Keeps exponentially forgotten sums of ``Y f``, ``f²`` and ``Y²`` over the anchor trajectories whose
    real and predicted advantages are both known (the world model's error drifts with the policy, so old
    pairs fade). :meth:`apply` uses the coefficient of the last :meth:`refit`; the caller pushes a
    step's anchors only *after* applying, so each step's ``λ`` is fitted on earlier steps (cross-fitted).
    Until the first refit ``λ = 0``: GRPO on the anchors alone.

    Args:
        half_life_pairs: anchor pairs after which a pair's weight in the sums halves (> 0).
        prior_pairs: shrinkage; the estimate counts half at this many (effective) pairs (>= 0).

    Raises:
        ConfigError: a non-positive half-life or a negative prior.

    Example:
        >>> tuner = PowerTuner(prior_pairs=0.0)
        >>> tuner.push(np.array([1.0, -1.0]), np.array([0.5, -0.5]))
        >>> tuner.refit()
        1.0
        >>> anchor, model = tuner.apply([np.array([1.0, -1.0]), None], [np.array([0.5, -0.5])] * 2)
        >>> anchor.values.tolist(), model.values.tolist()
        ([1.5, -1.5], [0.5, -0.5])
    """

    def __init__(self, half_life_pairs: float = 1024.0, prior_pairs: float = 32.0) -> None:
        if not (math.isfinite(half_life_pairs) and half_life_pairs > 0.0):
            raise ConfigError(f"half_life_pairs={half_life_pairs!r}; pass a number of pairs > 0, e.g. 1024")
        if not (math.isfinite(prior_pairs) and prior_pairs >= 0.0):
            raise ConfigError(f"prior_pairs={prior_pairs!r}; pass a number of pairs >= 0, e.g. 32")
        self.half_life_pairs = float(half_life_pairs)
        self.prior_pairs = float(prior_pairs)
        self._decay = 0.5 ** (1.0 / self.half_life_pairs)
        self._pairs = 0.0
        self._sum_real_predicted = 0.0
        self._sum_predicted_squared = 0.0
        self._sum_real_squared = 0.0
        self._coefficient = 0.0

    @property
    def coefficient(self) -> float:
        """The ``λ`` :meth:`apply` uses (from the last :meth:`refit`; 0 before)."""
        return self._coefficient

    @property
    def pairs(self) -> float:
        """The effective number of pairs in the sums (forgetting included)."""
        return self._pairs

    @property
    def correlation(self) -> float | None:
        """The correlation ``ρ`` of real and predicted advantages in the sums; ``None`` without spread."""
        denominator = self._sum_real_squared * self._sum_predicted_squared
        return self._sum_real_predicted / math.sqrt(denominator) if denominator > 0.0 else None

    def push(self, real: np.ndarray | Sequence[float], predicted: np.ndarray | Sequence[float]) -> None:
        """Add one anchor group's (real, predicted) advantages; pairs with an unknown (NaN) side are skipped.

        Raises:
            ConfigError: the two have different lengths or hold an infinite value.
        """
        truth, guess = _advantage_array(real, "real"), _advantage_array(predicted, "predicted")
        if truth.shape != guess.shape:
            raise ConfigError(
                f"{truth.size} real advantages but {guess.size} predicted; pass one pair per trajectory"
            )
        known = ~np.isnan(truth) & ~np.isnan(guess)
        count = int(known.sum())
        if count == 0:
            return
        fade = self._decay**count
        ages = self._decay ** np.arange(count - 1, -1, -1, dtype=float)
        truth, guess = truth[known], guess[known]
        self._pairs = self._pairs * fade + float(ages.sum())
        self._sum_real_predicted = self._sum_real_predicted * fade + float((ages * truth * guess).sum())
        self._sum_predicted_squared = self._sum_predicted_squared * fade + float((ages * guess * guess).sum())
        self._sum_real_squared = self._sum_real_squared * fade + float((ages * truth * truth).sum())

    def refit(self) -> float:
        """Re-estimate ``λ`` from the pairs pushed so far (:func:`power_coefficient`); returns it."""
        self._coefficient = power_coefficient(
            self._sum_real_predicted, self._sum_predicted_squared, self._pairs, self.prior_pairs
        )
        return self._coefficient

    def apply(
        self, real: Sequence[np.ndarray | None], predicted: Sequence[np.ndarray]
    ) -> list[PoweredAdvantages]:
        """:func:`powered_advantages` with the current coefficient."""
        return powered_advantages(real, predicted, self._coefficient)

    def variance_ratio(self, anchor_groups: int, groups: int) -> float | None:
        """The step's gradient variance relative to anchors-only's at the current ``λ`` and ``ρ``.

        ``1 + (λ² − 2 λ β)(1 − n/N) · Var f / Var Y`` with ``β = Cov / Var f``; at ``λ = β`` it is
        ``1 − ρ²(1 − n/N)``. ``None`` without spread in the sums.
        """
        if self._sum_real_squared <= 0.0 or self._sum_predicted_squared <= 0.0 or groups < 1:
            return None
        slope = self._sum_real_predicted / self._sum_predicted_squared
        spread = self._sum_predicted_squared / self._sum_real_squared
        coefficient = self._coefficient
        return 1.0 + (coefficient**2 - 2.0 * coefficient * slope) * (1.0 - anchor_groups / groups) * spread

    def state_dict(self) -> dict[str, Any]:
        """Settings, sums and coefficient: everything needed to resume exactly."""
        return {
            "half_life_pairs": self.half_life_pairs,
            "prior_pairs": self.prior_pairs,
            "pairs": self._pairs,
            "sum_real_predicted": self._sum_real_predicted,
            "sum_predicted_squared": self._sum_predicted_squared,
            "sum_real_squared": self._sum_real_squared,
            "coefficient": self._coefficient,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict` into a tuner built with the same settings.

        Raises:
            CheckpointError: the state is incomplete, or was saved with other settings.
        """
        try:
            settings = (float(state["half_life_pairs"]), float(state["prior_pairs"]))
            sums = tuple(
                float(state[key])
                for key in ("pairs", "sum_real_predicted", "sum_predicted_squared", "sum_real_squared")
            )
            coefficient = float(state["coefficient"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(
                f"power tuner state is incomplete or corrupt ({exc!r}); pass a state produced by "
                "PowerTuner.state_dict()"
            ) from exc
        if settings != (self.half_life_pairs, self.prior_pairs):
            raise CheckpointError(
                f"the power tuner was saved with half_life_pairs, prior_pairs = {settings} but this one has "
                f"{(self.half_life_pairs, self.prior_pairs)}; build it with the saved settings"
            )
        if not all(math.isfinite(value) for value in (*sums, coefficient)) or not 0.0 <= coefficient <= 1.0:
            raise CheckpointError(
                f"power tuner state holds a non-finite sum or a coefficient {coefficient!r} outside [0, 1]; "
                "the checkpoint is corrupt, resume from an earlier one"
            )
        self._pairs, self._sum_real_predicted, self._sum_predicted_squared, self._sum_real_squared = sums
        self._coefficient = coefficient
