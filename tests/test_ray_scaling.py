"""Smoke test: the Ray scaling benchmark runs real clusters of 1 and 2 worker nodes and writes its outputs."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.long  # moved out of the default suite (its slowest; CI's long pass runs it)
@pytest.mark.integration
@pytest.mark.slow
def test_benchmark_smoke_writes_tables_and_plot_with_plausible_rates(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "ray_scaling.py"), "--smoke", "--out-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("results.csv", "overhead.csv", "results.md", "ray_scaling.png"):
        assert (tmp_path / name).stat().st_size > 0, name
    with (tmp_path / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {(r["workers"], r["workload"], r["executor"]) for r in rows} == {
        (w, load, ex) for w in ("1", "2") for load in ("sandbox", "sleep") for ex in ("ray", "threads")
    }
    for row in rows:
        assert float(row["executions_per_min"]) > 0
        if row["workload"] == "sleep":  # sleep-bound: never faster than the ideal, minus timer noise
            assert float(row["executions_per_min"]) <= 1.02 * float(row["ideal_per_min"])
    with (tmp_path / "overhead.csv").open() as handle:
        overhead = list(csv.DictReader(handle))
    assert [o["workers"] for o in overhead] == ["1", "2"]
    # Which executor is faster is the benchmark's to report, not this test's to assert: beside other work
    # on the two cores a thread hand-off once measured slower than Ray's round trip (CI, 2026-12-06).
    for o in overhead:
        ray_ms, threads_ms = float(o["ray_latency_ms"]), float(o["threads_latency_ms"])
        assert ray_ms > 0 and threads_ms > 0
        assert float(o["ray_overhead_ms"]) == pytest.approx(ray_ms - threads_ms)
