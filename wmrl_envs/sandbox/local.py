"""The default backend: bubblewrap, an unprivileged per-run uid, cgroups, a capped tmpfs work dir.

Why this shape (each point is a pitfall measured on this machine; ``docs/threat-model.md`` has the
measurements):

* bubblewrap run *as root* with ``--uid 65534`` is still host root inside (it could read
  ``/etc/shadow``), so the process first drops to an unprivileged uid with ``setpriv`` and only then
  starts bwrap, which builds its namespaces (user, mount, pid, net, ipc, uts) as that user.
* Each run gets a fresh random uid from a high range: ``RLIMIT_NPROC`` counts per uid across the host,
  so a dedicated uid makes it a per-run limit, and concurrent runs cannot signal or read each other.
* The interpreter may live under ``/root`` (mode 700, e.g. pyenv), which the unprivileged user cannot
  traverse. We never chmod the host: as root, a private mount namespace (``unshare --mount``) bind-
  mounts the interpreter prefix and the input files, read-only, into the run's own directory; bwrap
  then maps them to their original paths. Those mounts vanish with the namespace.
* The work dir is a tmpfs mounted on the host with a size and an inode cap (one huge file or many
  small ones both hit it), owned by the run's uid; it is unmounted afterwards, which removes
  whatever the solution left, whatever modes it set.
* Memory and pids are limited by per-run cgroups (v1 or v2) that also count OOM kills and refused
  forks, and let the host sweep every process of the run, even a ``setsid`` daemon. The pid namespace
  dies with bwrap, taking every process of the run with it.
* Inside, the root is empty but for ``/usr`` (read-only), the interpreter, ``/proc``, a minimal
  ``/dev``, ``/tmp`` (part of the capped tmpfs) and ``/sandbox`` (the work dir, the cwd). No network
  (only a private loopback), no host environment (``--clearenv``), no ``/etc`` beyond the dynamic
  loader cache, hidden answers never mounted. ``/`` and ``/dev`` are remounted read-only, and
  ``/dev/shm`` is a tmpfs of :data:`SHM_MB` MB, so nothing outside the capped work dir takes space.
* A seccomp filter (:mod:`~wmrl_envs.sandbox.seccomp`, like Docker's default profile) refuses nested
  namespaces, mounts, ``ptrace``, ``bpf``, ``io_uring``, ``keyctl`` and the like; a CPU quota
  (``cpus``, the cgroup ``cpu`` controller) keeps one run from starving concurrent runs.
* Nothing outlives the owner (:mod:`~wmrl_envs.sandbox.lifetime`): the process chain arms a
  parent-death ``SIGKILL`` before anything runs and again after the uid drop (which clears it), and
  checks each time that the owner is still its parent; bwrap's ``--die-with-parent`` extends it to
  the solution. bwrap's init arms that signal only after its clone, so inside the sandbox the
  command starts only while the owner's lifeline pipe is open
  (:func:`~wmrl_envs.sandbox.lifetime.lifeline_guard`): a trainer killed in that gap leaves no run
  behind. Every backend start sweeps the mounts, cgroups and dirs of dead owners.
* Nothing of the host's layout shows: bwrap (the sandbox's pid 1) reads its options from a descriptor
  and runs under ``env -i``, so ``/proc/1/cmdline`` and ``/proc/1/environ`` name no host path, and
  inputs are bound through a read-only overlay
  (:func:`~wmrl_envs.sandbox.workdir.neutral_bind_script`), so ``/proc/self/mountinfo`` names
  ``/train.csv``, not where the suite lives. The interpreter's prefix is the exception: it is
  mounted at its own path, which ``sys.executable`` names anyway.

``strict=True`` (the default) raises :class:`~wmrl_algos.errors.IsolationUnavailableError` when any of
this cannot be had; ``strict=False`` degrades (no uid drop and no tmpfs without root, rlimits instead
of cgroups) and lists each degradation in :attr:`BubblewrapSandbox.degradations` and in every result.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from wmrl_algos.errors import ConfigError, IsolationUnavailableError, SandboxError
from wmrl_envs.sandbox.base import ExecutionRequest, ExecutionResult
from wmrl_envs.sandbox.lifetime import WALL_GRACE_S, lifeline_fd, lifeline_guard, owner_guard, sweep_stale
from wmrl_envs.sandbox.limits import RunCgroups, cgroup_version
from wmrl_envs.sandbox.process import ManagedProcess
from wmrl_envs.sandbox.results import build_result, unencodable_code_result
from wmrl_envs.sandbox.seccomp import seccomp_fd, seccomp_program
from wmrl_envs.sandbox.workdir import OutputStore, WorkDir, copy_out, neutral_bind_script, overlay_available

__all__ = [
    "SANDBOX_CWD",
    "SHM_MB",
    "BubblewrapSandbox",
    "LaunchedRun",
    "input_target",
    "python_roots",
    "sandbox_interpreter",
]

SANDBOX_CWD = "/sandbox"
"""The solution's working directory inside the sandbox."""
SHM_MB = 64
"""Size of ``/dev/shm`` inside a sandbox (the Docker backend uses the same)."""

