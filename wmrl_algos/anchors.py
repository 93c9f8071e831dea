"""Anchor scheduling: which GRPO groups of a step are executed for real as well as predicted.

Why a scheduler object and not ``rng.random() < 0.1``: anchoring must be decided *before* a group is
scored (otherwise the choice could depend on the score and bias the calibration), it must be
reproducible from a seed and resumable from a checkpoint, and the realised fraction must track the
requested one. Rounding ``0.1 * 8`` groups per step to 1 would anchor 12.5% forever; rounding it to 0
would never anchor. Error diffusion carries the rounding remainder from step to step, so the running
fraction converges to the requested one *when neither bound binds*. ``min_per_step`` keeps at least
that many anchor groups per step (the paper's setting: 1) and wins over the fraction: with 8 groups per
step and a fraction of 0.1 the realised fraction is 1/8 = 12.5%, not 10% (the surplus is not repaid
later). ``max_in_flight`` bounds how many anchor executions may be pending at once when executions
finish asynchronously; anchors it withholds are not repaid either.

A caller whose step spans several :meth:`AnchorScheduler.select` calls (TRL hands its reward function
one generation batch at a time, which may hold a single group) passes ``min_per_step=0`` to the calls
that are too small for the fraction: the carried remainder then spreads the anchors over the calls,
so that one call in four anchors its only group at a fraction of 0.25, instead of every call.

Which groups: uniformly at random by default. With a ``priority`` per group (e.g. the world model's
uncertainty about it, known before any real execution), a share ``1 - random_share`` of the anchor
slots goes to the highest-priority groups and the rest are drawn uniformly; the caller can tell the
two apart (:attr:`AnchorScheduler.last_random`) and measure the world model's quality on the uniform
ones only, which stay an unbiased sample.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from wmrl_algos.errors import CheckpointError, ConfigError

__all__ = ["AnchorScheduler"]

_CARRY_LIMIT = 1.0
"""Bound on the carried rounding remainder: anchors lost to the in-flight cap or added by
``min_per_step`` are not repaid in a later burst."""


class AnchorScheduler:
    """Chooses the anchor groups of each step, reproducibly.

    Each call to :meth:`select` decides ``k = max(min_per_step, round(fraction * n_groups))`` anchor
    groups, where the rounding diffuses its error into the next step, capped by ``n_groups`` and by the
    free in-flight slots. The realised fraction therefore converges to ``fraction`` only while
    ``fraction * n_groups >= min_per_step`` and the in-flight cap does not bind; otherwise it is
    ``min_per_step / n_groups`` (or lower under the cap). Which groups are anchored is drawn uniformly
    from a seeded generator, or partly by priority (:meth:`select`).

    Args:
        fraction: target share of groups executed for real, in ``[0, 1]`` (paper: 0.1).
        min_per_step: at least this many anchor groups per step (paper: 1), if slots allow.
        max_in_flight: at most this many anchor groups executing at once; :meth:`release` frees slots
            as executions finish. ``None``: no cap.
        seed: seed of the generator that picks the anchor groups.
        random_share: when :meth:`select` gets a ``priority``, the probability that an anchor slot is
            drawn uniformly rather than given to the highest-priority group left, in ``[0, 1]``.

    Raises:
        ConfigError: ``fraction`` or ``random_share`` outside ``[0, 1]`` or a negative count.

    Example:
        >>> scheduler = AnchorScheduler(fraction=0.25, min_per_step=1, seed=0)
        >>> mask = scheduler.select(8)
        >>> int(mask.sum())
        2
        >>> scheduler.realised_fraction
        0.25
    """

    def __init__(
        self,
        fraction: float = 0.1,
        min_per_step: int = 1,
        max_in_flight: int | None = None,
        seed: int = 0,
        random_share: float = 0.5,
    ) -> None:
        if not (isinstance(fraction, (int, float)) and 0.0 <= float(fraction) <= 1.0):
            raise ConfigError(
                f"fraction={fraction!r} is outside [0, 1]; pass the share of groups to execute for real, "
                "e.g. 0.1"
            )
        if min_per_step < 0:
            raise ConfigError(f"min_per_step={min_per_step!r} is negative; pass 0 (no minimum) or more")
        if max_in_flight is not None and max_in_flight < 0:
            raise ConfigError(
                f"max_in_flight={max_in_flight!r} is negative; pass None (no cap) or a count >= 0"
            )
        if not (isinstance(random_share, (int, float)) and 0.0 <= float(random_share) <= 1.0):
            raise ConfigError(
                f"random_share={random_share!r} is outside [0, 1]; pass the share of anchor slots drawn "
                "uniformly when a priority is given, e.g. 0.5"
            )
        self.fraction = float(fraction)
        self.random_share = float(random_share)
        self.min_per_step = int(min_per_step)
        self.max_in_flight = None if max_in_flight is None else int(max_in_flight)
        self.seed = int(seed)
        self._rng = np.random.default_rng(self.seed)
        self._carry = 0.0
        self._groups_seen = 0
        self._anchors_chosen = 0
        self._in_flight = 0
        self._last_random = np.zeros(0, dtype=bool)

    def select(
        self, n_groups: int, priority: Sequence[float] | None = None, *, min_per_step: int | None = None
    ) -> np.ndarray:
        """Decide which of the next ``n_groups`` groups are anchor groups.

        The chosen groups occupy in-flight slots until :meth:`release` frees them.

        Args:
            n_groups: number of groups in the step.
            priority: optional score per group known before execution (higher: more worth executing,
                e.g. the world model's uncertainty). Each anchor slot is drawn uniformly with
                probability ``random_share``, else given to the highest-priority group not yet chosen.
                ``None``: every slot is uniform.
            min_per_step: this call's minimum instead of the scheduler's own (``None``). Pass 0 for a
                call that is only part of a step, so that the carried remainder, not the minimum,
                decides its anchors (see the module docstring).

        Returns:
            A boolean mask of length ``n_groups``, True for anchor groups; :attr:`last_random` marks
            those drawn uniformly.

        Raises:
            ConfigError: ``n_groups`` or ``min_per_step`` is negative, or ``priority`` has the wrong
                length or a NaN.
        """
        if min_per_step is not None and min_per_step < 0:
            raise ConfigError(
                f"min_per_step={min_per_step!r} is negative; pass 0 (no minimum), more, or None"
            )
        if n_groups < 0:
            raise ConfigError(f"n_groups={n_groups!r} is negative; pass the number of groups in the step")
        if priority is not None:
            priority_array = np.asarray(priority, dtype=float)
            if priority_array.shape != (n_groups,) or not np.isfinite(priority_array).all():
                raise ConfigError(
                    f"priority has shape {priority_array.shape} for {n_groups} groups or holds a NaN or "
                    "infinity; pass one finite number per group"
                )
        desired = self.fraction * n_groups + self._carry
        minimum = self.min_per_step if min_per_step is None else int(min_per_step)
        k = max(minimum, math.floor(desired + 0.5))
        k = min(k, n_groups, self.free_slots)
        self._carry = min(_CARRY_LIMIT, max(-_CARRY_LIMIT, desired - k))
        mask = np.zeros(n_groups, dtype=bool)
        uniform = np.zeros(n_groups, dtype=bool)
        if k > 0 and priority is None:
            mask[self._rng.choice(n_groups, size=k, replace=False)] = True
            uniform[:] = mask
        elif k > 0:
            for draw in self._rng.random(k).tolist():
                left = np.flatnonzero(~mask)
                if draw < self.random_share:
                    chosen = int(self._rng.choice(left))
                    uniform[chosen] = True
                else:
                    chosen = int(left[np.argmax(priority_array[left])])
                mask[chosen] = True
        self._last_random = uniform
        self._groups_seen += n_groups
        self._anchors_chosen += k
        self._in_flight += k
        return mask

    def release(self, n: int = 1) -> None:
        """Free ``n`` in-flight slots because ``n`` anchor executions finished.

        Raises:
            ConfigError: ``n`` is negative or larger than the number of anchor groups in flight.
        """
        if n < 0 or n > self._in_flight:
            raise ConfigError(
                f"release(n={n!r}) but {self._in_flight} anchor groups are in flight; release only "
                "anchor groups returned by select()"
            )
        self._in_flight -= n

    @property
    def last_random(self) -> np.ndarray:
        """Mask of the last :meth:`select`'s anchor groups that were drawn uniformly (all of them without
        a priority): the unbiased sample to measure the world model on."""
        return self._last_random.copy()

    @property
    def in_flight(self) -> int:
        """Anchor groups selected and not yet released."""
        return self._in_flight

    @property
    def free_slots(self) -> int:
        """How many more anchor groups may be selected now (a large number when uncapped)."""
        if self.max_in_flight is None:
            return sys.maxsize
        return max(0, self.max_in_flight - self._in_flight)

    @property
    def realised_fraction(self) -> float:
        """Anchor groups chosen / groups seen so far (0.0 before the first selection)."""
        return self._anchors_chosen / self._groups_seen if self._groups_seen else 0.0

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly where this scheduler is (plain Python values)."""
        return {
            "fraction": self.fraction,
            "random_share": self.random_share,
            "min_per_step": self.min_per_step,
            "max_in_flight": self.max_in_flight,
            "seed": self.seed,
            "rng": self._rng.bit_generator.state,
            "carry": self._carry,
            "groups_seen": self._groups_seen,
            "anchors_chosen": self._anchors_chosen,
            "in_flight": self._in_flight,
            "last_random": self._last_random.tolist(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a state produced by :meth:`state_dict`.

        Raises:
            CheckpointError: a key is missing or the generator state is unreadable.
        """
        try:
            rng = np.random.default_rng()
            rng.bit_generator.state = dict(state["rng"])
            fraction, min_per_step = float(state["fraction"]), int(state["min_per_step"])
            max_in_flight = None if state["max_in_flight"] is None else int(state["max_in_flight"])
            seed, carry = int(state["seed"]), float(state["carry"])
            groups_seen, anchors_chosen = int(state["groups_seen"]), int(state["anchors_chosen"])
            in_flight = int(state["in_flight"])
            random_share = float(state["random_share"])
            last_random = np.asarray(state["last_random"], dtype=bool)
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(
                f"anchor scheduler state is incomplete or corrupt ({exc!r}); the anchor selection cannot "
                "resume, pass a state produced by AnchorScheduler.state_dict()"
            ) from exc
        self.fraction, self.min_per_step, self.max_in_flight, self.seed = (
            fraction,
            min_per_step,
            max_in_flight,
            seed,
        )
        self.random_share, self._last_random = random_share, last_random
        self._rng, self._carry = rng, carry
        self._groups_seen, self._anchors_chosen, self._in_flight = groups_seen, anchors_chosen, in_flight
