"""Scale-out on Ray: real executions as Ray tasks, world models as a pool of Ray actors.

Why Ray and not a home-made cluster: the systems WMRL is used next to (verl, OpenRLHF) already run on
Ray, so a user who outgrows one machine has a Ray cluster, its scheduler, its resource accounting and
its fault tolerance. wmrl only has to fit its two expensive parts into the slots it already has:

* :class:`RayExecutor` is a :class:`concurrent.futures.Executor`, the slot
  :class:`~wmrl_envs.rollouts.GroupedRollout` takes for its real executions. Each execution becomes one
  Ray task with its own CPU and memory request, so the sandbox runs on whichever worker node has room.
  The environment objects stay on the driver: for ``WorldModelWrapper.execute`` only the *real env's
  step* travels. The env (its whole wrapper chain) is shipped to the worker with the action, stepped
  there, and shipped back; the driver adopts the stepped state in place, so the wrapper's bound hooks
  keep pointing at the same object, and the wrapper's own bookkeeping (timing, the
  :class:`~wmrl_envs.ledger.CostLedger`, truncation, episode queries) runs on the driver exactly as it
  does locally. A retried task therefore never counts twice. A worker node that dies mid-execution is
  handled by Ray's task retries (``max_retries``), which replay the step from the same pre-step state
  on another node; when the retries run out, the step comes back *unknown*: reward ``NaN`` (the
  wrapper reports ``None``), the episode truncated, ``info["execution_lost"]`` saying why, and
  :attr:`RayExecutor.stats` counting it. Any other picklable callable runs as a plain Ray task; a lost
  one raises :class:`~wmrl_algos.errors.SandboxError` (the execution's score is unknown).
* :class:`RaySandbox` is the other cut, for envs that must stay on the driver (they share a cache or a
  meter with the trainer, or hold something unpicklable): the env steps on the driver and only
  ``Sandbox.run`` is a Ray task. ``RayExecutor`` sees a ``RaySandbox`` on the env and then ships
  nothing but the sandbox run; a lost one is a ``SandboxError``, which the Kaggle env scores unknown.
* :class:`RayWorldModelPool` is itself a :class:`~wmrl_envs.world_model.WorldModel`: ``num_actors``
  Ray actors each load the model once (``factory()``), and a batched ``predict`` is split into
  contiguous chunks, one per actor. A killed actor is restarted by Ray (``max_restarts``, which reruns
  the factory) and its chunk is retried on the new instance; when that fails too, the chunk's
  predictions are unknown (``Prediction(reward=None)``), which the wrapper counts in the ledger.

Back-pressure: at most ``max_in_flight`` executions are in flight (default: the cluster's CPUs divided
by each execution's CPU request); :meth:`RayExecutor.submit` blocks until one finishes. A killed
*driver* loses the step in progress; the run continues from its last checkpoint with
``wmrl train --resume``.

Only this module imports ``ray``; importing it without ``wmrl[ray]`` raises
:class:`~wmrl_algos.errors.MissingDependencyError` naming the extra. See ``docs/scale-out.md``.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import shutil
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import gymnasium as gym

from wmrl_algos.errors import ConfigError, SandboxError, require
from wmrl_envs.sandbox import ExecutionRequest, ExecutionResult, Sandbox
from wmrl_envs.world_model import Prediction, WorldModel, WorldModelQuery
from wmrl_envs.wrapper import PendingStep, WorldModelWrapper

ray = require("ray", "ray")

__all__ = [
    "ExecutionStats",
    "RayExecutor",
    "RaySandbox",
    "RayWorldModelPool",
    "connect",
    "start_local_cluster",
]

T = TypeVar("T")
_StepTuple = tuple[Any, Any, bool, bool, dict[str, Any]]
_BYTES_PER_MB = 1024 * 1024
# Ray failures that mean "the machine or process went away", as opposed to the callable raising.
_LOST_ERRORS: tuple[type[BaseException], ...] = (
    ray.exceptions.WorkerCrashedError,
    ray.exceptions.NodeDiedError,
    ray.exceptions.OutOfMemoryError,
    ray.exceptions.ObjectLostError,
    ray.exceptions.RayActorError,
)


def _lost(exc: BaseException) -> bool:
    """Whether a Ray error means the execution was lost (never one the callable itself raised)."""
    return isinstance(exc, _LOST_ERRORS) and not isinstance(exc, ray.exceptions.RayTaskError)


def connect(address: str | None) -> None:
    """Join the Ray cluster at ``address`` (``"auto"``: the one started with ``ray start``), once.

    ``None`` uses ``ray.init()``'s default (a private local instance unless ``RAY_ADDRESS`` names a
    cluster). An already initialised Ray session is reused as it is.

    Raises:
        ConfigError: ``address`` is not a string or ``None``, or no cluster answers there.
    """
    if address is not None and not isinstance(address, str):
        raise ConfigError(
            f"address={address!r}; pass 'auto', a cluster address such as '10.0.0.1:6379', or None"
        )
    if ray.is_initialized():
        return
    try:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    except ConnectionError as exc:
        raise ConfigError(
            f"no Ray cluster answers at address={address!r} ({exc}); start one with `ray start --head` "
            "(see docs/scale-out.md) or pass address=None for a private local instance"
        ) from exc


def start_local_cluster(
    workers: int = 2, *, cpus_per_worker: float = 1.0, object_store_mb: int = 80, attempts: int = 3
) -> Any:
    """Start a multi-node Ray cluster on this machine: a head without CPUs plus ``workers`` worker nodes.

    Each node is its own raylet with its own resources (``ray.cluster_utils.Cluster``, the processes
    ``ray start`` runs), so executions and actors only ever run on worker nodes and a test can kill one
    node. For trying scale-out on one machine and for tests; connect with ``ray.init(cluster.address)``
    and end it with ``cluster.shutdown()``.

    Args:
        workers: worker nodes.
        cpus_per_worker: CPUs each worker node offers.
        object_store_mb: object store per node (80 is Ray's minimum; keeps memory low).
        attempts: start-ups to try; Ray gives a node 30 s to register, which a loaded machine can miss.

    Returns:
        The running ``ray.cluster_utils.Cluster``.

    Raises:
        ConfigError: a value is out of range, or the cluster did not start in ``attempts`` tries.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"workers={workers!r} must be a positive int, e.g. 2")
    _check_resources(cpus_per_worker, None)
    from ray.cluster_utils import Cluster

    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise ConfigError(f"attempts={attempts!r} must be a positive int, e.g. 3")
    store = object_store_mb * _BYTES_PER_MB
    attempt = 1
    while True:
        cluster = None
        try:
            cluster = Cluster(
                initialize_head=True,
                head_node_args={"num_cpus": 0, "object_store_memory": store, "include_dashboard": False},
            )
            for _ in range(workers):
                cluster.add_node(num_cpus=cpus_per_worker, object_store_memory=store)
            cluster.wait_for_nodes()
            return cluster
        except Exception as exc:  # Ray reports a node's start-up timeout as a bare Exception
            if cluster is not None:
                cluster.shutdown()
            if attempt >= attempts:
                raise ConfigError(
                    f"a local Ray cluster of {workers} worker nodes did not start in {attempts} tries "
                    f"({exc}); the machine may be overloaded: retry, or pass fewer workers"
                ) from exc
            attempt += 1


