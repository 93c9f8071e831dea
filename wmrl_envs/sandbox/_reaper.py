"""The owner's reaper: a small process that outlives its owner just long enough to kill what it left.

Why: the death signals and the lifeline (:mod:`wmrl_envs.sandbox.lifetime`) stop every sandbox
process whose chain is complete, but one moment stays uncovered: bubblewrap's pid-namespace init
blocks on its parent's go-ahead right after its clone, before it arms its own death signal and
before it can read the lifeline. A trainer SIGKILLed in that window (seen about 1 start in 60, at
load 20) leaves that init asleep for ever in the run's cgroup, until some later start-up sweeps it.
Nothing inside the chain can notice; something outside it must.

So every owner starts one reaper with its first lifeline (:func:`~wmrl_envs.sandbox.lifetime.lifeline_fd`).
The reaper holds the lifeline's read end and waits for its hang-up; once the owner is gone (confirmed
by its pid and start time) it kills the members of the owner's run cgroups, a few times over a few
seconds (a process the owner's chain was still creating may appear just after), and exits. It is its
own session, outside every run cgroup, without a death signal; its environment is empty and it runs
``python -I -S`` on this file, which imports the standard library only (no package import: it starts
in milliseconds). A trainer that exits normally leaves nothing for it: it finds empty or no cgroups
and exits.

Run as ``python -I -S _reaper.py FD OWNER_TAG CGROUP_PARENT...``.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
from pathlib import Path

__all__ = ["ROUNDS", "ROUND_GAP_S", "kill_cgroup_members", "main", "process_start_time", "wait_for_owner"]

ROUNDS = 12
ROUND_GAP_S = 0.25
"""After the owner is gone: 12 sweeps of its run cgroups, 0.25 s apart (3 s in all)."""


def kill_cgroup_members(directory: Path, deadline_s: float = 5.0) -> int:
    """SIGKILL every process in a cgroup directory until it is empty; returns how many were signalled."""
    killed: set[int] = set()
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            pids = [int(pid) for pid in (directory / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return len(killed)
        if not pids:
            return len(killed)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
        time.sleep(0.005)
    return len(killed)


def process_start_time(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def wait_for_owner(fd: int, tag: str) -> None:
    """Return once the owner ``<pid>_<start time>`` is gone.

    The lifeline's hang-up (``POLLHUP``: its only write end closed) wakes the wait at once; the owner's
    death is then confirmed by its pid and start time before anything is killed. Nothing is read from
    the pipe: the guard inside each sandbox sets ``O_NONBLOCK`` on the pipe's shared file description
    (``dd iflag=nonblock``), so a read here could fail with ``EAGAIN`` while the owner lives.
    """
    pid, start = (int(part) for part in tag.split("_"))
    poller = select.poll()
    poller.register(fd, select.POLLHUP | select.POLLERR)
    while process_start_time(pid) == start:
        if poller.poll(5000):  # woken with the owner alive: never expected; do not spin
            time.sleep(1.0)


def main(argv: list[str]) -> int:
    """Wait until the owner whose lifeline is ``argv[0]`` is gone, then kill its runs' cgroup members."""
    fd, tag, parents = int(argv[0]), argv[1], [Path(parent) for parent in argv[2:]]
    wait_for_owner(fd, tag)
    for _ in range(ROUNDS):
        for parent in parents:
            for group in parent.glob(f"wmrl-run-{tag}-*"):
                kill_cgroup_members(group, deadline_s=ROUND_GAP_S)
        time.sleep(ROUND_GAP_S)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
