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
    args = experts.parse_args(
        ["--tasks", "0,7", "--states", "3", "--sft-noise", "0.1,0.5", "--sft-runs", "r"]
    )
    assert args.tasks == (0, 7) and args.states == 3 and args.sft_noise == (0.1, 0.5)
    assert args.sft_runs == Path("r")


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


def test_a_seed_whose_demonstrations_all_failed_is_counted_not_averaged_as_zero(
    tmp_path, monkeypatch
) -> None:
    # The SFT runs themselves are simulator runs (minutes each): here a stand-in returns their outcomes,
    # so that what is tested is the aggregation and the files it writes.
    outcomes = {0: None, 1: 0.4, 2: 0.6}

    def run(env, demos, noise, epochs, seed, args, root):
        return {
            "seed": seed,
            "success": outcomes[seed],
            "demo_successes": 0 if seed == 0 else 3,
            "wall_seconds": 1.0,
        }

    monkeypatch.setattr(experts, "_sft_run", run)
    args = experts.Args(sft_calibration=True, sft_demos=(8,), out=tmp_path)
    [setting] = experts.sft_calibration(args)
    assert setting["success"] == pytest.approx(0.5) and setting["seeds_without_policy"] == 1
    assert setting["se_over_seeds"] == pytest.approx(0.1)
    experts._write_sft_calibration([setting], args)
    written = json.loads((tmp_path / "sft_calibration.json").read_text())
    assert (
        written["in_target"] == [setting]
        and "| 8 | 0.3 | 100 | 0.50 | 0.10 |" in (tmp_path / "sft_calibration.md").read_text()
    )
