"""The distribution ships every subpackage and data file the code needs (a non-editable install works)."""

from __future__ import annotations

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(__file__).resolve().parents[1]


def _declared_packages() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return set(config["tool"]["setuptools"]["packages"])


def test_every_package_folder_is_declared_in_pyproject() -> None:
    found = set()
    for init in ROOT.glob("*/**/__init__.py"):
        parts = init.parent.relative_to(ROOT).parts
        if parts[0] in ("tests", "benchmarks", "build"):
            continue
        top = "wmrl_adapters" if parts[0] == "adapters" else parts[0]
        found.add(".".join((top, *parts[1:])))
    assert found == _declared_packages()


def test_core_never_imports_adapters() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for folder in ("wmrl_algos", "wmrl_envs")
        for path in (ROOT / folder).rglob("*.py")
        if "wmrl_adapters"
        in "\n".join(
            line for line in path.read_text().splitlines() if line.lstrip().startswith(("import ", "from "))
        )
    ]
    assert offenders == []
