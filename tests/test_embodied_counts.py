"""The embodied trainer's counters and the summary ``wmrl train`` prints from them.

The simulator is replaced by a scripted stand-in env (Lift's observation layout, a fixed 10 ms step,
success on the third step), because these tests check bookkeeping on every machine, including those
without the embodied stack; tests/test_embodied_train.py checks the same on the real simulator.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from _helpers import benchmark_script
from wmrl_adapters.train.cli import _print_embodied
from wmrl_adapters.train.embodied.config import EmbodiedConfig
from wmrl_adapters.train.embodied.trainer import EmbodiedTrainer

STEP_SECONDS = 0.01
SUCCESS_AT = 3


class _ScriptedLift(gym.Env[dict[str, Any], np.ndarray]):
    """Lift's observation keys and sizes; every episode succeeds at its third step (10 ms each)."""

    observation_space = gym.spaces.Dict(
        {
            "proprio": gym.spaces.Box(-np.inf, np.inf, (9,), np.float64),
            "object_state": gym.spaces.Box(-np.inf, np.inf, (10,), np.float64),
        }
    )
    action_space = gym.spaces.Box(-1.0, 1.0, (7,), np.float32)

    def __init__(self) -> None:
        self._steps = 0

    def _obs(self) -> dict[str, Any]:
        return {
            "proprio": np.r_[0.0, 0.0, 1.0, np.zeros(4), 0.04, -0.04],
            "object_state": np.r_[0.0, 0.0, 0.82 + 0.01 * self._steps, np.zeros(7)],
            "instruction": "lift the cube",
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        self._steps = 0
        return self._obs(), {}

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        time.sleep(STEP_SECONDS)
        self._steps += 1
        success = self._steps >= SUCCESS_AT
        return self._obs(), float(success), success, False, {"success": success}


SMALL = dict(horizon=5, workers=1, progress=False, eval_samples=2, bc_epochs=2, demos=2, demo_noise=0.0)


def test_sft_counts_its_demonstrations_and_evaluation_as_simulator_episodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = EmbodiedTrainer(
        EmbodiedConfig(algo="sft", **SMALL), tmp_path / "sft", make_env=_ScriptedLift
    ).run()
    final = summary["final"]
    assert final["compute/demo_episodes"] == 2
    assert final["compute/sim_episodes"] == 2, "the two demonstrations ran in the simulator"
    assert final["compute/sim_steps"] == 2 * SUCCESS_AT
    assert final["time/eval_episodes"] == 4, "the start's evaluation (step 0) and the end's"
    assert final["time/eval_seconds"] >= 4 * SUCCESS_AT * STEP_SECONDS, "evaluation time is measured"
    _print_embodied(summary, tmp_path / "sft")
    out = capsys.readouterr().out
    assert "simulator episodes 2 (2 demonstrations, 0 training rollouts)" in out
    assert "over 2 episodes (4 simulator episodes in all evaluations" in out
    assert f"{final['time/eval_seconds']:.1f} s, not charged" in out


def test_a_fresh_run_evaluates_its_start_and_the_summary_pairs_start_and_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from wmrl_adapters.train.run.rundir import read_metrics
    from wmrl_adapters.train.run.state_io import load_state

    config = EmbodiedConfig(algo="grpo", steps=2, groups=2, group_size=2, **SMALL)
    summary = EmbodiedTrainer(config, tmp_path / "grpo", make_env=_ScriptedLift).run()
    start, *training = read_metrics(tmp_path / "grpo" / "metrics.jsonl")
    assert start["step"] == 0 and start["eval/episodes"] == 2
    assert {key.split("/")[0] for key in start} == {"step", "eval", "time"}, "the evaluation's keys only"
    assert [line["step"] for line in training] == [1, 2]
    held_out = summary["held_out"]
    assert held_out["start"]["step"] == 0 and held_out["end"]["step"] == 2
    assert (
        held_out["start"]["episode_keys"]
        == held_out["end"]["episode_keys"]
        == ["Lift#1000000", "Lift#1000001"]
    )
    assert load_state(tmp_path / "grpo" / "checkpoint.pt", if_older="")["held_out"] == held_out
    _print_embodied(summary, tmp_path / "grpo")
    out = capsys.readouterr().out
    assert "success at step 0: 1.000 ± 0.000 (2 episodes)" in out
    assert "success at step 2: 1.000 ± 0.000 (2 episodes); change +0.000 ± 0.000 (paired" in out


def test_the_charged_compute_is_cpu_seconds_that_add_up_to_the_total(tmp_path: Path) -> None:
    config = EmbodiedConfig(algo="wmrl", steps=2, groups=2, group_size=2, anchor_fraction=0.5, **SMALL)
    final = EmbodiedTrainer(config, tmp_path / "wmrl", make_env=_ScriptedLift).run()["final"]
    parts = ("sim_cpu_s", "world_model_cpu_s", "policy_sample_cpu_s", "policy_update_cpu_s")
    charged = [final[f"compute/{part}"] for part in parts]
    assert all(value > 0 for value in charged), dict(zip(parts, charged, strict=True))
    assert final["compute/charged_total"] == pytest.approx(sum(charged))
    slept = 8 * SUCCESS_AT * STEP_SECONDS  # the stand-in sleeps 10 ms a step: wall time, no CPU
    assert final["time/rollout_seconds"] >= slept > final["compute/sim_cpu_s"]


def test_rl_counts_rollouts_as_training_and_evaluations_apart(tmp_path: Path) -> None:
    config = EmbodiedConfig(algo="grpo", steps=2, groups=2, group_size=2, eval_every=1, **SMALL)
    EmbodiedTrainer(config, tmp_path / "grpo", make_env=_ScriptedLift).run()
    from wmrl_adapters.train.run.rundir import read_metrics

    lines = read_metrics(tmp_path / "grpo" / "metrics.jsonl")
    start, *lines = lines  # the step-0 evaluation, then the training steps
    assert "compute/sim_episodes" not in start and start["time/eval_episodes"] == 2
    assert [line["compute/sim_episodes"] for line in lines] == [4, 8], "training rollouts only"
    assert [line["time/eval_episodes"] for line in lines] == [4, 6], "every evaluation, counted when it ran"
    assert start["time/eval_seconds"] >= 2 * SUCCESS_AT * STEP_SECONDS
    assert lines[1]["time/eval_seconds"] > lines[0]["time/eval_seconds"] > start["time/eval_seconds"]


def test_a_checkpoint_from_before_the_cpu_clocks_resumes_with_its_cpu_seconds_unknown_not_zero(
    tmp_path: Path,
) -> None:
    from wmrl_adapters.train.run.state_io import load_state, save_state

    config = EmbodiedConfig(algo="grpo", steps=1, groups=2, group_size=2, **SMALL)
    EmbodiedTrainer(config, tmp_path / "run", make_env=_ScriptedLift).run()
    path = tmp_path / "run" / "checkpoint.pt"
    state = load_state(path, if_older="")
    for key in ("clocks", "held_out"):  # what an older wmrl did not write
        del state[key]
    kept = ("sim_episodes", "sim_steps", "real_labels", "demo_episodes", "eval_episodes", "eval_seconds")
    wall = {"sim_seconds": 1.0, "world_model_seconds": 0.5, "policy_seconds": 0.25}  # its wall seconds
    state["counts"] = {**{key: state["counts"][key] for key in kept}, **wall}
    save_state(path, state)
    resumed = EmbodiedTrainer(config.replace(steps=2), tmp_path / "run", resume=True, make_env=_ScriptedLift)
    final = resumed.run()["final"]
    assert final["compute/sim_episodes"] == 8, "the counts carry on"
    assert math.isnan(final["compute/sim_cpu_s"]) and math.isnan(final["compute/charged_total"])
    assert final["time/rollout_seconds"] > 1.0, "the old wall seconds carry on under time/"


def test_the_demo_horizon_cuts_the_demonstrations_and_not_the_evaluation(tmp_path: Path) -> None:
    from wmrl_algos.errors import ConfigError

    cut = EmbodiedConfig(algo="sft", **{**SMALL, "demo_horizon": SUCCESS_AT - 1})
    with pytest.raises(ConfigError, match=r"none of the 2 scripted demonstrations succeeded.*demo_horizon=2"):
        EmbodiedTrainer(cut, tmp_path / "cut", make_env=_ScriptedLift).run()
    kept = EmbodiedConfig(algo="sft", **{**SMALL, "demo_horizon": SUCCESS_AT})
    final = EmbodiedTrainer(kept, tmp_path / "kept", make_env=_ScriptedLift).run()["final"]
    assert final["sft/demo_success_rate"] == 1.0 and final["compute/sim_steps"] == 2 * SUCCESS_AT
    assert final["time/eval_episodes"] == 4, "the evaluation keeps its own horizon and episodes"


def test_the_table2_benchmark_carries_a_finished_run_on_in_a_copy_and_leaves_the_shorter_run_as_it_was(
    tmp_path: Path,
) -> None:
    from wmrl_adapters.train.run.rundir import read_metrics

    table2 = benchmark_script("embodied_table2")
    short = tmp_path / "short" / "runs" / "wmrl-s0"
    config = EmbodiedConfig(algo="wmrl", steps=1, groups=2, group_size=2, anchor_fraction=0.5, **SMALL)
    EmbodiedTrainer(config, short, make_env=_ScriptedLift).run()
    before = {path.name: path.read_bytes() for path in short.iterdir() if path.is_file()}
    longer = tmp_path / "longer" / "runs" / "wmrl-s0"
    longer.parent.mkdir(parents=True)
    extended = table2.extend_run(short, longer, steps=3)
    assert extended == config.replace(steps=3), "the saved settings, only the steps changed"
    assert (longer / "checkpoint.pt").is_file() and not (longer / "summary.json").exists()
    assert not longer.with_name("wmrl-s0.partial").exists()
    final = EmbodiedTrainer(extended, longer, resume=True, make_env=_ScriptedLift).run()["final"]
    assert [line["step"] for line in read_metrics(longer / "metrics.jsonl")] == [0, 1, 2, 3]
    assert final["compute/sim_episodes"] == 3 * 4, "the first step's rollouts carried over, not run again"
    assert {p.name: p.read_bytes() for p in short.iterdir() if p.is_file()} == before, "the short run is kept"
    again = table2.extend_run(short, longer, steps=3)
    assert again == extended and (longer / "summary.json").is_file(), "a second call reads the copy"
    assert table2.extend_run(tmp_path / "short" / "runs" / "grpo-s0", tmp_path / "g", steps=3) is None


def test_extending_runs_needs_the_new_length_and_does_not_mix_with_shared_runs() -> None:
    table2 = benchmark_script("embodied_table2")
    with pytest.raises(SystemExit):
        table2.parse_args(["--extend-from", "somewhere"])
    with pytest.raises(SystemExit):
        table2.parse_args(["--extend-from", "a", "--steps", "16", "--shared-runs", "b"])
    assert table2.parse_args(["--extend-from", "a", "--steps", "16"]).steps == 16


def test_extending_links_the_sft_start_and_names_each_run_it_cannot_carry_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table2 = benchmark_script("embodied_table2")
    sft = tmp_path / "short" / "runs" / "sft-s4"
    sft.mkdir(parents=True)
    (sft / "summary.json").write_text("{}")
    (tmp_path / "short" / "runs" / "wmrl-s4").mkdir()  # a run without summary or checkpoint
    args = table2.parse_args(
        ["--extend-from", str(tmp_path / "short"), "--steps", "16", "--methods", "wmrl,anchors"]
        + ["--first-seed", "4", "--seeds", "1", "--out", str(tmp_path / "longer")]
    )
    table2.extend_all(args)
    runs = tmp_path / "longer" / "runs"
    assert (runs / "sft-s4").is_symlink() and (runs / "sft-s4" / "summary.json").is_file()
    assert sorted(path.name for path in runs.iterdir()) == ["sft-s4"], "nothing half-copied"
    out = capsys.readouterr().out
    assert "wmrl-s4: no complete run with a checkpoint" in out and "anchors-s4: no complete run" in out


def test_the_table2_benchmark_names_a_complete_sft_run_without_its_weights_before_any_rl_run(
    tmp_path: Path,
) -> None:
    from wmrl_algos.errors import ConfigError

    table2 = benchmark_script("embodied_table2")
    sft = tmp_path / "runs" / "sft-s4"
    sft.mkdir(parents=True)
    (sft / "summary.json").write_text("{}")  # what a committed run holds: no policy.pt
    args = table2.parse_args(
        ["--methods", "wmrl", "--first-seed", "4", "--seeds", "1", "--out", str(tmp_path)]
    )
    with pytest.raises(ConfigError, match=r"sft-s4 is a complete SFT run without its policy\.pt.*remove"):
        table2.run_all(args)
    assert sorted(path.name for path in (tmp_path / "runs").iterdir()) == ["sft-s4"], "no RL run started"
    (sft / "policy.pt").write_bytes(b"")
    table2.require_policy(sft)  # with its weights there, nothing to say
