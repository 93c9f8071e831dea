"""Resource limits for one sandboxed run: cgroup v1 memory and pids groups, and a tail-keeping buffer.

Why cgroups and not only rlimits: rlimits are per process (a fork bomb multiplies them) or per uid
across the whole host (``RLIMIT_NPROC``), and ``RLIMIT_AS`` breaks numerical libraries that reserve
large virtual ranges without touching them. A memory cgroup limits what the whole process tree really
uses and counts OOM kills; a pids cgroup caps the tree's tasks and lists every member, so a run can be
swept clean afterwards even when a daemon escaped its process group. This machine has cgroups v1 (the
v2 mount has no controllers); when the hierarchy is not writable, :func:`cgroup_v1_available` says so
and the caller decides whether that is acceptable (``strict``).

Each run gets its own groups, created below the *current* process's groups so that any limit already
imposed on the caller still applies.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CGROUP_V1_ROOT", "CgroupUsage", "RunCgroups", "TailBuffer", "cgroup_v1_available"]

CGROUP_V1_ROOT = Path("/sys/fs/cgroup")
"""Where the cgroup v1 controllers are mounted (one directory per controller)."""

_CONTROLLERS = ("memory", "pids")
_OPTIONAL_CONTROLLERS = ("cpuacct",)


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

    Args:
        memory_mb: memory limit (swap included, so swapping cannot stretch it).
        max_pids: task limit for the whole tree (threads count).

    Example:
        >>> from wmrl_envs.sandbox.limits import cgroup_v1_available
        >>> if cgroup_v1_available():
        ...     groups = RunCgroups(memory_mb=256, max_pids=16)
        ...     groups.remove()
    """

    def __init__(self, memory_mb: int, max_pids: int) -> None:
        name = f"wmrl-run-{uuid.uuid4().hex[:12]}"
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
        except OSError:
            self.remove()
            raise

    @property
    def procs_files(self) -> tuple[Path, ...]:
        """The ``cgroup.procs`` files a new process writes its pid into to join both groups."""
        return tuple(directory / "cgroup.procs" for directory in self._dirs.values())

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
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            pids = self.members()
            if not pids:
                return True
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)
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