def _check_resources(num_cpus: float, memory_mb: int | None) -> None:
    if isinstance(num_cpus, bool) or not isinstance(num_cpus, (int, float)) or not num_cpus > 0:
        raise ConfigError(f"num_cpus={num_cpus!r} must be a positive number of CPUs per task, e.g. 1.0")
    if memory_mb is not None and (
        isinstance(memory_mb, bool) or not isinstance(memory_mb, int) or memory_mb < 1
    ):
        raise ConfigError(f"memory_mb={memory_mb!r} must be a positive int (MiB reserved per task) or None")


def _check_retries(max_retries: int) -> None:
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ConfigError(f"max_retries={max_retries!r} must be an int >= 0 (0: a lost execution is unknown)")


def _resource_options(num_cpus: float, memory_mb: int | None) -> dict[str, Any]:
    options: dict[str, Any] = {"num_cpus": num_cpus}
    if memory_mb is not None:
        options["memory"] = memory_mb * _BYTES_PER_MB
    return options


@dataclass
class ExecutionStats:
    """What a :class:`RayExecutor` or :class:`RaySandbox` has run so far (read it from their ``stats``).

    Attributes:
        submitted: executions submitted.
        completed: executions whose result came back (including those that raised in the callable).
        lost: executions whose node (or worker) died and whose retries ran out: result unknown.
        remote_seconds: seconds spent inside the callables on the workers (completed ones).
        driver_seconds: seconds from submission to result on the driver (completed ones); the
            difference to ``remote_seconds`` is Ray's scheduling and transfer overhead.
        nodes: completed executions per Ray node id (where the sandboxes ran).
    """

    submitted: int = 0
    completed: int = 0
    lost: int = 0
    remote_seconds: float = 0.0
    driver_seconds: float = 0.0
    nodes: Counter[str] = field(default_factory=Counter)

    @property
    def overhead_seconds_per_task(self) -> float | None:
        """Mean seconds per completed execution beyond the callable's own (Ray's share); None before any."""
        if not self.completed:
            return None
        return (self.driver_seconds - self.remote_seconds) / self.completed


