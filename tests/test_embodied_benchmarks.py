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


@pytest.mark.long  # moved out of the default suite (its slowest; CI's long pass runs it)
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


@pytest.mark.long  # moved out of the default suite (its slowest; CI's long pass runs it)
def test_fidelity_benchmark_scores_demo_and_sft_policy_rollouts_with_every_scorer(tmp_path: Path) -> None:
    tiny = "--episodes 2 --max-steps 60 --noise 0.1 --image-size 32 --visual-epochs 2 --demos 4 --bc-epochs 5"
    _run("embodied_fidelity.py", *tiny.split(), "--groups", "1", "--group-size", "2", "--out", str(tmp_path))
    summary = json.loads((tmp_path / "fidelity.json").read_text())
    assert set(summary["success_rate_by_policy"]) == {"scripted", "noisy-scripted", "random"}
    assert summary["held_out_episodes"] == 3
    names = ("sim-state", "learned", "visual", "approach")
    for rows in (summary["results"], summary["policy_results"]):
        assert {(row["scorer"], row["collapse"]) for row in rows} == {
            (s, c) for s in names for c in ("potential", "max")
        }
    assert summary["policy_rollouts"] == 2
    for plot in ("progress_curves.png", "policy_progress_curves.png"):
        assert (tmp_path / plot).stat().st_size > 1000
