"""Group-relative advantages with unknown rewards left out and anchor groups weighted.

Why here, in one function: this is the one place where "unknown" becomes a zero *gradient*. An
ungraded trajectory (``None``: timeout, crash, unparseable prediction) is excluded from its group's
baseline, because counting it as 0 would pull the mean down and hand every graded member a positive
advantage it did not earn; only at the very end does it get advantage 0 with ``mask`` False. A group
with fewer than two graded members carries no within-group signal at all and is masked out entirely.

Anchor groups are multiplied by the anchor weight and world-model groups by the world-model weight
(:mod:`wmrl_algos.denoise` estimates them). With ``normalise_weights`` the weights are rescaled to mean
1 over the groups that carry a signal, which makes a loss that averages over groups compute exactly
the fusion ``(w_E * sum_E g + w_WM * sum_WM g) / (w_E * |G_E| + w_WM * |G_WM|)`` instead of also
scaling the step size. When every group with a signal weighs 0 (a useless world model and no anchor
group this step), every advantage is 0: the step carries no usable signal, and says so with a zero
gradient rather than a division by zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from wmrl_algos.errors import ConfigError
from wmrl_algos.types import GroupAdvantages, Score, as_score_array

__all__ = ["AdvantageScale", "centre_and_scale", "group_advantages"]

AdvantageScale = Literal["std", "none"]
"""``"std"``: GRPO's ``(r - mean) / (std + eps)``; ``"none"``: Dr. GRPO's ``r - mean``."""


def centre_and_scale(values: np.ndarray, scale: AdvantageScale = "std", eps: float = 1e-6) -> np.ndarray:
    """One group's advantages from its known rewards: ``r - mean``, divided by ``std + eps`` for ``"std"``.

    The one formula both training (:func:`group_advantages`) and the world model's agreement measure
    (:mod:`wmrl_algos.denoise`) use, so the weight is estimated on the advantages that are trained on.

    Example:
        >>> centre_and_scale(np.array([0.0, 1.0]), "none").tolist()
        [-0.5, 0.5]
    """
    centred = values - values.mean()
    if scale == "std":
        return centred / (values.std() + eps)
    return centred


def group_advantages(
    rewards: Sequence[Sequence[Score]],
    anchor: Sequence[bool],
    anchor_weight: float = 1.0,
    *,
    world_model_weight: float = 1.0,
    scale: AdvantageScale = "std",
    eps: float = 1e-6,
    normalise_weights: bool = False,
) -> list[GroupAdvantages]:
    """Compute per-trajectory advantages for every group of a step.

    Args:
        rewards: the training reward of every trajectory, one sequence per group (``None`` = unknown).
        anchor: whether each group is an anchor group.
        anchor_weight: the weight of anchor groups, finite and > 0.
        world_model_weight: the weight of world-model groups, finite and >= 0 (0: they carry no signal).
        scale: ``"std"`` divides by the group's (population) standard deviation plus ``eps``;
            ``"none"`` only subtracts the mean (Dr. GRPO, no difficulty re-weighting).
        eps: added to the standard deviation, >= 0.
        normalise_weights: rescale all group weights so their mean over the groups that carry a signal
            (at least two graded members) is 1; all advantages are 0 when that mean is 0.

    Returns:
        One :class:`~wmrl_algos.types.GroupAdvantages` per group, in order; ``values`` already include
        the group's weight and are 0.0 where ``mask`` is False.

    Raises:
        ConfigError: mismatched lengths, a NaN or infinite reward, an invalid ``anchor_weight``,
            ``world_model_weight``, ``eps`` or ``scale``.

    Example:
        >>> [a.values.round(3).tolist() for a in group_advantages([[1.0, 0.0, None]], [False], scale="none")]
        [[0.5, -0.5, 0.0]]
    """
    if len(rewards) != len(anchor):
        raise ConfigError(
            f"{len(rewards)} groups of rewards but {len(anchor)} anchor flags; pass one flag per group"
        )
    if not (np.isfinite(anchor_weight) and anchor_weight > 0.0):
        raise ConfigError(f"anchor_weight={anchor_weight!r}; pass a finite weight > 0 (1.0 = no denoising)")
    if not (np.isfinite(world_model_weight) and world_model_weight >= 0.0):
        raise ConfigError(
            f"world_model_weight={world_model_weight!r}; pass a finite weight >= 0 (1.0 = no denoising)"
        )
    if scale not in ("std", "none"):
        raise ConfigError(f"scale={scale!r} is unknown; pass 'std' (GRPO) or 'none' (Dr. GRPO)")
    if not (np.isfinite(eps) and eps >= 0.0):
        raise ConfigError(f"eps={eps!r}; pass a finite eps >= 0 (default 1e-6)")

    arrays = [as_score_array(group, name=f"rewards[{index}]") for index, group in enumerate(rewards)]
    weights = np.where(np.asarray(anchor, dtype=bool), anchor_weight, world_model_weight).astype(float)
    has_signal = np.array([int((~np.isnan(values)).sum()) >= 2 for values in arrays], dtype=bool)
    if normalise_weights and has_signal.any():
        mean_weight = weights[has_signal].mean()
        weights = weights / mean_weight if mean_weight > 0.0 else np.zeros_like(weights)

    result: list[GroupAdvantages] = []
    for values, weight, signal in zip(arrays, weights.tolist(), has_signal.tolist(), strict=True):
        graded = ~np.isnan(values)
        advantages = np.zeros(values.shape, dtype=float)
        mask = graded & signal
        if signal:
            advantages[graded] = centre_and_scale(values[graded], scale, eps) * weight
        result.append(GroupAdvantages(values=advantages, mask=mask, weight=float(weight), rewards=values))
    return result
