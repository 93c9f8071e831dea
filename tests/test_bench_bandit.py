"""Tests of benchmarks/bandit_ablation.py: the quick run's outputs, the variants' error sizes, and (slow)
the fallback and debiasing claims on a reduced budget."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from _helpers import BENCHMARKS, benchmark_script

SCRIPT = BENCHMARKS / "bandit_ablation.py"


@pytest.mark.long  # moved out of the default suite (its slowest; CI's long pass runs it)
def test_quick_run_writes_tables_curves_and_plot_with_honest_execution_counts(tmp_path: Path) -> None:
    bench = benchmark_script("bandit_ablation")
    completed = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--quick",
            "--variants",
            "monotone,useless",
            "--output-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert (tmp_path / "bandit_ablation.png").stat().st_size > 10_000
    markdown = (tmp_path / "results.md").read_text()
    assert "GRPO on anchor groups only (baseline)" in markdown and "## Targets" in markdown
    with open(tmp_path / "results.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * len(bench.METHODS)
    steps, groups, group_size = 24, 8, 8
    executions = {(row["variant"], row["method"]): int(row["real executions"]) for row in rows}
    for variant in ("monotone", "useless"):
        assert executions[(variant, "grpo_real")] == steps * groups * group_size
        assert executions[(variant, "world_model_only")] == 0
        for name in (
            "grpo_anchors_only",
            "direct_mix",
            "od_only",
            "od_ivd_paper",
            "wmrl",
            "wmrl_uncertainty",
        ):
            assert executions[(variant, name)] == steps * group_size, (
                f"{name}: one anchor group of 8 per step"
            )
        assert executions[(variant, "grpo_real_equal_budget")] == steps * group_size
    weights = {
        (row["variant"], row["method"]): float(row["WM weight / anchor weight (last 20 steps)"])
        for row in rows
    }
    assert weights[("useless", "wmrl")] < 0.1, "the default gives a useless world model ~no weight"
    assert weights[("useless", "od_ivd_paper")] >= 0.25, "the paper rule's anchor weight is capped at 4"
    assert weights[("monotone", "direct_mix")] == 1.0
    with open(tmp_path / "curves.csv", newline="") as handle:
        curve_rows = list(csv.DictReader(handle))
    runs = {(row["variant"], row["method"], row["seed"]) for row in curve_rows}
    world_model_methods = sum(method.uses_world_model for method in bench.METHODS)
    assert len(runs) == 2 * (world_model_methods * 2 + (len(bench.METHODS) - world_model_methods))


def test_unknown_method_or_variant_is_rejected_with_the_valid_names() -> None:
    for option, value, valid in (
        ("--methods", "wmrl,magic", "od_only"),
        ("--variants", "useless,weird", "arm_bias"),
    ):
        completed = subprocess.run(
            [sys.executable, str(SCRIPT), "--quick", option, value, "--output-dir", "unused"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert completed.returncode != 0
        assert valid in completed.stderr and ("magic" in completed.stderr or "weird" in completed.stderr)


def test_arm_bias_variant_has_the_within_group_rank_agreement_of_a_real_world_model() -> None:
    bench = benchmark_script("bandit_ablation")
    args = bench.Args(quick=True)
    assert 0.55 < bench.within_group_spearman("arm_bias", args, seed=0) < 0.65
    assert abs(bench.within_group_spearman("useless", args, seed=0)) < 0.05


@pytest.mark.slow
@pytest.mark.long  # out of the default suite (among CI's slowest); CI's long pass runs it
def test_useless_world_model_falls_back_to_anchor_grpo_and_debiasing_beats_the_raw_mix() -> None:
    bench = benchmark_script("bandit_ablation")
    args = bench.Args(steps=200, seeds=4)
    budget = bench.anchor_groups_per_run(args)
    methods = {method.name: method for method in bench.METHODS}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        final = {
            (name, variant): np.array(
                [
                    bench.run_method(methods[name], variant, args, seed, budget).true_reward[-1]
                    for seed in range(args.seeds)
                ]
            )
            for name, variant in (
                ("grpo_anchors_only", "useless"),
                ("wmrl", "useless"),
                ("od_ivd_paper", "useless"),
                ("direct_mix", "monotone"),
                ("wmrl", "monotone"),
            )
        }
    finally:
        torch.set_num_threads(threads)
    fallback = final[("wmrl", "useless")] - final[("grpo_anchors_only", "useless")]
    assert fallback.mean() > -fallback.std(ddof=1) / np.sqrt(args.seeds), "within 1 s.e. of anchors-only"
    assert final[("od_ivd_paper", "useless")].mean() < final[("wmrl", "useless")].mean()
    assert np.all(final[("direct_mix", "monotone")] < final[("wmrl", "monotone")]), "seed by seed"


@pytest.mark.long  # moved out of the default suite (its slowest; CI's long pass runs it)
@pytest.mark.slow
def test_powered_report_writes_the_decision_rule_targets_and_paired_intervals(tmp_path: Path) -> None:
    methods = "grpo_real,grpo_anchors_only,direct_mix,wmrl,wmrl_ppi"
    command = [sys.executable, str(SCRIPT), "--quick", "--report", "powered", "--methods", methods]
    command += ["--variants", "realistic,useless", "--output-dir", str(tmp_path)]
    command += ["--cache-dir", str(tmp_path / "runs")]
    for attempt in range(2):  # the second run reads every run back from the cache
        completed = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert completed.returncode == 0, completed.stderr[-2000:]
        if attempt == 0:
            first = (tmp_path / "results.csv").read_text()
    assert (tmp_path / "results.csv").read_text() == first, "a resumed run reports the same numbers"
    markdown = (tmp_path / "results.md").read_text()
    assert "## Decision rule (from the protocol)" in markdown and "**wmrl_ppi: " in markdown
    assert "wmrl_ppi / useless: " in markdown and "Power check" in markdown
    assert len(list((tmp_path / "runs").glob("*.npz"))) == 2 * 2 + 3 * 2 * 2, "one per run, all-real once"
    with open(tmp_path / "results.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    lows = {(row["variant"], row["method"], row["metric"]): float(row["ci95_low"]) for row in rows}
    highs = {(row["variant"], row["method"], row["metric"]): float(row["ci95_high"]) for row in rows}
    key = ("realistic", "wmrl_ppi", "area − anchors-only")
    assert lows[key] <= highs[key]
    assert (tmp_path / "bandit_powered.png").stat().st_size > 10_000
