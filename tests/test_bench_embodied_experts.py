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
        (["--suite", "libero_10"], "suite='libero_10'"),
        (["--states", "10", "--first-state", "41"], "first_state=41"),
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


def test_each_suite_writes_to_its_own_folder_unless_told_otherwise(tmp_path) -> None:
    assert experts.Args().out_dir == experts.RESULTS, "libero_object's table stays where the docs link it"
    assert experts.Args(suite="libero_spatial").out_dir == experts.RESULTS / "libero_spatial"
    assert experts.Args(suite="libero_spatial", out=tmp_path).out_dir == tmp_path


def test_the_held_out_states_are_named_in_the_table(tmp_path) -> None:
    args = experts.Args(suite="libero_spatial", tasks=(0,), states=10, first_state=10, out=tmp_path)
    row = {
        "task": 0,
        "instruction": "pick up the black bowl and place it on the plate",
        "success": 0.9,
        "se": 0.09,
        "episodes": 10,
        "solved_states": list(range(10, 19)),
        "mean_steps": 110.0,
        "wall_seconds": 60.0,
    }
    experts._write_expert_table([row], args)
    table = json.loads((tmp_path / "table.json").read_text())
    assert table["expert"] == "ScriptedRimGraspPolicy" and table["first_state"] == 10
    assert "10 (10-19) fixed initial states" in (tmp_path / "table.md").read_text()


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


def test_a_finished_sft_run_is_read_back_with_the_seconds_it_took(tmp_path) -> None:
    # A run directory as EmbodiedTrainer leaves it (summary.json marks it finished): nothing is re-run, and
    # its wall seconds are the run's own record, not the milliseconds it takes to read it back.
    run_dir = tmp_path / "d14-n0.1-e100-s0"
    run_dir.mkdir()
    (run_dir / "summary.json").write_text("{}")
    final = {
        "eval/success_rate": 0.2,
        "eval/episodes": 35,
        "sft/demo_success_rate": 1.0,
        "sft/demo_episodes": 14,
        "time/rollout_seconds": 40.0,
        "time/policy_update_seconds": 0.5,
        "time/eval_seconds": 190.0,
    }
    (run_dir / "metrics.jsonl").write_text(json.dumps({"eval/success_rate": 0.0}) + "\n" + json.dumps(final))
    args = experts.Args(sft_calibration=True, sft_env="libero:libero_spatial/0", sft_horizon=220)
    run = experts._sft_run("libero:libero_spatial/0", 14, 0.1, 100, 0, args, tmp_path)
    assert run["success"] == 0.2 and run["episodes"] == 35 and run["demo_successes"] == 14
    assert run["wall_seconds"] == pytest.approx(230.5)
