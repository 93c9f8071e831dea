"""Real executions for training: an execution cache that charges hits at cost, and a compute meter.

Why a cache: the design-space agent revisits designs, and a seeded, single-threaded solution gives the
same outcome every time on the same data and sandbox settings; executing it again would only burn CPU.
"The same data" is the competition's content, not its id
(:func:`~wmrl_envs.kaggle.fingerprint.competition_fingerprint`), graded by the same code
(:func:`~wmrl_envs.kaggle.fingerprint.grading_code_version`); "the same solution" is the exact code
that :func:`~wmrl_envs.kaggle.env.parse_action` let through, so the cache never sees an action the env
would refuse.
Why charge hits: the paper executes every trajectory, so a method's compute must be what it *would*
have cost. :class:`ComputeMeter` keeps both numbers: ``charged`` (every real execution at its measured
CPU cost, cache hit or not) and ``spent`` (CPU actually burnt here). The sandbox's CPU time includes a
warm worker's start-up imports (:class:`~wmrl_envs.sandbox.warm.WarmSandbox`), so warm sandboxes hide
latency, never cost.

:class:`CachedKaggleEnv` is a :class:`~wmrl_envs.kaggle.env.KaggleEnv` whose ``execute`` goes through
the cache and records into a meter; everything else (grading, the ladder, the world-model hooks) is the
env's own.

Why CPU clocks: compute is compared in one unit, CPU-seconds, whatever spent it. The sandbox reports
each solution's cgroup CPU; the work done in this process (the policy sampling and updating, the world
model predicting and learning) is measured by :class:`CpuClock` as ``time.process_time()`` deltas, not
wall time, which on a loaded machine measures the load (0.2 to 14.7 s were seen for identical work).
``process_time`` counts every thread of this process (torch's intra-op threads included) and no child
process (the sandboxed solutions are charged through their cgroup). So a block is charged what the
whole process burnt while it ran: :class:`CpuTimedWorldModel` runs while the rollout's threads grade
the real executions of the same turn (reading a submission, computing its metric: milliseconds each),
which makes its figure an upper bound of the world model's own; :class:`CpuTimedPolicy` samples when
no execution is in flight (the rollout waits for every execution of a turn before the next ``act``).
"""

from __future__ import annotations

import hashlib
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any

from wmrl_adapters.train.run.measure import CpuClock, CpuTimedPolicy, CpuTimedWorldModel

from wmrl_algos.errors import DataError
from wmrl_envs.kaggle.env import KaggleEnv
from wmrl_envs.kaggle.fingerprint import competition_fingerprint, grading_code_version
from wmrl_envs.kaggle.outcome import UNCACHED_STATUSES, Outcome

__all__ = [
    "CACHE_KEY_FORMAT",
    "UNCACHED_STATUSES",
    "CachedKaggleEnv",
    "ComputeMeter",
    "CpuClock",
    "CpuTimedPolicy",
    "CpuTimedWorldModel",
    "ExecutionCache",
]

