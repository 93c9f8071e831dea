"""Inverse-Variance Denoising (IVD): how much more an anchor group's gradient should count.

Why: anchor groups (real scores, scarce) and world-model groups (predicted scores, abundant) are two
estimates of the same policy gradient. Their minimum-variance fusion weighs each by the inverse of its
variance, which reduces to one ratio, the anchor weight ``rho = V_WM / V_E = 1 + c * sigma^2``.
``sigma^2`` is measured online as ``eta2``: the squared residual between *calibrated* world-model
scores and real scores on anchor groups, centred within each group because GRPO only ever sees
within-group differences (a constant offset costs nothing). Optionally (``disagreement="variance"``)
each group's residual is divided by its real-score variance, the error std-scaled advantages see; the
default is DESIGN.md's plain residual, because the normalised one inflates the anchor weight as the
policy concentrates (measured in ``benchmarks/bandit_ablation.py``). ``c`` is fixed once, as ``1 / eta2_cal``,
from the residual at the end of a warmup, so there is no free hyperparameter.

Why calibrated and not raw: the bias that Online Debiasing removes must not be counted as noise, or
the anchor weight would punish the world model for an error that is already corrected.

Before calibration the anchor weight is exactly 1.0 (plain averaging over groups). If the world model
stays as poor as during warmup while calibration fails to improve it, ``eta2`` stays large and the
weight stays high; if it gets worse (the policy drifts where the world model cannot follow), the
weight rises towards ``w_max`` and WMRL degrades smoothly to GRPO on the anchors.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from wmrl_algos.errors import CheckpointError, ConfigError
from wmrl_algos.types import Score, as_score_array

__all__ = ["Disagreement", "centred_residual", "InverseVarianceWeighter"]

Disagreement = Literal["variance", "raw"]
"""How IVD measures the world model's disagreement on anchor groups (see :class:`InverseVarianceWeighter`)."""


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
        normalise: divide by the real scores' within-group variance (IVD's ``eta2``); False gives the
            plain centred mean squared error (used for the debiasing metrics).
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
    predicted_centred = predicted_array[both] - predicted_array[both].mean()
    real_centred = real_array[both] - real_array[both].mean()
    squared_error = float(np.mean((predicted_centred - real_centred) ** 2))
    if not normalise:
        return squared_error
    variance = float(np.mean(real_centred**2))
    if variance <= min_variance:
        return None
    return squared_error / variance


