"""Turning what a run did into an :class:`ExecutionResult`: one place for every backend.

Why shared: the reward ladder reads ``status``, so ``timeout`` versus ``killed`` versus ``error`` must
mean the same thing whichever backend ran the code. Precedence: the wall clock first (a timed-out run
is ``timeout`` even if a limit was also hit), then a resource limit that explains a non-zero exit
(``killed``), then the exit code. Code that cannot even be written as a source file is a result too
(:func:`unencodable_code_result`), never an exception: the policy wrote it.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from pathlib import Path

from wmrl_envs.sandbox.base import ExecutionResult, RunStatus
from wmrl_envs.sandbox.process import ProcessOutcome
from wmrl_envs.sandbox.workdir import CopiedOutput

__all__ = ["build_result", "signal_name", "unencodable_code_result"]


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; ``signal 99`` for unknown numbers."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def unencodable_code_result(code: str, *, backend: str) -> ExecutionResult | None:
    """The result for code that is not valid Unicode text (a lone surrogate), or None for any other code.

    Why: a solution is written as a UTF-8 ``solution.py``; a ``str`` holding a lone surrogate such as
    ``'\\ud800'`` (which a policy can produce) has no UTF-8 form, so ``str.encode`` raised
    ``UnicodeEncodeError`` out of every backend's ``run``. Such code is not run: it is an ``error``
    with no exit code and a detail naming the character and its position.

    Example:
        >>> result = unencodable_code_result("x = '\\ud800'", backend="local")
        >>> result.status, result.exit_code, "lone surrogate" in result.detail
        ('error', None, True)
        >>> unencodable_code_result("print('ok')", backend="local") is None
        True
    """
    try:
        code.encode("utf-8")
    except UnicodeEncodeError as error:
        character = ascii(code[error.start])
        return ExecutionResult(
            status="error", exit_code=None, stdout="", stderr="", wall_s=0.0, backend=backend,
            detail=f"not run: the code is not valid Unicode text (lone surrogate {character} at character "
                   f"{error.start}); a solution must be UTF-8 encodable",
        )
    return None


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
