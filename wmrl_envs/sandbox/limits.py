"""Resource limits for one sandboxed run: cgroup v1 memory and pids groups, and a tail-keeping buffer.

Why cgroups and not only rlimits: rlimits are per process (a fork bomb multiplies them) or per uid
across the whole host (``RLIMIT_NPROC``), and ``RLIMIT_AS`` breaks numerical libraries that reserve
large virtual ranges without touching them. A memory cgroup limits what the whole process tree really
uses and counts OOM kills; a pids cgroup caps the tree's tasks and lists every member, so a run can be
swept clean afterwards even when a daemon escaped its process group.

Both hierarchies are supported, because hosts differ: cgroup v1 (one directory per controller; the
CI machine's layout, where the v2 mount has no controllers) and cgroup v2 (one unified directory; most
current distributions and the GPU machine this was measured on, where a v1-only sandbox refused to
start). :func:`cgroup_version` says which one per-run groups can be made in (v1 preferred), or ``None``,
and the caller decides whether running without is acceptable (``strict``).

Each run gets its own groups, created below the *current* process's groups (v1) so that any limit
already imposed on the caller still applies. Under v2 a non-root group that holds processes cannot
hand controllers to children (the "no internal processes" rule), so run groups go in a
``wmrl-sandbox`` group below the nearest ancestor that delegates ``memory`` and ``pids`` (the root
group, or the parent of the trainer's group), and only failing that in the trainer's own group after
moving the trainer into a leaf of it (:func:`cgroup_v2_parent`).
A CPU quota (the ``cpu`` controller's CFS bandwidth) keeps one run from starving concurrent runs into
timeouts. Groups are named after their owner process
(:func:`~wmrl_envs.sandbox.lifetime.owner_tag`), so a sweep can remove those of a dead owner.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from wmrl_envs.sandbox._reaper import kill_cgroup_members
from wmrl_envs.sandbox.lifetime import owner_tag

__all__ = [
    "CGROUP_V1_ROOT",
    "CGROUP_V2_ROOT",
    "CgroupUsage",
    "RunCgroups",
    "TailBuffer",
    "cgroup_v1_available",
    "cgroup_v2_parent",
    "cgroup_version",
    "kill_cgroup_members",
    "sandbox_cgroup_parents",
]

CGROUP_V1_ROOT = Path("/sys/fs/cgroup")
"""Where the cgroup v1 controllers are mounted (one directory per controller)."""
CGROUP_V2_ROOT = Path("/sys/fs/cgroup")
"""Where the unified (v2) hierarchy is mounted on a v2 host."""
_V2_SANDBOX_GROUP = "wmrl-sandbox"
_V2_TRAINER_LEAF = "wmrl-trainer-"

_CONTROLLERS = ("memory", "pids")
_OPTIONAL_CONTROLLERS = ("cpuacct", "cpu")
_CFS_PERIOD_US = 100_000


def _own_cgroups() -> list[tuple[str, list[str], str]]:
    """``(hierarchy id, controllers, path)`` per line of ``/proc/self/cgroup`` (empty if unreadable)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []
    entries = []
    for line in lines:
        hierarchy, controllers, path = line.split(":", 2)
        entries.append((hierarchy, [name for name in controllers.split(",") if name], path.lstrip("/")))
    return entries


def _own_cgroup_dir(controller: str) -> Path | None:
    """The directory of this process's cgroup for a v1 controller, or None when there is none."""
    for _, controllers, path in _own_cgroups():
        if controller in controllers:
            directory = CGROUP_V1_ROOT / controller / path
            return directory if directory.is_dir() else None
    return None


def _own_v2_dir() -> Path | None:
    """This process's group in the unified hierarchy, when that hierarchy is mounted at its root."""
    for hierarchy, controllers, path in _own_cgroups():
        if hierarchy == "0" and not controllers:
            directory = CGROUP_V2_ROOT / path
            return directory if (directory / "cgroup.controllers").is_file() else None
    return None


def _v2_enabled(directory: Path) -> set[str]:
    try:
        return set((directory / "cgroup.subtree_control").read_text().split())
    except OSError:
        return set()


