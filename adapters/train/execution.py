"""Real executions for training: an execution cache that charges hits at cost, and a compute meter.

Why a cache: the design-space agent revisits designs, and a seeded, single-threaded solution gives the
same outcome every time on the same data and sandbox settings; executing it again would only burn CPU.
Why charge hits: the paper executes every trajectory, so a method's compute must be what it *would*
have cost. :class:`ComputeMeter` keeps both numbers: ``charged`` (every real execution at its measured
CPU cost, cache hit or not) and ``spent`` (CPU actually burnt here). The sandbox's CPU time includes a
warm worker's start-up imports (:class:`~wmrl_envs.sandbox.warm.WarmSandbox`), so warm sandboxes hide
latency, never cost.

:class:`CachedKaggleEnv` is a :class:`~wmrl_envs.kaggle.env.KaggleEnv` whose ``execute`` goes through
the cache and records into a meter; everything else (grading, the ladder, the world-model hooks) is the
env's own.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from typing import Any

from wmrl_envs.kaggle.env import KaggleEnv, extract_code
from wmrl_envs.kaggle.outcome import Outcome

__all__ = ["ComputeMeter", "ExecutionCache", "CachedKaggleEnv"]


@dataclass
class ComputeMeter:
    """Thread-safe totals of real executions: count, cache hits, charged and spent sandbox CPU-seconds.

    Example:
        >>> meter = ComputeMeter()
        >>> meter.record(2.0, hit=False); meter.record(2.0, hit=True)
        >>> meter.charged_cpu_s, meter.spent_cpu_s, meter.hits
        (4.0, 2.0, 1)
    """

    executions: int = 0
    hits: int = 0
    charged_cpu_s: float = 0.0
    spent_cpu_s: float = 0.0
    wall_s: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record(self, cpu_s: float, *, hit: bool, wall_s: float = 0.0) -> None:
        """Count one real execution of measured cost ``cpu_s`` (spent only when not a cache hit)."""
        with self._lock:
            self.executions += 1
            self.hits += int(hit)
            self.charged_cpu_s += cpu_s
            self.spent_cpu_s += 0.0 if hit else cpu_s
            self.wall_s += 0.0 if hit else wall_s

    def state_dict(self) -> dict[str, float]:
        """The totals, for checkpoints and metrics."""
        with self._lock:
            return {
                "executions": self.executions,
                "hits": self.hits,
                "charged_cpu_s": self.charged_cpu_s,
                "spent_cpu_s": self.spent_cpu_s,
                "wall_s": self.wall_s,
            }

    def load_state_dict(self, state: dict[str, float]) -> None:
        """Restore :meth:`state_dict`."""
        with self._lock:
            self.executions, self.hits = int(state["executions"]), int(state["hits"])
            self.charged_cpu_s, self.spent_cpu_s = float(state["charged_cpu_s"]), float(state["spent_cpu_s"])
            self.wall_s = float(state["wall_s"])


class ExecutionCache:
    """Outcomes of real executions keyed by (competition, exact code, sandbox settings).

    Only definite outcomes are stored: a ``sandbox_error`` (the infrastructure failed) is retried next
    time. Thread-safe.

    Example:
        >>> cache = ExecutionCache()
        >>> key = ExecutionCache.key("titanic", "print(1)", ("local", 60.0))
        >>> cache.put(key, Outcome(status="runtime_error"), cpu_s=1.5)
        >>> cache.get(key)[1]
        1.5
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[Outcome, float]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(competition_id: str, code: str, settings: tuple[Any, ...]) -> str:
        """The cache key: a SHA-256 over the competition id, the code and the sandbox settings."""
        digest = hashlib.sha256(repr((competition_id, code, settings)).encode())
        return digest.hexdigest()

    def get(self, key: str) -> tuple[Outcome, float] | None:
        """The cached ``(outcome, cpu_s)`` or ``None``."""
        with self._lock:
            return self._entries.get(key)

    def put(self, key: str, outcome: Outcome, cpu_s: float) -> None:
        """Store a definite outcome with the CPU-seconds it cost."""
        if outcome.status == "sandbox_error":
            return
        with self._lock:
            self._entries[key] = (outcome, cpu_s)

    def __len__(self) -> int:
        return len(self._entries)

    def state_dict(self) -> dict[str, tuple[Outcome, float]]:
        """A copy of the entries (picklable), for checkpoints."""
        with self._lock:
            return dict(self._entries)

    def load_state_dict(self, state: dict[str, tuple[Outcome, float]]) -> None:
        """Replace the entries with a :meth:`state_dict`."""
        with self._lock:
            self._entries = dict(state)


class CachedKaggleEnv(KaggleEnv):
    """A :class:`KaggleEnv` whose real executions go through an execution cache and a compute meter.

    Args:
        meter: where every real execution is counted (charged at cost even on a cache hit).
        cache: the shared cache, or ``None`` to execute every time.
        **kwargs: :class:`KaggleEnv`'s arguments (pass a shared ``sandbox`` object).

    Example:
        >>> env = CachedKaggleEnv(ComputeMeter(), ExecutionCache(), sandbox="unsafe")  # doctest: +SKIP
    """

    def __init__(self, meter: ComputeMeter, cache: ExecutionCache | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.meter = meter
        self.cache = cache
        config = self.config
        self._settings = (
            getattr(self.sandbox, "name", type(self.sandbox).__name__),
            config.timeout_s,
            config.memory_mb,
            config.max_submission_mb,
        )

    def execute(self, action: str) -> Outcome:
        """Run ``action`` for real (or replay its cached outcome) and count its cost.

        ``KaggleEnv.step`` comes through here too. An action without a solution runs nothing and is
        neither cached nor charged.
        """
        competition = self._require_episode()
        code = extract_code(action) if isinstance(action, str) else None
        if code is None:
            return super().execute(action)
        key = ExecutionCache.key(competition.id, code, self._settings)
        cached = self.cache.get(key) if self.cache is not None else None
        if cached is not None:
            self.meter.record(cached[1], hit=True)
            return cached[0]
        outcome = super().execute(action)
        if outcome.status == "malformed":
            return outcome
        cpu = outcome.extra.get("cpu_s")
        cpu_s = float(cpu) if cpu is not None else float(outcome.wall_s)
        self.meter.record(cpu_s, hit=False, wall_s=float(outcome.wall_s))
        if self.cache is not None:
            self.cache.put(key, outcome, cpu_s)
        return outcome
