"""The Docker sandbox backend, and the local image it runs (built from this host, no registry).

Why an adapter: it needs the ``docker`` SDK (extra ``docker``) and a running engine, and the core never
imports adapters. Importing this module registers the backend under ``"docker"`` in
:mod:`wmrl_envs.sandbox`'s registry; ``make_sandbox("docker")`` imports it lazily by name.

Each run is one fresh container: ``network_mode="none"``, a memory limit with swap equal to it, a pids
limit, a CPU quota, a read-only root file system, every capability dropped, ``no-new-privileges``, a
fresh random unprivileged uid, a file-size ulimit and a size-capped log. Files move through bind
mounts (``put_archive``/``get_archive`` fail on read-only roots): the host's run dir (a capped tmpfs
when root, as in the local backend) is ``/sandbox`` and ``/tmp``; inputs are bound read-only under
``/sandbox/input``. The output file is copied out on the host with the same no-symlink, no-FIFO,
size-capped check as every backend, and the run dir is unmounted afterwards. As root, inputs are bound
through the local backend's neutral staging (:func:`~wmrl_envs.sandbox.workdir.neutral_bind_script`),
so the container's mount table names ``/train.csv`` on an overlay, not the host path of the suite.

The container's entry process is the image's ``timeout`` (GNU coreutils, copied from the host): pid 1
of the container's pid namespace, it runs the solution and SIGKILLs it at the run's wall-clock limit
plus :data:`WALL_GRACE_S`, then exits, and with pid 1 gone the kernel kills everything else in the
container (a ``setsid`` daemon cannot outlive it). The solution cannot signal it away: signals from
inside a pid namespace reach its init only through handlers it installed, and ``timeout`` forwards
those to the solution without touching its timer.

Nothing outlives its owner: the engine, not the trainer, runs the container, so a killed trainer
cannot take it along; but its entry process ends it at its own wall-clock limit whatever its owner
does (a sleeping orphan too, which a CPU-time cap would not catch). Every container is labelled
with its owner (``wmrl.owner``: pid and start time; ``wmrl.boot``: the host's boot id) and the backend
removes the (exited) containers of dead owners on this host when it starts and when it closes
(:func:`sweep_stale_containers`), as the local backend sweeps its mounts, cgroups and work dirs.
Docker's default seccomp profile applies (the ``local`` backend loads an equivalent filter).

The image (``wmrl-sandbox:<version>``) is made by :func:`build_sandbox_image` from the host's own
interpreter: its standard library (without tests, IDLE, tkinter and the static-link config), the ML
packages solutions use (numpy, pandas, scikit-learn, scipy, lightgbm and their dependencies, without
their test suites) and the shared libraries they link, found with ``ldd``. It is
imported with ``docker import`` (no Dockerfile, no registry, no network), so it matches the host's
Python exactly; the interpreter path is stored as the image label ``wmrl.python``.

Command line: ``python -m wmrl_adapters.docker build-image [--tag T] [--force]``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import io
import os
import re
import secrets
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import warnings
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any

from wmrl_algos.errors import ConfigError, IsolationUnavailableError, SandboxError, require
from wmrl_envs.sandbox import register_backend
from wmrl_envs.sandbox.base import ExecutionRequest, ExecutionResult
from wmrl_envs.sandbox.lifetime import WALL_GRACE_S, owner_alive, owner_tag, parse_owner, sweep_stale
from wmrl_envs.sandbox.local import SHM_MB, input_target
from wmrl_envs.sandbox.process import ProcessOutcome
from wmrl_envs.sandbox.results import build_result, unencodable_code_result
from wmrl_envs.sandbox.workdir import OutputStore, WorkDir, copy_out, neutral_bind_script, overlay_available

__all__ = [
    "DEFAULT_IMAGE",
    "IMAGE_PACKAGES",
    "WALL_GRACE_S",
    "DockerSandbox",
    "build_sandbox_image",
    "docker_client",
    "engine_reachable",
    "sweep_stale_containers",
]

try:
    _VERSION = importlib.metadata.version("wmrl")
except importlib.metadata.PackageNotFoundError:
    _VERSION = "dev"

DEFAULT_IMAGE = f"wmrl-sandbox:{_VERSION}"
"""The image name the backend uses unless told otherwise."""

IMAGE_PACKAGES: tuple[str, ...] = ("numpy", "pandas", "scikit-learn", "scipy", "lightgbm")
"""Distributions copied into the image, with their (non-extra) dependencies."""

_SOCKETS = ("/var/run/docker.sock", "/tmp/wmrl-docker/docker.sock")
_UID_RANGE = (1_000_000, 1_900_000)
_PYTHON_LABEL = "wmrl.python"
_ENTRY_LABEL = "wmrl.entry"
_OWNER_LABEL = "wmrl.owner"
_BOOT_LABEL = "wmrl.boot"
_STDLIB_SKIP = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "site-packages"}


def _base_url(base_url: str | None) -> str | None:
    if base_url:
        return base_url
    if os.environ.get("DOCKER_HOST"):
        return os.environ["DOCKER_HOST"]
    for socket_path in _SOCKETS:
        if os.path.exists(socket_path):
            return f"unix://{socket_path}"
    return None


def docker_client(base_url: str | None = None, timeout_s: float = 60.0) -> Any:
    """A docker SDK client for the engine at ``base_url``, ``$DOCKER_HOST`` or a known socket.

    Args:
        base_url: e.g. ``unix:///tmp/wmrl-docker/docker.sock``.
        timeout_s: HTTP timeout of API calls.

    Returns:
        A ``docker.DockerClient``.

    Raises:
        MissingDependencyError: the ``docker`` SDK is not installed.
        IsolationUnavailableError: no engine answers.
    """
    docker = require("docker", "docker")
    url = _base_url(base_url)
    if url is None:
        raise IsolationUnavailableError(
            "no Docker engine found (no DOCKER_HOST, no /var/run/docker.sock); start one (`dockerd`, or in a "
            "clone of the wmrl source repository `export $(bash scripts/docker_engine.sh start)`) or use "
            "make_sandbox('local')"
        )
    try:
        client = docker.DockerClient(base_url=url, timeout=int(timeout_s))
        client.ping()
    except Exception as exc:
        raise IsolationUnavailableError(
            f"the Docker engine at {url} does not answer ({exc}); start it (`dockerd`, or in a clone of the "
            "wmrl source repository `bash scripts/docker_engine.sh start`) or use make_sandbox('local')"
        ) from exc
    return client


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def sweep_stale_containers(client: Any) -> list[str]:
    """Remove the sandbox containers whose owner process on this host is gone.

    Args:
        client: a ``docker.DockerClient``.

    Returns:
        The ids of the removed containers. Containers of live owners, and of other hosts sharing
        the engine (another boot id), are left alone.
    """
    removed: list[str] = []
    boot = _boot_id()
    # sparse: the listing's own labels, no per-container inspect (a container removed between the list
    # and its inspect, e.g. by its live owner, would otherwise raise NotFound and end the sweep).
    for container in client.containers.list(all=True, filters={"label": _OWNER_LABEL}, sparse=True):
        labels = container.attrs.get("Labels") or {}
        owner = parse_owner(f"wmrl-run-{labels.get(_OWNER_LABEL, '')}-")
        if labels.get(_BOOT_LABEL) != boot or owner is None or owner_alive(*owner):
            continue
        with contextlib.suppress(Exception):
            container.remove(force=True)
            removed.append(str(container.id))
    return removed


def engine_reachable(base_url: str | None = None) -> bool:
    """Whether a Docker engine answers (and the SDK is installed)."""
    try:
        docker_client(base_url, timeout_s=5).close()
    except Exception:
        return False
    return True


def _distribution_closure(names: Iterable[str]) -> list[importlib.metadata.Distribution]:
    requirements = require("packaging.requirements", "docker")
    pending, seen = list(names), set()
    found: list[importlib.metadata.Distribution] = []
    while pending:
        name = re.sub(r"[-_.]+", "-", pending.pop()).lower()
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        found.append(dist)
        for spec in dist.requires or ():
            requirement = requirements.Requirement(spec)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    return found


def _shared_libraries(elf_files: list[str]) -> set[str]:
    libraries: set[str] = set()
    for start in range(0, len(elf_files), 64):
        result = subprocess.run(["ldd", *elf_files[start : start + 64]], capture_output=True, text=True)
        for line in result.stdout.splitlines():
            match = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", line)
            if match:
                libraries.add(os.path.normpath(match.group(1)))
    return libraries


def _host_timeout() -> str:
    found = shutil.which("timeout", path="/usr/bin:/bin")
    if found is None:
        raise SandboxError("the sandbox image needs the host's `timeout` as its entry process; "
                           "install coreutils")
    return os.path.realpath(found)


def _image_files(packages: Iterable[str]) -> set[str]:
    prefix = Path(sys.base_prefix).resolve()
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    entry = _host_timeout()
    files: set[str] = {os.path.realpath(sys.executable), sys.executable, entry}
    files |= {str(p) for p in (prefix / "lib").glob("libpython*.so*")}
    for path in stdlib.rglob("*"):
        relative = path.relative_to(stdlib)
        if relative.parts and (relative.parts[0] in _STDLIB_SKIP or relative.parts[0].startswith("config-")):
            continue
        if path.is_file() or path.is_symlink():
            files.add(str(path))
    for dist in _distribution_closure(packages):
        for entry in dist.files or ():
            if "tests" in entry.parts or entry.suffix == ".a":
                continue
            located = Path(str(dist.locate_file(entry))).resolve()
            if located.is_file():
                files.add(str(located))
    package_dirs = {str(Path(p).parent) for p in files if ".libs/" in p}
    for directory in package_dirs:
        files |= {str(p) for p in Path(directory).iterdir() if p.is_file()}
    programs = (os.path.realpath(sys.executable), entry)
    elf = [p for p in files if p.endswith(".so") or ".so." in p or p in programs]
    for library in _shared_libraries(elf):
        files.add(library)
        files.add(os.path.realpath(library))
    for extra in ("/etc/ld.so.cache", "/etc/localtime"):
        if os.path.exists(extra):
            files.add(extra)
    return files


def _add_parents(archive: tarfile.TarFile, path: PurePosixPath, added: set[str]) -> None:
    for parent in reversed(path.parents):
        name = str(parent).lstrip("/")
        if not name or name in added:
            continue
        added.add(name)
        info = tarfile.TarInfo(name)
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
        archive.addfile(info)


def _write_rootfs(files: set[str], target: Path) -> None:
    added: set[str] = set()
    with tarfile.open(target, "w") as archive:
        for link in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            host = Path("/") / link
            if host.is_symlink():
                info = tarfile.TarInfo(link)
                info.type = tarfile.SYMTYPE
                info.linkname = os.readlink(host)
                archive.addfile(info)
                added.add(link)
        for directory, mode in (("tmp", 0o1777), ("sandbox", 0o755), ("etc", 0o755), ("proc", 0o555),
                                ("dev", 0o755), ("sys", 0o555)):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, mode
            archive.addfile(info)
            added.add(directory)
        for name, text in (("etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/sh\n"),
                           ("etc/group", "root:x:0:\nnogroup:x:65534:\n")):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            archive.addfile(info, fileobj=io.BytesIO(data))
            added.add(name)
        for path in sorted(files):
            logical = PurePosixPath(path)
            if any(str(logical).startswith(f"/{link}/") for link in ("bin", "sbin", "lib", "lib64")
                   if Path(f"/{link}").is_symlink()):
                logical = PurePosixPath("/usr") / logical.relative_to("/")
            name = str(logical).lstrip("/")
            if name in added:
                continue
            _add_parents(archive, logical, added)
            info = archive.gettarinfo(path, arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if info.isdir():
                info.mode = 0o755
            if info.isreg():
                with open(path, "rb") as handle:
                    archive.addfile(info, handle)
            else:
                archive.addfile(info)
            added.add(name)


def build_sandbox_image(
    tag: str = DEFAULT_IMAGE,
    *,
    base_url: str | None = None,
    packages: Iterable[str] = IMAGE_PACKAGES,
    force: bool = False,
) -> str:
    """Build the sandbox image from this host's interpreter and ML packages, with ``docker import``.

    Args:
        tag: the image name, ``repository:tag``.
        base_url: the engine (default: ``$DOCKER_HOST`` or a known socket).
        packages: distributions to include (with their dependencies).
        force: rebuild even if the image exists.

    Returns:
        The image id.

    Raises:
        IsolationUnavailableError: no engine.
        SandboxError: the import failed.
    """
    client = docker_client(base_url, timeout_s=600)
    try:
        if not force:
            with contextlib.suppress(Exception):
                return str(client.images.get(tag).id)
        repository, _, version = tag.rpartition(":")
        with tempfile.TemporaryDirectory(prefix="wmrl-rootfs-") as scratch:
            rootfs = Path(scratch) / "rootfs.tar"
            _write_rootfs(_image_files(packages), rootfs)
            try:
                client.api.import_image_from_file(
                    str(rootfs), repository=repository or tag, tag=version or "latest",
                    changes=[f"LABEL {_PYTHON_LABEL}={os.path.realpath(sys.executable)}",
                             f"LABEL {_ENTRY_LABEL}={_host_timeout()}",
                             "WORKDIR /sandbox", "USER 65534"],
                )
            except Exception as exc:
                raise SandboxError(f"docker import of the sandbox image {tag!r} failed: {exc}") from exc
        return str(client.images.get(tag).id)
    finally:
        client.close()


class DockerSandbox:
    """Runs each request in a fresh, locked-down container of the local sandbox image.

    Args:
        strict: raise when isolation cannot be complete (no engine, not root so no disk-capped run
            dir) instead of degrading.
        base_url: the engine (default: ``$DOCKER_HOST``, ``/var/run/docker.sock`` or the socket of
            ``scripts/docker_engine.sh``).
        image: the image; built with :func:`build_sandbox_image` when missing and ``build_image``.
        build_image: build the image when it is missing.
        cpus: CPU quota per container.
        output_dir: where copied-out output files go (default: a private temp dir removed on close).

    Raises:
        IsolationUnavailableError: no engine, no image, or (strict) not root.
        ConfigError: ``cpus`` not positive.

    Example:
        >>> from wmrl_envs.sandbox import ExecutionRequest, make_sandbox
        >>> sandbox = make_sandbox("docker")  # doctest: +SKIP
        >>> sandbox.run(ExecutionRequest(code="print(1 + 1)", timeout_s=30)).stdout  # doctest: +SKIP
        '2\\n'
    """

    name = "docker"

    def __init__(
        self,
        *,
        strict: bool = True,
        base_url: str | None = None,
        image: str = DEFAULT_IMAGE,
        build_image: bool = True,
        cpus: float = 1.0,
        output_dir: Path | None = None,
    ) -> None:
        if cpus <= 0:
            raise ConfigError(f"cpus={cpus} must be > 0 (a CPU quota per container, e.g. 1.0)")
        self._docker = require("docker", "docker")
        self.strict = strict
        self.cpus = cpus
        self.image = image
        self.is_root = os.geteuid() == 0
        self.degradations: tuple[str, ...] = ()
        if not self.is_root:
            self.degradations = ("not root: the run dir is not a disk-capped tmpfs (file-size ulimit only) "
                                 "and inputs show their host paths",)
            if strict:
                raise IsolationUnavailableError(
                    "the docker sandbox needs root to mount a disk-capped run dir; run as root or pass "
                    "strict=False to accept a file-size limit only"
                )
            warnings.warn("docker sandbox degraded: " + self.degradations[0], RuntimeWarning, stacklevel=2)
        self._client = docker_client(base_url)
        self._base_url = base_url
        try:
            self._python, self._entry = self._image_labels()
        except Exception as exc:
            if not build_image:
                raise IsolationUnavailableError(
                    f"sandbox image {image!r} is missing or out of date ({exc}); build it with "
                    f"`python -m wmrl_adapters.docker build-image --force`"
                ) from exc
            build_sandbox_image(image, base_url=base_url, force=True)
            self._python, self._entry = self._image_labels()
        self._neutral_inputs = self.is_root and overlay_available()
        sweep_stale()
        sweep_stale_containers(self._client)
        self._outputs = OutputStore(output_dir)

    def _image_labels(self) -> tuple[str, str]:
        """The image's interpreter and entry process (an image built before the entry had none)."""
        labels = self._client.images.get(self.image).labels or {}
        missing = [label for label in (_PYTHON_LABEL, _ENTRY_LABEL) if not labels.get(label)]
        if missing:
            raise IsolationUnavailableError(
                f"image {self.image!r} has no {missing} label(s); rebuild it with "
                f"build_sandbox_image(force=True)"
            )
        return str(labels[_PYTHON_LABEL]), str(labels[_ENTRY_LABEL])

    def run(self, request: ExecutionRequest) -> ExecutionResult:
        """Execute one request (see :class:`~wmrl_envs.sandbox.base.Sandbox`)."""
        refused = unencodable_code_result(request.code, backend=self.name)
        if refused is not None:
            return refused
        uid = secrets.randbelow(_UID_RANGE[1] - _UID_RANGE[0]) + _UID_RANGE[0]
        try:
            work = WorkDir(request.disk_mb, owner=uid, capped=self.is_root)
        except (OSError, subprocess.CalledProcessError) as exc:
            raise SandboxError(f"could not create the run's work dir: {exc}") from exc
        container = None
        try:
            volumes = {str(work.work): {"bind": "/sandbox", "mode": "rw"},
                       str(work.tmp): {"bind": "/tmp", "mode": "rw"}}
            for name, source in request.inputs.items():
                target = input_target(name, source)
                placeholder = work.inputs / target
                placeholder.parent.mkdir(parents=True, exist_ok=True)
                real = os.path.realpath(source)
                (placeholder.mkdir if os.path.isdir(real) else placeholder.touch)()
                if self._neutral_inputs:
                    subprocess.run(["/bin/sh", "-c", "set -e; " + neutral_bind_script(
                        real, str(placeholder), work.stage)], check=True, capture_output=True)
                    real = str(placeholder)
                volumes[real] = {"bind": f"/sandbox/input/{target}", "mode": "ro"}
            solution = work.work / "solution.py"
            solution.write_text(request.code, encoding="utf-8")
            os.chmod(solution, 0o444)
            types = self._docker.types
            file_cap = request.disk_mb * 2**20
            log_cap = max(request.max_output_bytes, 65536)
            environment = {"HOME": "/sandbox", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
                           "PATH": f"{os.path.dirname(self._python)}:/usr/local/bin:/usr/bin:/bin",
                           **request.env}
            container = self._client.containers.create(
                self.image,
                command=[self._entry, "--signal=KILL", f"{request.timeout_s + WALL_GRACE_S}s",
                         self._python, "-s", "-B", "solution.py"],
                user=f"{uid}:{uid}",
                working_dir="/sandbox",
                environment=environment,
                volumes=volumes,
                network_mode="none",
                mem_limit=f"{request.memory_mb}m",
                memswap_limit=f"{request.memory_mb}m",
                pids_limit=request.max_pids,
                nano_cpus=int(self.cpus * 1e9),
                read_only=True,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                ulimits=[types.Ulimit(name="fsize", soft=file_cap, hard=file_cap),
                         types.Ulimit(name="core", soft=0, hard=0)],
                labels={_OWNER_LABEL: owner_tag(), _BOOT_LABEL: _boot_id()},
                log_config=types.LogConfig(
                    type="json-file", config={"max-size": str(log_cap), "max-file": "2"}
                ),
                shm_size=f"{SHM_MB}m",
                hostname="sandbox",
                detach=True,
            )
            started = time.monotonic()
            container.start()
            timed_out = False
            try:
                status = container.wait(timeout=request.timeout_s)
            except Exception:
                timed_out = True
                with contextlib.suppress(Exception):
                    container.kill()
                status = container.wait(timeout=60)
            wall = time.monotonic() - started
            container.reload()
            state = container.attrs.get("State", {})
            returncode = int(status.get("StatusCode", state.get("ExitCode", -1)))
            # The entry process's own kill (the trainer was too slow to end the run first) is a timeout too.
            timed_out = timed_out or (returncode == 128 + 9 and wall >= request.timeout_s)
            stdout = container.logs(stdout=True, stderr=False)
            stderr = container.logs(stdout=False, stderr=True)
            cap = request.max_output_bytes
            outcome = ProcessOutcome(
                returncode=returncode, timed_out=timed_out,
                stdout=stdout[-cap:].decode("utf-8", "replace") if cap else "",
                stderr=stderr[-cap:].decode("utf-8", "replace") if cap else "",
                stdout_truncated=len(stdout) > cap, stderr_truncated=len(stderr) > cap,
                wall_s=wall, cpu_s=0.0, max_rss_mb=0.0,
            )
            limits = []
            if state.get("OOMKilled"):
                limits.append(f"memory limit ({request.memory_mb} MB, OOM kill)")
            if work.disk_full():
                limits.append(f"disk cap ({request.disk_mb} MB)")
            if returncode == 128 + 25:
                limits.append("file size limit")
            copied = copy_out(work.work, request.output_name, self._outputs.new_path(request.output_name),
                              request.max_output_file_mb * 2**20)
            result = build_result(outcome, backend=self.name, limits_hit=limits, copied=copied,
                                  notes=self.degradations)
            return replace(result, cpu_s=None, max_rss_mb=None)
        except ConfigError:
            raise
        except Exception as exc:
            if isinstance(exc, SandboxError):
                raise
            raise SandboxError(f"the docker sandbox failed: {exc}") from exc
        finally:
            if container is not None:
                with contextlib.suppress(Exception):
                    container.remove(force=True)
            work.destroy()

    def close(self) -> None:
        """Sweep the containers of dead owners, close the engine connection, remove the output dir."""
        with contextlib.suppress(Exception):
            sweep_stale_containers(self._client)
        self._client.close()
        self._outputs.close()


def _factory(*, strict: bool = True, **kwargs: Any) -> DockerSandbox:
    return DockerSandbox(strict=strict, **kwargs)


register_backend("docker", _factory, engine_reachable)


def main(argv: list[str] | None = None) -> int:
    """``python -m wmrl_adapters.docker build-image [--tag T] [--force]``: build the sandbox image."""
    parser = argparse.ArgumentParser(prog="wmrl docker",
                                     description="Build the wmrl sandbox image.")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build-image", help="build the sandbox image from this host's Python")
    build.add_argument("--tag", default=DEFAULT_IMAGE, help="image name (default: %(default)s)")
    build.add_argument("--force", action="store_true", help="rebuild even if the image exists")
    build.add_argument("--base-url", default=None, help="engine URL (default: $DOCKER_HOST)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    image_id = build_sandbox_image(args.tag, base_url=args.base_url, force=args.force)
    print(f"{args.tag} {image_id} ({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
