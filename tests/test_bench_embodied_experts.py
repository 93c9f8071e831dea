"""Tests of benchmarks/embodied_experts.py: bad arguments are refused quoting the value, and the expert
table it writes (markdown, JSON, plot) says which tasks are solved. The measurements themselves run
the simulator (minutes): the committed table is checked against ``scripted_expert`` in
tests/test_embodied_demos.py."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "embodied_experts.py"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("embodied_experts", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


experts = _load_script()


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--tasks", "12"], "tasks=[12]"),
        (["--tasks", "0,a"], "'0,a'"),
        (["--states", "0"], "states=0"),
        (["--states", "51"], "states=51"),
        (["--workers", "3"], "workers=3"),
        (["--sft-noise", "-0.1"], "sft_noise=[-0.1]"),
        (["--sft-demos", "0"], "sft_demos=[0]"),
        (["--sft-seeds", "0"], "sft_seeds=0"),
    ],
)
def test_a_bad_argument_is_refused_quoting_the_value(argv, needle, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        experts.parse_args(argv)
    assert exited.value.code == 2 and needle in capsys.readouterr().err


def test_the_arguments_reach_the_settings() -> None:
    args = experts.parse_args(["--tasks", "0,7", "--states", "3", "--sft-noise", "0.1,0.5"])
    assert args.tasks == (0, 7) and args.states == 3 and args.sft_noise == (0.1, 0.5)


def test_the_expert_table_marks_solved_tasks_in_markdown_json_and_plot(tmp_path) -> None:
    args = experts.Args(tasks=(0, 1), states=4, out=tmp_path)
    rows = [
        {
            "task": task,
            "instruction": f"pick up object {task}",
            "success": rate,
            "se": 0.1,
            "episodes": 4,
            "solved_states": [],
            "mean_steps": 120.0,
            "wall_seconds": 30.0,
        }
        for task, rate in ((0, 0.75), (1, 1.0))
    ]
    experts._write_expert_table(rows, args)
    table = json.loads((tmp_path / "table.json").read_text())
    assert table["solved"] == [1] and table["states"] == 4, "0.75 is below the 0.8 that counts as solved"
    assert "tasks [1]" in (tmp_path / "table.md").read_text()
    assert (tmp_path / "experts.png").stat().st_size > 1000
