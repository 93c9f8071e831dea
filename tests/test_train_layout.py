"""The layout of ``wmrl_adapters.train``: one run skeleton, two track wings, old module names kept as aliases.

Why a test: the wing layout is only worth having while the arrows point one way (the skeleton imports
neither wing, neither wing imports the other) and while a user's import from before the move keeps
working; both break silently with one careless import.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

TRAIN = Path(__file__).resolve().parents[1] / "adapters" / "train"
MOVED = {
    "settings": "run.settings",
    "rundir": "run.rundir",
    "state_io": "run.state_io",
    "plots": "run.plots",
    "policy": "run.policy",
    "trainer": "kaggle.trainer",
    "design_policy": "kaggle.design_policy",
    "execution": "kaggle.execution",
    "evaluate": "kaggle.evaluate",
    "world_models": "kaggle.world_models",
    "compare": "kaggle.compare",
    "record": "kaggle.record",
    "embodied_policy": "embodied.policy",
}


def _imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at the top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize(
    ("wing", "forbidden"),
    [("run", ("kaggle", "embodied")), ("kaggle", ("embodied",)), ("embodied", ("kaggle",))],
)
def test_a_wing_never_imports_the_wings_it_must_not_know(wing: str, forbidden: tuple[str, ...]) -> None:
    offending = {
        f"{path.name}: {module}"
        for path in (TRAIN / wing).glob("*.py")
        for module in _imported_modules(path)
        if any(module.startswith(f"wmrl_adapters.train.{other}") for other in forbidden)
        or module in {f"wmrl_adapters.train.{old}" for old in MOVED} | {"wmrl_adapters.train.config"}
    }
    assert offending == set(), f"{wing}/ imports across the wings (or through a deprecated alias)"


def test_every_old_module_name_is_the_moved_module_and_says_where_it_went() -> None:
    script = f"""
import importlib, sys, warnings
moved = {MOVED!r}
for old, new in moved.items():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        alias = importlib.import_module("wmrl_adapters.train." + old)
    target = importlib.import_module("wmrl_adapters.train." + new)
    assert alias is target, (old, alias, target)
    texts = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert any("wmrl_adapters.train." + new in text for text in texts), (old, texts)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from wmrl_adapters.train.config import EmbodiedConfig, TrainConfig, load_config
from wmrl_adapters.train.embodied.config import EmbodiedConfig as E
from wmrl_adapters.train.kaggle.config import TrainConfig as T
assert EmbodiedConfig is E and TrainConfig is T
assert any("wmrl_adapters.train.kaggle.config" in str(w.message) for w in caught)
assert load_config(None, {{"steps": 2}}).steps == 2  # the old default class: TrainConfig
from wmrl_adapters.train.embodied import EmbodiedTrainer
from wmrl_adapters.train.embodied.trainer import EmbodiedTrainer as Moved
assert EmbodiedTrainer is Moved
print("ok", len(moved))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["ok", str(len(MOVED))]


def test_an_old_module_run_as_a_script_runs_the_moved_one_and_says_so() -> None:
    command = [sys.executable, "-Walways::DeprecationWarning", "-m", "wmrl_adapters.train.embodied_policy"]
    done = subprocess.run([*command, "--help"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage: python -m wmrl_adapters.train.embodied.policy" in done.stdout
    assert "python -m wmrl_adapters.train.embodied_policy is deprecated" in done.stderr


def test_the_embodied_config_imports_without_the_embodied_trainer() -> None:
    script = (
        "import sys, wmrl_adapters.train.embodied.config as c; c.EmbodiedConfig(algo='wm'); "
        "print(sorted(m for m in sys.modules if m.startswith(('wmrl_adapters.train.embodied.', "
        "'wmrl_adapters.train.kaggle.', 'robosuite', 'libero'))))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "['wmrl_adapters.train.embodied.config']"
