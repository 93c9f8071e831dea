"""Start a process tree, capture the tail of its output, and end it at a wall-clock deadline.

Why not ``subprocess.run(timeout=...)``: it kills only the direct child, keeps all output in memory
(a flood becomes the host's problem), and reports no resource usage. Here the child leads a new
session, stdout and stderr are drained by threads into :class:`TailBuffer` s, a waiter thread reaps it
with ``wait4`` (CPU time and peak RSS of the whole reaped tree), and at the deadline the session is
SIGKILLed and an optional extra killer (the cgroup sweep) runs. Starting and waiting are separate so a
warm pool can start a process ahead of time and only start the clock when the code is handed over.

Nothing may outlive its owner: the child is forked by the process-wide launcher thread
(:func:`~wmrl_envs.sandbox.lifetime.launcher_call`) and, before it executes anything else, arms a
``SIGKILL`` parent-death signal (``setpriv --pdeathsig``) and checks that its parent is still the
owner (else it exits with :data:`~wmrl_envs.sandbox.lifetime.OWNER_GONE_EXIT`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO

from wmrl_envs.sandbox.lifetime import OWNER_GONE_EXIT, launcher_call, owner_guard
from wmrl_envs.sandbox.limits import TailBuffer

__all__ = ["ManagedProcess", "ProcessOutcome"]


@dataclass(frozen=True)
class ProcessOutcome:
    """How a managed process ended.

    Attributes:
        returncode: exit code, or minus the signal number when a signal ended it.
        timed_out: the deadline passed and the tree was killed.
        stdout: captured stdout tail.
        stderr: captured stderr tail.
        stdout_truncated: stdout was longer than the cap.
        stderr_truncated: stderr was longer than the cap.
        wall_s: seconds from :meth:`ManagedProcess.start_clock` to the end.
        cpu_s: user + system CPU seconds of the reaped tree.
        max_rss_mb: peak resident set of the largest reaped process.
    """

    returncode: int
    timed_out: bool
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    wall_s: float
    cpu_s: float
    max_rss_mb: float


_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)
_SETPRIV = shutil.which("setpriv", path="/usr/sbin:/usr/bin:/sbin:/bin")


def _arm_in_child(owner: int) -> Callable[[], None]:
    """A ``preexec_fn`` that arms the death signal itself (used only where ``setpriv`` is missing)."""

    def arm() -> None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != owner:
            os._exit(OWNER_GONE_EXIT)

    return arm


def _dying_with_owner(argv: Sequence[str]) -> tuple[list[str], Callable[[], None] | None]:
    """``argv`` armed with a parent-death SIGKILL and an owner check, and the ``preexec_fn`` if one is needed.

    ``setpriv --pdeathsig`` then a shell guard cost about 10 ms; a ``preexec_fn`` forces ``fork``
    instead of ``vfork`` and costs about 25 ms in a large trainer process, so it is the fallback.
    """
    if _SETPRIV is None:
        return list(argv), _arm_in_child(os.getpid())
    return [_SETPRIV, "--pdeathsig", "KILL", "--", *owner_guard(list(argv))], None


def _drain(stream: IO[bytes], buffer: TailBuffer) -> None:
    with contextlib.suppress(OSError, ValueError):
        while chunk := os.read(stream.fileno(), 65536):
            buffer.write(chunk)
    with contextlib.suppress(OSError):
        stream.close()


class ManagedProcess:
    """One process tree with captured output, a deadline and resource accounting.

    Args:
        argv: the command.
        env: the complete environment (nothing is inherited).
        cwd: working directory.
        max_output_bytes: bytes of stdout and of stderr kept (the tail).
        pass_fds: file descriptors to keep open in the child.
        extra_kill: called after the session is SIGKILLed (e.g. a cgroup sweep).

    Example:
        >>> process = ManagedProcess(["/bin/echo", "hi"], env={}, cwd="/", max_output_bytes=100)
        >>> process.wait(timeout_s=5.0).stdout
        'hi\\n'
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str,
        max_output_bytes: int,
        pass_fds: Sequence[int] = (),
        extra_kill: Callable[[], object] | None = None,
    ) -> None:
        self._extra_kill = extra_kill
        self._stdout = TailBuffer(max_output_bytes)
        self._stderr = TailBuffer(max_output_bytes)
        armed, preexec = _dying_with_owner(argv)
        self._popen = launcher_call(lambda: subprocess.Popen(
            armed,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            pass_fds=tuple(pass_fds),
            start_new_session=True,
            close_fds=True,
            preexec_fn=preexec,
        ))
        self.pid = self._popen.pid
        self._status: tuple[int, float, float] | None = None
        self._done = threading.Event()
        self._started = time.monotonic()
        assert self._popen.stdout is not None and self._popen.stderr is not None
        self._readers = [
            threading.Thread(target=_drain, args=(self._popen.stdout, self._stdout), daemon=True),
            threading.Thread(target=_drain, args=(self._popen.stderr, self._stderr), daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        threading.Thread(target=self._reap, daemon=True).start()

    def _reap(self) -> None:
        _, status, usage = os.wait4(self.pid, 0)
        self._status = (
            os.waitstatus_to_exitcode(status),
            usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss / 1024.0,
        )
        self._popen.returncode = self._status[0]
        self._done.set()

    @property
    def finished(self) -> bool:
        """Whether the process has already exited."""
        return self._done.is_set()

    def start_clock(self) -> None:
        """Restart the wall clock (a warm process starts it when its code is handed over)."""
        self._started = time.monotonic()

    def send(self, data: bytes) -> None:
        """Write to the process's stdin and close it (a dead reader is ignored)."""
        stdin = self._popen.stdin
        if stdin is None:
            return
        with contextlib.suppress(BrokenPipeError, OSError, ValueError):
            stdin.write(data)
        with contextlib.suppress(BrokenPipeError, OSError, ValueError):
            stdin.close()

    def kill(self) -> None:
        """SIGKILL the whole session, then run the extra killer."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        if self._extra_kill is not None:
            self._extra_kill()

    def join(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the process to be reaped (no killing); True when it was."""
        return self._done.wait(timeout_s)

    def wait(self, timeout_s: float) -> ProcessOutcome:
        """Wait until exit or the deadline (counted from the clock start), killing the tree at the deadline.

        Args:
            timeout_s: wall-clock limit in seconds.

        Returns:
            The outcome; output readers are joined so the captured tails are complete.
        """
        self.send(b"")
        remaining = timeout_s - (time.monotonic() - self._started)
        timed_out = not self._done.wait(max(remaining, 0.0))
        if timed_out:
            self.kill()
            self._done.wait()
        wall = time.monotonic() - self._started
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        for reader in self._readers:
            reader.join(timeout=5.0)
        assert self._status is not None
        returncode, cpu, rss = self._status
        return ProcessOutcome(
            returncode=returncode,
            timed_out=timed_out,
            stdout=self._stdout.text(),
            stderr=self._stderr.text(),
            stdout_truncated=self._stdout.truncated,
            stderr_truncated=self._stderr.truncated,
            wall_s=wall,
            cpu_s=cpu,
            max_rss_mb=rss,
        )
