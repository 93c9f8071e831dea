"""Containers shared by the learning side: one scored group of trajectories, and what a step returns.

Why here and frozen: the rollout side (``wmrl_envs``) produces :class:`ScoredGroup` and the learning
side (:class:`~wmrl_algos.loop.CorrectionLoop`) consumes it; neither needs to know what a trajectory
contains (text, frames, tokens), so the payload is opaque. Unknown scores are ``None``, never 0
(``docs/method.md``, "Unknown scores"): a crashed sandbox, a lost worker or an unparseable prediction
says nothing about the attempt's quality. A solution that runs past its time limit is not unknown: it
failed, and the environment scores it (docs/design.md, the timeout contract).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Real
from typing import Any, Literal

import numpy as np

__all__ = ["Score", "ScoreSource", "ScoredGroup", "GroupAdvantages", "StepResult", "as_score_array"]

Score = float | None
"""A trajectory score; ``None`` means unknown (crashed sandbox, lost worker, unparseable prediction)."""

ScoreSource = Literal["real", "world_model"]


@dataclass(frozen=True)
class ScoredGroup:
    """One GRPO group (several trajectories of the same task) with its scores.

    Attributes:
        group_id: stable id of the group within the step (its index in the step by convention).
        anchor: whether the group was executed for real (anchor group) as well as predicted.
        predicted: world-model score of each trajectory (``None`` where the world model could not say).
        real: real score of each trajectory for anchor groups (``None`` items where the execution's
            outcome is unknown); ``None`` as a whole for non-anchor groups.
        trajectories: opaque payload (whatever the policy needs to compute log-probs), passed through.
        task_id: optional task identifier (for per-task metrics).
        pairs: extra (predicted, real) calibration pairs at the granularity the world model predicts
            (e.g. one per execution of a multi-turn trajectory whose return is the best of them), anchor
            groups only. When given, Online Debiasing is fitted on THESE instead of the trajectory-level
            ``(predicted[i], real[i])`` pairs; ``None`` (the default) uses the trajectory-level pairs.
            Both sides must be known (finite floats): leave out executions with an unknown side.

    Example:
        >>> group = ScoredGroup(0, anchor=True, predicted=(0.4, 0.9), real=(0.5, 0.7),
        ...                     pairs=((0.2, 0.3), (0.4, 0.5), (0.9, 0.7)))
        >>> group.size, len(group.pairs)
        (2, 3)
    """

    group_id: int
    anchor: bool
    predicted: tuple[Score, ...]
    real: tuple[Score, ...] | None = None
    trajectories: tuple[Any, ...] = ()
    task_id: str | None = None
    pairs: tuple[tuple[float, float], ...] | None = None

    def __post_init__(self) -> None:
        from wmrl_algos.errors import ConfigError

        if self.anchor and self.real is None:
            raise ConfigError(
                f"group {self.group_id} is an anchor group but has no real scores; "
                "anchor groups must be executed for real (pass real=...)"
            )
        if self.real is not None and len(self.real) != len(self.predicted):
            raise ConfigError(
                f"group {self.group_id}: {len(self.predicted)} predicted scores but {len(self.real)} real "
                "scores; every trajectory of an anchor group needs both"
            )
        if self.trajectories and len(self.trajectories) != len(self.predicted):
            raise ConfigError(
                f"group {self.group_id}: {len(self.trajectories)} trajectories but "
                f"{len(self.predicted)} scores"
            )
        if self.pairs is not None:
            if not self.anchor:
                raise ConfigError(
                    f"group {self.group_id} is not an anchor group but carries {len(self.pairs)} calibration "
                    "pairs; only executed (anchor) groups have real scores, pass pairs=None"
                )
            for index, pair in enumerate(self.pairs):
                if len(pair) != 2 or any(
                    isinstance(value, bool) or not isinstance(value, Real) or not np.isfinite(float(value))
                    for value in pair
                ):
                    raise ConfigError(
                        f"group {self.group_id}: pairs[{index}] is {pair!r}; each pair must be two finite "
                        "numbers (predicted, real), leave out executions with an unknown side"
                    )

    @property
    def size(self) -> int:
        """Number of trajectories in the group."""
        return len(self.predicted)


@dataclass(frozen=True)
class GroupAdvantages:
    """Advantages of one group, as arrays.

    Attributes:
        values: advantage per trajectory, already multiplied by ``weight``; 0.0 where ``mask`` is False
            (this is the one place where "unknown" becomes a zero *gradient*, never a zero *score*).
        mask: True where the trajectory was graded and its group had at least two graded members.
        weight: the group's weight (the anchor weight for anchor groups, 1.0 otherwise).
        rewards: the rewards the advantages were formed from (NaN where unknown).
    """

    values: np.ndarray
    mask: np.ndarray
    weight: float
    rewards: np.ndarray


@dataclass(frozen=True)
class StepResult:
    """What :meth:`CorrectionLoop.correct` returns for one training step.

    Attributes:
        advantages: one :class:`GroupAdvantages` per input group, in input order.
        groups: the input groups, in order.
        metrics: namespaced scalar metrics (``wmrl/anchor_fraction``, ``wmrl/anchor_weight``, ...).
    """

    advantages: tuple[GroupAdvantages, ...]
    groups: tuple[ScoredGroup, ...]
    metrics: Mapping[str, float] = field(default_factory=dict)

    def flat(self) -> tuple[np.ndarray, np.ndarray]:
        """All advantages and masks concatenated in group order (for a batched loss)."""
        if not self.advantages:
            return np.zeros(0), np.zeros(0, dtype=bool)
        return (
            np.concatenate([a.values for a in self.advantages]),
            np.concatenate([a.mask for a in self.advantages]),
        )


def as_score_array(scores: Sequence[Score], *, name: str = "scores") -> np.ndarray:
    """Convert ``None``-bearing scores to a float array with NaN for unknown (the one conversion).

    Raises:
        ConfigError: a score is NaN or infinite. Unknown must be said with ``None``: a NaN that
            slipped in from a buggy scorer would otherwise be indistinguishable from "not graded".
    """
    from wmrl_algos.errors import ConfigError

    out = np.empty(len(scores), dtype=float)
    for i, s in enumerate(scores):
        if s is None:
            out[i] = np.nan
            continue
        value = float(s)
        if not np.isfinite(value):
            raise ConfigError(
                f"{name}[{i}] is {value!r}; scores must be finite numbers, use None for an unknown score"
            )
        out[i] = value
    return out
