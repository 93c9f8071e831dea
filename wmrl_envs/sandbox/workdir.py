"""The per-run work dir on the host, copying the output file out of it, and removing it afterwards.

Why this lives outside every backend's sandbox: the solution is hostile, so everything that decides
what leaves the sandbox runs on the host, after the run, on a path the solution can no longer touch.
The output file is opened with ``O_NOFOLLOW | O_NONBLOCK`` and checked with ``fstat`` on the opened
descriptor (a symlink is refused by the kernel, a FIFO or device is refused by its mode, a file
swapped in between check and open cannot fool it), then copied with a byte cap.

Disk cap: as root the work dir is a size- and inode-capped tmpfs mounted on the host, so neither one
huge file nor many small ones can fill the host's disk, and unmounting it removes everything,
whatever permissions or attributes the solution set. Without root it is a plain directory; removal
then first restores permissions so a solution that ``chmod 000``'d its directories cannot leave
them behind. Work and output dirs are named after their owner process, so what a killed owner left
is removed by :func:`~wmrl_envs.sandbox.lifetime.sweep_stale`.

Neutral mount sources: a bind mount shows, in the sandbox's ``/proc/self/mountinfo``, the path of its
source inside the source's file system (an input bound from ``/root/.cache/suite/c1/train.csv`` shows
that path, the suite root included). :func:`neutral_bind_script` binds through a read-only overlay
instead: the sandbox then sees ``/train.csv`` of an ``overlay`` whose layers are named ``empty`` and
``layer`` (relative names, resolved in the run's staging dir), never the host path.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import stat
import subprocess
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path

from wmrl_envs.sandbox.lifetime import owner_tag

__all__ = ["CopiedOutput", "OutputStore", "WorkDir", "copy_out", "neutral_bind_script", "overlay_available",
           "remove_tree"]

_COPY_CHUNK = 1 << 20
_STAGE_DIRS = ("layer", "merged", "empty")


def overlay_available() -> bool:
    """Whether the kernel offers overlayfs (needed by :func:`neutral_bind_script`)."""
    try:
        lines = Path("/proc/filesystems").read_text().splitlines()
    except OSError:
        return False
    return any(line.split()[-1:] == ["overlay"] for line in lines)


def neutral_bind_script(source: str, target: str, stage: Path, *, mount: str = "mount",
                        umount: str = "umount") -> str:
    """Shell commands (run as root) that show ``source`` read-only at ``target`` under a neutral source.

    The source's directory (its parent for a file) is bound on ``stage/layer`` and covered by a
    read-only overlay (lower layers ``empty:layer``, named relative to ``stage``) on ``stage/merged``;
    ``target`` is bound from the overlay, and both staging mounts are removed again (the overlay keeps
    its own reference to its layers). The mount table then names ``/<file name>`` on ``overlay``, not
    the host path; the file's siblings are never reachable from ``target``.

    Args:
        source: the host file or directory.
        target: an existing placeholder of the same kind (file or directory).
        stage: a :attr:`WorkDir.stage` directory (its ``layer``, ``merged`` and ``empty`` are used).
        mount: the ``mount`` binary.
        umount: the ``umount`` binary.

    Returns:
        One line of ``sh`` commands, to run under ``set -e``.
    """
    directory, name = (source, ".") if os.path.isdir(source) else os.path.split(source)
    quoted = shlex.quote
    return "; ".join([
        f"cd {quoted(str(stage))}",
        f"{mount} --bind {quoted(directory)} layer",
        f"{mount} -t overlay overlay -o ro,lowerdir=empty:layer merged",
        f"{mount} --bind {quoted(os.path.join('merged', name))} {quoted(target)}",
        f"{mount} -o remount,bind,ro {quoted(target)}",
        f"{umount} merged",
        f"{umount} layer",
    ])


@dataclass(frozen=True)
class CopiedOutput:
    """The result of copying the output file out.

    Attributes:
        path: host path of the copy, or None.
        rejected: why no copy was made although something was there (symlink, FIFO, too large).
    """

    path: Path | None
    rejected: str | None


def copy_out(directory: Path, name: str, destination: Path, max_bytes: int) -> CopiedOutput:
    """Copy ``directory/name`` to ``destination`` only if it is a regular file of at most ``max_bytes``.

    Args:
        directory: the (finished) work dir.
        name: the output file name; must be a plain name, no ``/``.
        destination: where the copy goes (created, mode 0600).
        max_bytes: size cap.

    Returns:
        The copy's path, or why it was rejected; ``(None, None)`` when no file exists.
    """
    if "/" in name or name in ("", ".", ".."):
        return CopiedOutput(None, f"output name {name!r} is not a plain file name")
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        return CopiedOutput(None, f"work dir unreadable: {exc.strerror}")
    try:
        try:
            before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return CopiedOutput(None, None)
        if not stat.S_ISREG(before.st_mode):
            kind = "a symlink" if stat.S_ISLNK(before.st_mode) else "not a regular file"
            return CopiedOutput(None, f"{name} is {kind} (mode {oct(before.st_mode)}); ignored")
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
        except OSError as exc:
            return CopiedOutput(None, f"{name} could not be opened safely: {exc.strerror}")
        with os.fdopen(fd, "rb") as source:
            info = os.fstat(source.fileno())
            if not stat.S_ISREG(info.st_mode):
                return CopiedOutput(None, f"{name} is not a regular file; ignored")
            if info.st_size > max_bytes:
                return CopiedOutput(None, f"{name} is {info.st_size} bytes, over the {max_bytes}-byte cap")
            out_fd = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            copied = 0
            with os.fdopen(out_fd, "wb") as target:
                while chunk := source.read(_COPY_CHUNK):
                    copied += len(chunk)
                    if copied > max_bytes:
                        break
                    target.write(chunk)
            if copied > max_bytes:
                destination.unlink()
                return CopiedOutput(None, f"{name} grew past the {max_bytes}-byte cap while being copied")
        return CopiedOutput(destination, None)
    finally:
        os.close(dir_fd)


class OutputStore:
    """Where a sandbox puts the output files it copied out, one unique path per run.

    Args:
        directory: a directory the caller owns (kept on :meth:`close`), or None for a private temp
            dir that :meth:`close` removes (or garbage collection, or interpreter exit: copied-out
            files live as long as the sandbox that made them).

    Example:
        >>> store = OutputStore(None)
        >>> store.new_path("submission.csv").name.endswith("submission.csv")
        True
        >>> store.close()
    """

    def __init__(self, directory: Path | None) -> None:
        self._owned = directory is None
        self.directory = (Path(tempfile.mkdtemp(prefix=f"wmrl-outputs-{owner_tag()}-")) if directory is None
                          else directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._count = 0
        self._finalizer = (weakref.finalize(self, shutil.rmtree, str(self.directory), ignore_errors=True)
                           if self._owned else None)

    def new_path(self, name: str) -> Path:
        """A fresh, not yet existing path for one run's copy of ``name``."""
        self._count += 1
        return self.directory / f"{os.getpid()}-{self._count}-{os.urandom(4).hex()}-{name}"

    def close(self) -> None:
        """Remove the directory when it was a private temp dir (also done when garbage-collected)."""
        if self._finalizer is not None:
            self._finalizer()


