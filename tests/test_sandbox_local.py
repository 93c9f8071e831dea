"""The bubblewrap backend: layout, privilege drop, limits, and what the solution can see."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from wmrl_algos.errors import ConfigError, IsolationUnavailableError
from wmrl_envs.sandbox import BubblewrapSandbox, ExecutionRequest
from wmrl_envs.sandbox.local import python_roots, sandbox_interpreter

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sandbox(strict_bubblewrap: BubblewrapSandbox) -> BubblewrapSandbox:
    """This module's sandbox: the shared strict bubblewrap one (tests/conftest.py)."""
    return strict_bubblewrap


def test_solution_runs_in_sandbox_cwd_with_read_only_inputs_and_its_submission_copied_out(
    sandbox: BubblewrapSandbox, tmp_path: Path
) -> None:
    data = tmp_path / "train.csv"
    data.write_text("a\n1\n")
    code = """
import os
print(os.getcwd(), sorted(os.listdir('.')), open('input/train.csv').read().strip())
try:
    open('input/train.csv', 'a').write('tamper')
except OSError as exc:
    print('readonly', type(exc).__name__)
open('submission.csv', 'w').write('id\\n1\\n')
"""
    result = sandbox.run(ExecutionRequest(code=code, inputs={"train.csv": data}, timeout_s=30))
    assert result.status == "ok", result.stderr
    assert result.stdout.startswith("/sandbox ['input', 'solution.py'] a\n1\n")
    assert "readonly" in result.stdout
    assert data.read_text() == "a\n1\n"
    assert result.output is not None and result.output.read_text() == "id\n1\n"


def test_solution_runs_as_a_fresh_unprivileged_uid_each_time(sandbox: BubblewrapSandbox) -> None:
    request = ExecutionRequest(code="import os; print(os.getuid(), os.geteuid())", timeout_s=30)
    uids = {sandbox.run(request).stdout for _ in range(2)}
    assert len(uids) == 2, "each run must get its own uid"
    for line in uids:
        uid, euid = map(int, line.split())
        assert uid == euid and uid >= 1000


def test_the_ml_stack_of_the_host_interpreter_is_importable(sandbox: BubblewrapSandbox) -> None:
    code = "import numpy, pandas, sklearn.linear_model; print(pandas.DataFrame({'a': [1, 2]}).a.sum())"
    result = sandbox.run(ExecutionRequest(code=code, timeout_s=120))
    assert (result.status, result.stdout) == ("ok", "3\n"), result.stderr


def test_root_file_system_shows_only_what_the_solution_needs(sandbox: BubblewrapSandbox) -> None:
    code = "import os; print(sorted(os.listdir('/'))); print(sorted(os.listdir('/etc')))"
    result = sandbox.run(ExecutionRequest(code=code, timeout_s=30))
    top, etc = (eval(line) for line in result.stdout.splitlines())
    assert "home" not in top and "var" not in top and "work" not in top
    assert "shadow" not in etc and "passwd" not in etc


def test_memory_limit_kills_with_a_clear_status(sandbox: BubblewrapSandbox) -> None:
    code = "chunks = [b'x' * 2**20 for _ in range(400)]"
    result = sandbox.run(ExecutionRequest(code=code, memory_mb=128, timeout_s=30))
    assert result.status == "killed" and "memory limit" in result.detail


def test_usage_is_measured_from_the_run_cgroup(sandbox: BubblewrapSandbox) -> None:
    code = "x = 0\nfor i in range(2_000_000): x += i\nblob = b'x' * (64 * 2**20)"
    result = sandbox.run(ExecutionRequest(code=code, timeout_s=60))
    assert result.cpu_s is not None and result.cpu_s > 0.05
    assert result.max_rss_mb is not None and result.max_rss_mb > 60


@pytest.mark.parametrize("name", ["../escape.csv", "/abs.csv", "a/../../b.csv", "."])
def test_input_names_that_could_escape_input_dir_are_refused(
    sandbox: BubblewrapSandbox, tmp_path: Path, name: str
) -> None:
    data = tmp_path / "x.csv"
    data.write_text("x")
    with pytest.raises(ConfigError, match="relative path"):
        sandbox.run(ExecutionRequest(code="pass", inputs={name: data}, timeout_s=30))


def test_python_roots_of_a_system_interpreter_need_no_extra_mount() -> None:
    # Where this process runs /usr/bin/python3 through a venv (seen on a GPU machine), its prefix counts.
    if os.path.realpath("/usr/bin/python3") != os.path.realpath(sys.executable) or sys.prefix == "/usr":
        assert python_roots("/usr/bin/python3") == ()
    roots = python_roots(sys.executable)
    assert all(os.path.isabs(root) for root in roots)
    interpreter = sandbox_interpreter(sys.executable, roots)
    assert any(interpreter.startswith(root + "/") for root in roots) or not roots


def test_a_venvs_packages_reach_the_solution(tmp_path: Path) -> None:
    """``python3 -m venv`` links ``bin/python3`` to the base interpreter; run by the resolved binary (as
    before, measured on a GPU machine whose Python is a venv) a solution could not import the venv's
    packages. A real venv here, with a module only in its site-packages, run in the strict sandbox."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    [site] = list(venv.glob("lib/python3*/site-packages"))
    (site / "wmrl_venv_probe.py").write_text("VALUE = 42\n")
    os.chmod(tmp_path, 0o755)
    python = str(venv / "bin" / "python3")
    assert str(venv.resolve()) in python_roots(python)
    try:
        box = BubblewrapSandbox(strict=True, python=python)
    except IsolationUnavailableError as exc:
        pytest.skip(f"full bubblewrap isolation unavailable here: {exc}")
    try:
        code = "import wmrl_venv_probe; print(wmrl_venv_probe.VALUE)"
        result = box.run(ExecutionRequest(code=code, timeout_s=60))
    finally:
        box.close()
    assert (result.status, result.stdout) == ("ok", "42\n"), result.stderr


def test_strict_mode_refuses_when_not_root(monkeypatch: pytest.MonkeyPatch) -> None:
    # A mock of geteuid: we cannot become non-root inside this test process; the check it feeds is real.
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(IsolationUnavailableError, match="strict=False"):
        BubblewrapSandbox(strict=True)


def test_missing_input_file_is_a_config_error_not_a_failed_run(sandbox: BubblewrapSandbox,
                                                                 tmp_path: Path) -> None:
    request = ExecutionRequest(code="pass", inputs={"train.csv": tmp_path / "absent.csv"}, timeout_s=30)
    with pytest.raises(ConfigError, match="does not exist"):
        sandbox.run(request)
