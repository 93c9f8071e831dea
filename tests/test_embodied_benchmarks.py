"""The embodied benchmarks run end to end at a tiny budget and write their table, JSON and plot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _helpers import embodied_marks

pytestmark = embodied_marks(pytest.mark.slow)
ROOT = Path(__file__).resolve().parent.parent


def _run(script: str, *arguments: str) -> None:
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *arguments], check=True, timeout=1200)


def test_cost_benchmark_writes_table_json_and_plot(tmp_path: Path) -> None:
    _run(
        "embodied_cost.py",
        "--steps",
        "2",
        "--resets",
        "1",
        "--image-size",
        "32",
        "--no-libero",
        "--no-robometer",
        "--out",
        str(tmp_path),
    )
    rows = json.loads((tmp_path / "cost.json").read_text())["rows"]
    measures = {(row["subject"], row["measure"]) for row in rows}
    assert ("Lift, no camera", "step") in measures and ("Lift, 2 cameras 32²", "step") in measures
    assert ("sim-state scorer", "score") in measures and (
        "Lift, no camera",
        "episode (200 steps)",
    ) in measures
    assert all(row["seconds"] > 0 for row in rows)
    assert (tmp_path / "cost.png").stat().st_size > 1000 and "| pipe |" in (tmp_path / "cost.md").read_text()


def test_fidelity_benchmark_scores_scripted_noisy_and_random_rollouts(tmp_path: Path) -> None:
    _run("embodied_fidelity.py", "--episodes", "2", "--max-steps", "60", "--out", str(tmp_path))
    summary = json.loads((tmp_path / "fidelity.json").read_text())
    assert set(summary["success_rate_by_policy"]) == {"scripted", "noisy-scripted", "random"}
    assert summary["held_out_episodes"] == 3
    scorers = {(row["scorer"], row["collapse"]) for row in summary["results"]}
    assert scorers == {(s, c) for s in ("sim-state", "learned") for c in ("potential", "max")}
    assert (tmp_path / "progress_curves.png").stat().st_size > 1000
