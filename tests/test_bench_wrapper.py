"""Smoke test of benchmarks/wrapper_overhead.py: it runs with a tiny budget and writes its outputs."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "wrapper_overhead.py"


@pytest.mark.long  # out of the default suite (among its slowest); CI's long pass runs it
def test_wrapper_overhead_smoke_run_writes_the_table_and_the_plot(tmp_path):
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--output-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert (tmp_path / "wrapper_overhead.png").stat().st_size > 1000
    markdown = (tmp_path / "results.md").read_text()
    assert "## Wrapper overhead per step" in markdown and markdown in completed.stdout + "\n"
    with open(tmp_path / "results.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    timing = {row["name"]: float(row["median_us"]) for row in rows if row["table"] == "timing"}
    for table in ("overhead_blocked", "overhead_interleaved", "rollout"):
        percents = {row["name"]: float(row["percent_of_wm_1ms"]) for row in rows if row["table"] == table}
        expected = {"simulate", "score"} if table == "rollout" else {"simulate", "simulate, anchor", "score"}
        assert set(percents) == expected, table
    assert timing["world_model.predict (1 ms)"] >= 300.0
    assert timing["world_model.predict (1 ms)"] > timing["world_model.predict (zero-cost)"]
    assert all(value > 0 for value in timing.values())


def test_wrapper_overhead_rejects_a_bad_budget_with_the_fix():
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), "--repetitions", "1", "--output-dir", "unused"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode != 0 and "--repetitions=1 with --block=25" in completed.stderr
