"""Inverse-Variance Denoising (IVD): how much a world-model group's gradient should count against an anchor's.

Why: anchor groups (real scores, scarce) and world-model groups (predicted scores, abundant) are
estimates of the same policy gradient ``G``. The minimum-variance fusion of unbiased estimates weighs
each by the inverse of its variance,

    g = (V_E^-1 * sum_E g_k + V_WM^-1 * sum_WM g_k) / (V_E^-1 * |G_E| + V_WM^-1 * |G_WM|),

so what the fusion needs is ``V_WM`` *relative to* ``V_E``. This module estimates that ratio from the
anchor groups, where both scores of the same trajectories are known.

**The agreement rule (default).** A group's gradient is ``g = sum_i A_i x_i`` with ``A_i`` the
trajectory's advantage and ``x_i`` its score function. On an anchor group we see both the world
model's advantages ``A_WM`` (from calibrated predictions, with the training's own centring and
scaling) and the real ones ``A_E``. Pooled over recent anchor groups, with ``S_wr = sum A_WM A_E``,
``S_ww = sum A_WM^2``, ``S_rr = sum A_E^2``:

* ``beta = S_wr / S_ww`` is the regression slope of real on world-model advantages: ``beta * g_WM`` is
  the best linear prediction of the gradient the group would have given had it been executed. A world
  model whose advantages are independent of the real ones has ``beta = 0``.
* what that prediction misses has variance ``V_p = (1 - r^2) V_s`` per unit of sampling variance
  ``V_s`` (``r^2 = S_wr^2 / (S_ww S_rr)``), on top of the group's own sampling noise ``V_s``, which
  anchor and world-model groups share. So ``V_E = V_s`` and ``V_WM = V_s + V_p = (2 - r^2) V_s``.

Fusing the anchor's ``g_E`` (weight ``1 / V_E``) with the world-model group's ``beta * g_WM`` (weight
``1 / V_WM``) gives the world-model group, relative to an anchor group, the weight

    w_WM = beta / (2 - r^2),   in [0, 1]:  1 for a perfect model, 0 for a useless one.

``beta`` is replaced by its lower confidence bound ``beta - z * se(beta)`` (``confidence = z``, default
1) and clipped to ``[0, 1]``, so a world model must *show* agreement before it is trusted: with no
evidence yet (``se`` infinite) or a useless model (``beta`` within noise of 0) the world-model groups
weigh ~0 and WMRL is GRPO on the anchor groups alone, which is the fallback a user with a bad world
model needs. Why not raise the anchor weight instead: the anchor weight is bounded in practice (the
paper caps it), so 7 world-model groups of pure noise still outvote 1 anchor group; a world-model
weight can reach 0.

**The paper's rule** (``rule="paper"``): anchor weight ``clip(1 + eta2 / eta2_cal, 1, w_max)`` with
``eta2`` the within-group centred squared residual of calibrated against real scores and ``eta2_cal``
its value at the end of a warm-up; world-model groups weigh 1. It is the agreement rule's
``V_WM / V_E = 1 + V_p / V_s`` with ``V_s`` replaced by ``eta2_cal``, which pins the anchor weight at
about 2 at the end of warm-up *whatever the world model's quality*: with a useless model the anchor
weight stays ~1.5-2 and WMRL finishes below GRPO on the anchors (measured in
``benchmarks/bandit_ablation.py``). Kept as an option, smoothed as in the authors' reference
implementation (EMA over a half-life of 64 groups, warm-up over 32 groups, cap 4).

Both rules measure the world model **out of sample**: the caller passes calibrated scores from the map
fitted *before* the group's own pairs entered the calibration buffer (an in-sample residual is
optimistic, most of all early, when the exact isotonic fit interpolates few pairs). Both smooth with an
exponential moving average over anchor groups (half-life ``half_life_groups``), because the policy and
the world model drift, and one group of 8 trajectories measures little.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from wmrl_algos.advantages import AdvantageScale, centre_and_scale
from wmrl_algos.errors import CheckpointError, ConfigError
from wmrl_algos.types import Score, as_score_array

__all__ = ["WeightRule", "centred_residual", "InverseVarianceWeighter"]

WeightRule = Literal["agreement", "paper"]
"""How IVD turns the world model's measured error into group weights (see the module docstring)."""

_EMA_KEYS = ("eta2_sum", "eta2_weight", "s_wr", "s_ww", "s_rr", "count", "count_squared")


