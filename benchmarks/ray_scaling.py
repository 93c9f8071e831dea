"""Ray scaling: executions per minute against the number of Ray worker nodes, and Ray's cost per task.

Why: :class:`~wmrl_adapters.ray_exec.RayExecutor` exists so that anchor executions spread over a
cluster, and the question a user has is how the rate grows with workers and what each task pays for
going through Ray. This measures it on a real Ray cluster started here (a head without CPUs plus W
worker nodes of one CPU each, each its own raylet, ``ray.cluster_utils.Cluster``), for two workloads:

1. ``sandbox``: a real sandboxed execution (a small numpy script in the ``--sandbox`` backend, the
   same ``Sandbox.run`` the Kaggle env calls). It is CPU-bound, so on a machine with few cores the
   curve saturates at the core count, whatever W says.
2. ``sleep``: a sleep-bound execution of ``--sleep-seconds`` (a stand-in for an execution that waits
   on something else: a remote GPU, an external service). It shows the scheduling overhead and the
   shape of the scaling curve with the CPU out of the way; the ideal is ``W * 60 / sleep`` per minute.

Each point runs the same executions on a local ``ThreadPoolExecutor`` with W threads, the executor
``GroupedRollout`` uses by default. The overhead per task is the mean latency of a no-op task
submitted and awaited one at a time, Ray against the thread pool.

Usage: ``python benchmarks/ray_scaling.py [--smoke] [--workers 1,2,3,4] [--out-dir DIR]``.
Writes ``results.csv``, ``overhead.csv``, ``results.md`` and ``ray_scaling.png`` to the output dir.
"""

from __future__ import annotations

import concurrent.futures
import csv
import dataclasses
import functools
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from wmrl_adapters.cli import parse_dataclass_args

from wmrl_algos.errors import ConfigError, SandboxError
from wmrl_envs.sandbox import ExecutionRequest, Sandbox, make_sandbox

OBJECT_STORE_MB = 80
SCRIPT = (
    "import numpy as np\n"
    "a = np.random.default_rng(0).random((200, 200))\n"
    "for _ in range(5):\n"
    "    np.linalg.svd(a)\n"
    "open('submission.csv', 'w').write('id\\n1\\n')\n"
)
"""The sandboxed solution: about half a CPU-second of numpy, then a submission file."""


@dataclass(frozen=True)
class Args:
    """Benchmark settings (every field is a command-line flag)."""

    out_dir: str = field(default="benchmarks/results/ray_scaling", metadata={"help": "where outputs go"})
    workers: str = field(default="1,2,3,4", metadata={"help": "comma-separated worker-node counts"})
    executions: int = field(default=8, metadata={"help": "sandbox executions per point"})
    sleep_executions: int = field(default=24, metadata={"help": "sleep-bound executions per point"})
    sleep_seconds: float = field(default=0.5, metadata={"help": "length of one sleep-bound execution"})
    overhead_tasks: int = field(default=30, metadata={"help": "no-op tasks for the per-task latency"})
    sandbox: str = field(default="local", metadata={"help": "sandbox backend: local, docker or unsafe"})
    smoke: bool = field(default=False, metadata={"help": "tiny budget: 1 and 2 workers, a few tasks"})

    def __post_init__(self) -> None:
        if not self.worker_counts or min(self.worker_counts) < 1:
            raise ConfigError(f"workers={self.workers!r} must list positive ints, e.g. '1,2,4'")
        for name in ("executions", "sleep_executions", "overhead_tasks"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)!r} must be at least 1")
        if not self.sleep_seconds > 0:
            raise ConfigError(f"sleep_seconds={self.sleep_seconds!r} must be > 0, e.g. 0.5")

    @property
    def worker_counts(self) -> tuple[int, ...]:
        """The worker-node counts to measure, in order."""
        try:
            return tuple(int(part) for part in self.workers.split(",") if part.strip())
        except ValueError as exc:
            raise ConfigError(f"workers={self.workers!r} must be comma-separated ints, e.g. '1,2,4'") from exc

    def budget(self) -> Args:
        """These settings, shrunk to a few seconds per point with ``--smoke``."""
        if not self.smoke:
            return self
        return dataclasses.replace(
            self, workers="1,2", executions=1, sleep_executions=4, sleep_seconds=0.2, overhead_tasks=5
        )


@dataclass(frozen=True)
class Point:
    """One measured (workers, workload, executor) point."""

    workers: int
    workload: str
    executor: str
    executions: int
    wall_s: float
    executions_per_min: float
    ideal_per_min: float | None


@dataclass(frozen=True)
class Overhead:
    """Mean latency of a no-op task submitted and awaited one at a time, Ray against threads."""

    workers: int
    ray_latency_ms: float
    threads_latency_ms: float
    ray_overhead_ms: float


def sandbox_execution(sandbox: Sandbox) -> str:
    """Run :data:`SCRIPT` once in ``sandbox`` (shipped to the worker with the task, as an env's is).

    Raises:
        SandboxError: the run did not finish with status ``ok``.
    """
    result = sandbox.run(ExecutionRequest(code=SCRIPT, timeout_s=120, memory_mb=512))
    if result.output is not None:
        result.output.unlink(missing_ok=True)
    if result.status != "ok":
        raise SandboxError(f"the benchmark script ended with status {result.status!r}: {result.detail}")
    return result.status


