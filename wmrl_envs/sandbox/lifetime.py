"""Tie every sandbox resource to the process that owns it, and sweep what dead owners left behind.

Why: a trainer is killed (SIGKILL, OOM, a preempted node) at arbitrary moments, and whatever a run
created on the host (a tmpfs mount, cgroups, a copied-out submission, a container, the solution's
processes) must not outlive it. Two mechanisms, because neither alone covers every moment:

* **Death signals** for processes: every sandbox process is started by one long-lived thread
  (:func:`launcher_call`; a parent-death signal fires when the *thread* that forked the child exits,
  so short-lived worker threads would kill their children), armed with ``SIGKILL`` as its first act
  (``setpriv --pdeathsig``), re-armed after every credential change (which clears it), and followed
  by a check that the owner is still its parent (:func:`owner_guard`), so an owner that died before
  the signal was armed is noticed before any untrusted code runs.
* **A lifeline** for what a death signal cannot reach: a process forked by a sandbox process arms its
  own signal only after it exists (bubblewrap's pid-namespace init arms ``--die-with-parent`` right
  after its clone), so an owner killed in between leaves it orphaned. Every sandbox gets the read end
  of one process-wide pipe whose write end only the owner holds (:func:`lifeline_fd`); the kernel
  closes it when the owner dies, and :func:`lifeline_guard`, run inside the sandbox after every
  signal is armed, refuses to start the solution once it reads end-of-file.
* **A reaper** for the one moment neither covers: bubblewrap's namespace init waits for its parent's
  go-ahead before it arms its signal or reads the lifeline, and an owner killed then leaves it asleep
  for ever. Each owner's lifeline comes with a reaper process (:mod:`wmrl_envs.sandbox._reaper`) that
  blocks on the read end and, at end-of-file, kills the members of the owner's run cgroups.
* **A wall clock of the run's own** as the last resort: a cold run's solution is started under
  ``timeout --signal=KILL`` (limit + :data:`WALL_GRACE_S`) inside the sandbox, so whatever the chain
  missed, the solution cannot outlive its own limit by more than the grace.
* **Owner-tagged names and a start-up sweep** for host resources: work dirs, output dirs and cgroups
  are named ``wmrl-<kind>-<pid>_<start time>-...`` (:func:`owner_tag`). :func:`sweep_stale` kills the
  members of, and removes, every such resource whose owner is no longer running (same pid *and*
  start time, so a reused pid is not mistaken for the owner). Backends call it when they start; the
  Docker backend sweeps its labelled containers the same way.

Example:
    >>> owner_alive(*parse_owner(f"wmrl-run-{owner_tag()}-x"))
    True
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from wmrl_envs.sandbox._reaper import process_start_time

__all__ = [
    "OWNED_NAME",
    "OWNER_GONE_EXIT",
    "WALL_GRACE_S",
    "SweepReport",
    "launcher_call",
    "lifeline_fd",
    "lifeline_guard",
    "owner_alive",
    "owner_guard",
    "owner_tag",
    "parse_owner",
    "process_start_time",
    "sweep_stale",
]

OWNED_NAME = re.compile(r"^wmrl-(?P<kind>run|outputs)-(?P<pid>\d+)_(?P<start>\d+)-")
"""Names of owner-tagged host resources: ``wmrl-run-<pid>_<start>-...`` (work dirs and cgroups) and
``wmrl-outputs-<pid>_<start>-...`` (copied-out outputs)."""

OWNER_GONE_EXIT = 97
"""Exit code of a sandbox process whose owner died before its death signal was armed."""

WALL_GRACE_S = 2.0
"""Seconds past its timeout after which a run's own wall clock (coreutils ``timeout`` inside the sandbox
or as the container's entry process) kills the solution itself. The owner's deadline ends a live run
first, so this matters only when the owner is gone and some link of the death-signal chain did not fire
(seen once in 20 trainers SIGKILLed within 150 ms of a bubblewrap start, on a loaded CI host): a
solution then ends by itself instead of running until a later start-up sweeps its cgroup."""

_T = TypeVar("_T")
_HOST_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
_REAPER_FILE = Path(__file__).with_name("_reaper.py")


def owner_tag(pid: int | None = None) -> str:
    """``<pid>_<start time>`` of a process (default: this one): unique across pid reuse."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}_{process_start_time(pid) or 0}"