_UID_RANGE = (1_000_000, 1_900_000)
_HOST_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
_MERGED_USR_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")


def python_roots(python: str = sys.executable) -> tuple[str, ...]:
    """The directory trees outside ``/usr`` that an interpreter needs (its prefix and site dirs).

    Args:
        python: the interpreter path.

    Returns:
        Absolute, de-duplicated, non-nested paths (empty for a Debian ``/usr/bin/python3``).
    """
    real = os.path.realpath(python)
    candidates = {os.path.dirname(os.path.dirname(real))}
    venv = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(python))))
    if os.path.isfile(os.path.join(venv, "pyvenv.cfg")):  # a venv: its site-packages live beside the link
        candidates.add(venv)
    if os.path.realpath(sys.executable) == real:
        candidates |= {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}
    roots = sorted(path for path in candidates if not (path + "/").startswith("/usr/") and path != "/")
    return tuple(path for path in roots if not any(path.startswith(other + "/") for other in roots))


def sandbox_interpreter(python: str, roots: Sequence[str]) -> str:
    """The path the sandbox runs the interpreter by: the venv's own when it lies in a mounted root.

    Why not always the resolved binary: a venv's ``bin/python3`` is usually a symlink to the system
    interpreter, and Python finds the venv (``pyvenv.cfg``, its site-packages) from the path it was
    started by. Run by the resolved ``/usr/bin/python3.12``, a solution could not import the venv's
    numpy (measured on a GPU machine whose Python is ``/opt/torch/.venv``).

    Example:
        >>> sandbox_interpreter("/opt/venv/bin/python3", ("/opt/venv",))
        '/opt/venv/bin/python3'
    """
    unresolved = os.path.abspath(python)
    linked = os.path.join(os.path.realpath(os.path.dirname(unresolved)), os.path.basename(unresolved))
    if any(linked.startswith(root + "/") for root in roots):
        return linked
    return os.path.realpath(python)


def input_target(name: str, source: str | os.PathLike[str]) -> PurePosixPath:
    """Check one ``inputs`` entry and return where it goes under ``./input/``.

    Args:
        name: the name under ``./input/``.
        source: the host path.

    Returns:
        The relative target path.

    Raises:
        ConfigError: the name is absolute or contains ``.``/``..``, or the host path does not exist.
    """
    path = PurePosixPath(name)
    if path.is_absolute() or not path.parts or any(part in ("..", ".") for part in path.parts):
        raise ConfigError(
            f"input name {name!r} must be a relative path without '.' or '..' (it is placed under "
            f"./input/); rename the input"
        )
    if not os.path.exists(source):
        raise ConfigError(f"input {name!r} -> {os.fspath(source)!r} does not exist on the host; fix the path")
    return path


@dataclass
class LaunchedRun:
    """A started run: its process and the host-side resources to release.

    Attributes:
        process: the process tree.
        work: the host work dir.
        cgroups: the run's cgroups, when used.
        notes: degradations and other notes for the result's ``detail``.
    """

    process: ManagedProcess
    work: WorkDir
    cgroups: RunCgroups | None
    notes: list[str] = field(default_factory=list)

    def release(self) -> None:
        """Kill whatever is left and remove the cgroups and the work dir."""
        self.process.kill()
        if self.cgroups is not None:
            self.cgroups.remove()
        self.process.join(5.0)
        self.work.destroy()


