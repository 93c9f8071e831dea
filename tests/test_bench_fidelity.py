"""Smoke test of benchmarks/fidelity.py: a tiny real run (one competition, four references) writes outputs.

The run generates the suite into a scratch ``WMRL_DATA_DIR`` (about 10 s) and executes four cheap
reference solutions through the local sandbox (about 10-15 s on two busy cores), so it is marked slow.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "fidelity.py"


@pytest.mark.long  # moved out of the default suite (its slowest; CI's long pass runs it)
@pytest.mark.slow
@pytest.mark.integration
def test_fidelity_smoke_run_writes_the_table_and_the_three_plots(tmp_path: Path) -> None:
    output = tmp_path / "out"
    cache = tmp_path / "executions.jsonl"
    command = [
        sys.executable,
        str(SCRIPT),
        "--smoke",
        "--sandbox",
        "unsafe",
        "--output-dir",
        str(output),
        "--cache",
        str(cache),
    ]
    env = {**os.environ, "WMRL_DATA_DIR": str(tmp_path / "data"), "MPLBACKEND": "Agg"}
    completed = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert completed.returncode == 0, completed.stderr[-3000:]
    for name in ("reliability.png", "calibration.png", "prequential.png"):
        assert (output / name).stat().st_size > 5_000
    with open(output / "fidelity.csv", newline="") as handle:
        rows = {row["world_model"]: row for row in csv.DictReader(handle)}
    assert set(rows) == {"rubric", "learned", "learned+rubric"}
    assert rows["rubric"]["n_cases"] == "4" and rows["rubric"]["parse_failure_rate"] == "0.0"
    assert rows["learned"]["parse_failure_rate"] == "1.0"  # one task: nothing observed before predicting it
    assert float(rows["rubric"]["executions_per_s"]) > 0
    assert len(cache.read_text().splitlines()) == 4
    markdown = (output / "fidelity.md").read_text()
    assert "Prequential error" in markdown and "4 fresh" in markdown

    again = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "0 fresh" in (output / "fidelity.md").read_text()


def test_fidelity_benchmark_rejects_bad_settings_with_the_fix() -> None:
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), "--embeddings", "bert", "--output-dir", "unused"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode != 0
    assert "--embeddings='bert'" in completed.stderr