def parse_owner(name: str) -> tuple[int, int] | None:
    """``(pid, start time)`` of an owner-tagged name, or None for any other name."""
    match = OWNED_NAME.match(name)
    return (int(match.group("pid")), int(match.group("start"))) if match else None


def owner_alive(pid: int, start: int) -> bool:
    """Whether the process ``pid`` that started at ``start`` is still running (not a zombie)."""
    return process_start_time(pid) == start


def owner_guard(argv: list[str], pid: int | None = None) -> list[str]:
    """Prefix ``argv`` with a shell check that its parent is still ``pid`` (default: this process).

    Run right after a death signal is armed: if the owner died before, the signal will never come,
    and the command must not start (exit code :data:`OWNER_GONE_EXIT`).
    """
    pid = os.getpid() if pid is None else pid
    check = f'test "$PPID" = "$0" || exit {OWNER_GONE_EXIT}; exec "$@"'
    return ["/bin/sh", "-c", check, str(pid), *argv]


class _Lifeline:
    """A pipe whose write end lives only in this process: its reader sees end-of-file once we are gone."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fds: tuple[int, int] | None = None
        self._reaper: subprocess.Popen[bytes] | None = None
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        # A forked child (a data loader, a multiprocessing worker) must not keep the owner's lifeline open.
        if self._fds is not None:
            for fd in self._fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._fds = None
            self._reaper = None  # the parent's reaper; this child starts its own with its own lifeline

    def read_end(self) -> int:
        with self._lock:
            if self._fds is None:
                self._fds = os.pipe()  # both ends close-on-exec: only pass_fds hands the read end on
                self._reaper = _start_reaper(self._fds[0])
            return self._fds[0]


def _start_reaper(read_fd: int) -> subprocess.Popen[bytes]:
    """Start this owner's reaper on the lifeline's read end (see :mod:`wmrl_envs.sandbox._reaper`)."""
    from wmrl_envs.sandbox.limits import sandbox_cgroup_parents

    argv = [sys.executable, "-I", "-S", str(_REAPER_FILE), str(read_fd), owner_tag(),
            *(str(parent) for parent in sandbox_cgroup_parents())]
    return subprocess.Popen(argv, pass_fds=(read_fd,), start_new_session=True, env={"PATH": _HOST_PATH},
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


_LIFELINE = _Lifeline()


def lifeline_fd() -> int:
    """The read end of this process's lifeline: pass it to a sandbox process (``pass_fds``).

    Nothing is ever written to it; it reads end-of-file as soon as this process has exited (the kernel
    closes the only write end), so a sandbox can tell that its owner is gone without any pid.
    """
    return _LIFELINE.read_end()


def lifeline_guard(argv: list[str], fd: int) -> list[str]:
    """Prefix ``argv`` with a check that the lifeline ``fd`` is still open (its owner alive).

    Run *inside* the sandbox, after every death signal of the chain is armed: an owner that died before
    that has closed the lifeline, and the command exits with :data:`OWNER_GONE_EXIT` instead of
    starting. A non-blocking one-byte read of the open, empty pipe fails with ``EAGAIN`` (go on); at
    end-of-file it reads nothing and succeeds (stop). The check needs ``bash`` (``dash`` takes only
    one-digit descriptors); it closes the lifeline and unsets the ``SHLVL`` bash exports before the
    command starts, so the solution holds neither.
    """
    check = (f"dd iflag=nonblock bs=1 count=1 <&{fd} 2>/dev/null && exit {OWNER_GONE_EXIT}; exec {fd}<&-; "
             'unset SHLVL; exec "$@"')
    return ["/bin/bash", "-c", check, "lifeline", *argv]


class _Launcher:
    """One daemon thread that forks every sandbox process, so their death signals fire only at exit."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[[], object], concurrent.futures.Future[object]]]
        self._queue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _serve(self) -> None:
        while True:
            function, future = self._queue.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(function())
            except BaseException as exc:
                future.set_exception(exc)

    def call(self, function: Callable[[], _T]) -> _T:
        if threading.current_thread() is self._thread:
            return function()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="wmrl-sandbox-launcher", daemon=True)
                self._thread.start()
        future: concurrent.futures.Future[object] = concurrent.futures.Future()
        self._queue.put((function, future))
        return future.result()  # type: ignore[return-value]


