"""Resource limits for one sandboxed run: cgroup v1 memory and pids groups, and a tail-keeping buffer.

Why cgroups and not only rlimits: rlimits are per process (a fork bomb multiplies them) or per uid
across the whole host (``RLIMIT_NPROC``), and ``RLIMIT_AS`` breaks numerical libraries that reserve
large virtual ranges without touching them. A memory cgroup limits what the whole process tree really
uses and counts OOM kills; a pids cgroup caps the tree's tasks and lists every member, so a run can be
swept clean afterwards even when a daemon escaped its process group. This machine has cgroups v1 (the
v2 mount has no controllers); when the hierarchy is not writable, :func:`cgroup_v1_available` says so
and the caller decides whether that is acceptable (``strict``).

Each run gets its own groups, created below the *current* process's groups so that any limit already
imposed on the caller still applies. A CPU quota (the ``cpu`` controller's CFS bandwidth) keeps one
run from starving concurrent runs into timeouts. Groups are named after their owner process
(:func:`~wmrl_envs.sandbox.lifetime.owner_tag`), so a sweep can remove those of a dead owner.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from wmrl_envs.sandbox.lifetime import owner_tag

__all__ = [
    "CGROUP_V1_ROOT",
    "CgroupUsage",
    "RunCgroups",
    "TailBuffer",
    "cgroup_v1_available",
    "kill_cgroup_members",
    "sandbox_cgroup_parents",
]

CGROUP_V1_ROOT = Path("/sys/fs/cgroup")
"""Where the cgroup v1 controllers are mounted (one directory per controller)."""

_CONTROLLERS = ("memory", "pids")
_OPTIONAL_CONTROLLERS = ("cpuacct", "cpu")
_CFS_PERIOD_US = 100_000


def _own_cgroup_dir(controller: str) -> Path | None:
    """The directory of this process's cgroup for a v1 controller, or None when there is none."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            directory = CGROUP_V1_ROOT / controller / path.lstrip("/")
            return directory if directory.is_dir() else None
    return None


def sandbox_cgroup_parents() -> list[Path]:
    """The directories in which this process creates run cgroups (one per mounted controller)."""
    parents = (_own_cgroup_dir(controller) for controller in (*_CONTROLLERS, *_OPTIONAL_CONTROLLERS))
    return sorted({parent for parent in parents if parent is not None})


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


def cgroup_v1_available() -> bool:
    """Whether per-run memory and pids cgroups (v1) can be created here.

    Returns:
        True when both controllers are mounted and a child group can be created and removed.
    """
    for controller in _CONTROLLERS:
        parent = _own_cgroup_dir(controller)
        if parent is None:
            return False
        probe = parent / f"wmrl-probe-{uuid.uuid4().hex[:8]}"
        try:
            probe.mkdir()
            probe.rmdir()
        except OSError:
            return False
    return True


@dataclass(frozen=True)
class CgroupUsage:
    """What a run's cgroups recorded.

    Attributes:
        oom_kills: processes killed by the memory cgroup's OOM killer.
        pids_limit_hits: forks refused because the pids limit was reached.
        peak_memory_mb: peak memory charged to the group (page cache and tmpfs included).
        cpu_s: CPU seconds used by every process of the group (None without the cpuacct controller).
    """

    oom_kills: int
    pids_limit_hits: int
    peak_memory_mb: float | None
    cpu_s: float | None


