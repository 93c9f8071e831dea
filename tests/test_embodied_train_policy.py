"""The embodied trainer's parts that need no simulator: the policy interface, behaviour cloning, the
config and CLI validation, and the Table 2 benchmark's table (from run summaries written here)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from _helpers import benchmark_script
from wmrl_adapters.train.embodied.config import EmbodiedConfig
from wmrl_adapters.train.embodied.policy import (
    ActionDistributionPolicy,
    GaussianMLPPolicy,
    behaviour_cloning,
    build_embodied_policy,
)
from wmrl_adapters.train.embodied.trainer import LIBERO_INIT_STATES, EmbodiedTrainer

from wmrl_algos.errors import ConfigError, MissingDependencyError


def _obs(value: float) -> dict[str, object]:
    return {
        "instruction": "lift the red cube",
        "proprio": np.full(9, value),
        "object_state": np.full(10, -value),
    }


def test_the_gaussian_policy_fits_the_vla_interface_with_one_log_prob_per_observation():
    policy = GaussianMLPPolicy({"proprio": 9, "object_state": 10}, seed=0)
    assert isinstance(policy, ActionDistributionPolicy)
    distribution = policy.distribution([_obs(0.0), _obs(1.0), _obs(2.0)])
    actions = distribution.sample()
    assert actions.shape == (3, 7)
    logprobs = distribution.log_prob(actions)
    assert logprobs.shape == (3,)
    logprobs.sum().backward()
    assert policy.log_std.grad is not None and policy.net[0].weight.grad is not None


def test_an_observation_without_the_policys_keys_is_an_error_naming_them():
    policy = GaussianMLPPolicy({"proprio": 9, "object_state": 10})
    with pytest.raises(ConfigError, match="object_state"):
        policy.distribution([{"proprio": np.zeros(9)}])


def test_behaviour_cloning_fits_the_demonstrated_actions_and_keeps_the_exploration_noise():
    rng = np.random.default_rng(0)
    observations = [_obs(float(v)) for v in rng.uniform(-1, 1, 64)]
    targets = np.stack([np.tanh(np.full(7, obs["proprio"][0])) for obs in observations]).astype(np.float32)
    policy = GaussianMLPPolicy({"proprio": 9, "object_state": 10}, init_std=0.2, seed=0)
    losses = behaviour_cloning(policy, observations, targets, epochs=60, seed=0)
    assert losses[-1] < 0.1 * losses[0]
    with torch.no_grad():
        error = (policy.mean(observations).numpy() - targets).std()
        std = float(policy.log_std.exp().mean())
    assert error < 0.15
    assert std == pytest.approx(0.2)


def test_policy_specs_are_validated_and_a_lerobot_policy_without_lerobot_names_the_install():
    with pytest.raises(ConfigError, match="gaussian-mlp"):
        build_embodied_policy("transformer", {"proprio": 9}, seed=0, init_std=0.1)
    try:
        import lerobot  # noqa: F401
    except ImportError:
        with pytest.raises(MissingDependencyError, match="pip install"):
            build_embodied_policy("lerobot:/nowhere", {"proprio": 9}, seed=0, init_std=0.1)


class _LiberoLayout(gym.Env[dict[str, Any], np.ndarray]):
    """LIBERO's observation layout and task count, without its simulator: the evaluation's list of
    states is bookkeeping, checked on every machine (tests/test_embodied_train.py runs the real one)."""

    n_tasks = 10
    observation_space = gym.spaces.Dict(
        {
            "proprio": gym.spaces.Box(-np.inf, np.inf, (9,), np.float64),
            "object_state": gym.spaces.Box(-np.inf, np.inf, (70,), np.float64),
        }
    )
    action_space = gym.spaces.Box(-1.0, 1.0, (7,), np.float32)


@pytest.mark.parametrize(("eval_samples", "per_task"), [(3, 3), (80, LIBERO_INIT_STATES)])
def test_libero_is_evaluated_on_each_tasks_fixed_initial_states_the_same_for_every_run(
    tmp_path, eval_samples, per_task
):
    def starts(**changes):
        config = EmbodiedConfig(
            env="libero:libero_object/0,3", eval_samples=eval_samples, progress=False, **changes
        )
        trainer = EmbodiedTrainer(
            config, tmp_path / str(len(list(tmp_path.iterdir()))), make_env=_LiberoLayout
        )
        return trainer.eval_starts()

    first = starts()
    pairs = [(options["task_id"], options["init_index"]) for _, options in first]
    assert sorted(pairs) == [(task, i) for task in (0, 3) for i in range(per_task)], "each state once"
    assert starts(seed=5, algo="grpo", init_std=1.0) == first, "paired across seeds and methods"


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"env": "mujoco:Lift"}, "robosuite:TASK"),
        ({"algo": "ppo"}, "sft, grpo"),
        ({"env": "libero:libero_10/a"}, "integers"),
        ({"world_model": "robometer"}, "sim-state"),
        ({"group_size": 1}, "group_size=1"),
        ({"anchor_fraction": 0.0}, "anchor_fraction=0.0"),
        ({"demo_horizon": 0}, r"demo_horizon=0; pass an integer from 1 to horizon \(60\)"),
        ({"demo_horizon": 61}, "demo_horizon=61"),
        ({"demo_horizon": "20"}, "demo_horizon='20'"),
    ],
)
def test_a_bad_embodied_setting_is_an_error_naming_it(changes, needle):
    with pytest.raises(ConfigError, match=needle):
        EmbodiedConfig(**changes)


def test_libero_task_ids_come_from_the_env_spec():
    assert EmbodiedConfig(env="libero:libero_object/0,3").tasks() == [0, 3]
    assert EmbodiedConfig(env="libero:libero_10").tasks() is None
    assert EmbodiedConfig(env="libero:libero_10").name == "libero_10"


def test_sft_without_a_scripted_expert_is_refused_before_any_simulator_starts(tmp_path):
    with pytest.raises(ConfigError, match="libero_10.*has no scripted expert"):
        EmbodiedTrainer(EmbodiedConfig(env="libero:libero_10/0", algo="sft"), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_wmrl_train_with_env_rejects_an_unknown_key_listing_the_embodied_ones(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "wmrl_adapters.cli", "train", "--env", "robosuite:Lift", "--bogus", "1"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 2
    assert "bogus" in result.stderr and "horizon" in result.stderr


def _summary(run_dir, seed, rate, final):
    run_dir.mkdir(parents=True)
    summary = {"config": {"seed": seed}, "eval": {"eval/success_rate": rate}, "final": final}
    (run_dir / "summary.json").write_text(json.dumps(summary))
    lines = [{"step": 3.0, "eval/success_rate": rate, "diag/scorer_auroc": 0.8, "wmrl/anchor_weight": 2.0}]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_the_table2_benchmark_reports_mean_and_standard_error_over_seeds_and_marks_targets(tmp_path):
    embodied_table2 = benchmark_script("embodied_table2")

    runs = tmp_path / "runs"
    final = {"compute/real_labels": 24.0, "compute/sim_episodes": 192.0, "compute/charged_total": 100.0}
    for seed, (sft, grpo, wmrl) in enumerate([(0.4, 0.5, 0.6), (0.3, 0.5, 0.5)]):
        _summary(
            runs / f"sft-s{seed}", seed, sft, {"compute/demo_episodes": 30.0, "compute/charged_total": 50.0}
        )
        _summary(runs / f"grpo-s{seed}", seed, grpo, final)
        _summary(runs / f"wmrl-s{seed}", seed, wmrl, final)
    table = embodied_table2.build_table(tmp_path)
    rows = {row["method"]: row for row in table["rows"]}
    assert rows["sft"]["success"] == pytest.approx(0.35)
    assert rows["sft"]["success_se"] == pytest.approx(0.05)
    assert rows["wmrl"]["success"] == pytest.approx(0.55)
    assert rows["wmrl"]["anchor_weight"] == pytest.approx(2.0)
    assert table["targets"]["WMRL >= GRPO sparse + 3 points"] is True
    assert table["curves"]["grpo"] == {0: [0.4, 0.3], 3: [0.5, 0.5]}
    embodied_table2.write_outputs(table, tmp_path, {})
    assert "met" in (tmp_path / "table.md").read_text()
    assert (tmp_path / "success_vs_step.png").stat().st_size > 0
    assert (tmp_path / "success_bar.png").stat().st_size > 0


def test_the_table2_benchmark_keeps_each_envs_results_and_sizes_apart():
    embodied_table2 = benchmark_script("embodied_table2")

    lift = embodied_table2.parse_args([])
    libero = embodied_table2.parse_args(["--env", "libero:libero_object/0", "--steps", "1"])
    assert lift.env == "robosuite:Lift" and lift.out == embodied_table2.RESULTS and lift.horizon == 50
    assert libero.out.name == "embodied_table2_libero" and libero.horizon == 280 and libero.hidden == 128
    assert libero.steps == 1, "a flag overrides the env's committed size"


def test_the_table2_world_model_target_needs_the_papers_order_not_just_betweenness(tmp_path):
    embodied_table2 = benchmark_script("embodied_table2")

    final = {"compute/real_labels": 12.0, "compute/sim_episodes": 48.0, "compute/charged_total": 10.0}
    for method, rate in (("grpo", 0.8), ("wm", 0.7), ("wmrl", 0.6)):  # reversed: WMRL lowest
        _summary(tmp_path / "runs" / f"{method}-s0", 0, rate, final)
    targets = embodied_table2.build_table(tmp_path)["targets"]
    assert targets["world model only between GRPO sparse and WMRL"] is False


def test_the_table2_benchmark_sizes_each_method_difference_from_its_spread_over_seeds(tmp_path):
    embodied_table2 = benchmark_script("embodied_table2")

    final = {"compute/real_labels": 12.0, "compute/sim_episodes": 48.0, "compute/charged_total": 10.0}
    for seed, (wm, wmrl) in enumerate([(0.5, 0.6), (0.6, 0.6), (0.4, 0.6)]):  # wmrl - wm: 0.1, 0.0, 0.2
        _summary(tmp_path / "runs" / f"wm-s{seed}", seed, wm, final)
        _summary(tmp_path / "runs" / f"wmrl-s{seed}", seed, wmrl, final)
    table = embodied_table2.build_table(tmp_path)
    [difference] = table["differences"]
    assert difference["comparison"] == "wmrl - wm" and difference["seeds"] == 3
    assert difference["per_seed"] == pytest.approx([0.1, 0.0, 0.2])
    assert difference["mean"] == pytest.approx(0.1) and difference["sd"] == pytest.approx(0.1)
    assert difference["se"] == pytest.approx(0.1 / 3**0.5)
    assert difference["seeds_for_2se"] == 4, "(2 sd / mean)^2 seeds put the mean at 2 s.e."
    # Of the 8 sign patterns of (0.1, 0, 0.2), |sum| reaches 0.3 in 4 (the 0 flips freely): p = 0.5.
    assert difference["sign_flip_p"] == pytest.approx(0.5)
    embodied_table2.write_outputs(table, tmp_path, {})
    assert difference["seeds_for_margin"] == 4, "a 0.10 difference with s.d. 0.10: 4 seeds"
    assert "| wmrl - wm | 3 | +0.100, +0.000, +0.200 |" in (tmp_path / "table.md").read_text()
    assert "| 4 | 4 | 0.500 |" in (tmp_path / "table.md").read_text(), "sizes, then the sign-flip p"


def test_the_table2_benchmark_reports_each_runs_paired_change_from_its_start(tmp_path):
    embodied_table2 = benchmark_script("embodied_table2")
    from wmrl_adapters.train.run.measure import HeldOutScore

    keys = ("Lift#1", "Lift#2", "Lift#3")
    start = HeldOutScore(0, 1 / 3, None, 3, 0, (0.0, 1.0, 0.0), keys).to_dict()
    end = HeldOutScore(4, 2 / 3, None, 3, 1, (1.0, None, 1.0), keys).to_dict()
    run_dir = tmp_path / "runs" / "wm-s0"
    _summary(
        run_dir,
        0,
        1.0,
        {"compute/real_labels": 0.0, "compute/sim_episodes": 8.0, "compute/charged_total": 1.0},
    )
    summary = json.loads((run_dir / "summary.json").read_text())
    (run_dir / "summary.json").write_text(json.dumps({**summary, "held_out": {"start": start, "end": end}}))
    [change] = embodied_table2.build_table(tmp_path)["changes"]
    assert change["method"] == "wm" and change["pairs"] == 2, "the unknown episode is left out of the pairs"
    assert change["change"] == pytest.approx(1.0) and change["change_se"] == pytest.approx(0.0)
    assert embodied_table2.parse_args(["--world-model", "approach"]).world_model == "approach"
    assert embodied_table2.parse_args([]).world_model == "sim-state"


def test_a_difference_that_is_zero_to_rounding_needs_no_finite_number_of_seeds(tmp_path):
    embodied_table2 = benchmark_script("embodied_table2")

    final = {"compute/real_labels": 12.0, "compute/sim_episodes": 48.0, "compute/charged_total": 10.0}
    for seed, (wm, wmrl) in enumerate(
        [(0.8333333333333334, 0.875), (0.5833333333333334, 0.5416666666666666)]
    ):
        _summary(tmp_path / "runs" / f"wm-s{seed}", seed, wm, final)
        _summary(tmp_path / "runs" / f"wmrl-s{seed}", seed, wmrl, final)
    [difference] = embodied_table2.build_table(tmp_path)["differences"]
    assert difference["mean"] == pytest.approx(0.0, abs=1e-12) and difference["mean"] != 0.0, "rounding"
    assert difference["seeds_for_2se"] is None, "no number of seeds puts a zero difference at 2 s.e."
    assert difference["seeds_for_margin"] == 2, "a 0.10 difference with this spread (s.d. 0.059): 2 seeds"


def test_the_table2_benchmark_curves_success_against_cost_and_the_scorer_over_training(tmp_path):
    embodied_table2 = benchmark_script("embodied_table2")

    final = {"compute/real_labels": 8.0, "compute/sim_episodes": 64.0, "compute/charged_total": 10.0}
    for method, labels, episodes in (("wmrl", 4.0, 32.0), ("anchors", 4.0, 4.0)):
        run_dir = tmp_path / "runs" / f"{method}-s0"
        run_dir.mkdir(parents=True)
        summary = {"config": {"seed": 0}, "eval": {"eval/success_rate": 0.75}, "final": final}
        (run_dir / "summary.json").write_text(json.dumps(summary))
        lines = [
            {"step": 0.0, "eval/success_rate": 0.25},
            {
                "step": 1.0,
                "compute/real_labels": labels,
                "compute/sim_episodes": episodes,
                "diag/scorer_auroc": 0.9,
                "wmrl/anchor_weight": 1.0,
            },
            {
                "step": 2.0,
                "compute/real_labels": 2 * labels,
                "compute/sim_episodes": 2 * episodes,
                "diag/scorer_auroc": float("nan"),
                "diag/sim_success_rate": 0.5,
                "wmrl/anchor_weight": 1.5,
                "eval/success_rate": 0.75,
            },
        ]
        (run_dir / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    table = embodied_table2.build_table(tmp_path)
    wmrl, anchors = table["training"]["wmrl"], table["training"]["anchors"]
    assert wmrl["success"] == {0: [0.25], 2: [0.75]}
    assert wmrl["sim_episodes"] == {0: [0.0], 2: [64.0]} and anchors["sim_episodes"] == {0: [0.0], 2: [8.0]}
    assert wmrl["real_labels"] == {0: [0.0], 2: [8.0]}
    assert wmrl["diag/scorer_auroc"] == {1: [0.9]}, "a NaN diagnostic is left out, not averaged in"
    embodied_table2.write_outputs(table, tmp_path, {})
    text = (tmp_path / "table.md").read_text()
    assert "| wmrl | 2 | 0.500 | - | - | - | 1.500 |" in text
    assert "| anchors | 2 | 0.500 | - | - | - | - |" in text, (
        "the correction's numbers only for the method that corrects; the rollouts' success for every method"
    )
    for name in ("success_vs_cost.png", "diagnostics_vs_step.png"):
        assert (tmp_path / name).stat().st_size > 0


def test_the_demo_horizon_parses_from_the_command_line_and_an_older_run_without_it_resumes(tmp_path):
    from wmrl_adapters.train.run.checks import coerce
    from wmrl_adapters.train.run.rundir import RunTrainer

    assert coerce("demo_horizon", "25", EmbodiedConfig) == 25
    assert coerce("demo_horizon", "none", EmbodiedConfig) is None
    with pytest.raises(ConfigError, match="--demo-horizon 'x'"):
        coerce("demo_horizon", "x", EmbodiedConfig)
    config = EmbodiedConfig(demo_horizon=None)
    run_dir = tmp_path / "older"
    run_dir.mkdir()
    saved = {k: v for k, v in config.to_dict().items() if k != "demo_horizon"}  # written before the setting
    (run_dir / "config.json").write_text(json.dumps(saved))
    directory = RunTrainer.__new__(RunTrainer)
    directory.run_dir, directory.config = run_dir, config
    directory._check_same_settings(saved)  # the default reads as the older run's: no refusal
    directory.config = EmbodiedConfig(demo_horizon=30)
    with pytest.raises(ConfigError, match="demo_horizon: run None vs now 30"):
        directory._check_same_settings(saved)


def test_the_table2_benchmark_reads_runs_in_seed_order_not_name_order(tmp_path):
    embodied_table2 = benchmark_script("embodied_table2")

    for seed in (10, 4, 5):
        (tmp_path / f"wmrl-s{seed}").mkdir()
    (tmp_path / "wm-s1").mkdir()  # another method's prefix overlaps: not wmrl's
    assert [d.name for d in embodied_table2._seed_dirs(tmp_path, "wmrl")] == [
        "wmrl-s4",
        "wmrl-s5",
        "wmrl-s10",
    ]
    assert [d.name for d in embodied_table2._seed_dirs(tmp_path, "wm")] == ["wm-s1"]


def test_the_table2_bias_reduction_is_pooled_over_seeds_not_a_mean_of_ratios(tmp_path):
    embodied_table2 = benchmark_script("embodied_table2")

    final = {"compute/real_labels": 4.0, "compute/sim_episodes": 32.0, "compute/charged_total": 1.0}
    for seed, (raw, calibrated, logged) in enumerate([(0.2, 0.1, 0.5), (0.0005, 0.02, -39.0)]):
        run_dir = tmp_path / "runs" / f"wmrl-s{seed}"
        run_dir.mkdir(parents=True)
        summary = {"config": {"seed": seed}, "eval": {"eval/success_rate": 0.5}, "final": final}
        (run_dir / "summary.json").write_text(json.dumps(summary))
        line = {"step": 1.0, "wmrl/residual_raw": raw, "wmrl/residual_calibrated": calibrated,
                "wmrl/bias_reduction": logged}  # fmt: skip
        (run_dir / "metrics.jsonl").write_text(json.dumps(line) + "\n")
    table = embodied_table2.build_table(tmp_path)
    [wmrl] = [row for row in table["rows"] if row["method"] == "wmrl"]
    assert wmrl["bias_reduction"] == pytest.approx(1 - 0.12 / 0.2005)
    assert table["training"]["wmrl"]["wmrl/bias_reduction"] == {1: [pytest.approx(1 - 0.12 / 0.2005)]}


def test_the_table2_benchmark_links_only_the_runs_that_never_read_the_scorer(tmp_path):
    embodied_table2 = benchmark_script("embodied_table2")

    final = {"compute/real_labels": 4.0, "compute/sim_episodes": 4.0, "compute/charged_total": 1.0}
    final["compute/demo_episodes"] = 6.0  # read for the SFT row of the table --table-only writes
    source, here = tmp_path / "hack" / "runs", tmp_path / "simstate" / "runs"
    for method in ("sft", "anchors", "wm", "wmrl"):
        _summary(source / f"{method}-s4", 4, 0.5, final)
    (source / "grpo-s4").mkdir()  # started, not complete: not shared
    _summary(source / "anchors-s5", 5, 0.5, final)  # another seed
    _summary(here / "sft-s4", 4, 0.25, final)  # already here: kept
    assert embodied_table2.link_shared_runs(source, here, 4) == ["anchors-s4"]
    assert (here / "anchors-s4").is_symlink() and not (here / "sft-s4").is_symlink()
    assert not (here / "wm-s4").exists() and not (here / "grpo-s4").exists()
    assert (here / "anchors-s4" / "summary.json").is_file(), "a relative link that resolves"
    assert embodied_table2.link_shared_runs(source, here, 4) == [], "a second call links nothing"
    table_only = ["--table-only", "--env", "robosuite:Lift", "--first-seed", "5", "--seeds", "1"]
    shared = ["--shared-runs", str(source.parent), "--out", str(here.parent)]
    assert embodied_table2.main([*table_only, *shared]) == 0
    assert (here / "anchors-s5").is_symlink(), "--table-only takes in the other table's runs, runs none"
    assert not (here / "sft-s5").exists() and (here.parent / "table.md").is_file()
    spatial = embodied_table2.parse_args(["--env", "libero:libero_spatial/0,1,2,3,5,7,8"])
    assert spatial.out.name == "embodied_table2_libero_spatial" and spatial.horizon == 220
    assert spatial.demos == 42 and spatial.eval_samples == 5 and spatial.shared_runs is None


def test_the_table2_versus_pairs_each_method_with_its_own_seed_under_another_setting(tmp_path):
    embodied_table2 = benchmark_script("embodied_table2")

    final = {"compute/real_labels": 8.0, "compute/sim_episodes": 32.0, "compute/charged_total": 1.0}
    final["compute/demo_episodes"] = 6.0
    base, here = tmp_path / "base" / "runs", tmp_path / "a25" / "runs"
    for seed, (grpo, wmrl_base, wmrl_here) in {
        4: (0.5, 0.3, 0.5),
        5: (0.2, 0.1, 0.1),
        6: (0.4, 0.4, 0.7),
    }.items():
        _summary(base / f"grpo-s{seed}", seed, grpo, final)
        _summary(base / f"wmrl-s{seed}", seed, wmrl_base, final)
        _summary(here / f"wmrl-s{seed}", seed, wmrl_here, final)
    _summary(here / "wmrl-s7", 7, 0.9, final)  # no seed 7 there: not paired
    here.joinpath("grpo-s4").symlink_to(base / "grpo-s4", target_is_directory=True)  # one run: no difference
    rows = embodied_table2.versus_differences(here, base.parent)
    assert [row["comparison"] for row in rows] == ["wmrl - wmrl (base)"], "the linked GRPO run is left out"
    assert rows[0]["per_seed"] == pytest.approx([0.2, 0.0, 0.3]) and rows[0]["seeds"] == 3
    assert rows[0]["mean"] == pytest.approx(0.5 / 3)
    table_only = ["--table-only", "--env", "robosuite:Lift", "--first-seed", "4", "--seeds", "3"]
    assert embodied_table2.main([*table_only, "--versus", str(base.parent), "--out", str(here.parent)]) == 0
    assert "| wmrl - wmrl (base) | 3 | +0.200, +0.000, +0.300 |" in (here.parent / "table.md").read_text()
    with pytest.raises(SystemExit):  # argparse's error: a clear message, not an empty comparison
        embodied_table2.parse_args(["--versus", str(base.parent), "--versus", str(tmp_path / "typo")])
    comparisons = [row["comparison"] for row in embodied_table2.build_table(here.parent)["differences"]]
    assert comparisons == ["wmrl - grpo"], "without --versus only the pairs inside the directory"


def test_the_table2_versus_is_repeatable_and_pairs_each_gap_with_the_same_gap_there(tmp_path):
    """ "Do the methods separate if they train longer" is a per-seed difference of gaps between two
    directories (the longer runs and the shorter ones); several --versus directories give one table."""
    embodied_table2 = benchmark_script("embodied_table2")

    final = {"compute/real_labels": 8.0, "compute/sim_episodes": 32.0, "compute/charged_total": 1.0}
    final["compute/demo_episodes"] = 6.0
    short, long, other = (tmp_path / name / "runs" for name in ("short", "long", "other"))
    for seed, (wmrl_8, anchors_8, wmrl_16, anchors_16) in {
        4: (0.6, 0.4, 0.5, 0.5),
        5: (0.3, 0.3, 0.6, 0.2),
    }.items():
        _summary(short / f"wmrl-s{seed}", seed, wmrl_8, final)
        _summary(short / f"anchors-s{seed}", seed, anchors_8, final)
        _summary(long / f"wmrl-s{seed}", seed, wmrl_16, final)
        _summary(long / f"anchors-s{seed}", seed, anchors_16, final)
        _summary(other / f"wmrl-s{seed}", seed, 0.1, final)
        other.joinpath(f"anchors-s{seed}").symlink_to(long / f"anchors-s{seed}", target_is_directory=True)
    rows = {row["comparison"]: row for row in embodied_table2.versus_differences(long, short.parent)}
    assert list(rows) == [
        "wmrl - wmrl (short)",
        "anchors - anchors (short)",
        "(wmrl - anchors) - same (short)",
    ]
    assert rows["(wmrl - anchors) - same (short)"]["per_seed"] == pytest.approx([0.0 - 0.2, 0.4 - 0.0])
    other_rows = [row["comparison"] for row in embodied_table2.versus_differences(long, other.parent)]
    assert other_rows == ["wmrl - wmrl (other)"], "a gap whose one run is linked into both is no new row"
    table_only = ["--table-only", "--env", "robosuite:Lift", "--first-seed", "4", "--seeds", "2"]
    versus = ["--versus", str(short.parent), "--versus", str(other.parent)]
    assert embodied_table2.main([*table_only, *versus, "--out", str(long.parent)]) == 0
    text = (long.parent / "table.md").read_text()
    assert "| (wmrl - anchors) - same (short) | 2 | -0.200, +0.400 |" in text
    assert "| wmrl - wmrl (other) | 2 | +0.400, +0.500 |" in text
    settings = json.loads((long.parent / "table.json").read_text())["settings"]
    assert settings["versus"] == f"{short.parent}, {other.parent}", "the directories, not a list's repr"


def test_the_table2_ablation_without_od_is_a_row_and_a_paired_difference_only_when_it_ran(tmp_path):
    embodied_table2 = benchmark_script("embodied_table2")

    assert "ivd" not in embodied_table2.parse_args([]).methods.split(","), "the ablation runs only when named"
    final = {"compute/real_labels": 12.0, "compute/sim_episodes": 48.0, "compute/charged_total": 10.0}
    rates = {"wmrl": (0.3, 0.2), "ivd": (0.5, 0.2)}  # per seed 0, 1
    for seed, rate in enumerate(rates["wmrl"]):
        _summary(tmp_path / "runs" / f"wmrl-s{seed}", seed, rate, final)
    without = embodied_table2.build_table(tmp_path)
    assert "ivd" not in {row["method"] for row in without["rows"]}
    assert not any(d["comparison"].startswith("ivd") for d in without["differences"])
    for seed, rate in enumerate(rates["ivd"]):
        _summary(tmp_path / "runs" / f"ivd-s{seed}", seed, rate, final)
    table = embodied_table2.build_table(tmp_path)
    assert {row["method"]: row for row in table["rows"]}["ivd"]["success"] == pytest.approx(0.35)
    [difference] = [d for d in table["differences"] if d["comparison"] == "ivd - wmrl"]
    assert difference["per_seed"] == pytest.approx([0.2, 0.0])
    embodied_table2.write_outputs(table, tmp_path, {})
    assert "WMRL without OD" in (tmp_path / "table.md").read_text()


@pytest.mark.parametrize(
    ("method", "compared_with", "has_bias_reduction", "has_anchor_weight"),
    [("ivd", "wm", False, True), ("od", "wmrl", True, False), ("mix", "anchors", False, False)],
)
def test_each_table2_ablation_shows_only_the_corrections_it_runs(
    tmp_path, method: str, compared_with: str, has_bias_reduction: bool, has_anchor_weight: bool
) -> None:
    """An ablation's row reads OD's bias reduction only when OD ran and IVD's anchor weight only when IVD
    ran; the logged neutral values of a correction that is off must not read as a measurement."""
    embodied_table2 = benchmark_script("embodied_table2")

    assert method not in embodied_table2.parse_args([]).methods.split(","), "ablations run only when named"
    final = {"compute/real_labels": 12.0, "compute/sim_episodes": 48.0, "compute/charged_total": 10.0}
    logged = {"wmrl/anchor_weight": 2.5, "wmrl/residual_raw": 0.2, "wmrl/residual_calibrated": 0.1}
    for seed, (mine, theirs) in enumerate([(0.4, 0.3), (0.2, 0.3)]):
        for name, rate in ((method, mine), (compared_with, theirs)):
            run = tmp_path / "runs" / f"{name}-s{seed}"
            _summary(run, seed, rate, final)
            (run / "metrics.jsonl").write_text(json.dumps({"step": 1, **logged}) + "\n")
    table = embodied_table2.build_table(tmp_path)
    row = {row["method"]: row for row in table["rows"]}[method]
    assert (row["bias_reduction"] is not None) is has_bias_reduction
    assert row["anchor_weight"] == pytest.approx(2.5 if has_anchor_weight else 1.0)
    [difference] = [d for d in table["differences"] if d["comparison"] == f"{method} - {compared_with}"]
    assert difference["per_seed"] == pytest.approx([0.1, -0.1])
    embodied_table2.write_outputs(table, tmp_path, {})
    assert dict(embodied_table2.METHODS)[method] in (tmp_path / "table.md").read_text()


def test_the_step_logs_the_scorers_order_inside_each_group_beside_its_pooled_auroc() -> None:
    """No simulator: two groups whose scores order the first group's episodes right and the second's the
    wrong way round (what GRPO reads), with a pooled AUROC of 0.75 that hides the difference."""
    from types import SimpleNamespace

    from wmrl_algos.types import ScoredGroup

    groups = [
        ScoredGroup(0, anchor=False, predicted=(0.9, 0.1)),
        ScoredGroup(1, anchor=False, predicted=(0.5, 0.6)),
    ]
    identity = SimpleNamespace(loop=SimpleNamespace(debiaser=SimpleNamespace(apply=lambda scores: scores)))
    outcomes = ["success", "failure", "success", "failure"]
    metrics = EmbodiedTrainer._episode_metrics(identity, groups, outcomes)  # type: ignore[arg-type]
    assert metrics["diag/scorer_auroc"] == pytest.approx(0.75)
    assert metrics["diag/scorer_group_spearman"] == pytest.approx(0.0)  # +1 in group 0, -1 in group 1