CACHE_KEY_FORMAT = "wmrl-execution/2"
"""The first part of every cache key; bump it when what a key covers changes. Format 1 (unprefixed keys
over the competition id) is never served."""


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
    """Outcomes of real executions keyed by (competition content, exact code, sandbox settings).

    Only definite outcomes are stored (:data:`UNCACHED_STATUSES` are not: a ``sandbox_error`` or a
    ``timeout`` is executed again next time). Every key starts with :data:`CACHE_KEY_FORMAT` and the
    grading code's version, and :meth:`load_state_dict` drops entries whose keys do not (a cache from
    a checkpoint of older code), with a warning. Thread-safe.

    Example:
        >>> cache = ExecutionCache()
        >>> key = ExecutionCache.key("9f86d081884c7d65", "print(1)", ("local", 60.0))
        >>> cache.put(key, Outcome(status="runtime_error"), cpu_s=1.5)
        >>> cache.get(key)[1]
        1.5
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[Outcome, float]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def prefix() -> str:
        """What every current key starts with: the key format and the grading code's version."""
        return f"{CACHE_KEY_FORMAT}+{grading_code_version()[:16]}:"

    @staticmethod
    def key(fingerprint: str, code: str, settings: tuple[Any, ...]) -> str:
        """The cache key: :meth:`prefix`, then a SHA-256 over the fingerprint, the code and the settings.

        Args:
            fingerprint: the competition's :func:`~wmrl_envs.kaggle.fingerprint.competition_fingerprint`.
            code: the solution exactly as :func:`~wmrl_envs.kaggle.env.parse_action` returned it.
            settings: the sandbox backend and limits the outcome depends on.
        """
        digest = hashlib.sha256(repr((fingerprint, code, settings)).encode())
        return ExecutionCache.prefix() + digest.hexdigest()

    def get(self, key: str) -> tuple[Outcome, float] | None:
        """The cached ``(outcome, cpu_s)`` or ``None``."""
        with self._lock:
            return self._entries.get(key)

    def put(self, key: str, outcome: Outcome, cpu_s: float) -> None:
        """Store a definite outcome with the CPU-seconds it cost (:data:`UNCACHED_STATUSES` are not)."""
        if outcome.status in UNCACHED_STATUSES:
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
        """Replace the entries with a :meth:`state_dict`, keeping only keys of the current format.

        An entry under another key format or grading version (a checkpoint written by older code) is
        dropped, with a ``RuntimeWarning`` that says how many: its outcome may have been graded on
        another competition with the same id, or by other grading code, so it is executed again.
        """
        prefix = self.prefix()
        current = {key: entry for key, entry in state.items() if key.startswith(prefix)}
        stale = len(state) - len(current)
        if stale:
            warnings.warn(
                f"{stale} of {len(state)} cached executions were written under another cache key format or "
                f"grading code (keys not starting with {prefix!r}); they are ignored and will be executed "
                "again",
                RuntimeWarning,
                stacklevel=2,
            )
        with self._lock:
            self._entries = current


class CachedKaggleEnv(KaggleEnv):
    """A :class:`KaggleEnv` whose real executions go through an execution cache and a compute meter.

    The env judges every action first (:func:`~wmrl_envs.kaggle.env.parse_action`, through
    :meth:`KaggleEnv.execute`) and only a solution it lets through reaches :meth:`execute_solution`:
    a cached env and an uncached one give the same outcome for any action. An action without a
    solution runs nothing and is neither cached nor charged.

    Timeouts are never cached (nor are unknown outcomes, ``sandbox_error``): a run that timed out on
    a loaded host may finish on a quiet one, so each repeat executes again (and is charged again),
    rather than replaying one unlucky run as a definite failure for the rest of training. Re-running
    once before caching was the alternative; it would still cache a timeout when the host stays busy.

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

    def execute_solution(self, code: str) -> Outcome:
        """Run a validated solution for real (or replay its cached outcome) and count its cost.

        Args:
            code: the solution exactly as :func:`~wmrl_envs.kaggle.env.parse_action` returned it (the
                cache key holds exactly this code).

        Returns:
            The outcome; ``sandbox_error`` (unknown, not charged) when the competition's files cannot
            be read to fingerprint it.
        """
        competition = self._require_episode()
        key = None
        if self.cache is not None:
            try:
                key = ExecutionCache.key(competition_fingerprint(competition), code, self._settings)
            except DataError as error:
                return Outcome(status="sandbox_error", detail=f"the competition cannot be read: {error}")
            cached = self.cache.get(key)
            if cached is not None:
                self.meter.record(cached[1], hit=True)
                return cached[0]
        outcome = super().execute_solution(code)
        cpu = outcome.extra.get("cpu_s")
        cpu_s = float(cpu) if cpu is not None else float(outcome.wall_s)
        self.meter.record(cpu_s, hit=False, wall_s=float(outcome.wall_s))
        if self.cache is not None and key is not None:
            self.cache.put(key, outcome, cpu_s)
        return outcome