class RunCgroups:
    """A memory and a pids cgroup (v1) for one run; created on construction, removed by :meth:`remove`.

    Also a ``cpuacct`` group (CPU time) and a ``cpu`` group (the quota) where those are mounted.

    Args:
        memory_mb: memory limit (swap included, so swapping cannot stretch it).
        max_pids: task limit for the whole tree (threads count).
        cpus: CPU quota in cores (CFS bandwidth), or None for no quota.

    Example:
        >>> from wmrl_envs.sandbox.limits import cgroup_v1_available
        >>> if cgroup_v1_available():
        ...     groups = RunCgroups(memory_mb=256, max_pids=16)
        ...     groups.remove()
    """

    def __init__(self, memory_mb: int, max_pids: int, cpus: float | None = None) -> None:
        name = f"wmrl-run-{owner_tag()}-{uuid.uuid4().hex[:12]}"
        self._dirs: dict[str, Path] = {}
        try:
            for controller in _CONTROLLERS:
                parent = _own_cgroup_dir(controller)
                if parent is None:
                    raise OSError(f"cgroup v1 controller {controller!r} is not mounted")
                directory = parent / name
                directory.mkdir()
                self._dirs[controller] = directory
            for controller in _OPTIONAL_CONTROLLERS:
                parent = _own_cgroup_dir(controller)
                if parent is not None:
                    with contextlib.suppress(OSError):
                        (parent / name).mkdir()
                        self._dirs[controller] = parent / name
            limit = str(memory_mb * 1024 * 1024)
            (self._dirs["memory"] / "memory.limit_in_bytes").write_text(limit)
            memsw = self._dirs["memory"] / "memory.memsw.limit_in_bytes"
            if memsw.exists():
                memsw.write_text(limit)
            (self._dirs["pids"] / "pids.max").write_text(str(max_pids))
            if cpus is not None and "cpu" in self._dirs:
                (self._dirs["cpu"] / "cpu.cfs_period_us").write_text(str(_CFS_PERIOD_US))
                quota = max(1000, int(cpus * _CFS_PERIOD_US))
                (self._dirs["cpu"] / "cpu.cfs_quota_us").write_text(str(quota))
        except OSError:
            self.remove()
            raise

    @property
    def procs_files(self) -> tuple[Path, ...]:
        """The ``cgroup.procs`` files a new process writes its pid into to join both groups."""
        return tuple(directory / "cgroup.procs" for directory in self._dirs.values())

    @property
    def cpu_quota(self) -> bool:
        """Whether a CPU quota applies (the ``cpu`` controller is mounted and writable)."""
        return "cpu" in self._dirs

    def grant_current_usage(self, memory_mb: int) -> float:
        """Raise the memory limit to ``memory_mb`` on top of what the group already uses; returns that use.

        A warm worker calls it when its code is handed over: the modules it preloaded must not count
        against the solution's limit, or a solution that fits cold would be OOM-killed warm.
        """
        memory = self._dirs.get("memory")
        if memory is None:
            return 0.0
        used = int((memory / "memory.usage_in_bytes").read_text())
        limit = str(memory_mb * 1024 * 1024 + used)
        memsw = memory / "memory.memsw.limit_in_bytes"
        if memsw.exists():
            memsw.write_text(limit)
        (memory / "memory.limit_in_bytes").write_text(limit)
        return used / 2**20

    def members(self) -> list[int]:
        """Pids currently in the run's pids group."""
        directory = self._dirs.get("pids")
        if directory is None:
            return []
        try:
            text = (directory / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(pid) for pid in text.split()]

    def kill_all(self, deadline_s: float = 5.0) -> bool:
        """SIGKILL every member until the group is empty.

        Args:
            deadline_s: give up after this many seconds.

        Returns:
            True when the group ended empty.
        """
        directory = self._dirs.get("pids")
        if directory is None:
            return True
        kill_cgroup_members(directory, deadline_s)
        return not self.members()

    def usage(self) -> CgroupUsage:
        """Read the counters (OOM kills, refused forks, peak memory, CPU time)."""
        oom_kills = pids_hits = 0
        peak: float | None = None
        memory = self._dirs.get("memory")
        if memory is not None:
            try:
                for line in (memory / "memory.oom_control").read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        oom_kills = int(value)
                peak = int((memory / "memory.max_usage_in_bytes").read_text()) / 2**20
            except (OSError, ValueError):
                pass
        pids = self._dirs.get("pids")
        if pids is not None:
            try:
                for line in (pids / "pids.events").read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "max":
                        pids_hits = int(value)
            except (OSError, ValueError):
                pass
        cpu: float | None = None
        cpuacct = self._dirs.get("cpuacct")
        if cpuacct is not None:
            with contextlib.suppress(OSError, ValueError):
                cpu = int((cpuacct / "cpuacct.usage").read_text()) / 1e9
        return CgroupUsage(oom_kills=oom_kills, pids_limit_hits=pids_hits, peak_memory_mb=peak, cpu_s=cpu)

    def remove(self) -> None:
        """Kill any member left and delete the groups (idempotent)."""
        self.kill_all()
        for controller in list(self._dirs):
            directory = self._dirs[controller]
            for _ in range(200):
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
            del self._dirs[controller]


class TailBuffer:
    """Keeps the last ``limit`` bytes written to it and counts everything it was given.

    Args:
        limit: how many trailing bytes to keep.

    Example:
        >>> buffer = TailBuffer(4)
        >>> buffer.write(b"abcdef")
        >>> buffer.text(), buffer.total, buffer.truncated
        ('cdef', 6, True)
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._data = bytearray()

    def write(self, chunk: bytes) -> None:
        """Append a chunk, dropping the oldest bytes beyond the limit."""
        self.total += len(chunk)
        self._data += chunk[-self.limit :] if self.limit else b""
        if len(self._data) > self.limit:
            del self._data[: len(self._data) - self.limit]

    @property
    def truncated(self) -> bool:
        """Whether bytes were dropped."""
        return self.total > len(self._data)

    def text(self) -> str:
        """The kept tail, decoded as UTF-8 with replacement."""
        return self._data.decode("utf-8", errors="replace")
