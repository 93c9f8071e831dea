"""What both trainers measure and report with: CPU-seconds, and a run's start and end with their change.

Why one module: the two tracks must report in one unit and one format, or their tables cannot stand
side by side. :class:`CpuClock` charges process CPU-seconds (wall seconds kept apart: on a loaded
machine wall time measures the load, not the method), with the wrappers that time a policy's sampling
and a world model's predictions (:class:`CpuTimedPolicy`, :class:`CpuTimedWorldModel`).
:class:`HeldOutScore` is one evaluation point, kept episode by episode so that the start (step 0) and
the end pair up: :func:`paired_change` gives the change with its paired standard error and
:func:`describe_held_out` the lines ``wmrl train`` prints.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from wmrl_algos.errors import ConfigError

__all__ = [
    "CpuClock",
    "CpuTimedPolicy",
    "CpuTimedWorldModel",
    "HeldOutScore",
    "PairedChange",
    "describe_held_out",
    "mean_se",
    "paired_change",
    "sign_flip_p",
]


def mean_se(values: Sequence[float | None]) -> tuple[float | None, float | None, int]:
    """The mean of the known values, its standard error (sample SD / sqrt(n)) and n.

    ``None`` values are unknown: excluded. The mean is ``None`` without a known value, the s.e. with
    fewer than two.

    Example:
        >>> mean_se([0.25, None, 0.75])
        (0.5, 0.25, 2)
    """
    known = [float(v) for v in values if v is not None]
    if not known:
        return None, None, 0
    mean = float(np.mean(known))
    se = float(np.std(known, ddof=1) / math.sqrt(len(known))) if len(known) > 1 else None
    return mean, se, len(known)


def sign_flip_p(differences: Sequence[float]) -> float | None:
    """The exact two-sided sign-flip (paired permutation) p-value of ``differences`` having mean 0.

    Why beside the s.e.: a "≥ 2 paired s.e." call over a handful of seeds leans on a normal
    approximation that a few seeds cannot support; under the null of no difference each seed's sign is
    a coin flip, so the share of the 2^n sign patterns whose |sum| reaches the observed one is an exact
    p that needs no distribution. It also shows the floor a small sample cannot go below (2 / 2^n: 0.125
    at four seeds). Exact for any n this project runs (meet in the middle: two halves of 2^(n/2) sums
    each, up to n = 40; more is a :class:`ConfigError`). ``None`` without a difference.

    Example:
        >>> sign_flip_p([0.1, 0.2, 0.3, 0.4])  # all four the same sign: only the two all-same patterns
        0.125
    """
    signed = np.asarray(list(differences), dtype=float)  # any iterable, read once
    values = np.abs(signed)
    if values.size == 0:
        return None
    if values.size > 40:
        raise ConfigError(
            f"sign_flip_p enumerates 2^n sign patterns: {values.size} differences is too many (at most 40)"
        )
    observed = abs(float(signed.sum())) - 1e-9 * max(1.0, float(values.sum()))  # ties count as reached
    if observed <= 0:  # a zero sum: every pattern reaches it
        return 1.0

    def sums(half: np.ndarray) -> np.ndarray:
        signs = 1 - 2 * ((np.arange(2**half.size)[:, None] >> np.arange(half.size)) & 1)
        return np.sort(signs @ half)

    left, right = sums(values[: values.size // 2]), sums(values[values.size // 2 :])
    # For each left sum a: the right sums b with a + b >= observed, plus those with a + b <= -observed.
    upper = right.size - np.searchsorted(right, observed - left, side="left")
    lower = np.searchsorted(right, -observed - left, side="right")
    return float((upper + lower).sum()) / float(2**values.size)


@dataclass(frozen=True)
class HeldOutScore:
    """The score of one evaluation point, with what pairs it to another.

    Both tracks record their start (step 0) and end this way: the Kaggle trainer each episode's held-out
    position, the embodied trainer each episode's success (1/0).

    Attributes:
        step: the training step evaluated (0: the initial policy).
        mean: mean score over the known episodes (``None``: none known).
        se: its standard error (``None`` with fewer than two known episodes).
        episodes: episodes evaluated (known and unknown).
        unknown: episodes with an unknown score (excluded).
        positions: each episode's score (``None``: unknown).
        episode_keys: what pairs an episode across evaluations (Kaggle: ``"<competition id>#<reset
            seed>"``; embodied: ``"<task>#<reset seed>#<initial state>"``).

    Example:
        >>> HeldOutScore(0, 0.61, 0.04, 8, 0, (), ()).text()
        'held-out at step 0: 0.610 ± 0.040 (8 episodes)'
    """

    step: int
    mean: float | None
    se: float | None
    episodes: int
    unknown: int
    positions: tuple[float | None, ...]
    episode_keys: tuple[str, ...]

    def text(self, label: str = "held-out") -> str:
        """``LABEL at step S: MEAN ± SE (N episodes[, U unknown: excluded])``."""
        unknown = f", {self.unknown} unknown: excluded" if self.unknown else ""
        score = f"{_number(self.mean)} ± {_number(self.se)}"
        return f"{label} at step {self.step}: {score} ({_count(self.episodes, 'episode')}{unknown})"

    def to_dict(self) -> dict[str, Any]:
        """Plain data (``summary.json``, checkpoints)."""
        return {**asdict(self), "positions": list(self.positions), "episode_keys": list(self.episode_keys)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HeldOutScore:
        """The inverse of :meth:`to_dict`."""
        return cls(
            step=int(data["step"]),
            mean=data["mean"],
            se=data["se"],
            episodes=int(data["episodes"]),
            unknown=int(data["unknown"]),
            positions=tuple(data["positions"]),
            episode_keys=tuple(data["episode_keys"]),
        )


@dataclass(frozen=True)
class PairedChange:
    """The change of the score between two evaluations of the same episodes.

    Attributes:
        mean: mean over the pairs of (later position - earlier position).
        se: the paired standard error (SD of the per-episode differences / sqrt(pairs)); ``None`` with
            fewer than two pairs.
        pairs: episodes known at both points (the same competition and reset seed).
    """

    mean: float
    se: float | None
    pairs: int

    def text(self) -> str:
        """``change +0.130 ± 0.040 (paired: same tasks and seeds, 8 pairs)``."""
        pairs = _count(self.pairs, "pair")
        return f"change {self.mean:+.3f} ± {_number(self.se)} (paired: same tasks and seeds, {pairs})"


def _number(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.3f}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def paired_change(start: HeldOutScore, end: HeldOutScore) -> PairedChange | None:
    """The paired change from ``start`` to ``end`` over the episodes known at both (matched by key).

    Returns:
        ``None`` when no episode is known at both points (e.g. the two evaluated other competitions).

    Example:
        >>> keys = ("a#0", "a#1", "b#0")
        >>> start = HeldOutScore(0, None, None, 3, 1, (0.5, None, 0.25), keys)
        >>> paired_change(start, HeldOutScore(4, None, None, 3, 0, (0.75, 1.0, 0.75), keys))
        PairedChange(mean=0.375, se=0.125, pairs=2)
    """
    earlier = dict(zip(start.episode_keys, start.positions, strict=True))
    differences: list[float | None] = [
        later - earlier[key]  # type: ignore[operator]
        for key, later in zip(end.episode_keys, end.positions, strict=True)
        if later is not None and earlier.get(key) is not None
    ]
    mean, se, pairs = mean_se(differences)
    return None if mean is None else PairedChange(mean=mean, se=se, pairs=pairs)


def describe_held_out(held_out: Mapping[str, Any], label: str = "held-out") -> list[str]:
    """The lines ``wmrl train`` prints from a summary's ``held_out`` (start, end, paired change).

    Args:
        held_out: ``{"start": ..., "end": ...}`` of :meth:`HeldOutScore.to_dict` (either may be missing).
        label: what the score is (``held-out``: the Kaggle position; ``success``: the embodied rate).

    Example:
        >>> start = HeldOutScore(0, 0.5, 0.1, 2, 0, (0.4, 0.6), ("a#0", "a#1")).to_dict()
        >>> end = HeldOutScore(3, 0.75, 0.05, 2, 0, (0.7, 0.8), ("a#0", "a#1")).to_dict()
        >>> first, second = describe_held_out({"start": start, "end": end})
        >>> first
        'held-out at step 0: 0.500 ± 0.100 (2 episodes)'
        >>> for part in second.split("; "): print(part)
        held-out at step 3: 0.750 ± 0.050 (2 episodes)
        change +0.250 ± 0.050 (paired: same tasks and seeds, 2 pairs)
    """
    start = HeldOutScore.from_dict(held_out["start"]) if held_out.get("start") else None
    end = HeldOutScore.from_dict(held_out["end"]) if held_out.get("end") else None
    lines = [start.text(label)] if start is not None else []
    if end is None or (start is not None and end.step == start.step):
        return lines
    if start is None:
        return [f"{end.text(label)}; change unknown (the run has no step-0 evaluation)"]
    change = paired_change(start, end)
    change_text = change.text() if change else "change unknown (no episode known at both)"
    lines.append(f"{end.text(label)}; {change_text}")
    return lines


@dataclass
class CpuClock:
    """Process CPU-seconds (and wall seconds, kept apart) spent inside the blocks it measures.

    CPU is ``time.process_time()``: every thread of this process, no child process (so a block is
    charged what the whole process burnt while it ran, other threads included). Measure from one thread
    at a time: two overlapping blocks would each be charged the other's CPU.

    Example:
        >>> clock = CpuClock()
        >>> with clock.measure():
        ...     _ = sum(i * i for i in range(10_000))
        >>> clock.cpu_s > 0 and clock.wall_s > 0
        True
    """

    cpu_s: float = 0.0
    wall_s: float = 0.0

    @contextlib.contextmanager
    def measure(self) -> Iterator[None]:
        """Add the process CPU-seconds and wall seconds of the ``with`` block (also when it raises)."""
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            yield
        finally:
            self.cpu_s += time.process_time() - cpu
            self.wall_s += time.perf_counter() - wall

    def state_dict(self) -> dict[str, float]:
        """The totals, for checkpoints."""
        return {"cpu_s": self.cpu_s, "wall_s": self.wall_s}

    def load_state_dict(self, state: Mapping[str, float]) -> None:
        """Restore :meth:`state_dict`."""
        self.cpu_s, self.wall_s = float(state["cpu_s"]), float(state["wall_s"])


class CpuTimedPolicy:
    """A policy whose sampling (``act``) is measured by a :class:`CpuClock`: what a rollout is given.

    Args:
        policy: a :class:`~wmrl_adapters.train.policy.TrainablePolicy` (its ``act`` takes ``contexts``).
        clock: where the sampling's CPU-seconds go.

    Example:
        >>> class Echo:
        ...     def act(self, observations, infos, contexts=None):
        ...         return list(observations)
        >>> clock = CpuClock()
        >>> CpuTimedPolicy(Echo(), clock).act(["a"], [{}]), clock.wall_s > 0
        (['a'], True)
    """

    def __init__(self, policy: Any, clock: CpuClock) -> None:
        self.policy = policy
        self.clock = clock

    def act(
        self,
        observations: Sequence[Any],
        infos: Sequence[Mapping[str, Any]],
        contexts: Sequence[Any] | None = None,
    ) -> list[Any]:
        """The policy's actions, its CPU-seconds added to the clock."""
        with self.clock.measure():
            return list(self.policy.act(observations, infos, contexts=contexts))


class CpuTimedWorldModel:
    """A world model whose ``predict`` is measured by a :class:`CpuClock`; every other attribute is the
    model's own (its ``name``, ``observe``...).

    Args:
        world_model: anything with ``predict(queries)``.
        clock: where the predictions' CPU-seconds go.
    """

    def __init__(self, world_model: Any, clock: CpuClock) -> None:
        self.world_model = world_model
        self.clock = clock
        self.name = getattr(world_model, "name", type(world_model).__name__)

    def predict(self, queries: Sequence[Any]) -> list[Any]:
        """The model's predictions, its CPU-seconds added to the clock (also when it raises)."""
        with self.clock.measure():
            return list(self.world_model.predict(queries))

    def __getattr__(self, name: str) -> Any:
        if name in ("world_model", "clock"):  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        return getattr(self.world_model, name)
