"""Tests of benchmarks/bandit_ablation.py: the smoke run's outputs, and the paper's ordering on a budget."""

from __future__ import annotations

import csv
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bandit_ablation.py"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bandit_ablation", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_smoke_run_writes_the_table_curves_and_plot_with_honest_execution_counts(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--output-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert (tmp_path / "bandit_ablation.png").stat().st_size > 10_000
    markdown = (tmp_path / "results.md").read_text()
    assert markdown.split("\n\n")[1] in completed.stdout
    with open(tmp_path / "results.csv", newline="") as handle:
        rows = {row["method"]: row for row in csv.DictReader(handle)}
    assert len(rows) == len(_load_script().METHODS)
    steps, groups, group_size = 24, 8, 8
    executions = {label: int(row["real executions"]) for label, row in rows.items()}
    assert executions["GRPO, all real (equal steps)"] == steps * groups * group_size
    assert executions["world model only"] == 0
    mixed = {
        "direct mix (no correction)",
        "IVD only",
        "OD only",
        "WMRL (OD + IVD)",
        "GRPO on anchor groups only",
    }
    assert {executions[label] for label in mixed} == {steps * group_size}, "one anchor group of 8 per step"
    assert executions["GRPO, all real (equal executions)"] == steps * group_size
    assert int(rows["GRPO, all real (equal executions)"]["steps"]) == steps // groups
    for row in rows.values():
        reward = float(row["final true reward"].split(" ± ")[0])
        assert 0.3 < reward < 0.8
    anchor_weights = {label: float(row["anchor weight (last 20)"]) for label, row in rows.items()}
    assert anchor_weights["OD only"] == 1.0 and anchor_weights["direct mix (no correction)"] == 1.0
    assert anchor_weights["WMRL (OD + IVD)"] > 1.0 and anchor_weights["IVD only"] > 1.0
    with open(tmp_path / "curves.csv", newline="") as handle:
        curve_rows = list(csv.DictReader(handle))
    per_run = {(row["method"], row["seed"]) for row in curve_rows}
    assert len(per_run) == len(_load_script().METHODS) * 2
    assert sum(1 for row in curve_rows if row["method"] == "od_ivd" and row["seed"] == "0") == steps + 1


def test_unknown_method_is_rejected_with_the_valid_names() -> None:
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--methods", "od_ivd,magic", "--output-dir", "unused"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode != 0
    assert "['magic']" in completed.stderr and "od_ivd" in completed.stderr


@pytest.mark.slow
def test_debiasing_removes_the_world_model_floor_that_uncorrected_training_keeps() -> None:
    bench = _load_script()
    args = bench.Args(steps=200, seeds=4)
    budget = bench.anchor_groups_per_run(args)
    methods = {method.name: method for method in bench.METHODS}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        final = {
            name: np.array(
                [
                    bench.run_method(methods[name], args, seed, budget).true_reward[-1]
                    for seed in range(args.seeds)
                ]
            )
            for name in ("grpo_real", "world_model_only", "direct_mix", "od_ivd")
        }
    finally:
        torch.set_num_threads(threads)
    assert np.all(final["world_model_only"] < final["grpo_real"]), "the bias floor"
    assert np.all(final["direct_mix"] < final["od_ivd"]), "debiasing beats the uncorrected mix, seed by seed"
    assert abs(final["od_ivd"].mean() - final["grpo_real"].mean()) < 0.01, "WMRL matches all-real GRPO"
