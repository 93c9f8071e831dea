"""Warm execution: a pool of pre-started, single-use sandboxes that have already imported the ML stack.

Why: importing pandas + scikit-learn costs about 1.3 CPU-seconds per run, often more than a small
solution itself. Two designs were possible:

* a *zygote* that imports once and forks a child per run: saves the CPU, but every child inherits the
  zygote's memory (its heap, its RNG state, any bug in how it was set up) and must enter its own
  isolation after the fork, inside a process that already holds host resources;
* a *pool of pre-warmed single-use sandboxes* (this module): each worker is a complete, fresh
  sandbox of the wrapped backend (own uid, own namespaces, own cgroups, own capped work dir) started
  ahead of time; it imports the preloaded modules, then blocks on its stdin. A run takes one idle
  worker (preferring one whose imports are done), writes ``solution.py`` into its work dir, sends
  ``go`` and starts the wall clock; the worker runs the solution as ``__main__`` and is destroyed
  afterwards, like a cold run. A replacement is started in the background.

The trade-off (measured in ``benchmarks/sandbox_overhead.py``): the pool keeps full per-run isolation
and hides the import *latency*, but does not save import *CPU* (every worker still imports), and idle
workers hold memory (about 150 MB each with pandas + scikit-learn). It pays when runs arrive with gaps
or the CPUs are not saturated; on saturated cores throughput is unchanged.

Same code, same inputs, same grade, warm or cold (a difference is a reward a policy can learn to
exploit). The worker runs :mod:`~wmrl_envs.sandbox._warm_worker`, which rebuilds what CPython does
around a script: ``sys.modules`` as a fresh interpreter has it (the preloaded modules are hidden until
the solution imports them, then handed back with what their import loaded and changed), the run of
``solution.py`` as the real ``__main__`` (tracebacks, syntax errors, ``SystemExit``), and the steps of
the teardown a solution can observe, in their order (threads joined, ``atexit``, the standard
streams flushed as CPython flushes them, so a ``None`` or closed ``sys.stdout`` exits 0 and a failing
flush exits 120, ``__main__`` freed). It then skips the rest of the teardown (freeing every preloaded
module, about 2.5 s with pandas and scikit-learn loaded, invisible to the solution); the preloaded
objects are frozen out of the garbage collector's reach (``gc.freeze``) so that the final collection
costs only what the solution allocated. Code that Python decodes differently from a file than from
bytes (a NUL byte, a coding declaration) runs cold. The preloaded modules do not count against the
solution's memory either: at hand-over the run's memory limit is raised by what the worker already
uses (:meth:`~wmrl_envs.sandbox.limits.RunCgroups.grant_current_usage`). The CPU time and peak memory
reported for a warm run include its imports.

Workers are keyed by the run configuration that is fixed at start (inputs, memory, pids, disk, output
cap, environment); a request whose configuration has no idle worker runs cold and warms the pool
for the next one.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from wmrl_algos.errors import ConfigError, SandboxError
from wmrl_envs.sandbox.base import ExecutionRequest, ExecutionResult
from wmrl_envs.sandbox.local import SANDBOX_CWD, BubblewrapSandbox, LaunchedRun
from wmrl_envs.sandbox.results import unencodable_code_result

__all__ = ["DEFAULT_PRELOAD", "WarmSandbox"]

DEFAULT_PRELOAD: tuple[str, ...] = ("numpy", "pandas", "sklearn", "sklearn.linear_model", "sklearn.ensemble",
                                    "sklearn.model_selection", "sklearn.metrics")
"""Modules a warm worker imports before it waits for code."""

_WORKER_SOURCE = (Path(__file__).parent / "_warm_worker.py").read_text(encoding="utf-8")
_LAUNCHER = "import sys; worker = {'__name__': 'wmrl_warm'}; exec(sys.argv.pop(1), worker); worker['main']()"
"""Runs the worker's source (the package is not mounted in the sandbox) in a namespace of its own."""
_CODING_DECLARATION = re.compile(rb"^[ \t\f]*#.*?coding[:=]", re.MULTILINE)

_READY_FILE = ".wmrl-warm-ready"
_ConfigKey = tuple[object, ...]