def sleep_execution(seconds: float) -> float:
    """Sleep for ``seconds``: an execution bound by waiting, not by this machine's CPUs."""
    time.sleep(seconds)
    return seconds


def _noop() -> int:
    return os.getpid()


def _rate(executor: concurrent.futures.Executor, task: Callable[[], Any], n: int) -> float:
    start = time.perf_counter()
    for future in [executor.submit(task) for _ in range(n)]:
        future.result()
    return time.perf_counter() - start


def _latency(executor: concurrent.futures.Executor, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        executor.submit(_noop).result()
    return (time.perf_counter() - start) / n


def measure(args: Args, workers: int) -> tuple[list[Point], Overhead]:
    """All points for ``workers`` worker nodes: a fresh cluster, each workload on Ray and on threads."""
    import ray
    from wmrl_adapters.ray_exec import RayExecutor, start_local_cluster

    workloads: dict[str, tuple[Callable[[], Any], int, float | None]] = {
        "sandbox": (functools.partial(sandbox_execution, make_sandbox(args.sandbox)), args.executions, None),
        "sleep": (
            functools.partial(sleep_execution, args.sleep_seconds),
            args.sleep_executions,
            workers * 60.0 / args.sleep_seconds,
        ),
    }
    cluster = start_local_cluster(workers, object_store_mb=OBJECT_STORE_MB)
    points: list[Point] = []
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        with (
            RayExecutor(num_cpus=1, max_in_flight=workers, max_retries=0) as on_ray,
            concurrent.futures.ThreadPoolExecutor(workers) as on_threads,
        ):
            for executor in (on_ray, on_threads):  # start every worker process and sandbox first
                _rate(executor, workloads["sandbox"][0], workers)
            for name, (task, n, ideal) in workloads.items():
                for label, executor in (("ray", on_ray), ("threads", on_threads)):
                    wall = _rate(executor, task, n)
                    points.append(Point(workers, name, label, n, wall, n * 60.0 / wall, ideal))
            on_ray_ms = 1000 * _latency(on_ray, args.overhead_tasks)
            on_threads_ms = 1000 * _latency(on_threads, args.overhead_tasks)
            overhead = Overhead(workers, on_ray_ms, on_threads_ms, on_ray_ms - on_threads_ms)
    finally:
        ray.shutdown()
        cluster.shutdown()
    return points, overhead


def _write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _plot(points: Sequence[Point], path: Path) -> None:
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    for axis, workload in zip(axes, ("sandbox", "sleep"), strict=True):
        for label in ("ray", "threads"):
            series = [p for p in points if p.workload == workload and p.executor == label]
            axis.plot([p.workers for p in series], [p.executions_per_min for p in series], "o-", label=label)
        ideal = [p for p in points if p.workload == workload and p.executor == "ray" and p.ideal_per_min]
        if ideal:
            axis.plot([p.workers for p in ideal], [p.ideal_per_min for p in ideal], "k--", label="ideal")
        axis.set_title(f"{workload} executions")
        axis.set_xlabel("Ray worker nodes (threads for the local pool)")
        axis.set_ylabel("executions per minute")
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _markdown(args: Args, points: Sequence[Point], overheads: Sequence[Overhead]) -> str:
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    lines = [
        f"# Ray scaling ({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC)",
        "",
        f"Machine: {os.cpu_count()} CPUs, load average at the end {load} (shared: treat the figures as "
        f"orders of magnitude). Cluster: a head without CPUs plus W worker nodes of 1 CPU each (one raylet "
        f"each), on this one machine. Sandbox backend `{args.sandbox}`; sleep-bound executions of "
        f"{args.sleep_seconds} s.",
        "",
        "## Executions per minute",
        "",
        "| workers | workload | executor | executions | wall s | executions/min | ideal/min |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in points:
        ideal = "" if p.ideal_per_min is None else f"{p.ideal_per_min:.0f}"
        lines.append(
            f"| {p.workers} | {p.workload} | {p.executor} | {p.executions} | {p.wall_s:.2f} | "
            f"{p.executions_per_min:.1f} | {ideal} |"
        )
    lines += [
        "",
        "## Overhead per task (no-op task, submitted and awaited one at a time)",
        "",
        "| workers | Ray ms | thread pool ms | Ray overhead ms |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {o.workers} | {o.ray_latency_ms:.2f} | {o.threads_latency_ms:.3f} | {o.ray_overhead_ms:.2f} |"
        for o in overheads
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and write its tables and plot."""
    args = parse_dataclass_args(Args, argv, __doc__.split("\n")[0]).budget()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    points: list[Point] = []
    overheads: list[Overhead] = []
    for workers in args.worker_counts:
        measured, overhead = measure(args, workers)
        points += measured
        overheads.append(overhead)
        print(f"workers={workers}: " + ", ".join(
            f"{p.workload}/{p.executor} {p.executions_per_min:.1f}/min" for p in measured
        ) + f", Ray overhead {overhead.ray_overhead_ms:.2f} ms/task", flush=True)
    _write_csv(out / "results.csv", [dataclasses.asdict(p) for p in points])
    _write_csv(out / "overhead.csv", [dataclasses.asdict(o) for o in overheads])
    (out / "results.md").write_text(_markdown(args, points, overheads))
    _plot(points, out / "ray_scaling.png")
    print(f"wrote {out}/results.md, results.csv, overhead.csv, ray_scaling.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
