"""The ``wmrl`` console script: dispatch, usage errors, and the suite/doctor subcommands for real."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from wmrl_adapters.cli import SUBCOMMANDS, main


def _wmrl(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wmrl_adapters.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
    )


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert name in out


def test_unknown_command_exits_2_with_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trian"]) == 2
    assert "unknown command 'trian'" in capsys.readouterr().err


def test_every_subcommand_module_has_a_main() -> None:
    import importlib

    for module_name, _ in SUBCOMMANDS.values():
        assert callable(importlib.import_module(module_name).main), module_name


def test_suite_subcommand_builds_and_lists_sixteen_competitions(tmp_path: Path) -> None:
    result = _wmrl("suite", "--dir", str(tmp_path / "suite"))
    assert result.returncode == 0, result.stderr
    listed = [line for line in result.stdout.splitlines() if line.startswith("  ")]
    assert len(listed) >= 12
    assert any("held-out" in line for line in listed)
    assert (tmp_path / "suite" / "manifest.json").is_file()


@pytest.mark.integration
def test_doctor_runs_a_real_sandboxed_program() -> None:
    result = _wmrl("doctor")
    line = next(row for row in result.stdout.splitlines() if "sandbox:local" in row)
    assert line.startswith("ok"), result.stdout
    assert result.returncode == 0
