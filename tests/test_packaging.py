"""The distribution ships every subpackage and data file the code needs (a non-editable install works)."""

from __future__ import annotations

import re
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
        if parts[0] in ("tests", "benchmarks", "build") or parts[0].startswith("."):  # .venv, packed deps
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


def _code() -> str:
    return "\n".join(
        path.read_text()
        for folder in ("wmrl_algos", "wmrl_envs", "adapters")
        for path in (ROOT / folder).rglob("*.py")
    )


def test_every_extra_is_required_by_code_that_exists() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    code = _code()
    unused = [
        extra
        for extra in extras
        if extra != "dev" and not re.search(rf"""require\([^)]*["']{re.escape(extra)}["']\)""", code)
    ]
    assert unused == [], "an extra lands with the code that imports it (require(module, extra))"


def test_the_adapters_package_advertises_only_modules_that_exist() -> None:
    import wmrl_adapters

    bullets = [line for line in (wmrl_adapters.__doc__ or "").splitlines() if line.startswith("- ``")]
    named = {name for line in bullets for name in re.findall(r"``(\w+)``", line.split(":")[0])}
    assert {"transformers_backend", "openai_backend", "cli", "doctor"} <= named
    adapters = ROOT / "adapters"
    missing = [
        name
        for name in sorted(named)
        if not ((adapters / f"{name}.py").is_file() or (adapters / name / "__init__.py").is_file())
    ]
    assert missing == []
