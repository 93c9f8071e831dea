"""The unsafe development backend: same layout and statuses as the real ones, no isolation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from wmrl_envs.sandbox import ExecutionRequest, UnsafeSandbox


@pytest.fixture(scope="module")
def sandbox() -> Iterator[UnsafeSandbox]:
    backend = UnsafeSandbox()
    yield backend
    backend.close()


def test_layout_matches_the_contract_inputs_under_input_and_submission_copied_out(
    sandbox: UnsafeSandbox, tmp_path: Path
) -> None:
    data = tmp_path / "train.csv"
    data.write_text("a\n1\n")
    code = "print(open('input/train.csv').read().strip()); open('submission.csv', 'w').write('id\\n1\\n')"
    result = sandbox.run(ExecutionRequest(code=code, inputs={"train.csv": data}, timeout_s=30))
    assert result.status == "ok" and result.stdout == "a\n1\n" and result.backend == "unsafe"
    assert result.output is not None and result.output.read_text() == "id\n1\n"
    assert "no isolation" in result.detail


def test_host_environment_is_not_inherited_but_request_env_is(
    sandbox: UnsafeSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WMRL_HOST_ONLY", "leak")
    code = "import os; print(os.environ.get('WMRL_HOST_ONLY'), os.environ.get('MINE'))"
    result = sandbox.run(ExecutionRequest(code=code, env={"MINE": "yes"}, timeout_s=30))
    assert result.stdout == "None yes\n"


def test_nonzero_exit_is_an_error_with_its_code(sandbox: UnsafeSandbox) -> None:
    result = sandbox.run(ExecutionRequest(code="raise SystemExit(4)", timeout_s=30))
    assert (result.status, result.exit_code) == ("error", 4)


def test_work_dir_is_removed_after_the_run(sandbox: UnsafeSandbox) -> None:
    result = sandbox.run(ExecutionRequest(code="import os; print(os.getcwd())", timeout_s=30))
    assert result.status == "ok"
    assert not Path(result.stdout.strip()).exists()