_LAUNCHER = _Launcher()


def launcher_call(function: Callable[[], _T]) -> _T:
    """Run ``function`` (typically a ``Popen``) on the process-wide launcher thread and return its result."""
    return _LAUNCHER.call(function)


@dataclass
class SweepReport:
    """What :func:`sweep_stale` removed.

    Attributes:
        cgroups: cgroup directories removed (their members killed first).
        mounts: stale tmpfs work dirs unmounted.
        paths: directories removed (work dirs, output dirs).
        killed: processes killed.
    """

    cgroups: list[str] = field(default_factory=list)
    mounts: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    killed: int = 0

    def __bool__(self) -> bool:
        return bool(self.cgroups or self.mounts or self.paths or self.killed)


def _stale(name: str) -> bool:
    owner = parse_owner(name)
    return owner is not None and not owner_alive(*owner)


def _cgroup_dirs() -> Iterator[Path]:
    from wmrl_envs.sandbox.limits import sandbox_cgroup_parents

    for parent in sandbox_cgroup_parents():
        with contextlib.suppress(OSError):
            yield from (child for child in parent.iterdir() if child.is_dir() and _stale(child.name))


def _sweep_cgroups(report: SweepReport) -> None:
    from wmrl_envs.sandbox.limits import kill_cgroup_members

    for directory in _cgroup_dirs():
        report.killed += kill_cgroup_members(directory)
        with contextlib.suppress(OSError):
            directory.rmdir()
            report.cgroups.append(str(directory))


def _mount_points() -> list[str]:
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    points = []
    for line in lines:
        fields = line.split()
        if len(fields) > 4:
            points.append(fields[4].encode().decode("unicode_escape"))
    return points


def _sweep_mounts(report: SweepReport) -> None:
    umount = shutil.which("umount", path=_HOST_PATH)
    if umount is None or os.geteuid() != 0:
        return
    for point in _mount_points():
        if _stale(os.path.basename(point)):
            result = subprocess.run([umount, "-l", point], capture_output=True)
            if result.returncode == 0:
                report.mounts.append(point)


def _sweep_paths(report: SweepReport, directory: Path) -> None:
    from wmrl_envs.sandbox.workdir import remove_tree

    with contextlib.suppress(OSError):
        for child in directory.iterdir():
            if _stale(child.name) and child.is_dir() and not child.is_symlink() and not child.is_mount():
                remove_tree(child)
                report.paths.append(str(child))


def sweep_stale(directory: Path | None = None) -> SweepReport:
    """Remove every owner-tagged sandbox resource whose owner process is gone.

    Kills the members of stale ``wmrl-run-*`` cgroups (the orphaned solution processes) and removes
    the groups, lazily unmounts stale tmpfs work dirs, and removes stale work and output dirs.
    Resources of live owners (other trainers on this host) are left alone. Cheap (a directory
    listing or two) and safe to call at any time; every backend calls it when it starts.

    Args:
        directory: where work and output dirs are created (default: the system temp dir).

    Returns:
        What was removed.
    """
    report = SweepReport()
    _sweep_cgroups(report)
    _sweep_mounts(report)
    _sweep_paths(report, Path(directory) if directory is not None else Path(tempfile.gettempdir()))
    return report