class BubblewrapSandbox:
    """Runs each request in a fresh bubblewrap sandbox as a fresh unprivileged uid.

    Args:
        strict: raise instead of degrading when a layer of isolation is unavailable.
        python: the interpreter that runs ``solution.py`` (its prefix is mounted read-only).
        output_dir: where copied-out output files go (default: a private temp dir removed on close).
        extra_ro_paths: further host paths made visible read-only at the same path.
        cpus: CPU quota per run in cores (the Docker backend's default too), or None for none.
        seccomp: load the seccomp filter (x86-64; elsewhere its absence is listed as a degradation).

    Raises:
        IsolationUnavailableError: bwrap is missing or cannot create namespaces, or (strict) not root
            or no cgroups.
        ConfigError: ``cpus`` not positive.

    Example:
        >>> from wmrl_envs.sandbox.base import ExecutionRequest
        >>> sandbox = BubblewrapSandbox(strict=False)
        >>> result = sandbox.run(ExecutionRequest(code="import os; print(os.getuid() != 0)", timeout_s=30))
        >>> result.status, result.stdout
        ('ok', 'True\\n')
        >>> sandbox.close()
    """

    name = "local"

    def __init__(
        self,
        *,
        strict: bool = True,
        python: str = sys.executable,
        output_dir: Path | None = None,
        extra_ro_paths: Sequence[str] = (),
        cpus: float | None = 1.0,
        seccomp: bool = True,
    ) -> None:
        if cpus is not None and not cpus > 0:
            raise ConfigError(f"cpus={cpus} must be > 0 (a CPU quota per run, e.g. 1.0) or None for no quota")
        self.strict = strict
        self.cpus = cpus
        self._roots = python_roots(python)
        self.python = sandbox_interpreter(python, self._roots)
        self._extra = tuple(os.path.realpath(p) for p in extra_ro_paths)
        self._tools = {tool: shutil.which(tool, path=_HOST_PATH) for tool in
                       ("bwrap", "setpriv", "prlimit", "unshare", "mount", "umount", "env", "timeout")}
        if self._tools["bwrap"] is None:
            raise IsolationUnavailableError(
                "the local sandbox needs bubblewrap, which is not installed; install it "
                "(apt-get install -y bubblewrap) or ask for make_sandbox('docker'); untrusted code "
                "would otherwise run unconfined"
            )
        self.is_root = os.geteuid() == 0
        self.cgroup_version = cgroup_version() if self.is_root else None
        self.use_cgroups = self.cgroup_version is not None
        degradations: list[str] = []
        if not self.is_root:
            degradations.append("not root: no uid drop, no disk-capped tmpfs, no cgroups, inputs show their "
                                "host paths")
        elif not self.use_cgroups:
            degradations.append(
                "no cgroups (neither v1 memory+pids nor a v2 group that can delegate them): memory by "
                "RLIMIT_AS, pids by RLIMIT_NPROC"
            )
        self._seccomp = seccomp_program() if seccomp else None
        if seccomp and self._seccomp is None:
            degradations.append(f"no seccomp filter for {os.uname().machine}")
        missing = [tool for tool in ("setpriv", "prlimit", "unshare", "mount", "umount")
                   if self._tools[tool] is None]
        if self.is_root and missing:
            raise IsolationUnavailableError(
                f"running as root, the local sandbox needs {missing} (util-linux) to drop privileges; "
                f"install util-linux"
            )
        self.degradations = tuple(degradations)
        self._neutral_inputs = self.is_root and overlay_available()
        if degradations:
            if strict:
                raise IsolationUnavailableError(
                    "the local sandbox cannot provide full isolation here (" + "; ".join(degradations)
                    + "); run as root on a host with cgroups (v1, or v2 with the memory and pids "
                    "controllers), or pass strict=False to accept it"
                )
            warnings.warn("local sandbox degraded: " + "; ".join(degradations), RuntimeWarning, stacklevel=2)
        sweep_stale()
        self._outputs = OutputStore(output_dir)
        self._probe()

    def _probe(self) -> None:
        request = ExecutionRequest(code="", timeout_s=30.0, memory_mb=256, disk_mb=4)
        launched = self.launch(request, ["/usr/bin/true"])
        try:
            outcome = launched.process.wait(request.timeout_s)
        finally:
            launched.release()
        if outcome.returncode != 0:
            raise IsolationUnavailableError(
                f"bubblewrap cannot create its namespaces here (exit {outcome.returncode}: "
                f"{outcome.stderr.strip()[-300:]}); enable unprivileged user namespaces "
                f"(sysctl kernel.unprivileged_userns_clone=1) or use make_sandbox('docker')"
            )

    def _bwrap_options(self, request: ExecutionRequest, work: WorkDir, staged: Mapping[str, str],
                       inputs: Mapping[PurePosixPath, str], seccomp: int | None) -> list[str]:
        args = ["--unshare-all", "--die-with-parent", "--new-session",
                "--clearenv", "--hostname", "sandbox", "--ro-bind", "/usr", "/usr"]
        for link in _MERGED_USR_LINKS:
            host = Path("/") / link
            if host.is_symlink():
                args += ["--symlink", os.readlink(host), str(host)]
            elif host.is_dir():
                args += ["--ro-bind", str(host), str(host)]
        for etc in ("/etc/ld.so.cache", "/etc/localtime"):
            if os.path.exists(etc):
                args += ["--ro-bind", etc, etc]
        args += ["--proc", "/proc", "--dev", "/dev", "--size", str(SHM_MB * 2**20), "--tmpfs", "/dev/shm",
                 "--remount-ro", "/dev", "--bind", str(work.tmp), "/tmp",
                 "--bind", str(work.work), SANDBOX_CWD]
        for target, source in staged.items():  # after /tmp: an interpreter or venv under /tmp stays visible
            args += ["--ro-bind", source, target]
        for name, source in inputs.items():
            args += ["--ro-bind", source, f"{SANDBOX_CWD}/input/{name}"]
        args += ["--remount-ro", "/"]
        if seccomp is not None:
            args += ["--seccomp", str(seccomp)]
        env = {"PATH": ":".join([*(f"{r}/bin" for r in self._roots), "/usr/local/bin", "/usr/bin", "/bin"]),
               "HOME": SANDBOX_CWD, "TMPDIR": "/tmp", "LANG": "C.UTF-8", **request.env}
        for key, value in env.items():
            args += ["--setenv", key, value]
        return [*args, "--chdir", SANDBOX_CWD]

    def _bwrap(self, options: Sequence[str], options_fd: int, command: Sequence[str]) -> list[str]:
        """bwrap with an empty environment, its options read from ``options_fd``, the command guarded.

        bwrap's own process is the sandbox's pid 1: its argv and environment are what a solution reads
        in ``/proc/1/cmdline`` and ``/proc/1/environ``. The options (host paths of the work dir and of
        the mount sources) are written to a descriptor that bwrap closes after reading them, and
        ``env -i`` leaves it no environment (the shell chain would hand it ``PWD``, the host work
        dir). Inside, :func:`~wmrl_envs.sandbox.lifetime.lifeline_guard` runs the command only if the
        owner is still alive (see :mod:`~wmrl_envs.sandbox.lifetime`).
        """
        os.write(options_fd, b"".join(arg.encode() + b"\0" for arg in options))
        os.lseek(options_fd, 0, os.SEEK_SET)
        return [self._tools["env"] or "env", "-i", self._tools["bwrap"] or "bwrap", "--args", str(options_fd),
                "--", *lifeline_guard(list(command), lifeline_fd())]

    def launch(
        self, request: ExecutionRequest, command: Sequence[str], *, write_code: bool = True
    ) -> LaunchedRun:
        """Start ``command`` in a fresh sandbox set up for ``request`` (limits, inputs, work dir).

        The wall clock starts now; call ``process.start_clock()`` to restart it (warm execution).

        Args:
            request: the limits, inputs and environment.
            command: argv run inside, in ``/sandbox``.
            write_code: write ``request.code`` to ``solution.py`` before starting (a warm run writes
                it later with :meth:`write_code`).

        Returns:
            The started run; the caller must call :meth:`LaunchedRun.release` (or :meth:`finish`).

        Raises:
            ConfigError: an input name is not a plain relative path.
            SandboxError: the host-side setup (tmpfs, cgroups) failed.
        """
        inputs = {input_target(name, source): os.path.realpath(source)
                  for name, source in request.inputs.items()}
        uid = secrets.randbelow(_UID_RANGE[1] - _UID_RANGE[0]) + _UID_RANGE[0] if self.is_root else None
        try:
            work = WorkDir(request.disk_mb, owner=uid, capped=self.is_root)
        except (OSError, subprocess.CalledProcessError) as exc:
            raise SandboxError(f"could not create the run's work dir: {exc}") from exc
        cgroups: RunCgroups | None = None
        fds: list[int] = []
        try:
            if self.use_cgroups:
                version = self.cgroup_version or 1
                cgroups = RunCgroups(request.memory_mb, request.max_pids, self.cpus, version=version)
            fds.append(os.memfd_create("bwrap-options"))
            if self._seccomp is not None:
                fds.append(seccomp_fd(self._seccomp))
            argv = self._command(request, work, uid, cgroups, inputs, command, fds[0],
                                 fds[1] if len(fds) > 1 else None)
            if write_code:
                self.write_code(work, request.code)
            process = ManagedProcess(argv, env={"PATH": _HOST_PATH}, cwd=str(work.root),
                                     max_output_bytes=request.max_output_bytes,
                                     pass_fds=(*fds, lifeline_fd()),
                                     extra_kill=cgroups.kill_all if cgroups is not None else None)
        except BaseException as exc:
            if cgroups is not None:
                cgroups.remove()
            work.destroy()
            if isinstance(exc, OSError):
                raise SandboxError(f"could not start the sandbox: {exc}") from exc
            raise
        finally:
            for fd in fds:
                os.close(fd)
        notes = list(self.degradations)
        if self.cpus is not None and (cgroups is None or not cgroups.cpu_quota):
            notes.append("no CPU quota (cgroup cpu controller unavailable)")
        if inputs and uid is not None and not self._neutral_inputs:
            notes.append("inputs show their host paths in /proc/self/mountinfo (no overlayfs here)")
        return LaunchedRun(process=process, work=work, cgroups=cgroups, notes=notes)

    def _command(self, request: ExecutionRequest, work: WorkDir, uid: int | None, cgroups: RunCgroups | None,
                 inputs: Mapping[PurePosixPath, str], command: Sequence[str], options_fd: int,
                 seccomp: int | None) -> list[str]:
        for name, source in inputs.items():
            placeholder = work.inputs / name
            placeholder.parent.mkdir(parents=True, exist_ok=True)
            if os.path.isdir(source):
                placeholder.mkdir(exist_ok=True)
            else:
                placeholder.touch()
        if uid is None:
            staged = {root: root for root in (*self._roots, *self._extra)}
            options = self._bwrap_options(request, work, staged, inputs, seccomp)
            bwrap = self._bwrap(options, options_fd, command)
            rlimits = [f"--fsize={request.disk_mb * 2**20}", "--core=0",
                       f"--as={max(request.memory_mb, 1024) * 2**20 * 4}"]
            prlimit = [self._tools["prlimit"]] if self._tools["prlimit"] else []
            argv = [*prlimit, *rlimits, "--", *bwrap] if prlimit else bwrap
            return argv
        mounts: list[str] = []
        staged = {}
        for index, root in enumerate((*self._roots, *self._extra)):
            stage = work.root / f"ro-{index}"
            (stage.mkdir if os.path.isdir(root) else stage.touch)()
            mounts.append(self._ro_bind_script(root, str(stage)))
            staged[root] = str(stage)
        for name, source in inputs.items():
            target = str(work.inputs / name)
            mounts.append(neutral_bind_script(source, target, work.stage,
                                              mount=self._tools["mount"] or "mount",
                                              umount=self._tools["umount"] or "umount")
                          if self._neutral_inputs else self._ro_bind_script(source, target))
        bwrap = self._bwrap(self._bwrap_options(request, work, staged, {}, seccomp), options_fd, command)
        rlimits = [f"--fsize={request.disk_mb * 2**20}", "--core=0", f"--nproc={request.max_pids}"]
        if cgroups is None:
            rlimits.append(f"--as={max(request.memory_mb, 1024) * 2**20 * 4}")
        # The uid change clears the parent-death signal: re-arm it, then check the owner is still alive.
        drop = [self._tools["setpriv"] or "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--pdeathsig", "KILL", "--"]
        inner = "set -e; " + "; ".join(mounts) + ("; " if mounts else "") + "exec " + shlex.join(
            [self._tools["prlimit"] or "prlimit", *rlimits, "--", *drop, *owner_guard(bwrap)])
        # Join the cgroups before anything else runs; set -e makes a failed join abort the run.
        join = "".join(f"echo $$ > {shlex.quote(str(path))}; " for path in
                       (cgroups.procs_files if cgroups is not None else ()))
        outer = "set -e; " + join + "exec " + shlex.join([self._tools["unshare"] or "unshare", "--mount",
                                             "--propagation", "private", "/bin/sh", "-c", inner])
        return ["/bin/sh", "-c", outer]

    @staticmethod
    def write_code(work: WorkDir, code: str) -> None:
        """Write the solution as a read-only UTF-8 ``solution.py`` in the run's work dir."""
        solution = work.work / "solution.py"
        solution.write_text(code, encoding="utf-8")
        os.chmod(solution, 0o444)

    def _ro_bind_script(self, source: str, target: str) -> str:
        mount = self._tools["mount"] or "mount"
        return (f"{mount} --bind {shlex.quote(source)} {shlex.quote(target)}; "
                f"{mount} -o remount,bind,ro {shlex.quote(target)}")

    def finish(self, launched: LaunchedRun, request: ExecutionRequest) -> ExecutionResult:
        """Wait for a launched run, classify it, copy the output out, and release everything.

        Args:
            launched: from :meth:`launch`.
            request: the request it runs (its timeout and output settings apply).

        Returns:
            The result.
        """
        try:
            outcome = launched.process.wait(request.timeout_s)
            if outcome.returncode in (-9, 128 + 9) and outcome.wall_s >= request.timeout_s:
                outcome = dataclasses.replace(outcome, timed_out=True)  # the run's own clock was first
            limits: list[str] = []
            peak_mb = cpu_s = None
            if launched.cgroups is not None:
                launched.cgroups.kill_all()
                usage = launched.cgroups.usage()
                peak_mb, cpu_s = usage.peak_memory_mb, usage.cpu_s
                if usage.oom_kills:
                    limits.append(f"memory limit ({request.memory_mb} MB, {usage.oom_kills} OOM kill(s))")
                if usage.pids_limit_hits:
                    limits.append(f"pids limit ({request.max_pids}, {usage.pids_limit_hits} fork(s) refused)")
            if launched.work.disk_full():
                limits.append(f"disk cap ({request.disk_mb} MB)")
            if outcome.returncode in (-25, 128 + 25):
                limits.append("file size limit")
            copied = copy_out(launched.work.work, request.output_name,
                              self._outputs.new_path(request.output_name),
                              request.max_output_file_mb * 2**20)
            return build_result(outcome, backend=self.name, limits_hit=limits, copied=copied,
                                notes=launched.notes, max_rss_mb=peak_mb, cpu_s=cpu_s)
        finally:
            launched.release()

    def run(self, request: ExecutionRequest) -> ExecutionResult:
        """Execute one request (see :class:`~wmrl_envs.sandbox.base.Sandbox`)."""
        refused = unencodable_code_result(request.code, backend=self.name)
        if refused is not None:
            return refused
        # The run's own wall clock (see :data:`~wmrl_envs.sandbox.lifetime.WALL_GRACE_S`): the owner's
        # deadline ends a live run first; this one ends it when the owner is gone.
        clock = [self._tools["timeout"] or "timeout", "--signal=KILL", f"{request.timeout_s + WALL_GRACE_S}s"]
        launched = self.launch(request, [*clock, self.python, "-s", "-B", "solution.py"])
        return self.finish(launched, request)

    def close(self) -> None:
        """Remove the private output dir."""
        self._outputs.close()