class _Tracker:
    """Thread-safe :class:`ExecutionStats`, and the one place results come back from Ray."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stats = ExecutionStats()

    def submitted(self) -> None:
        with self._lock:
            self._stats.submitted += 1

    def lost(self) -> None:
        with self._lock:
            self._stats.lost += 1

    def collect(self, ref: Any, start: float) -> Any:
        """Wait for a task returning ``(result, remote seconds, node id)``; record it, return the result."""
        result, seconds, node = ray.get(ref)
        with self._lock:
            self._stats.completed += 1
            self._stats.remote_seconds += seconds
            self._stats.driver_seconds += time.perf_counter() - start
            self._stats.nodes[node] += 1
        return result

    def snapshot(self) -> ExecutionStats:
        with self._lock:
            return dataclasses.replace(self._stats, nodes=Counter(self._stats.nodes))


def _timed_call(fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[T, float, str]:
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start, ray.get_runtime_context().get_node_id()


def _remote_step(
    env: gym.Env[Any, Any], action: Any
) -> tuple[tuple[_StepTuple, gym.Env[Any, Any]], float, str]:
    result, seconds, node = _timed_call(env.step, (action,), {})
    return (result, env), seconds, node


def _adopt_state(local: gym.Env[Any, Any], stepped: gym.Env[Any, Any]) -> None:
    """Make ``local`` (and every env it wraps) hold the state of its stepped copy, keeping identities."""
    while True:
        state = dict(vars(stepped))
        if not isinstance(local, gym.Wrapper):
            vars(local).update(state)
            return
        inner = state.pop("env")
        vars(local).update(state)
        local, stepped = local.env, inner


class _RemoteStepEnv(gym.Wrapper[Any, Any, Any, Any]):
    """Stands in for a wrapper's real env during one execution: its ``step`` runs on a Ray worker."""

    def __init__(self, env: gym.Env[Any, Any], executor: RayExecutor) -> None:
        super().__init__(env)
        self._executor = executor

    def step(self, action: Any) -> _StepTuple:
        try:
            result, stepped = self._executor._step(self.env, action)
        except ray.exceptions.RayError as exc:
            if not _lost(exc):
                raise
            self._executor._tracker.lost()
            reason = f"the Ray worker running this execution was lost and its retries ran out: {exc!r}"
            return None, math.nan, False, True, {"execution_lost": reason}
        _adopt_state(self.env, stepped)
        return result


