"""The ``wmrl`` console script: dispatch, usage errors, and the suite/doctor subcommands for real."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from _helpers import run_wmrl
from wmrl_adapters.cli import SUBCOMMANDS, main, plain_help


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert name in out


def test_unknown_command_exits_2_with_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trian"]) == 2
    assert "unknown command 'trian'" in capsys.readouterr().err


def test_no_arguments_prints_the_usage_and_exits_2() -> None:
    result = run_wmrl()
    assert result.returncode == 2
    assert "usage: wmrl" in result.stderr and "fidelity" in result.stderr


def test_version_prints_the_installed_version() -> None:
    import importlib.metadata

    result = run_wmrl("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"wmrl {importlib.metadata.version('wmrl')}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--world-models", "nope"], "unknown world model 'nope'"),
        (["--split", "x"], "split='x'"),
        (["--sandbox", "x"], "unknown sandbox backend 'x'"),
        (["--world-models", "llm-http"], "needs llm_base_url"),
        (["--competitions", "nope"], "unknown competitions ['nope']"),
    ],
)
def test_a_bad_input_is_one_error_line_and_exit_2_without_a_traceback(args: list[str], message: str) -> None:
    result = run_wmrl("fidelity", *args, "--quiet")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("wmrl fidelity: error: ") and message in lines[0]


def test_an_error_keeps_its_traceback_on_request() -> None:
    import os

    result = subprocess.run(
        [sys.executable, "-m", "wmrl_adapters.cli", "fidelity", "--split", "x", "--quiet"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "WMRL_TRACEBACK": "1"},
    )
    assert result.returncode == 1 and "Traceback" in result.stderr and "ConfigError" in result.stderr


@pytest.mark.parametrize("command", ["fidelity", "doctor"])
def test_help_shows_each_default_once_and_no_markup(command: str) -> None:
    result = run_wmrl(command, "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "``" not in text and ":class:" not in text
    assert "(default: )" not in text
    for option_help in re.split(r"\s--(?=[a-z])", text):
        assert option_help.count("(default:") <= 1, option_help


def test_plain_help_turns_rest_into_words() -> None:
    assert plain_help("``wmrl x``: see :func:`~a.b.run` and :class:`Env <gymnasium.Env>`.") == (
        "wmrl x: see run and Env."
    )


def test_every_subcommand_module_has_a_main() -> None:
    import importlib

    for module_name, _ in SUBCOMMANDS.values():
        assert callable(importlib.import_module(module_name).main), module_name


def test_suite_subcommand_builds_and_lists_sixteen_competitions(tmp_path: Path) -> None:
    result = run_wmrl("suite", "--dir", str(tmp_path / "suite"))
    assert result.returncode == 0, result.stderr
    listed = [line for line in result.stdout.splitlines() if line.startswith("  ")]
    assert len(listed) >= 12
    assert any("held-out" in line for line in listed)
    assert (tmp_path / "suite" / "manifest.json").is_file()


@pytest.mark.integration
def test_doctor_runs_a_real_sandboxed_program() -> None:
    result = run_wmrl("doctor")
    line = next(row for row in result.stdout.splitlines() if "sandbox:local" in row)
    assert line.startswith("ok"), result.stdout
    assert result.returncode == 0


_HELP_COMMANDS = [[name] for name in SUBCOMMANDS] + [["docker", "build-image"]]


@pytest.mark.parametrize("command", _HELP_COMMANDS, ids=" ".join)
def test_help_speaks_to_users_and_shows_every_default(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No internal references (issues, module docs), and every option that has a default shows it."""
    import argparse

    parsers: list[argparse.ArgumentParser] = []
    parse_known_args = argparse.ArgumentParser.parse_known_args

    def recording(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> object:
        parsers.append(self)
        return parse_known_args(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", recording)
    with pytest.raises(SystemExit) as exited:
        main([*command, "--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for internal in ("issue", "see module doc", "(see wmrl_", "the paper's Table", ":class:", "``"):
        assert internal not in text, f"wmrl {' '.join(command)} --help says {internal!r}"
    parser = parsers[-1]
    formatter = parser._get_formatter()
    for action in parser._actions:
        if action.nargs == 0 or action.default in (None, argparse.SUPPRESS) or not action.option_strings:
            continue  # flags, options without a default, positionals
        shown = " ".join(formatter._format_action(action).split())
        assert "default" in shown, f"wmrl {' '.join(command)}: {shown!r} hides its default {action.default!r}"


def test_train_help_lists_every_setting_with_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    import dataclasses

    from wmrl_adapters.train.embodied.config import EmbodiedConfig
    from wmrl_adapters.train.kaggle.config import TrainConfig

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    entries = re.split(r"\n  (?=--)", capsys.readouterr().out.split("settings of a Kaggle run", 1)[1])[1:]
    names = [entry.split()[0] for entry in entries]
    fields = [*dataclasses.fields(TrainConfig), *dataclasses.fields(EmbodiedConfig)]
    assert names == ["--" + spec.name.replace("_", "-") for spec in fields]
    for entry in entries:
        assert "(default: " in " ".join(entry.split()), entry


def test_fidelity_help_counts_the_reference_population_from_the_code() -> None:
    from wmrl_envs.kaggle.references import REFERENCE_NAMES

    result = run_wmrl("fidelity", "--help")
    assert f"(default: all {len(REFERENCE_NAMES)})" in " ".join(result.stdout.split())
