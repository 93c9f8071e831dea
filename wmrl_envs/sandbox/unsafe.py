"""A plain-subprocess backend for development: same layout and result shape, no isolation at all.

Why it exists: to write and debug an environment on a machine without bubblewrap or Docker, and as
the baseline the sandbox overhead benchmark measures against. It is never chosen implicitly: only
``make_sandbox("unsafe")`` returns it. The solution runs as the caller's user with the caller's file
system and network; only the wall-clock limit (whole session killed), the output caps, a clean
environment, per-process rlimits (file size, core dumps) and the output-file checks apply.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from wmrl_envs.sandbox.base import ExecutionRequest, ExecutionResult
from wmrl_envs.sandbox.lifetime import sweep_stale
from wmrl_envs.sandbox.local import input_target
from wmrl_envs.sandbox.process import ManagedProcess
from wmrl_envs.sandbox.results import build_result, unencodable_code_result
from wmrl_envs.sandbox.workdir import OutputStore, WorkDir, copy_out

__all__ = ["UnsafeSandbox"]


class UnsafeSandbox:
    """Runs each request as a plain subprocess in a fresh temporary work dir. NOT a security boundary.

    Args:
        python: the interpreter that runs ``solution.py``.
        output_dir: where copied-out output files go (default: a private temp dir removed on close).

    Example:
        >>> from wmrl_envs.sandbox.base import ExecutionRequest
        >>> sandbox = UnsafeSandbox()
        >>> result = sandbox.run(ExecutionRequest(code="print(6 * 7)", timeout_s=30))
        >>> result.status, result.stdout
        ('ok', '42\\n')
        >>> sandbox.close()
    """

    name = "unsafe"

    def __init__(self, python: str = sys.executable, output_dir: Path | None = None) -> None:
        self.python = python
        sweep_stale()
        self._outputs = OutputStore(output_dir)

    def run(self, request: ExecutionRequest) -> ExecutionResult:
        """Execute one request (see :class:`~wmrl_envs.sandbox.base.Sandbox`)."""
        refused = unencodable_code_result(request.code, backend=self.name)
        if refused is not None:
            return refused
        work = WorkDir(request.disk_mb)
        try:
            for name, source in request.inputs.items():
                link = work.inputs / input_target(name, source)
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(Path(source).resolve())
            (work.work / "solution.py").write_text(request.code, encoding="utf-8")
            env = {"PATH": os.defpath, "HOME": str(work.work), "TMPDIR": str(work.tmp), "LANG": "C.UTF-8",
                   **request.env}
            file_cap = request.disk_mb * 1024 * 1024
            argv = [self.python, "-s", "-B", "solution.py"]
            prlimit = shutil.which("prlimit")
            if prlimit is not None:
                argv = [prlimit, f"--fsize={file_cap}", "--core=0", "--", *argv]
            process = ManagedProcess(argv, env=env, cwd=str(work.work),
                                     max_output_bytes=request.max_output_bytes)
            outcome = process.wait(request.timeout_s)
            limits = ["file size limit"] if outcome.returncode in (-25, 153) else []
            copied = copy_out(work.work, request.output_name, self._outputs.new_path(request.output_name),
                              request.max_output_file_mb * 1024 * 1024)
            return build_result(outcome, backend=self.name, limits_hit=limits, copied=copied,
                                notes=["unsafe backend: no isolation"])
        finally:
            work.destroy()

    def close(self) -> None:
        """Remove the private output dir."""
        self._outputs.close()
