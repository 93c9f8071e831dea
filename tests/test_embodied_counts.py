"""The embodied trainer's counters and the summary ``wmrl train`` prints from them.

The simulator is replaced by a scripted stand-in env (Lift's observation layout, a fixed 10 ms step,
success on the third step), because these tests check bookkeeping on every machine, including those
without the embodied stack; tests/test_embodied_train.py checks the same on the real simulator.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
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
    assert final["time/eval_episodes"] == 2
    assert final["time/eval_seconds"] >= 2 * SUCCESS_AT * STEP_SECONDS, "evaluation time is measured"
    _print_embodied(summary, tmp_path / "sft")
    out = capsys.readouterr().out
    assert "simulator episodes 2 (2 demonstrations, 0 training rollouts)" in out
    assert "over 2 episodes (2 simulator episodes in all evaluations" in out
    assert f"{final['time/eval_seconds']:.1f} s, not charged" in out


def test_rl_counts_rollouts_as_training_and_evaluations_apart(tmp_path: Path) -> None:
    config = EmbodiedConfig(algo="grpo", steps=2, groups=2, group_size=2, eval_every=1, **SMALL)
    EmbodiedTrainer(config, tmp_path / "grpo", make_env=_ScriptedLift).run()
    from wmrl_adapters.train.run.rundir import read_metrics

    lines = read_metrics(tmp_path / "grpo" / "metrics.jsonl")
    assert [line["compute/sim_episodes"] for line in lines] == [4, 8], "training rollouts only"
    assert [line["time/eval_episodes"] for line in lines] == [2, 4], "every evaluation, counted when it ran"
    assert lines[0]["time/eval_seconds"] >= 2 * SUCCESS_AT * STEP_SECONDS
    assert lines[1]["time/eval_seconds"] > lines[0]["time/eval_seconds"]
