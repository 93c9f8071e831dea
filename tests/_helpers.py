"""Helpers shared by several test modules (pytest puts tests/ on sys.path: ``from _helpers import ...``)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TypeVar

import pytest

from wmrl_algos.errors import MissingDependencyError

T = TypeVar("T")

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def benchmark_script(name: str) -> ModuleType:
    """Import ``benchmarks/<name>.py`` as a module. benchmarks/ is no package: its scripts import each other
    and their fixtures by bare name, as when run as scripts, so the folder goes on ``sys.path`` (once)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module(name)


# The group shape of the tiny ``wmrl train`` runs: two groups of two, one turn, half of them anchors.
TINY_GROUP_ARGS = ("--groups", "2", "--group-size", "2", "--max-turns", "1", "--anchor-fraction", "0.5")


def embodied_marks(*marks: pytest.MarkDecorator) -> list[pytest.MarkDecorator]:
    """``pytestmark`` for an embodied test module: ``embodied``, then ``marks``, then a skip (with the
    reason and how to build it) when the embodied stack's venv is not built."""
    from wmrl_envs.embodied import embodied_python

    try:
        embodied_python()
        missing = ""
    except MissingDependencyError as exc:
        missing = str(exc)
    return [
        pytest.mark.embodied,
        *marks,
        pytest.mark.skipif(bool(missing), reason=f"embodied stack not built: {missing}"),
    ]


def on_the_simulator(*marks: pytest.MarkDecorator) -> Callable[[T], T]:
    """A decorator marking a test that runs a real simulator worker: ``embodied_marks(*marks)`` applied to it,
    so it is skipped, with the reason, where the embodied stack is not built."""

    def mark_test(test: T) -> T:
        for mark in embodied_marks(*marks):
            test = mark(test)
        return test

    return mark_test


def run_wmrl(*args: str, cwd: Path | None = None, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """``wmrl ARGS`` as a user runs it: a fresh interpreter, output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "wmrl_adapters.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )
