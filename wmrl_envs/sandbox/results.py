"""Turning what a run did into an :class:`ExecutionResult`: one place for every backend.

Why shared: the reward ladder reads ``status``, so ``timeout`` versus ``killed`` versus ``error`` must
mean the same thing whichever backend ran the code. Precedence: the wall clock first (a timed-out run
is ``timeout`` even if a limit was also hit), then a resource limit that explains a non-zero exit
(``killed``), then the exit code.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from pathlib import Path

from wmrl_envs.sandbox.base import ExecutionResult, RunStatus
from wmrl_envs.sandbox.process import ProcessOutcome
from wmrl_envs.sandbox.workdir import CopiedOutput

__all__ = ["build_result", "signal_name"]


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; ``signal 99`` for unknown numbers."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def build_result(
    outcome: ProcessOutcome,
    *,
    backend: str,
    limits_hit: Sequence[str] = (),
    copied: CopiedOutput | None = None,
    notes: Sequence[str] = (),
    max_rss_mb: float | None = None,
    cpu_s: float | None = None,
) -> ExecutionResult:
    """Classify a finished run.

    Args:
        outcome: how the process ended.
        backend: the backend's name.
        limits_hit: resource limits known to have been hit (``"memory limit"``, ``"pids limit"``...).
        copied: the output copy, if one was attempted.
        notes: extra human-readable notes for ``detail``.
        max_rss_mb: peak memory, when the backend measured it better than ``wait4`` did.
        cpu_s: CPU seconds, when the backend measured them better than ``wait4`` did.

    Returns:
        The result.
    """
    code = outcome.returncode
    details = list(notes)
    exit_code: int | None = code if code >= 0 else None
    if code < 0:
        details.append(f"ended by {signal_name(-code)}")
    elif code > 128 and code - 128 in {int(s) for s in signal.Signals}:
        details.append(f"exit code {code} (probably {signal_name(code - 128)})")
    status: RunStatus
    if outcome.timed_out:
        status = "timeout"
        exit_code = None
        details.insert(0, f"wall-clock limit hit after {outcome.wall_s:.2f} s; process tree killed")
    elif limits_hit and code != 0:
        status = "killed"
        details.insert(0, "killed by resource limit: " + ", ".join(limits_hit))
    elif code == 0:
        status = "ok"
        if limits_hit:
            details.append("limits hit but the solution recovered: " + ", ".join(limits_hit))
    else:
        status = "error"
    if outcome.stdout_truncated:
        details.append("stdout truncated (tail kept)")
    if outcome.stderr_truncated:
        details.append("stderr truncated (tail kept)")
    output: Path | None = None
    rejected: str | None = None
    if copied is not None:
        output, rejected = copied.path, copied.rejected
        if rejected:
            details.append(f"output rejected: {rejected}")
    return ExecutionResult(
        status=status,
        exit_code=exit_code,
        stdout=outcome.stdout,
        stderr=outcome.stderr,
        wall_s=outcome.wall_s,
        cpu_s=cpu_s if cpu_s is not None else outcome.cpu_s,
        max_rss_mb=max_rss_mb if max_rss_mb is not None else outcome.max_rss_mb,
        output=output,
        output_rejected=rejected,
        detail="; ".join(details),
        backend=backend,
    )
