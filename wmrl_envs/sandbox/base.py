"""The sandbox contract: run one untrusted Python solution in isolation and report what happened.

Why a separate contract: the Kaggle env, the fidelity harness and the benchmarks all execute
untrusted code, and each backend (bubblewrap, Docker, plain subprocess) has different costs and
guarantees. They share one request/result shape so they are interchangeable, and a ``strict`` backend
refuses to run rather than silently degrade isolation.

Layout seen by the solution (every backend): the current directory is a fresh, writable, size-capped
work dir; the public input files are read-only under ``./input/``; the solution writes its submission
to ``./submission.csv``. Hidden answers are never mounted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

__all__ = ["RunStatus", "ExecutionRequest", "ExecutionResult", "Sandbox"]

RunStatus = Literal["ok", "error", "timeout", "killed", "sandbox_error"]
"""``ok``: exit code 0. ``error``: non-zero exit (a Python exception, ``sys.exit(1)``). ``timeout``:
wall-clock limit hit, process tree killed. ``killed``: killed by a resource limit (memory, pids,
output, disk). ``sandbox_error``: the sandbox itself failed; the outcome is unknown."""


@dataclass(frozen=True)
class ExecutionRequest:
    """One execution.

    Attributes:
        code: the Python source to run as ``solution.py``.
        inputs: read-only input files, ``name under ./input/ -> host path``.
        timeout_s: wall-clock limit; the whole process tree is killed when it passes.
        memory_mb: memory limit for the whole run.
        max_pids: process/thread limit.
        max_output_bytes: stdout and stderr are each truncated to this many bytes (tail kept).
        disk_mb: cap on what the run may write in its work dir.
        output_name: the file copied out after the run (regular file only, size-capped).
        max_output_file_mb: cap on the copied-out file's size.
        env: extra environment variables (the host's environment is never inherited).
    """

    code: str
    inputs: Mapping[str, Path] = field(default_factory=dict)
    timeout_s: float = 60.0
    memory_mb: int = 2048
    max_pids: int = 64
    max_output_bytes: int = 64 * 1024
    disk_mb: int = 256
    output_name: str = "submission.csv"
    max_output_file_mb: int = 64
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ExecutionResult:
    """What one execution did.

    Attributes:
        status: see :data:`RunStatus`.
        exit_code: the solution's exit code, when it exited by itself.
        stdout: the (tail of the) captured stdout, decoded with replacement.
        stderr: the (tail of the) captured stderr.
        wall_s: wall-clock seconds of the run (sandbox start included).
        cpu_s: CPU seconds used by the run's process tree, when measurable.
        max_rss_mb: peak resident memory, when measurable.
        output: host path of the copied-out output file (a regular file outside the sandbox), or
            ``None`` when the solution wrote none or it was rejected.
        output_rejected: why the output file was rejected (symlink, FIFO, too large), if it was.
        detail: a human-readable note on limits hit or sandbox failures.
        backend: name of the sandbox backend that ran it.
    """

    status: RunStatus
    exit_code: int | None
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float | None = None
    max_rss_mb: float | None = None
    output: Path | None = None
    output_rejected: str | None = None
    detail: str = ""
    backend: str = ""


@runtime_checkable
class Sandbox(Protocol):
    """A backend that executes :class:`ExecutionRequest` s in isolation."""

    name: str

    def run(self, request: ExecutionRequest) -> ExecutionResult:
        """Execute one request; never raises for the solution's own failures (those are statuses)."""
        ...

    def close(self) -> None:
        """Release pooled resources (warm workers, containers)."""
        ...
