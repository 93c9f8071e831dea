"""Smoke test: the sandbox overhead benchmark runs end to end with a tiny budget and writes its outputs."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.integration
def test_benchmark_smoke_writes_tables_and_plot_with_plausible_numbers(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "sandbox_overhead.py"), "--smoke",
         "--out-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    for name in ("overhead.csv", "throughput.csv", "results.md", "sandbox_overhead.png"):
        assert (tmp_path / name).stat().st_size > 0, name
    with (tmp_path / "overhead.csv").open() as handle:
        overhead = list(csv.DictReader(handle))
    backends = {row["backend"] for row in overhead}
    assert {"plain subprocess", "unsafe"} <= backends
    assert all(float(row["median_wall_s"]) > 0 for row in overhead)
    with (tmp_path / "throughput.csv").open() as handle:
        throughput = list(csv.DictReader(handle))
    assert throughput and all(float(row["executions_per_min"]) > 0 for row in throughput)