class RayExecutor(concurrent.futures.Executor):
    """Runs real executions as Ray tasks, each with its own CPU and memory request.

    Pass it as ``GroupedRollout(..., executor=RayExecutor())``. For a submitted
    ``WorldModelWrapper.execute`` the real env's ``step`` runs on a worker node and the result, the
    stepped env state and the cost accounting come back to the driver (see the module docstring); if
    the env's ``sandbox`` is a :class:`RaySandbox`, the env stays on the driver and only the sandbox
    run travels. Any other picklable callable simply runs as a Ray task and its result comes back.

    Args:
        address: the Ray cluster (``"auto"``: the one ``ray start`` started on this machine; an address
            such as ``"10.0.0.1:6379"``; ``None``: ``ray.init()``'s default, which starts a private
            instance unless ``RAY_ADDRESS`` names one). An already initialised Ray session is reused.
        num_cpus: CPUs each execution requests (Ray places it on a node with that many free).
        memory_mb: memory each execution reserves in Ray's scheduler, or ``None`` for no reservation.
            It is a scheduling reservation, not a limit: the sandbox's own limits still apply.
        max_in_flight: executions in flight at once; ``submit`` blocks beyond it. ``None``: the
            cluster's CPUs at construction divided by ``num_cpus`` (at least 1).
        max_retries: times Ray reruns an execution whose worker or node died (exceptions raised by
            the callable itself are never retried).

    Raises:
        ConfigError: a value is out of range, or no cluster answers at ``address``.

    Example:
        >>> from wmrl_envs.rollouts import GroupedRollout  # doctest: +SKIP
        >>> with RayExecutor("auto", num_cpus=1, memory_mb=2048) as executor:  # doctest: +SKIP
        ...     rollout = GroupedRollout("wmrl/CostlyToy-v0", world_model, executor=executor)
        ...     groups = rollout.run(tasks, policy, anchors=[True, False])
        >>> executor.stats.lost  # doctest: +SKIP
        0
    """

    def __init__(
        self,
        address: str | None = "auto",
        *,
        num_cpus: float = 1.0,
        memory_mb: int | None = None,
        max_in_flight: int | None = None,
        max_retries: int = 1,
    ) -> None:
        _check_resources(num_cpus, memory_mb)
        if max_in_flight is not None and (
            isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int) or max_in_flight < 1
        ):
            raise ConfigError(
                f"max_in_flight={max_in_flight!r} must be a positive int or None (cluster size)"
            )
        _check_retries(max_retries)
        connect(address)
        if max_in_flight is None:
            cluster_cpus = float(ray.cluster_resources().get("CPU", 0.0))
            max_in_flight = max(1, int(cluster_cpus // num_cpus))
        self.max_in_flight = max_in_flight
        self._remote = ray.remote(_timed_call).options(
            **_resource_options(num_cpus, memory_mb), max_retries=max_retries, retry_exceptions=False
        )
        self._remote_step = ray.remote(_remote_step).options(
            **_resource_options(num_cpus, memory_mb), max_retries=max_retries, retry_exceptions=False
        )
        self._slots = threading.BoundedSemaphore(max_in_flight)
        self._threads = concurrent.futures.ThreadPoolExecutor(max_in_flight, thread_name_prefix="wmrl-ray")
        self._tracker = _Tracker()
        self._shutdown = False

    @property
    def stats(self) -> ExecutionStats:
        """A snapshot of what has run so far."""
        return self._tracker.snapshot()

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        """Schedule ``fn(*args, **kwargs)`` on the cluster; blocks while ``max_in_flight`` are running.

        Raises:
            RuntimeError: the executor was shut down.
        """
        if self._shutdown:
            raise RuntimeError("cannot submit to a RayExecutor after shutdown()")
        self._slots.acquire()
        self._tracker.submitted()
        try:
            wrapper = getattr(fn, "__self__", None)
            if (
                isinstance(wrapper, WorldModelWrapper)
                and getattr(fn, "__func__", None) is WorldModelWrapper.execute
            ):
                future: concurrent.futures.Future[Any] = self._threads.submit(self._execute, wrapper, *args)
            else:
                future = self._threads.submit(self._call, fn, args, kwargs)
        except BaseException:
            self._slots.release()
            raise
        future.add_done_callback(lambda _: self._slots.release())
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop accepting executions; with ``wait``, return once those in flight have come back.

        The Ray session itself is left running (a world-model pool may share it); ``ray.shutdown()``
        ends it.
        """
        self._shutdown = True
        self._threads.shutdown(wait=wait, cancel_futures=cancel_futures)

    def _call(self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
        start = time.perf_counter()
        try:
            result: T = self._tracker.collect(self._remote.remote(fn, args, kwargs), start)
        except ray.exceptions.RayError as exc:
            if not _lost(exc):
                raise
            self._tracker.lost()
            raise SandboxError(
                f"the Ray worker running {getattr(fn, '__qualname__', fn)!r} was lost and its retries ran "
                f"out ({exc!r}); the execution's result is unknown"
            ) from exc
        return result

    def _execute(self, wrapper: WorldModelWrapper[Any, Any], pending: PendingStep) -> None:
        # The wrapper's own execute() runs here on the driver (ledger, timing, truncation). With a
        # RaySandbox only the sandbox run is remote; otherwise the real env's step is, through a
        # stand-in env swapped in for this one call and swapped back whatever happens.
        if isinstance(getattr(wrapper.unwrapped, "sandbox", None), RaySandbox):
            wrapper.execute(pending)
            return
        env = wrapper.env
        wrapper.env = _RemoteStepEnv(env, self)
        try:
            wrapper.execute(pending)
        finally:
            wrapper.env = env

    def _step(self, env: gym.Env[Any, Any], action: Any) -> tuple[_StepTuple, gym.Env[Any, Any]]:
        start = time.perf_counter()
        try:
            ref = self._remote_step.remote(env, action)
        except TypeError as exc:  # Ray could not pickle the env
            raise ConfigError(
                f"{type(env.unwrapped).__name__} cannot be shipped to a Ray worker ({exc}); give it a "
                "RaySandbox (sandbox=RaySandbox('local')) so that only its sandbox runs remotely, or make "
                "the env picklable"
            ) from exc
        stepped: tuple[_StepTuple, gym.Env[Any, Any]] = self._tracker.collect(ref, start)
        return stepped


_WORKER_SANDBOXES: dict[str, Sandbox] = {}
"""The sandboxes a Ray worker process has built, by spec: one per process, kept warm across runs."""


def _run_sandbox(
    backend: str, options: dict[str, Any], request: ExecutionRequest
) -> tuple[tuple[ExecutionResult, bytes | None], float, str]:
    def run() -> tuple[ExecutionResult, bytes | None]:
        from wmrl_envs.sandbox import make_sandbox

        spec = repr((backend, sorted(options.items())))
        if spec not in _WORKER_SANDBOXES:
            _WORKER_SANDBOXES[spec] = make_sandbox(backend, **options)  # type: ignore[arg-type]
        result = _WORKER_SANDBOXES[spec].run(request)
        if result.output is None:
            return result, None
        data = result.output.read_bytes()  # already size-capped by the sandbox
        result.output.unlink(missing_ok=True)
        return dataclasses.replace(result, output=None), data

    return _timed_call(run, (), {})


class RaySandbox:
    """A :class:`~wmrl_envs.sandbox.Sandbox` whose runs happen on Ray worker nodes.

    Use it when the environment itself should stay on the driver (it shares a cache, a meter or other
    state with the trainer, or it cannot be pickled): the env steps on the driver and only
    ``sandbox.run`` travels, as a Ray task reserving the request's memory. Each Ray worker process
    builds the backend once (``make_sandbox(backend, **options)``) and keeps it, so a warm pool stays
    warm on its node. The copied-out file comes back as bytes and is written to a driver-side
    directory (removed by :meth:`close`). A run whose node died and whose retries ran out raises
    :class:`~wmrl_algos.errors.SandboxError`, which an env reports as an unknown score (``KaggleEnv``:
    status ``sandbox_error``); the backend's own errors are raised as they are.

    The request's input paths must exist on every worker node (the built-in suite: run
    ``wmrl suite build`` on each node, or share ``~/.cache/wmrl``).

    Args:
        backend: the backend to build on the workers (``"local"``: bubblewrap must be installed on each
            worker; ``"docker"``: an engine and the sandbox image on each worker).
        options: keyword arguments of ``make_sandbox`` (e.g. ``{"warm": 2}``).
        address: the Ray cluster, as for :class:`RayExecutor`.
        num_cpus: CPUs each run requests.
        memory_mb: memory each run reserves; ``None`` reserves the request's own ``memory_mb``.
        max_retries: times Ray reruns a run whose worker or node died.

    Raises:
        ConfigError: a value is out of range, or no cluster answers at ``address``.

    Example:
        >>> from wmrl_envs.kaggle.env import KaggleEnv  # doctest: +SKIP
        >>> env = KaggleEnv("concrete-strength", sandbox=RaySandbox("local"))  # doctest: +SKIP
    """

    def __init__(
        self,
        backend: str = "local",
        *,
        options: Mapping[str, Any] | None = None,
        address: str | None = "auto",
        num_cpus: float = 1.0,
        memory_mb: int | None = None,
        max_retries: int = 1,
    ) -> None:
        if not isinstance(backend, str) or not backend:
            raise ConfigError(f"backend={backend!r} must name a sandbox backend, e.g. 'local' or 'docker'")
        _check_resources(num_cpus, memory_mb)
        _check_retries(max_retries)
        connect(address)
        self.backend = backend
        self.options = dict(options or {})
        self.name = f"ray:{backend}"
        self._memory_mb = memory_mb
        self._remote = ray.remote(_run_sandbox)
        self._task_options: dict[str, Any] = {
            "num_cpus": num_cpus, "max_retries": max_retries, "retry_exceptions": False
        }
        self._outputs = Path(tempfile.mkdtemp(prefix="wmrl-ray-outputs-"))
        self._tracker = _Tracker()

    @property
    def stats(self) -> ExecutionStats:
        """A snapshot of the runs so far (where they ran, how long, how many were lost)."""
        return self._tracker.snapshot()

    def run(self, request: ExecutionRequest) -> ExecutionResult:
        """Run ``request`` on a worker node and bring its result (and copied-out file) back.

        Raises:
            SandboxError: the run's node died and its retries ran out, or the backend failed there.
        """
        memory_mb = self._memory_mb if self._memory_mb is not None else request.memory_mb
        start = time.perf_counter()
        self._tracker.submitted()
        try:
            task = self._remote.options(**self._task_options, memory=memory_mb * _BYTES_PER_MB)
            ref = task.remote(self.backend, self.options, request)
            result, data = self._tracker.collect(ref, start)
        except ray.exceptions.RayError as exc:
            if not _lost(exc):
                raise
            self._tracker.lost()
            raise SandboxError(
                f"the Ray worker running this sandboxed execution was lost and its retries ran out "
                f"({exc!r}); the execution's result is unknown"
            ) from exc
        if data is None:
            return result
        path = self._outputs / f"{uuid.uuid4().hex}-{request.output_name}"
        path.write_bytes(data)
        return dataclasses.replace(result, output=path)

    def close(self) -> None:
        """Remove the copied-out files kept on the driver (the workers' sandboxes end with them)."""
        shutil.rmtree(self._outputs, ignore_errors=True)


class _WorldModelActor:
    """One Ray actor holding one loaded world model (the factory runs again after a restart)."""

    def __init__(self, factory: Callable[[], WorldModel]) -> None:
        model = factory()
        if not isinstance(model, WorldModel):
            raise ConfigError(
                f"factory() returned {model!r}, not a WorldModel; it must build one with a `name` and a "
                "batched `predict(queries)`"
            )
        self._model = model

    def name(self) -> str:
        return str(self._model.name)

    def predict(self, queries: Sequence[WorldModelQuery]) -> list[Prediction]:
        return list(self._model.predict(queries))


class RayWorldModelPool:
    """A world model served by ``num_actors`` Ray actors: one model load per actor, batches split across them.

    It is itself a :class:`~wmrl_envs.world_model.WorldModel`, so it goes wherever one goes
    (``GroupedRollout``, ``WorldModelWrapper``, the trainer). A ``predict`` call splits its batch into
    contiguous chunks, one per actor, and returns the predictions in order. A dead actor is restarted
    by Ray (the factory runs again on the new instance) and its chunk retried; if that fails too, the
    chunk's predictions are unknown (``Prediction(reward=None, info={"error": ...})``) and
    :attr:`lost_queries` counts them. An exception raised by the model itself is raised as usual.

    Args:
        factory: builds the world model; runs once in each actor, so it must be picklable (a
            module-level function or class, or a ``functools.partial`` of one).
        num_actors: actors in the pool.
        address: the Ray cluster, as for :class:`RayExecutor`.
        num_cpus: CPUs each actor holds.
        memory_mb: memory each actor reserves in Ray's scheduler, or ``None``.
        num_gpus: GPUs each actor holds (0 on CPU-only clusters).
        max_restarts: times Ray restarts a dead actor (each restart reloads the model).

    Raises:
        ConfigError: a value is out of range, no cluster answers, or the factory builds no world model.

    Example:
        >>> import functools
        >>> from wmrl_envs.toy import ToyWorldModel
        >>> factory = functools.partial(ToyWorldModel, bias=0.0)
        >>> pool = RayWorldModelPool(factory, num_actors=2)  # doctest: +SKIP
        >>> len(pool.predict(queries)) == len(queries), pool.lost_queries  # doctest: +SKIP
        (True, 0)
    """

    def __init__(
        self,
        factory: Callable[[], WorldModel],
        *,
        num_actors: int = 1,
        address: str | None = "auto",
        num_cpus: float = 1.0,
        memory_mb: int | None = None,
        num_gpus: float = 0.0,
        max_restarts: int = 1,
    ) -> None:
        if not callable(factory):
            raise ConfigError(
                f"factory={factory!r} is not callable; pass a function that builds the world model"
            )
        if isinstance(num_actors, bool) or not isinstance(num_actors, int) or num_actors < 1:
            raise ConfigError(f"num_actors={num_actors!r} must be a positive int, e.g. 2")
        _check_resources(num_cpus, memory_mb)
        if isinstance(num_gpus, bool) or not isinstance(num_gpus, (int, float)) or num_gpus < 0:
            raise ConfigError(f"num_gpus={num_gpus!r} must be a number >= 0")
        if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < 0:
            raise ConfigError(
                f"max_restarts={max_restarts!r} must be an int >= 0 (0: a dead actor stays dead)"
            )
        connect(address)
        actor_class = ray.remote(_WorldModelActor).options(
            **_resource_options(num_cpus, memory_mb),
            num_gpus=num_gpus,
            max_restarts=max_restarts,
            max_task_retries=max_restarts,
        )
        self.actors: tuple[Any, ...] = tuple(actor_class.remote(factory) for _ in range(num_actors))
        try:
            names = ray.get([actor.name.remote() for actor in self.actors])
        except ray.exceptions.RayError as exc:
            self.shutdown()
            cause = exc.as_instanceof_cause() if isinstance(exc, ray.exceptions.RayTaskError) else exc
            if isinstance(cause, ConfigError):
                raise ConfigError(str(cause)) from exc
            raise ConfigError(f"the world-model actors could not load the model: {exc!r}") from exc
        self.name: str = names[0]
        self._lock = threading.Lock()
        self._lost_queries = 0

    @property
    def lost_queries(self) -> int:
        """Queries answered ``None`` because their actor died and could not be restarted in time."""
        with self._lock:
            return self._lost_queries

    def predict(self, queries: Sequence[WorldModelQuery]) -> list[Prediction]:
        """Predict every query, the batch split across the actors; in order, one per query."""
        if not queries:
            return []
        size = math.ceil(len(queries) / len(self.actors))
        chunks = [list(queries[start : start + size]) for start in range(0, len(queries), size)]
        refs = [actor.predict.remote(chunk) for actor, chunk in zip(self.actors, chunks, strict=False)]
        predictions: list[Prediction] = []
        for ref, chunk in zip(refs, chunks, strict=True):
            try:
                predictions.extend(ray.get(ref))
            except ray.exceptions.RayError as exc:
                if not _lost(exc):
                    raise
                with self._lock:
                    self._lost_queries += len(chunk)
                error = f"world-model actor lost and not restarted in time: {exc!r}"
                predictions.extend(Prediction(reward=None, info={"error": error}) for _ in chunk)
        return predictions

    def shutdown(self) -> None:
        """Kill the actors (their models are unloaded); the pool cannot predict afterwards."""
        for actor in self.actors:
            ray.kill(actor, no_restart=True)

    def __enter__(self) -> RayWorldModelPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()
