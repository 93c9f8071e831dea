"""Where the embodied stack lives, and the worker process that runs a simulator (or Robometer) for wmrl.

Why out of process: the robotics teams' stack (LeRobot >= 0.6 with LIBERO, robosuite 1.4, MuJoCo, and
Robometer) needs Python >= 3.12 and pulls CUDA torch with its nvidia wheels (≈7 GB), while wmrl itself
runs on a light interpreter with CPU torch. ``scripts/embodied.sh`` builds the stack in its own venv;
each :class:`SimulatorProcess` starts one worker under that interpreter and exchanges framed pickles
with it (see :mod:`wmrl_envs.embodied._worker`, which imports nothing of wmrl). Measured on a loaded
2-core machine, a round trip costs 0.6 ms and two 256×256 images both ways 4.3 ms, against 20–1000 ms
per simulator step (docs/embodied.md), so the split costs nothing that matters.

A worker that dies (a segfault in MuJoCo, an out-of-memory kill) is reported as
:class:`SimulatorError` with the tail of its stderr; the env turns a failed step into an ended episode.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any, BinaryIO

from wmrl_algos.errors import MissingDependencyError, WMRLError
from wmrl_envs.embodied import _worker

__all__ = [
    "EMBODIED_HOME_VARIABLE",
    "EMBODIED_PYTHON_VARIABLE",
    "RenderingUnavailableError",
    "SimulatorError",
    "SimulatorProcess",
    "embodied_python",
]

EMBODIED_PYTHON_VARIABLE = "WMRL_EMBODIED_PYTHON"
"""Environment variable naming the interpreter of the embodied stack (overrides the default venv)."""
EMBODIED_HOME_VARIABLE = "WMRL_EMBODIED_HOME"
"""Environment variable naming the folder ``scripts/embodied.sh`` builds into (default
``~/.cache/wmrl/embodied``)."""
_WORKER_FILE = Path(_worker.__file__).resolve()
_STDERR_TAIL = 4000


class SimulatorError(WMRLError, RuntimeError):
    """The simulator worker failed an operation or died; the message carries its error and stderr tail."""


class RenderingUnavailableError(SimulatorError):
    """MuJoCo cannot render offscreen here; the message names ``MUJOCO_GL`` and the fix."""


def embodied_python() -> Path:
    """The interpreter of the embodied stack.

    ``$WMRL_EMBODIED_PYTHON`` when set, else the venv that ``scripts/embodied.sh`` builds under
    ``$WMRL_EMBODIED_HOME`` (default ``~/.cache/wmrl/embodied/venv``).

    Raises:
        MissingDependencyError: no such interpreter exists; the message gives the build command.
    """
    explicit = os.environ.get(EMBODIED_PYTHON_VARIABLE)
    if explicit:
        path = Path(explicit)
    else:
        home = Path(os.environ.get(EMBODIED_HOME_VARIABLE, Path.home() / ".cache" / "wmrl" / "embodied"))
        path = home / "venv" / "bin" / "python"
    if not path.exists():
        raise MissingDependencyError(
            f"the embodied stack's interpreter {str(path)!r} does not exist; build it with "
            "`bash scripts/embodied.sh` from a clone of the wmrl source repository "
            "(LeRobot + LIBERO + robosuite 1.4 in a Python 3.12 venv, ≈10 min "
            f"once), or point ${EMBODIED_PYTHON_VARIABLE} at a Python that has that stack"
        )
    return path


class SimulatorProcess:
    """One worker process under the embodied stack's interpreter, called one operation at a time.

    Args:
        python: the interpreter to run the worker with; :func:`embodied_python` if ``None``.
        env: extra environment variables for the worker (e.g. ``{"MUJOCO_GL": "osmesa"}``); the worker
            defaults ``MUJOCO_GL`` to ``egl``.

    Raises:
        MissingDependencyError: no embodied interpreter exists.
        SimulatorError: the worker did not start.

    Example:
        >>> worker = SimulatorProcess()  # doctest: +SKIP
        >>> worker.call("hello")["python"]  # doctest: +SKIP
        '3.12.1'
        >>> worker.close()  # doctest: +SKIP
    """

    def __init__(
        self, python: str | os.PathLike[str] | None = None, *, env: dict[str, str] | None = None
    ) -> None:
        interpreter = Path(python) if python is not None else embodied_python()
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the worker; closed in close()
        environment = {**os.environ, **(env or {})}
        environment.pop("PYTHONPATH", None)  # the worker must see its own stack, not this interpreter's
        self._process = subprocess.Popen(
            [str(interpreter), "-u", str(_WORKER_FILE)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=environment,
        )
        self._lock = threading.Lock()
        self.versions: dict[str, Any] = self.call("hello")

    def call(self, operation: str, **arguments: Any) -> Any:
        """Run one operation in the worker and return its value.

        Raises:
            RenderingUnavailableError: the worker could not create a rendering context.
            SimulatorError: the operation raised in the worker (its message and traceback are kept), or
                the worker is gone.
        """
        with self._lock:
            if self._process.poll() is not None:
                raise SimulatorError(
                    f"the simulator worker has exited ({self._exit_text()}){self._stderr_tail()}"
                )
            try:
                _worker.write_message(self._pipe_in, (operation, arguments))
                reply = _worker.read_message(self._pipe_out)
            except (BrokenPipeError, OSError) as exc:
                raise SimulatorError(
                    f"lost the simulator worker during {operation!r}: {exc}{self._stderr_tail()}"
                ) from exc
            if reply is None:
                self._process.wait(timeout=10)
                raise SimulatorError(
                    f"the simulator worker died during {operation!r} ({self._exit_text()})"
                    f"{self._stderr_tail()}"
                )
        if reply[0] == "ok":
            return reply[1]
        _, kind, message, remote_traceback = reply
        if kind == "RenderingUnavailable":
            raise RenderingUnavailableError(message)
        raise SimulatorError(
            f"{operation!r} failed in the simulator worker: {kind}: {message}\n{remote_traceback}"
        )

    @property
    def alive(self) -> bool:
        """Whether the worker process is still running."""
        return self._process.poll() is None

    def close(self) -> None:
        """Ask the worker to close its simulator and exit; kill it if it does not within 10 s."""
        if self._process.poll() is None:
            try:
                with self._lock:
                    _worker.write_message(self._pipe_in, ("close", {}))
                    _worker.read_message(self._pipe_out)
                self._process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait()
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                stream.close()
        self._stderr.close()

    def __del__(self) -> None:
        process = getattr(self, "_process", None)
        if process is not None and process.poll() is None:
            process.kill()

    @property
    def _pipe_in(self) -> BinaryIO:
        assert self._process.stdin is not None
        return self._process.stdin

    @property
    def _pipe_out(self) -> BinaryIO:
        assert self._process.stdout is not None
        return self._process.stdout

    def _exit_text(self) -> str:
        code = self._process.poll()
        return "still running" if code is None else f"exit status {code}"

    def _stderr_tail(self) -> str:
        try:
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - _STDERR_TAIL))
            text = self._stderr.read().decode(errors="replace").strip()
        except (OSError, ValueError):
            return ""
        return f"; its stderr ends with:\n{text}" if text else ""