def _v2_enable(directory: Path) -> bool:
    """Hand ``memory`` and ``pids`` (and ``cpu`` where it can) to the children of ``directory``."""
    for controller in (*_CONTROLLERS, "cpu"):
        if controller not in _v2_enabled(directory):
            with contextlib.suppress(OSError):
                (directory / "cgroup.subtree_control").write_text(f"+{controller}")
    return set(_CONTROLLERS) <= _v2_enabled(directory)


def _v2_sandbox_group(delegating: Path) -> Path | None:
    """``delegating/wmrl-sandbox`` with ``memory`` and ``pids`` handed to its children, or None."""
    if not _v2_enable(delegating):
        return None
    group = delegating / _V2_SANDBOX_GROUP
    try:
        group.mkdir(exist_ok=True)
    except OSError:
        return None
    return group if _v2_enable(group) else None


def _v2_move_self_to_leaf(own: Path) -> bool:
    """Move this process into ``own/wmrl-trainer-<pid>`` and delegate from ``own``; undo on failure."""
    leaf = own / f"{_V2_TRAINER_LEAF}{os.getpid()}"
    try:
        leaf.mkdir(exist_ok=True)
        (leaf / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        with contextlib.suppress(OSError):
            leaf.rmdir()
        return False
    if _v2_enable(own):
        return True
    with contextlib.suppress(OSError):
        (own / "cgroup.procs").write_text(str(os.getpid()))
        leaf.rmdir()
    return False


def _v2_ancestors(own: Path) -> list[Path]:
    """``own``'s parent, grandparent, ... up to the hierarchy's root (own excluded)."""
    chain = []
    current = own
    while current != CGROUP_V2_ROOT and CGROUP_V2_ROOT in current.parents:
        current = current.parent
        chain.append(current)
    return chain


def _v2_own() -> Path | None:
    own = _own_v2_dir()
    if own is not None and own.name.startswith(_V2_TRAINER_LEAF):  # moved there by an earlier call
        own = own.parent
    return own


def cgroup_v2_parent() -> Path | None:
    """The v2 group run groups go in, ``memory`` and ``pids`` delegated to it first; None if impossible.

    In order: ``wmrl-sandbox`` below this process's group when that group is the root (the root may
    hold processes and still delegate); ``wmrl-sandbox`` beside this process's group, below the nearest
    ancestor that already delegates both controllers (measured on a GPU machine: the command's group
    held the whole process tree, its parent delegated), so runs stay under that ancestor's limits;
    last, this process's own group after moving this process into a leaf below it (fails, and is undone,
    when other processes share the group). Idempotent.
    """
    own = _v2_own()
    if own is None:
        return None
    if own == CGROUP_V2_ROOT:
        return _v2_sandbox_group(own)
    for ancestor in _v2_ancestors(own):
        if set(_CONTROLLERS) <= _v2_enabled(ancestor):
            group = _v2_sandbox_group(ancestor)
            if group is not None:
                return group
    if set(_CONTROLLERS) <= _v2_enabled(own) or _v2_move_self_to_leaf(own):
        return own
    return None


def cgroup_version() -> int | None:
    """1 or 2: the hierarchy per-run memory and pids groups can be made in here (v1 first); else None."""
    if cgroup_v1_available():
        return 1
    parent = cgroup_v2_parent()
    return 2 if parent is not None and _can_make_child(parent) else None


def _can_make_child(parent: Path) -> bool:
    """Whether a child group can be created (and removed) in ``parent``."""
    probe = parent / f"wmrl-probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError:
        return False
    return True


def sandbox_cgroup_parents() -> list[Path]:
    """The directories in which run cgroups are created (one per v1 controller, or the v2 parent).

    Side-effect free (it never delegates), so a sweep can call it on any host.
    """
    parents = {_own_cgroup_dir(controller) for controller in (*_CONTROLLERS, *_OPTIONAL_CONTROLLERS)}
    own = _v2_own()
    if own is not None:
        parents |= {own, *(group / _V2_SANDBOX_GROUP for group in (own, *_v2_ancestors(own)))}
    return sorted(parent for parent in parents if parent is not None and parent.is_dir())


def cgroup_v1_available() -> bool:
    """Whether per-run memory and pids cgroups (v1) can be created here.

    Returns:
        True when both controllers are mounted and a child group can be created and removed.
    """
    parents = [_own_cgroup_dir(controller) for controller in _CONTROLLERS]
    return all(parent is not None and _can_make_child(parent) for parent in parents)


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
    """Memory and pids limits for one run; created on construction, removed by :meth:`remove`.

    Under v1: a memory and a pids group, plus a ``cpuacct`` group (CPU time) and a ``cpu`` group (the
    quota) where those are mounted. Under v2: one group with the same limits (``memory.max`` with
    ``memory.swap.max`` 0, ``pids.max``, ``cpu.max``) and the same counters.

    Args:
        memory_mb: memory limit (swap included, so swapping cannot stretch it).
        max_pids: task limit for the whole tree (threads count).
        cpus: CPU quota in cores (CFS bandwidth), or None for no quota.
        version: the hierarchy (:func:`cgroup_version`); default 1.

    Example:
        >>> from wmrl_envs.sandbox.limits import cgroup_version
        >>> version = cgroup_version()
        >>> if version is not None:
        ...     groups = RunCgroups(memory_mb=256, max_pids=16, version=version)
        ...     groups.remove()
    """

    def __init__(self, memory_mb: int, max_pids: int, cpus: float | None = None, *, version: int = 1) -> None:
        name = f"wmrl-run-{owner_tag()}-{uuid.uuid4().hex[:12]}"
        self.version = version
        self._dirs: dict[str, Path] = {}
        try:
            if version == 2:
                self._make_v2(name, memory_mb, max_pids, cpus)
                return
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

    def _make_v2(self, name: str, memory_mb: int, max_pids: int, cpus: float | None) -> None:
        parent = cgroup_v2_parent()
        if parent is None:
            raise OSError("no cgroup v2 group with the memory and pids controllers can be made here")
        directory = parent / name
        directory.mkdir()
        enabled = _v2_enabled(parent)
        for controller in (*_CONTROLLERS, "cpuacct", *(("cpu",) if "cpu" in enabled else ())):
            self._dirs[controller] = directory  # one group holds every controller (cpu.stat: CPU time)
        (directory / "memory.max").write_text(str(memory_mb * 1024 * 1024))
        swap = directory / "memory.swap.max"
        if swap.exists():
            swap.write_text("0")
        (directory / "pids.max").write_text(str(max_pids))
        if cpus is not None and "cpu" in self._dirs:
            quota = max(1000, int(cpus * _CFS_PERIOD_US))
            (directory / "cpu.max").write_text(f"{quota} {_CFS_PERIOD_US}")

    @property
    def procs_files(self) -> tuple[Path, ...]:
        """The ``cgroup.procs`` files a new process writes its pid into to join every group."""
        return tuple(directory / "cgroup.procs" for directory in dict.fromkeys(self._dirs.values()))

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
        if self.version == 2:
            used = int((memory / "memory.current").read_text())
            (memory / "memory.max").write_text(str(memory_mb * 1024 * 1024 + used))
            return used / 2**20
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
        v2 = self.version == 2
        if memory is not None:
            oom_kills = _counter(memory / ("memory.events" if v2 else "memory.oom_control"), "oom_kill")
            peak_file = memory / ("memory.peak" if v2 else "memory.max_usage_in_bytes")  # v2: Linux >= 5.19
            with contextlib.suppress(OSError, ValueError):
                peak = int(peak_file.read_text()) / 2**20
        pids = self._dirs.get("pids")
        if pids is not None:
            pids_hits = _counter(pids / "pids.events", "max")
        cpu: float | None = None
        cpuacct = self._dirs.get("cpuacct")
        if cpuacct is not None and v2:
            usage_usec = _counter(cpuacct / "cpu.stat", "usage_usec", missing=-1)
            cpu = usage_usec / 1e6 if usage_usec >= 0 else None
        elif cpuacct is not None:
            with contextlib.suppress(OSError, ValueError):
                cpu = int((cpuacct / "cpuacct.usage").read_text()) / 1e9
        return CgroupUsage(oom_kills=oom_kills, pids_limit_hits=pids_hits, peak_memory_mb=peak, cpu_s=cpu)

    def remove(self) -> None:
        """Kill any member left and delete the groups (idempotent)."""
        self.kill_all()
        for directory in dict.fromkeys(self._dirs.values()):
            for _ in range(200):
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
        self._dirs.clear()


def _counter(path: Path, key: str, *, missing: int = 0) -> int:
    """The value of ``key`` in a flat-keyed cgroup file (``oom_kill 2``), or ``missing``."""
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return missing


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
