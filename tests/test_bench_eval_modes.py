"""benchmarks/embodied_eval_modes.py: mean-action against sampled-action success on a real SFT run.

The long test makes one small SFT run on robosuite Lift in the embodied stack's simulator worker, then
checks that the benchmark's mean-action success reproduces the run's own evaluation exactly (same
states, same policy) and that it writes its table and plot. The fast tests cover the refusals.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _helpers import benchmark_script, on_the_simulator
from wmrl_adapters.train.embodied.config import EmbodiedConfig
from wmrl_adapters.train.embodied.trainer import EmbodiedTrainer

eval_modes = benchmark_script("embodied_eval_modes")


def test_a_folder_without_runs_of_the_method_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "sft-s0").mkdir()  # no policy.pt: not a finished run
    assert eval_modes.main(["--runs", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    assert f"no sft-s* run with policy.pt under {tmp_path}" in capsys.readouterr().err


def test_the_summary_over_seeds_gives_each_mode_and_the_gap_with_its_standard_error() -> None:
    rows = [
        {"mean": 0.25, "sampled": 0.5, "gap": 0.25},
        {"mean": 0.5, "sampled": 0.5, "gap": 0.0},
        {"mean": None, "sampled": None, "gap": None},  # no known pair: left out, not counted as 0
    ]
    over = eval_modes.summary(rows)
    assert over["mean"] == pytest.approx(0.375) and over["gap"] == pytest.approx(0.125)
    assert over["gap_se"] == pytest.approx(0.125)


@on_the_simulator(pytest.mark.long)
def test_the_mean_action_reproduces_the_runs_own_evaluation_and_the_table_is_written(tmp_path: Path) -> None:
    config = EmbodiedConfig(
        env="robosuite:Lift", algo="sft", demos=2, demo_noise=0.0, bc_epochs=5, horizon=45,
        eval_samples=3, workers=1, init_std=0.3, progress=False,
    )  # fmt: skip
    EmbodiedTrainer(config, tmp_path / "runs" / "sft-s0").run()
    out = tmp_path / "out"
    assert eval_modes.main(["--runs", str(tmp_path / "runs"), "--out", str(out)]) == 0
    result = json.loads((out / "table.json").read_text())
    [row] = result["rows"]
    assert row["states"] == 3 and row["paired"] == 3
    assert row["mean"] == row["recorded_mean"]  # the same states and policy as the trainer's evaluation
    assert row["gap"] == pytest.approx(row["sampled"] - row["mean"])
    assert "| sft-s0 | 3 |" in (out / "table.md").read_text()
    assert (out / "eval_modes.png").stat().st_size > 5_000