def centred_residual(
    calibrated: Sequence[Score],
    real: Sequence[Score],
    *,
    normalise: bool = True,
    min_variance: float = 1e-12,
) -> float | None:
    """Within-group centred squared residual between calibrated and real scores of one group.

    Only members where both scores are known count. Each side is centred on its own mean over those
    members; the residual is the mean squared difference, divided by the variance of the real scores
    when ``normalise`` is True.

    Args:
        calibrated: calibrated world-model scores of the group (``None`` where unknown).
        real: real scores of the same trajectories (``None`` where unknown).
        normalise: divide by the real scores' within-group variance; False gives the plain centred mean
            squared error (the paper rule's ``eta2`` and the debiasing metrics).
        min_variance: real-score variance at or below which a normalised residual is undefined.

    Returns:
        The residual, or ``None`` (the group is skipped, never counted as 0) when fewer than two members
        have both scores, or when ``normalise`` and the real scores have (almost) no variance.

    Raises:
        ConfigError: the sequences differ in length, or a score is NaN or infinite.

    Example:
        >>> round(centred_residual([0.1, 0.5, 0.9], [0.0, 0.5, 1.0]), 6)
        0.04
    """
    known = _known_pairs(calibrated, real)
    if known is None:
        return None
    predicted_array, real_array = known
    predicted_centred = predicted_array - predicted_array.mean()
    real_centred = real_array - real_array.mean()
    squared_error = float(np.mean((predicted_centred - real_centred) ** 2))
    if not normalise:
        return squared_error
    variance = float(np.mean(real_centred**2))
    if variance <= min_variance:
        return None
    return squared_error / variance


def _known_pairs(calibrated: Sequence[Score], real: Sequence[Score]) -> tuple[np.ndarray, np.ndarray] | None:
    """The members known on both sides, or ``None`` when fewer than two are."""
    if len(calibrated) != len(real):
        raise ConfigError(
            f"{len(calibrated)} calibrated scores but {len(real)} real scores; pass one of each per "
            "trajectory of the group"
        )
    predicted_array = as_score_array(calibrated, name="calibrated")
    real_array = as_score_array(real, name="real")
    both = ~np.isnan(predicted_array) & ~np.isnan(real_array)
    if int(both.sum()) < 2:
        return None
    return predicted_array[both], real_array[both]


