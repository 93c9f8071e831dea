"""Tests of the trainer (wmrl_adapters.train.kaggle.trainer): algorithms, exact resume after SIGKILL,
failures, the step-0 evaluation and its paired change, and compute in one unit (CPU-seconds).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from _helpers import TINY_GROUP_ARGS
from wmrl_adapters.train.kaggle.config import TrainConfig
from wmrl_adapters.train.kaggle.evaluate import HeldOutScore, describe_held_out, paired_change
from wmrl_adapters.train.kaggle.execution import ExecutionCache
from wmrl_adapters.train.kaggle.trainer import (
    Trainer,
    correction_config,
    learning_metrics,
    read_metrics,
    write_atomic,
)
from wmrl_adapters.train.run.measure import sign_flip_p
from wmrl_adapters.train.run.settings import ALGOS

from wmrl_algos.errors import ConfigError
from wmrl_envs.kaggle.world_models.rubric import RubricWorldModel

TINY = dict(
    steps=2,
    groups=2,
    group_size=2,
    max_turns=1,
    anchor_fraction=0.5,
    competitions="titanic-survival",
    eval_samples=0,
    warm=0,
    progress=False,
)


@pytest.mark.parametrize("algo", ALGOS)
def test_each_algorithm_is_the_papers_definition(algo):
    config = correction_config(TrainConfig(algo=algo))
    expected = {
        "grpo": (1.0, False, False),
        "anchors": (0.125, False, False),
        "wm": (0.0, False, False),
        "mix": (0.125, False, False),
        "od": (0.125, True, False),
        "ivd": (0.125, False, True),
        "wmrl": (0.125, True, True),
    }[algo]
    assert (config.anchor_fraction, config.debias, config.denoise) == expected
    assert config.min_anchor_groups == (0 if algo == "wm" else 1)
    assert config.weighting == "paper", "IVD is the paper's rule unless --weighting agreement"


def test_a_failed_checkpoint_write_on_a_full_disk_keeps_the_earlier_checkpoint(tmp_path):
    target = tmp_path / "checkpoint.pt"
    write_atomic(target, b"step 1")
    # /dev/full is a real device that fails every write with ENOSPC: the temporary file points at it.
    (tmp_path / f".checkpoint.pt.tmp-{os.getpid()}").symlink_to("/dev/full")
    with pytest.raises(OSError):
        write_atomic(target, b"step 2" * 100_000)
    assert target.read_bytes() == b"step 1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt"]


@pytest.mark.integration
@pytest.mark.long  # out of the default suite (among its slowest); CI's long pass runs it
def test_real_executions_per_algorithm_follow_the_same_anchor_plan(tmp_path):
    cache = ExecutionCache()  # shared: the same designs are sampled first, so most runs replay them
    executions = {}
    for algo in ("grpo", "anchors", "wmrl", "wm"):
        trainer = Trainer(TrainConfig(algo=algo, **{**TINY, "steps": 1}), tmp_path / algo, cache=cache)
        summary = trainer.run()
        executions[algo] = summary["final"]["compute/real_executions"]
        assert summary["final"]["compute/charged_total"] >= summary["final"]["compute/spent_total"]
    assert executions == {"grpo": 4, "anchors": 2, "wmrl": 2, "wm": 0}


class _FailsOnSecondCall:
    """A world model that breaks mid-run (a real rubric until its second batch, then an exception).

    A test double: a real world model cannot be made to fail on demand.
    """

    name = "flaky-rubric"

    def __init__(self) -> None:
        self.calls = 0
        self.rubric = RubricWorldModel()

    def predict(self, queries):
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("the world model server went away")
        return self.rubric.predict(queries)


@pytest.mark.integration
def test_a_world_model_failing_mid_run_gives_unknown_predictions_counted_and_the_run_goes_on(tmp_path):
    trainer = Trainer(TrainConfig(algo="wmrl", world_model="rubric", **TINY), tmp_path / "run")
    trainer.rollout.world_model = _FailsOnSecondCall()
    summary = trainer.run()
    lines = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert len(lines) == 2 and summary["steps"] == 2
    assert lines[0]["cost/world_model_errors"] == 0 and lines[1]["cost/world_model_errors"] > 0
    assert lines[1]["reward/predicted_unknown"] > 0


RESUMABLE = [
    "--steps",
    "3",
    *TINY_GROUP_ARGS,
    "--competitions",
    "titanic-survival,concrete-strength",
    "--eval-samples",
    "0",
    "--warm",
    "0",
    "--checkpoint-every",
    "1",
    "--progress",
    "false",
    "--seed",
    "7",
]


def _train(*args: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "wmrl_adapters.cli", "train", *args]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.long  # moved out of the default suite (its slowest; CI's long pass runs it)
@pytest.mark.integration
def test_a_run_killed_mid_step_resumes_to_the_same_metrics_as_an_uninterrupted_run(tmp_path):
    reference = _train(*RESUMABLE, "--out", str(tmp_path / "reference"))
    killed = _train(*RESUMABLE, "--out", str(tmp_path / "killed"))
    deadline = time.monotonic() + 600
    checkpoint = tmp_path / "killed" / "checkpoint.pt"
    metrics = tmp_path / "killed" / "metrics.jsonl"
    while time.monotonic() < deadline and not (checkpoint.is_file() and read_metrics(metrics)):
        time.sleep(0.2)
    time.sleep(1.0)  # well inside step 2
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert killed.returncode == -signal.SIGKILL
    assert len(read_metrics(metrics)) < 3, "the kill came too late to test a resume"
    resumed = _train("--resume", str(tmp_path / "killed"))
    assert resumed.wait(timeout=900) == 0, resumed.stderr.read()[-3000:]
    assert reference.wait(timeout=900) == 0, reference.stderr.read()[-3000:]
    expected = [learning_metrics(line) for line in read_metrics(tmp_path / "reference" / "metrics.jsonl")]
    got = [learning_metrics(line) for line in read_metrics(tmp_path / "killed" / "metrics.jsonl")]
    assert [line["step"] for line in got] == [1.0, 2.0, 3.0]
    assert got == expected
    assert json.loads((tmp_path / "killed" / "config.json").read_text())["seed"] == 7


@pytest.mark.llm
@pytest.mark.long  # out of the default suite (among CI's slowest); CI's long pass runs it
def test_policy_llm_builds_the_llm_agent_as_a_trainable_policy():
    from wmrl_adapters.train.kaggle.trainer import build_policy
    from wmrl_adapters.train.run.policy import TrainablePolicy

    policy = build_policy(TrainConfig(policy="llm", seed=3), lambda competition_id: None)
    assert isinstance(policy, TrainablePolicy)
    assert type(policy).__name__ == "LLMAgent"


class _CtrlCOnFirstPrediction:
    """A world model that raises KeyboardInterrupt at its first prediction: Ctrl-C in the middle of step 1.

    A test double: a real Ctrl-C cannot be timed to land inside step 1.
    """

    name = "ctrl-c"

    def predict(self, queries):
        raise KeyboardInterrupt


@pytest.mark.integration
def test_a_fresh_run_evaluates_its_start_once_and_a_resumed_run_keeps_it(tmp_path):
    settings = {**TINY, "steps": 1, "eval_samples": 1, "eval_competitions": "titanic-survival"}
    config = TrainConfig(algo="wm", world_model="rubric", **settings)
    trainer = Trainer(config, tmp_path / "run")
    trainer.rollout.world_model = _CtrlCOnFirstPrediction()
    with pytest.raises(KeyboardInterrupt):
        trainer.run()
    [start] = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert start["step"] == 0.0 and math.isfinite(start["eval/position"]) and start["eval/episodes"] == 1
    assert {key for key in start if key != "step"} == {key for key in start if key.startswith("eval/")}
    summary = Trainer(config, tmp_path / "run", resume=True).run()  # from the step-0 checkpoint
    lines = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert [line["step"] for line in lines] == [0.0, 1.0] and lines[0] == start
    assert summary["eval_compute"]["executions"] == 2, "the start was not evaluated again"
    held_out = summary["held_out"]
    assert held_out["start"]["step"] == 0 and held_out["end"]["step"] == 1
    assert held_out["start"]["mean"] == start["eval/position"]
    assert held_out["start"]["episode_keys"] == held_out["end"]["episode_keys"] == ["titanic-survival#0"]
    text = describe_held_out(held_out)
    assert text[0].startswith("held-out at step 0: ") and "(1 episode)" in text[0]
    assert "; change " in text[1] and "(paired: same tasks and seeds, 1 pair)" in text[1]


def test_the_change_is_paired_by_episode_and_leaves_unknown_episodes_out():
    keys = ("a#0", "a#1", "b#0", "b#1")
    start = HeldOutScore(0, None, None, 4, 1, (0.5, 0.25, None, 0.75), keys)
    end = HeldOutScore(6, None, None, 4, 1, (1.0, 0.75, 0.5, None), keys[::-1])  # another order
    change = paired_change(start, end)
    assert change is not None and change.pairs == 2  # a#1 and a#0: the only episodes known at both
    assert change.mean == pytest.approx(((0.5 - 0.25) + (0.75 - 0.5)) / 2)
    assert change.se == pytest.approx(0.0), "the same gain on both pairs: no paired spread"
    elsewhere = HeldOutScore(6, 0.9, None, 1, 0, (0.9,), ("c#0",))
    assert paired_change(start, elsewhere) is None, "other tasks: no pairs, no change"
    no_start = describe_held_out({"end": elsewhere.to_dict()})
    assert no_start == ["held-out at step 6: 0.900 ± unknown (1 episode); change unknown (the run has no "
                        "step-0 evaluation)"]  # fmt: skip


def test_the_sign_flip_p_is_exact_and_shows_the_floor_a_few_seeds_cannot_go_below():
    assert sign_flip_p([0.1, 0.2, 0.3, 0.4]) == pytest.approx(2 / 16), "all one sign: the floor 2 / 2^n"
    assert sign_flip_p([0.0, 0.0]) == 1.0 and sign_flip_p([]) is None
    rng = np.random.default_rng(0)
    for n in (1, 2, 5, 9):  # against the plain enumeration of every sign pattern (ties count as reached)
        values = rng.integers(-4, 5, n) / 24
        reached = [
            abs(np.dot(signs, np.abs(values))) >= abs(values.sum()) - 1e-12
            for signs in itertools.product((1, -1), repeat=n)
        ]
        assert sign_flip_p(values) == pytest.approx(np.mean(reached))
    with pytest.raises(ConfigError, match="too many"):
        sign_flip_p(np.ones(41))
