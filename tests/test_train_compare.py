"""Tests of wmrl compare (wmrl_adapters.train.kaggle.compare): the table, the targets, skipping complete runs.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from wmrl_adapters.train.kaggle.compare import CompareArgs, eval_curve, summarise, targets

from wmrl_algos.errors import ConfigError


def _summary(algo, position, charged):
    return {
        "config": {"algo": algo},
        "eval": {
            "eval/position": position,
            "eval/medal_rate": 0.0,
            "eval/above_median_rate": 1.0,
            "eval/valid_rate": 1.0,
        },
        "final": {
            "compute/charged_total": charged,
            "compute/spent_total": charged / 2,
            "compute/real_executions": charged,
        },
    }


def test_summary_rows_average_seeds_with_a_standard_error():
    rows = summarise([_summary("grpo", 0.5, 100.0), _summary("grpo", 0.7, 120.0)], ["grpo"])
    assert rows[0]["position"] == pytest.approx(0.6) and rows[0]["position_se"] == pytest.approx(0.1)
    assert rows[0]["charged_s"] == pytest.approx(110.0) and rows[0]["seeds"] == 2


def test_targets_report_met_and_not_met_honestly():
    summaries = [
        _summary("grpo", 0.6, 400.0),
        _summary("grpo", 0.6, 400.0),
        _summary("wmrl", 0.55, 100.0),
        _summary("anchors", 0.7, 90.0),
    ]
    checks = dict(targets(summarise(summaries, ["grpo", "wmrl", "anchors"])))
    verdicts = list(checks.values())
    assert "NOT met" in verdicts[0], "0.55 is below 0.6 - 0 s.e."
    assert verdicts[1] == "met", "400 / 100 = 4x >= 3.4x"
    assert checks["WMRL > anchors-only"] == "NOT met"
    assert checks["world model only < WMRL"] == "n/a"


def test_unknown_methods_are_refused_with_the_valid_ones():
    with pytest.raises(ConfigError, match="choose from grpo"):
        CompareArgs(methods="grpo,ppo")
    assert summarise([], ["grpo"]) == []


@pytest.mark.long  # moved out of the default suite (its slowest; CI's long pass runs it)
@pytest.mark.integration
@pytest.mark.slow
def test_compare_writes_the_table_and_skips_complete_runs_when_run_again(tmp_path):
    command = [
        sys.executable,
        "-m",
        "wmrl_adapters.cli",
        "compare",
        "--methods",
        "anchors,wmrl",
        "--seeds",
        "1",
        "--steps",
        "2",
        "--eval-every",
        "1",
        "--groups",
        "2",
        "--group-size",
        "2",
        "--max-turns",
        "1",
        "--eval-samples",
        "1",
        "--out",
        str(tmp_path),
    ]
    first = subprocess.run(command, capture_output=True, text=True, timeout=1200, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    assert (tmp_path / "table.md").is_file() and (tmp_path / "score_vs_compute.png").is_file()
    assert "| wmrl |" in (tmp_path / "table.md").read_text()
    summary = json.loads((tmp_path / "runs" / "wmrl-s0" / "summary.json").read_text())
    curve = eval_curve([summary])
    assert len(curve) == 3, "the start (step 0), then an evaluation after each of the 2 steps"
    assert curve[0][0] == 0.0 < curve[1][0] < curve[2][0], "compute grows along the curve from none"
    assert all(0.0 <= position <= 1.0 for _, position in curve)
    second = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert second.returncode == 0 and second.stdout.count("complete, skipped") == 2


def test_eval_curve_finds_runs_moved_to_another_checkout(tmp_path):
    run = tmp_path / "runs" / "wmrl-s0"
    run.mkdir(parents=True)
    lines = [{"step": 1, "compute/charged_total": 10.0}, {"step": 2, "compute/charged_total": 20.0,
             "eval/position": 0.5}, {"step": 4, "compute/charged_total": 40.0, "eval/position": 0.75}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    moved = {"run_dir": "/elsewhere/that/is/gone/wmrl-s0"}
    assert eval_curve([moved]) == [], "without a root the moved run is not found"
    assert eval_curve([moved], tmp_path / "runs") == [(20.0, 0.5), (40.0, 0.75)]
