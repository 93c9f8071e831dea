"""``wmrl train`` / ``wmrl eval`` as a user runs them: subprocesses with tiny budgets, as CleanRL does."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from _helpers import TINY_GROUP_ARGS, run_wmrl

TINY = [
    "--steps",
    "2",
    *TINY_GROUP_ARGS,
    "--competitions",
    "titanic-survival",
    "--eval-competitions",
    "titanic-survival",
    "--eval-samples",
    "1",
    "--warm",
    "0",
    "--progress",
    "false",
]




@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--algo", "ppo"], "grpo, anchors, wm, mix, od, ivd, wmrl"),
        (["--world-model", "oracle"], "learned+rubric"),
        (["--policy", "gpt"], "design, llm"),
        (["--learning-rte", "0.1"], "learning_rate"),
        (["--competitions", "no-such-task"], "titanic-survival"),
        (["--competitions", "phone-churn"], "held out"),
    ],
)
def test_bad_input_exits_2_and_lists_the_valid_choices(tmp_path, args, names):
    result = run_wmrl("train", *args, "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert names in result.stderr


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    result = run_wmrl("train", *TINY, "--out", str(root / "run"), cwd=root)
    assert result.returncode == 0, result.stderr[-3000:]
    return root, result


@pytest.mark.integration
def test_train_writes_config_metrics_checkpoint_plots_and_says_where(trained):
    root, result = trained
    run = root / "run"
    for name in ("config.json", "metrics.jsonl", "checkpoint.pt", "summary.json", "plots/training.png"):
        assert (run / name).is_file(), name
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [0.0, 1.0, 2.0], "the initial policy is evaluated first"
    for key in (
        "wmrl/anchor_weight",
        "cost/real_steps",
        "compute/charged_total",
        "losses/loss",
        "losses/entropy",
        "losses/approx_kl",
        "reward/real_mean",
        "reward/predicted_mean",
    ):
        assert key in lines[-1], key
    assert "eval/position" in lines[-1] and "eval/valid_rate" in lines[-1]
    assert lines[-1]["compute/charged_total"] >= lines[-1]["compute/spent_total"] > 0
    assert f"metrics: {run / 'metrics.jsonl'}" in result.stdout and "plots:" in result.stdout


CPU_PARTS = (
    "compute/sandbox_cpu_charged",
    "compute/world_model_cpu_s",
    "compute/policy_sample_cpu_s",
    "compute/policy_update_cpu_s",
)


@pytest.mark.integration
def test_train_charges_one_unit_cpu_seconds_the_total_being_the_sum_of_its_parts(trained):
    root, result = trained
    lines = [json.loads(line) for line in (root / "run" / "metrics.jsonl").read_text().splitlines()]
    for line in lines[1:]:
        assert line["compute/charged_total"] == pytest.approx(sum(line[key] for key in CPU_PARTS))
        assert line["compute/policy_sample_cpu_s"] > 0, "sampling the rollouts is charged"
        assert line["compute/policy_update_cpu_s"] > 0 and line["compute/world_model_cpu_s"] > 0
        assert line["compute/sandbox_cpu_charged"] > 0, "the anchor group ran for real"
        assert line["time/policy_sample_seconds"] > 0, "wall seconds are kept, apart, under time/"
        assert not {"compute/policy_seconds", "compute/world_model_seconds"} & set(line), "no wall time"
    assert all(lines[2][key] >= lines[1][key] for key in CPU_PARTS), "totals so far, never per step"
    assert "compute charged " in result.stdout and " CPU-s (sandbox " in result.stdout


@pytest.mark.integration
def test_train_prints_the_held_out_start_and_end_with_their_paired_change(trained):
    root, result = trained
    start, *_, end = [json.loads(line) for line in (root / "run" / "metrics.jsonl").read_text().splitlines()]
    assert set(start) == {"step"} | {key for key in start if key.startswith("eval/")}
    summary = json.loads((root / "run" / "summary.json").read_text())
    assert summary["held_out"]["start"]["mean"] == start["eval/position"]
    assert summary["held_out"]["end"]["mean"] == end["eval/position"]
    printed = [line for line in result.stdout.splitlines() if line.startswith("held-out at step ")]
    one_episode = "± unknown (1 episode)"  # one episode has no standard error
    assert printed[0] == printed[1] == f"held-out at step 0: {start['eval/position']:.3f} {one_episode}"
    assert printed[2].startswith(f"held-out at step 2: {end['eval/position']:.3f} {one_episode}; ")
    change = end["eval/position"] - start["eval/position"]
    assert printed[2].endswith(f"change {change:+.3f} ± unknown (paired: same tasks and seeds, 1 pair)")
    assert len(printed) == 3, "the start when it is measured, then the start and the end at the finish"


@pytest.mark.integration
def test_resume_with_another_config_is_refused_and_overwrites_nothing(trained):
    root, _ = trained
    run = root / "run"
    before = {path.name: path.read_bytes() for path in run.iterdir() if path.is_file()}
    result = run_wmrl("train", "--resume", str(run), "--algo", "grpo", cwd=root)
    assert result.returncode == 2
    assert "another config" in result.stderr and "algo" in result.stderr
    assert before == {path.name: path.read_bytes() for path in run.iterdir() if path.is_file()}


@pytest.mark.integration
@pytest.mark.long
def test_resume_with_more_steps_extends_a_finished_run(trained, tmp_path):
    root, _ = trained
    run = tmp_path / "run"
    shutil.copytree(root / "run", run)
    result = run_wmrl("train", "--resume", str(run), "--steps", "3", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [0.0, 1.0, 2.0, 3.0], "the recorded start is kept, once"
    assert "held-out at step 0: " not in result.stdout.split("done: ")[0], "the start is not evaluated again"
    assert "held-out at step 3: " in result.stdout
    assert json.loads((run / "config.json").read_text())["steps"] == 3
    assert "done: 3 steps" in result.stdout
    assert torch.load(run / "checkpoint.pt", weights_only=True)["state"]["step"] == 3  # plain data
    fewer = run_wmrl("train", "--resume", str(run), "--steps", "2", cwd=tmp_path)
    assert fewer.returncode == 2
    assert "has done 3 steps" in fewer.stderr and "--steps 3 or more" in fewer.stderr


@pytest.mark.integration
def test_a_new_run_in_an_existing_run_directory_is_refused(trained):
    root, _ = trained
    result = run_wmrl("train", *TINY, "--out", str(root / "run"), cwd=root)
    assert result.returncode == 2 and "--resume" in result.stderr


@pytest.mark.integration
def test_eval_runs_a_trained_policy_on_an_mlebench_layout_competition(trained):
    from wmrl_envs.kaggle.suite import load_suite

    root, _ = trained
    competition = load_suite().get("titanic-survival")
    mle = root / "mlebench" / "titanic-copy"
    shutil.copytree(competition.public_dir, mle / "prepared" / "public")
    (mle / "prepared" / "private").mkdir(parents=True)
    shutil.copy(competition.answers_path, mle / "prepared" / "private" / "test.csv")
    (mle / "config.yaml").write_text("id: titanic-copy\ngrader:\n  name: accuracy\n")
    scores = sorted(competition.leaderboard.scores, reverse=True)
    (mle / "leaderboard.csv").write_text(
        "teamName,score\n" + "".join(f"t{i},{s}\n" for i, s in enumerate(scores))
    )
    result = run_wmrl(
        "eval",
        str(root / "run"),
        "--competitions",
        str(mle),
        "--samples",
        "1",
        "--out",
        str(root / "eval.json"),
        cwd=root,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((root / "eval.json").read_text())
    assert metrics["eval/episodes"] == 1.0 and 0.0 <= metrics["eval/position"] <= 1.0
    assert "titanic-copy" in result.stdout and "not training" in result.stdout


def test_eval_of_a_directory_that_is_not_a_run_exits_2(tmp_path):
    result = run_wmrl("eval", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 2 and "not a trained run" in result.stderr