class InverseVarianceWeighter:
    """Online estimate of the world model's disagreement ``eta2`` and the anchor weight it implies.

    Call :meth:`update` once per training step with that step's anchor groups. ``eta2`` is the mean of
    :func:`centred_residual` over the groups of the last ``window`` steps that had a measurement; after
    ``warmup_steps`` such steps ``eta2_cal`` is frozen to the current ``eta2``, and from then on
    :attr:`anchor_weight` is ``clip(1 + eta2 / eta2_cal, 1, w_max)``.

    Args:
        warmup_steps: measured steps before ``eta2_cal`` is frozen (>= 1).
        w_max: upper bound of the anchor weight (>= 1).
        window: number of recent measured steps ``eta2`` averages over (>= 1).
        disagreement: ``"variance"`` divides each group's centred squared residual by the group's real
            score variance (the error GRPO's std-scaled advantages actually see); ``"raw"`` keeps the
            plain centred mean squared residual of DESIGN.md §2. Why both: the normalised form grows as
            the policy concentrates (real within-group variance shrinks) even when the world model
            improves, which pushes the anchor weight towards ``w_max`` late in training;
            ``benchmarks/bandit_ablation.py`` measures both.

    Raises:
        ConfigError: a count below 1, ``w_max < 1`` or an unknown ``disagreement``.

    Example:
        >>> weighter = InverseVarianceWeighter(warmup_steps=1, w_max=10.0, window=4)
        >>> weighter.anchor_weight
        1.0
        >>> round(weighter.update([[0.1, 0.5, 0.9]], [[0.0, 0.5, 1.0]]), 6)
        0.006667
        >>> weighter.anchor_weight
        2.0
    """

    def __init__(
        self,
        warmup_steps: int = 5,
        w_max: float = 10.0,
        window: int = 8,
        disagreement: Disagreement = "raw",
    ) -> None:
        if disagreement not in ("variance", "raw"):
            raise ConfigError(
                f"disagreement={disagreement!r}; use 'variance' (variance-normalised residual) or 'raw'"
            )
        if warmup_steps < 1:
            raise ConfigError(
                f"warmup_steps={warmup_steps!r}; pass >= 1 measured steps before the calibration "
                "constant is frozen"
            )
        if not (np.isfinite(w_max) and w_max >= 1.0):
            raise ConfigError(
                f"w_max={w_max!r}; the anchor weight is at least 1, pass a finite w_max >= 1 "
                "(1 disables denoising)"
            )
        if window < 1:
            raise ConfigError(f"window={window!r}; pass >= 1 recent steps to average the disagreement over")
        self.warmup_steps = int(warmup_steps)
        self.w_max = float(w_max)
        self.window = int(window)
        self.disagreement: Disagreement = disagreement
        self._recent: deque[list[float]] = deque(maxlen=self.window)
        self._measured_steps = 0
        self._eta2_cal: float | None = None

    def update(
        self, calibrated_groups: Sequence[Sequence[Score]], real_groups: Sequence[Sequence[Score]]
    ) -> float | None:
        """Record one training step's anchor groups.

        Args:
            calibrated_groups: calibrated world-model scores of each anchor group of the step.
            real_groups: real scores of the same groups, in the same order.

        Returns:
            This step's measurement (mean :func:`centred_residual` over its usable groups), or ``None``
            when no group was usable; the window average is :attr:`eta2`.

        Raises:
            ConfigError: the two lists differ in length, or a group's lengths differ.
        """
        if len(calibrated_groups) != len(real_groups):
            raise ConfigError(
                f"{len(calibrated_groups)} calibrated groups but {len(real_groups)} real groups; pass the "
                "same anchor groups on both sides"
            )
        normalise = self.disagreement == "variance"
        residuals = [
            centred_residual(c, r, normalise=normalise)
            for c, r in zip(calibrated_groups, real_groups, strict=True)
        ]
        usable = [value for value in residuals if value is not None]
        if not usable:
            return None
        self._recent.append(usable)
        self._measured_steps += 1
        if self._eta2_cal is None and self._measured_steps >= self.warmup_steps:
            self._eta2_cal = self.eta2
        return float(np.mean(usable))

    @property
    def eta2(self) -> float | None:
        """Mean residual over the groups of the last ``window`` measured steps (``None`` before any)."""
        if not self._recent:
            return None
        return float(np.mean([value for step in self._recent for value in step]))

    @property
    def eta2_cal(self) -> float | None:
        """The frozen calibration residual (``None`` until warmup is over)."""
        return self._eta2_cal

    @property
    def is_calibrated(self) -> bool:
        """True once ``eta2_cal`` is frozen."""
        return self._eta2_cal is not None

    @property
    def anchor_weight(self) -> float:
        """Weight of anchor groups: exactly 1.0 before calibration, ``clip(1 + eta2/eta2_cal, 1, w_max)``
        after (``w_max`` if warmup saw a perfect world model and it now disagrees)."""
        eta2, eta2_cal = self.eta2, self._eta2_cal
        if eta2_cal is None or eta2 is None:
            return 1.0
        if eta2_cal == 0.0:
            return self.w_max if eta2 > 0.0 else 1.0
        return float(min(self.w_max, max(1.0, 1.0 + eta2 / eta2_cal)))

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly where this weighter is (plain Python values)."""
        return {
            "warmup_steps": self.warmup_steps,
            "w_max": self.w_max,
            "window": self.window,
            "disagreement": self.disagreement,
            "recent": [list(step) for step in self._recent],
            "measured_steps": self._measured_steps,
            "eta2_cal": self._eta2_cal,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a state produced by :meth:`state_dict`.

        Raises:
            CheckpointError: a key is missing or a value is unreadable.
        """
        try:
            warmup_steps, window = int(state["warmup_steps"]), int(state["window"])
            w_max = float(state["w_max"])
            recent = [[float(v) for v in step] for step in state["recent"]]
            measured_steps = int(state["measured_steps"])
            eta2_cal = None if state["eta2_cal"] is None else float(state["eta2_cal"])
            disagreement = str(state.get("disagreement", "raw"))
            if disagreement not in ("variance", "raw"):
                raise ValueError(f"disagreement={disagreement!r}")
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(
                f"inverse-variance state is incomplete or corrupt ({exc!r}); the anchor weight cannot "
                "resume, pass a state produced by InverseVarianceWeighter.state_dict()"
            ) from exc
        self.warmup_steps, self.w_max, self.window = warmup_steps, w_max, window
        self.disagreement = disagreement  # type: ignore[assignment]
        self._recent = deque(recent, maxlen=window)
        self._measured_steps, self._eta2_cal = measured_steps, eta2_cal
