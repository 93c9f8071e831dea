"""One classification of run outcomes for every backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from wmrl_envs.sandbox.process import ProcessOutcome
from wmrl_envs.sandbox.results import build_result
from wmrl_envs.sandbox.workdir import CopiedOutput


def _outcome(returncode: int, timed_out: bool = False, truncated: bool = False) -> ProcessOutcome:
    return ProcessOutcome(returncode=returncode, timed_out=timed_out, stdout="o", stderr="e",
                          stdout_truncated=truncated, stderr_truncated=False, wall_s=1.0, cpu_s=0.5,
                          max_rss_mb=10.0)


@pytest.mark.parametrize(
    ("returncode", "timed_out", "limits", "status", "exit_code"),
    [
        (0, False, [], "ok", 0),
        (1, False, [], "error", 1),
        (-9, True, ["memory limit"], "timeout", None),
        (137, False, ["memory limit"], "killed", 137),
        (137, False, [], "error", 137),
        (0, False, ["pids limit"], "ok", 0),
        (-9, False, [], "error", None),
    ],
)
def test_status_precedence_is_timeout_then_limit_then_exit_code(
    returncode: int, timed_out: bool, limits: list[str], status: str, exit_code: int | None
) -> None:
    result = build_result(_outcome(returncode, timed_out), backend="x", limits_hit=limits)
    assert (result.status, result.exit_code) == (status, exit_code)


def test_rejected_output_and_truncation_are_explained_in_detail(tmp_path: Path) -> None:
    result = build_result(_outcome(0, truncated=True), backend="x",
                          copied=CopiedOutput(None, "submission.csv is a symlink"))
    assert result.output is None and result.output_rejected == "submission.csv is a symlink"
    assert "stdout truncated" in result.detail and "symlink" in result.detail


def test_backend_measurements_override_wait4_ones() -> None:
    result = build_result(_outcome(0), backend="x", max_rss_mb=99.0, cpu_s=2.0)
    assert (result.max_rss_mb, result.cpu_s) == (99.0, 2.0)
