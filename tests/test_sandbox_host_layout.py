"""A solution learns nothing of the host's layout: no host path of the suite, the work dir, the home
directory or the repository shows in what it can read about its own sandbox.

The probe reads the mount table, the environment and the command line of itself and of the sandbox's
pid 1 (bubblewrap's init, or the container's entry process). The interpreter's own prefix is exempt:
it is mounted at its host path (it is where the solution's Python runs from; ``sys.executable`` names
it), so its occurrences are removed before the check; on this machine it lies under the home dir.
Runs on the real bubblewrap and Docker backends (Docker skips, with the reason, without an engine).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from wmrl_algos.errors import IsolationUnavailableError
from wmrl_envs.sandbox import ExecutionRequest, Sandbox, make_sandbox
from wmrl_envs.sandbox.local import python_roots

pytestmark = pytest.mark.integration

PROBE = """
from pathlib import Path
for path in ("/proc/self/mountinfo", "/proc/1/environ", "/proc/self/environ", "/proc/1/cmdline",
             "/proc/self/cmdline"):
    print("==", path)
    print(Path(path).read_bytes().replace(b"\\0", b" ").decode("utf-8", "replace"))
print("== inputs", sorted(p.name for p in Path("input").iterdir()), Path("input/train.csv").read_text())
"""


def _docker_reason() -> str | None:
    try:
        from wmrl_adapters.docker import engine_reachable
    except ImportError as exc:
        return f"docker SDK not installed ({exc})"
    return None if engine_reachable() else "no Docker engine reachable (run scripts/docker_engine.sh start)"


@pytest.fixture(scope="module", params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    if request.param == "docker" and (reason := _docker_reason()):
        pytest.skip(reason)
    try:
        sandbox = make_sandbox(request.param)
    except IsolationUnavailableError as exc:
        pytest.skip(f"{request.param} backend unavailable here: {exc}")
    if getattr(sandbox, "degradations", ()):
        sandbox.close()
        pytest.skip(f"{request.param} backend degraded here (not root: no neutral mount sources)")
    yield sandbox
    sandbox.close()


@pytest.fixture()
def suite_root() -> Iterator[Path]:
    """A competition laid out as the suite lays it out, under a name the probe must never see."""
    root = Path(tempfile.mkdtemp(prefix="wmrl-suite-root-"))
    root.chmod(0o755)
    (root / "competition" / "private").mkdir(parents=True)
    (root / "competition" / "train.csv").write_text("x,y\n1,2\n")
    (root / "competition" / "private" / "answers.csv").write_text("id,label\n0,secret\n")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _host_paths_in(text: str, paths: list[str]) -> list[str]:
    for root in python_roots(sys.executable):
        text = text.replace(root, "<interpreter>")
    return [path for path in paths if re.search(rf"(?<![\w.-]){re.escape(path)}(?![\w.-])", text)]


def test_solution_sees_no_host_path_of_suite_work_dir_home_or_repository(backend: Sandbox,
                                                                           suite_root: Path) -> None:
    request = ExecutionRequest(code=PROBE, timeout_s=60,
                               inputs={"train.csv": suite_root / "competition" / "train.csv"})
    result = backend.run(request)
    assert result.status == "ok", result.stderr
    assert "== inputs ['train.csv'] x,y\n1,2" in result.stdout, "the input itself must still be readable"
    forbidden = [str(suite_root), os.path.realpath(suite_root), os.path.expanduser("~"),
                 str(Path(__file__).resolve().parents[1]), os.path.join(tempfile.gettempdir(), "wmrl-run")]
    assert _host_paths_in(result.stdout, forbidden) == [], result.stdout
    assert "wmrl-run-" not in result.stdout, f"the host work dir's name shows:\n{result.stdout}"