def _is_ready(launched: LaunchedRun) -> bool:
    return (launched.work.tmp / _READY_FILE).exists()


def _cold_only_reason(code: str) -> str | None:
    """Why ``code`` must run cold: Python decodes it differently from a file than from bytes, else None."""
    source = code.encode("utf-8")
    if b"\0" in source:
        return "a NUL byte"
    if _CODING_DECLARATION.search(b"\n".join(source.splitlines()[:2])):
        return "a coding declaration"
    return None


def _config_key(request: ExecutionRequest) -> _ConfigKey:
    return (
        tuple(sorted((name, str(path)) for name, path in request.inputs.items())),
        request.memory_mb,
        request.max_pids,
        request.disk_mb,
        request.max_output_bytes,
        tuple(sorted(request.env.items())),
    )


class WarmSandbox:
    """Wraps a :class:`BubblewrapSandbox` with a pool of pre-warmed single-use sandboxes per configuration.

    Args:
        sandbox: the backend whose sandboxes are pre-started (owned: closed with this object).
        pool_size: idle workers kept per configuration.
        preload: modules each worker imports before waiting.
        max_configs: configurations kept warm (least recently used ones are dropped).

    Raises:
        ConfigError: ``pool_size`` or ``max_configs`` below 1, or a ``preload`` entry that is not a
            dotted module name.

    Example:
        >>> from wmrl_envs.sandbox.local import BubblewrapSandbox
        >>> from wmrl_envs.sandbox.base import ExecutionRequest
        >>> sandbox = WarmSandbox(BubblewrapSandbox(strict=False), pool_size=1, preload=("json",))
        >>> request = ExecutionRequest(code="import sys; print('json' in sys.modules)", timeout_s=30)
        >>> sandbox.warm_up(request, wait=True)
        >>> result = sandbox.run(request)  # preloaded, yet hidden as in a fresh interpreter
        >>> result.stdout, result.detail
        ('False\\n', 'warm worker')
        >>> sandbox.close()
    """

    def __init__(
        self,
        sandbox: BubblewrapSandbox,
        *,
        pool_size: int = 2,
        preload: Sequence[str] = DEFAULT_PRELOAD,
        max_configs: int = 4,
    ) -> None:
        if pool_size < 1:
            raise ConfigError(f"pool_size={pool_size} must be >= 1 (use the plain backend for no pool)")
        if max_configs < 1:
            raise ConfigError(f"max_configs={max_configs} must be >= 1")
        for module in preload:
            if not all(part.isidentifier() for part in module.split(".")):
                raise ConfigError(f"preload entry {module!r} is not a dotted module name; use one like "
                                  f"'sklearn.metrics'")
        self.name = f"{sandbox.name}-warm"
        self._sandbox = sandbox
        self.pool_size = pool_size
        self.max_configs = max_configs
        self._command = [sandbox.python, "-s", "-B", "-c", _LAUNCHER, _WORKER_SOURCE, ",".join(preload),
                         SANDBOX_CWD, f"/tmp/{_READY_FILE}"]
        self._idle: OrderedDict[_ConfigKey, deque[LaunchedRun]] = OrderedDict()
        self._starting: dict[_ConfigKey, int] = {}
        self._spawners: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._release_idle = weakref.finalize(self, _release_all, self._idle, self._lock)
        self.warm_hits = 0
        self.cold_runs = 0

    def _spawn(self, key: _ConfigKey, template: ExecutionRequest) -> None:
        try:
            launched = self._sandbox.launch(template, self._command, write_code=False)
        except SandboxError:
            launched = None
        with self._lock:
            self._spawners.discard(threading.current_thread())
            self._starting[key] -= 1
            if launched is None:
                return
            if self._closed or key not in self._idle:
                discard = launched
            else:
                self._idle[key].append(launched)
                discard = None
        if discard is not None:
            discard.release()

    def warm_up(
        self, request: ExecutionRequest, *, wait: bool = False, ready_timeout_s: float = 120.0
    ) -> None:
        """Start idle workers for ``request``'s configuration until ``pool_size`` are idle or starting.

        Args:
            request: a request with the configuration to warm (its code is ignored).
            wait: block until this configuration's idle workers have finished their imports.
            ready_timeout_s: give up waiting after this long.
        """
        key = _config_key(request)
        template = replace(request, code="")
        evicted: list[LaunchedRun] = []
        with self._lock:
            if self._closed:
                return
            if key not in self._idle:
                self._idle[key] = deque()
                while len(self._idle) > self.max_configs:
                    _, old = self._idle.popitem(last=False)
                    evicted.extend(old)
            self._idle.move_to_end(key)
            missing = self.pool_size - len(self._idle[key]) - self._starting.get(key, 0)
            self._starting[key] = self._starting.get(key, 0) + max(missing, 0)
        for launched in evicted:
            launched.release()
        threads = [threading.Thread(target=self._spawn, args=(key, template), daemon=True)
                   for _ in range(max(missing, 0))]
        with self._lock:
            self._spawners.update(threads)
        for thread in threads:
            thread.start()
        if wait:
            for thread in threads:
                thread.join()
            deadline = time.monotonic() + ready_timeout_s
            while time.monotonic() < deadline:
                with self._lock:
                    workers = list(self._idle.get(key, ()))
                    pending = self._starting.get(key, 0)
                if not pending and all(_is_ready(w) or w.process.finished for w in workers):
                    return
                time.sleep(0.02)

    def _take(self, key: _ConfigKey) -> LaunchedRun | None:
        dead: list[LaunchedRun] = []
        found: LaunchedRun | None = None
        with self._lock:
            queue = self._idle.get(key)
            if queue:
                dead = [w for w in queue if w.process.finished]
                alive = [w for w in queue if not w.process.finished]
                ready = [w for w in alive if _is_ready(w)]
                candidates = ready or alive
                found = candidates[0] if candidates else None
                queue.clear()
                queue.extend(w for w in alive if w is not found)
        for launched in dead:
            launched.release()
        return found

    def run(self, request: ExecutionRequest) -> ExecutionResult:
        """Execute one request on an idle warm worker if one matches, else cold; then refill the pool.

        Code that cannot be a source file (a lone surrogate) is refused without running; code that
        would be decoded differently warm runs cold (see :func:`_cold_only_reason`).
        """
        refused = unencodable_code_result(request.code, backend=self.name)
        if refused is not None:
            return refused
        key = _config_key(request)
        reason = _cold_only_reason(request.code)
        launched = self._take(key) if reason is None else None
        self.warm_up(request)
        if launched is None:
            self.cold_runs += 1
            result = self._sandbox.run(request)
            why = f"cold run (the code has {reason})" if reason else "cold start (no idle warm worker)"
            return replace(result, detail="; ".join(filter(None, [why, result.detail])), backend=self.name)
        self.warm_hits += 1
        try:
            self._sandbox.write_code(launched.work, request.code)
            if launched.cgroups is not None:
                launched.cgroups.grant_current_usage(request.memory_mb)
        except BaseException as exc:
            launched.release()
            if isinstance(exc, OSError):
                raise SandboxError(f"could not hand the code to a warm worker: {exc}") from exc
            raise
        launched.process.start_clock()
        launched.process.send(b"go")
        result = self._sandbox.finish(launched, request)
        detail = "; ".join(filter(None, ["warm worker", result.detail]))
        return replace(result, detail=detail, backend=self.name)

    def close(self, timeout_s: float = 60.0) -> None:
        """Destroy every idle worker and close the wrapped backend (also done at garbage collection).

        Workers still being started (a refill in flight) are waited for, up to ``timeout_s``, and
        destroyed as they arrive: closing during a refill leaks no sandbox.
        """
        with self._lock:
            self._closed = True
            spawners = list(self._spawners)
        deadline = time.monotonic() + timeout_s
        for thread in spawners:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._release_idle()
        self._sandbox.close()


def _release_all(idle: OrderedDict[_ConfigKey, deque[LaunchedRun]], lock: threading.Lock) -> None:
    with lock:
        workers = [launched for queue in idle.values() for launched in queue]
        idle.clear()
    for launched in workers:
        with contextlib.suppress(Exception):
            launched.release()
