"""Smoke test of benchmarks/world_model_throughput.py: a tiny budget, run as a subprocess.

It loads the real SmolLM2-135M-Instruct twice (transformers in-process, llama.cpp server as a child
process), so it is marked ``llm`` and ``slow``.
"""

from __future__ import annotations

import csv
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "world_model_throughput.py"


@pytest.mark.long  # moved out of the default suite (its slowest; CI's long pass runs it)
@pytest.mark.llm
@pytest.mark.slow
@pytest.mark.integration
def test_smoke_run_measures_every_configuration_and_writes_table_and_plot(tmp_path: Path) -> None:
    backends = "transformers,llama.cpp" if importlib.util.find_spec("llama_cpp") else "transformers"
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--backends", backends, "--output-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert (tmp_path / "world_model_throughput.png").stat().st_size > 10_000
    with open(tmp_path / "results.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    expected = {("transformers", "simulate", "2"), ("transformers", "score", "2")}
    if "llama.cpp" in backends:
        expected |= {("llama.cpp", mode, "2") for mode in ("simulate", "simulate+grammar", "score")}
    assert {(row["backend"], row["mode"], row["batch_or_concurrency"]) for row in rows} == expected
    for row in rows:
        assert int(row["predictions"]) == 2
        assert int(row["parsed"]) + int(row["unknown"]) == 2
        assert float(row["predictions_per_s"]) > 0
        if row["mode"] == "score":
            assert int(row["parsed"]) == 2, "score mode has no format to break: it must always give a reward"
    assert "| backend | mode |" in (tmp_path / "results.md").read_text()
    assert "| transformers | simulate | 2 | 2 |" in completed.stdout


def test_bad_arguments_are_refused_with_the_value() -> None:
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), "--backends", "tgi", "--output-dir", "/nonexistent"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode != 0 and "tgi" in completed.stderr