class InverseVarianceWeighter:
    """Online, smoothed, out-of-sample estimate of the group weights of the fusion.

    Call :meth:`update` once per training step with that step's anchor groups, scored by the map that
    was fitted *before* their pairs were added. Each usable anchor group (at least two members known on
    both sides) decays the moving sums by ``2 ** (-1 / half_life_groups)`` and adds its own.

    * ``rule="agreement"`` (default): :attr:`world_model_weight` is ``clip(beta - z se, 0, 1) /
      (2 - r^2)`` (module docstring), :attr:`anchor_weight` is 1.
    * ``rule="paper"``: :attr:`anchor_weight` is ``clip(1 + eta2 / eta2_cal, 1, w_max)`` once
      ``warmup_groups`` groups were measured (1.0 before), :attr:`world_model_weight` is 1.

    Args:
        rule: ``"agreement"`` or ``"paper"``.
        half_life_groups: anchor groups after which a measurement's weight in the average halves (> 0).
        warmup_groups: measured groups before the paper rule freezes ``eta2_cal`` (>= 1).
        w_max: the paper rule's cap on the anchor weight (>= 1).
        confidence: ``z`` of the agreement rule's lower confidence bound on ``beta`` (>= 0; 0 uses the
            point estimate).
        scale: the advantage scale training uses (``"std"`` or ``"none"``), so the agreement is measured
            on the advantages that are trained on.

    Raises:
        ConfigError: an unknown rule or scale, or a count or bound out of range.

    Example:
        >>> weighter = InverseVarianceWeighter()
        >>> weighter.world_model_weight  # no evidence yet: the world model is not trusted
        0.0
        >>> for _ in range(8):
        ...     _ = weighter.update([[0.1, 0.5, 0.9, 0.3]], [[0.0, 0.5, 1.0, 0.3]])
        >>> round(weighter.world_model_weight, 2), weighter.anchor_weight
        (0.98, 1.0)
    """

    def __init__(
        self,
        rule: WeightRule = "agreement",
        half_life_groups: float = 64.0,
        warmup_groups: int = 32,
        w_max: float = 4.0,
        confidence: float = 1.0,
        scale: AdvantageScale = "std",
    ) -> None:
        if rule not in ("agreement", "paper"):
            raise ConfigError(f"rule={rule!r} is unknown; pass 'agreement' (the default) or 'paper'")
        if scale not in ("std", "none"):
            raise ConfigError(f"scale={scale!r} is unknown; pass 'std' (GRPO) or 'none' (Dr. GRPO)")
        if not (np.isfinite(half_life_groups) and half_life_groups > 0.0):
            raise ConfigError(
                f"half_life_groups={half_life_groups!r}; pass a finite number of anchor groups > 0 (64 in "
                "the reference implementation)"
            )
        if warmup_groups < 1:
            raise ConfigError(
                f"warmup_groups={warmup_groups!r}; pass >= 1 measured groups before the paper rule's "
                "calibration constant is frozen"
            )
        if not (np.isfinite(w_max) and w_max >= 1.0):
            raise ConfigError(
                f"w_max={w_max!r}; the anchor weight is at least 1, pass a finite w_max >= 1 "
                "(1 disables the paper rule's weighting)"
            )
        if not (np.isfinite(confidence) and confidence >= 0.0):
            raise ConfigError(f"confidence={confidence!r}; pass a finite z >= 0 (1.0: one standard error)")
        self.rule: WeightRule = rule
        self.half_life_groups = float(half_life_groups)
        self.warmup_groups = int(warmup_groups)
        self.w_max = float(w_max)
        self.confidence = float(confidence)
        self.scale: AdvantageScale = scale
        self._sums = dict.fromkeys(_EMA_KEYS, 0.0)
        self._measured_groups = 0
        self._eta2_cal: float | None = None

    @property
    def decay(self) -> float:
        """Factor every moving sum is multiplied by per measured group: ``2 ** (-1 / half_life_groups)``."""
        return float(2.0 ** (-1.0 / self.half_life_groups))

    def update(
        self, calibrated_groups: Sequence[Sequence[Score]], real_groups: Sequence[Sequence[Score]]
    ) -> float | None:
        """Record one training step's anchor groups (calibrated out of sample).

        Args:
            calibrated_groups: calibrated world-model scores of each anchor group of the step.
            real_groups: real scores of the same groups, in the same order.

        Returns:
            This step's mean centred squared residual over its usable groups (the paper's ``eta2``
            measurement), or ``None`` when no group was usable (then nothing changes).

        Raises:
            ConfigError: the two lists differ in length, or a group's lengths differ.
        """
        if len(calibrated_groups) != len(real_groups):
            raise ConfigError(
                f"{len(calibrated_groups)} calibrated groups but {len(real_groups)} real groups; pass the "
                "same anchor groups on both sides"
            )
        residuals: list[float] = []
        for calibrated, real in zip(calibrated_groups, real_groups, strict=True):
            known = _known_pairs(calibrated, real)
            if known is None:
                continue
            predicted_array, real_array = known
            advantage_wm = centre_and_scale(predicted_array, self.scale)
            advantage_real = centre_and_scale(real_array, self.scale)
            residual = float(
                np.mean(((predicted_array - predicted_array.mean()) - (real_array - real_array.mean())) ** 2)
            )
            degrees = float(predicted_array.size - 1)
            decay = self.decay
            new = {
                "eta2_sum": residual,
                "eta2_weight": 1.0,
                "s_wr": float(advantage_wm @ advantage_real),
                "s_ww": float(advantage_wm @ advantage_wm),
                "s_rr": float(advantage_real @ advantage_real),
                "count": degrees,
                "count_squared": degrees,
            }
            for key, value in new.items():
                factor = decay**2 if key == "count_squared" else decay
                self._sums[key] = factor * self._sums[key] + value
            self._measured_groups += 1
            residuals.append(residual)
            if self._eta2_cal is None and self._measured_groups >= self.warmup_groups:
                self._eta2_cal = self.eta2
        return float(np.mean(residuals)) if residuals else None

    @property
    def measured_groups(self) -> int:
        """Anchor groups measured so far."""
        return self._measured_groups

    @property
    def eta2(self) -> float | None:
        """Moving average of the centred squared residual (``None`` before any measurement)."""
        weight = self._sums["eta2_weight"]
        return self._sums["eta2_sum"] / weight if weight > 0.0 else None

    @property
    def eta2_cal(self) -> float | None:
        """The paper rule's frozen calibration residual (``None`` until ``warmup_groups`` were measured)."""
        return self._eta2_cal

    @property
    def is_calibrated(self) -> bool:
        """True once ``eta2_cal`` is frozen."""
        return self._eta2_cal is not None

    @property
    def slope(self) -> float | None:
        """``beta``: slope of real on world-model advantages (``None`` until a world-model advantage is
        non-zero)."""
        s_ww = self._sums["s_ww"]
        return self._sums["s_wr"] / s_ww if s_ww > 0.0 else None

    @property
    def agreement(self) -> float | None:
        """Correlation ``r`` of world-model and real advantages on anchor groups (``None`` when undefined)."""
        s_ww, s_rr = self._sums["s_ww"], self._sums["s_rr"]
        if s_ww <= 0.0 or s_rr <= 0.0:
            return None
        return float(np.clip(self._sums["s_wr"] / math.sqrt(s_ww * s_rr), -1.0, 1.0))

    @property
    def slope_stderr(self) -> float:
        """Standard error of :attr:`slope` from the moving sums' effective sample size (inf without one)."""
        count, count_squared, s_ww = self._sums["count"], self._sums["count_squared"], self._sums["s_ww"]
        slope = self.slope
        if slope is None or count_squared <= 0.0:
            return math.inf
        effective = count**2 / count_squared
        if effective <= 1.0:
            return math.inf
        residual_variance = max(0.0, self._sums["s_rr"] - slope * self._sums["s_wr"]) / count
        return float(math.sqrt(residual_variance / (s_ww / count) / (effective - 1.0)))

    @property
    def world_model_weight(self) -> float:
        """Weight of a world-model group relative to an anchor group's 1 (1.0 under the paper rule)."""
        if self.rule == "paper":
            return 1.0
        slope = self.slope
        if slope is None:
            return 0.0
        lower = slope - self.confidence * self.slope_stderr if self.confidence > 0.0 else slope
        if not lower > 0.0:
            return 0.0
        r_squared = (self.agreement or 0.0) ** 2
        return float(min(1.0, lower) / (2.0 - r_squared))

    @property
    def anchor_weight(self) -> float:
        """Weight of anchor groups: 1.0 under the agreement rule; under the paper rule exactly 1.0 before
        warm-up ends, then ``clip(1 + eta2/eta2_cal, 1, w_max)`` (``w_max`` if warm-up saw a perfect world
        model and it now disagrees)."""
        if self.rule == "agreement":
            return 1.0
        eta2, eta2_cal = self.eta2, self._eta2_cal
        if eta2_cal is None or eta2 is None:
            return 1.0
        if eta2_cal == 0.0:
            return self.w_max if eta2 > 0.0 else 1.0
        return float(min(self.w_max, max(1.0, 1.0 + eta2 / eta2_cal)))

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly where this weighter is (plain Python values)."""
        return {
            "rule": self.rule,
            "half_life_groups": self.half_life_groups,
            "warmup_groups": self.warmup_groups,
            "w_max": self.w_max,
            "confidence": self.confidence,
            "scale": self.scale,
            "sums": dict(self._sums),
            "measured_groups": self._measured_groups,
            "eta2_cal": self._eta2_cal,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a state produced by :meth:`state_dict`.

        Raises:
            CheckpointError: a key is missing or a value is unreadable.
        """
        try:
            restored = InverseVarianceWeighter(
                rule=state["rule"],
                half_life_groups=float(state["half_life_groups"]),
                warmup_groups=int(state["warmup_groups"]),
                w_max=float(state["w_max"]),
                confidence=float(state["confidence"]),
                scale=state["scale"],
            )
            sums = {key: float(state["sums"][key]) for key in _EMA_KEYS}
            measured_groups = int(state["measured_groups"])
            eta2_cal = None if state["eta2_cal"] is None else float(state["eta2_cal"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(
                f"inverse-variance state is incomplete or corrupt ({exc!r}); the group weights cannot "
                "resume, pass a state produced by InverseVarianceWeighter.state_dict()"
            ) from exc
        self.__dict__.update(restored.__dict__)
        self._sums, self._measured_groups, self._eta2_cal = sums, measured_groups, eta2_cal