def _make_writable(path: Path) -> None:
    for root, dirs, _ in os.walk(path, topdown=True, followlinks=False):
        for name in dirs:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(root, name), 0o700, follow_symlinks=False)


def remove_tree(path: Path) -> None:
    """Remove a directory tree left by a hostile run (permissions restored first, symlinks not followed).

    Args:
        path: the tree; a missing path is fine.
    """
    if not os.path.lexists(path):
        return
    with contextlib.suppress(OSError):
        os.chmod(path, 0o700)
    _make_writable(path)
    shutil.rmtree(path, ignore_errors=True)
    if os.path.lexists(path):
        _make_writable(path)
        shutil.rmtree(path)


class WorkDir:
    """A fresh host directory for one run, with ``work/`` (the solution's cwd), ``tmp/`` and ``stage/``.

    ``stage/`` holds the staging mount points of :func:`neutral_bind_script`; it is never visible in
    the sandbox.

    Args:
        disk_mb: cap on everything written (enforced only when ``capped``).
        owner: uid that owns ``work/`` and ``tmp/`` (the sandbox user), or None for the caller.
        capped: mount a size- and inode-capped tmpfs (needs root).
        parent: where to create it (default: the system temp dir).

    Example:
        >>> work = WorkDir(disk_mb=8, capped=False)
        >>> work.work.is_dir()
        True
        >>> work.destroy()
    """

    def __init__(self, disk_mb: int, *, owner: int | None = None, capped: bool = False,
                 parent: Path | None = None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix=f"wmrl-run-{owner_tag()}-", dir=parent))
        self.capped = False
        try:
            if capped:
                inodes = max(1024, disk_mb * 64)
                subprocess.run(
                    ["mount", "-t", "tmpfs", "-o",
                     f"size={disk_mb}m,nr_inodes={inodes},mode=0755,nosuid,nodev", "tmpfs", str(self.root)],
                    check=True, capture_output=True,
                )
                self.capped = True
            self.work = self.root / "work"
            self.tmp = self.root / "tmp"
            self.inputs = self.work / "input"
            self.stage = self.root / "stage"
            for directory in (self.work, self.tmp):
                directory.mkdir(mode=0o700)
                if owner is not None:
                    os.chown(directory, owner, owner)
            self.inputs.mkdir(mode=0o755)
            self.stage.mkdir(mode=0o700)
            for name in _STAGE_DIRS:
                (self.stage / name).mkdir(mode=0o700)
        except BaseException:
            self.destroy()
            raise

    def disk_full(self) -> bool:
        """Whether the capped tmpfs is (nearly) out of space or inodes."""
        if not self.capped:
            return False
        info = os.statvfs(self.root)
        return info.f_bavail * info.f_frsize < 64 * 1024 or info.f_favail < 4

    def destroy(self) -> None:
        """Unmount (when capped; staged input mounts below it first) and remove everything; idempotent."""
        if self.capped:
            result = subprocess.run(["umount", "--recursive", str(self.root)], capture_output=True)
            if result.returncode != 0:
                subprocess.run(["umount", "-l", str(self.root)], capture_output=True)
            self.capped = False
        remove_tree(self.root)
