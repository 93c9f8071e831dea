"""benchmarks/visual_scorer_scaling.py: the frames file, the grid of fits, its resume and its outputs.

The fast tests write a frames file of synthetic episodes (a bright square that climbs the image on a
success and stays put on a failure) through the benchmark's own ``write_frames``, then run the ``fit``
stage on the CPU: they check the table machinery, the resume and the refusals, not what a CNN sees in
a real robot. The long test renders real Lift episodes in the embodied stack's simulator worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from _helpers import BENCHMARKS, benchmark_script, on_the_simulator

scaling = benchmark_script("visual_scorer_scaling")

SIZE = 16


def _frames(lifted: bool, length: int = 8) -> np.ndarray:
    frames = np.zeros((length, SIZE, SIZE, 3), np.uint8)
    for t in range(length):
        row = SIZE - 4 - (t * (SIZE - 4)) // (length - 1) if lifted else SIZE - 4
        frames[t, row : row + 4, SIZE // 2 - 2 : SIZE // 2 + 2] = 255
    return frames


def _records() -> list:
    """Three demo policies (2 episodes each) to fit on, a held-out copy, and two groups of rollouts."""
    records = []
    outcomes = {"expert": (True, True), "noisy-expert": (True, False), "random": (False, False)}
    for split in ("fit", "held_out"):
        for label, successes in outcomes.items():
            for success in successes:
                records.append(scaling.EpisodeRecord(split, _frames(success), success, label, -1, {}))
    for group, successes in enumerate(((True, False, False), (True, True, False))):
        for success in successes:
            references = {"sim-state": float(success), "approach": 0.5}
            records.append(
                scaling.EpisodeRecord("policy", _frames(success), success, "sft", group, references)
            )
    return records


@pytest.fixture
def frames_file(tmp_path: Path) -> Path:
    return scaling.write_frames(tmp_path / "frames.npz", _records(), {"args": {}})


def _fit(frames: Path, out: Path, *extra: str) -> int:
    return scaling.main(
        [
            "fit",
            "--frames",
            str(frames),
            "--demos",
            "1,2",
            "--widths",
            "4",
            "--epochs",
            "30",
            "--out",
            str(out),
        ]
        + list(extra)
    )


def test_the_frames_file_reads_back_split_by_split_with_the_reference_scores(frames_file: Path) -> None:
    sets, meta = scaling.load_frames(frames_file)
    assert [len(sets[split].items) for split in scaling.SPLITS] == [6, 6, 6]
    assert meta["image_size"] == SIZE and meta["frames"] == 18 * 8
    policy = sets["policy"]
    assert policy.groups == (0, 0, 0, 1, 1, 1)
    assert policy.references["sim-state"] == (1.0, 0.0, 0.0, 1.0, 1.0, 0.0)
    assert sets["fit"].references["approach"] == (None,) * 6  # demos carry no reference score: unknown, not 0
    items, successes = scaling.first_per_policy(sets["fit"], 1)
    assert successes == [True, True, False]  # the first of each policy, in order
    assert items[0].frames["agentview_image"].shape == (8, SIZE, SIZE, 3)


def test_the_grid_trains_every_point_and_writes_the_table_the_json_and_the_plot(
    frames_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "grid"
    assert _fit(frames_file, out, "--seeds", "0,1") == 0
    result = json.loads((out / "table.json").read_text())
    assert [(r["demos"], r["seeds"]) for r in result["rows"]] == [(1, 2), (2, 2)]
    for row in result["rows"]:
        assert row["held_out_auroc"] > 0.9  # the synthetic lift is easy: the scorer learned it
        assert row["policy_auroc"] is not None and row["fit_seconds"] > 0
    assert [r["fit_episodes"] for r in result["runs"]] == [3, 6, 3, 6]  # one whole grid a seed
    table = (out / "table.md").read_text()
    assert "| sim-state | – | 1.000 |" in table  # the reference row, from the stored scores
    assert (out / "auroc_vs_capacity.png").stat().st_size > 5_000


def test_an_interrupted_grid_resumes_without_refitting_and_survives_a_torn_line(
    frames_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "grid"
    assert _fit(frames_file, out, "--seeds", "0") == 0
    log = out / "runs.jsonl"
    first = log.read_text().splitlines()
    assert len(first) == 2
    with log.open("a") as handle:
        handle.write('{"demos": 2, "width": 4, "epo')  # a write cut off by a kill
    assert _fit(frames_file, out, "--seeds", "0,1") == 0
    lines = log.read_text().splitlines()
    assert lines[:2] == first  # the two finished fits are kept, not re-run
    assert sum(1 for line in lines if line.startswith("{") and line.endswith("}")) == 4
    assert "dropped a torn line" in capsys.readouterr().err
    rows = json.loads((out / "table.json").read_text())["rows"]
    assert [r["seeds"] for r in rows] == [2, 2]


def test_table_only_summarises_a_grid_cut_off_on_another_device_without_fitting(
    frames_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "grid"
    assert _fit(frames_file, out, "--seeds", "0") == 0
    log = out / "runs.jsonl"
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    log.write_text("".join(json.dumps(run | {"device": "cuda"}) + "\n" for run in runs[:1]))  # cut off there
    (out / "table.json").unlink()
    assert _fit(frames_file, out, "--device", "cuda", "--table-only") == 0  # no GPU needed: nothing is fitted
    assert log.read_text().count("\n") == 1
    rows = json.loads((out / "table.json").read_text())["rows"]
    assert [(r["demos"], r["seeds"]) for r in rows] == [(1, 1)]
    assert _fit(frames_file, out, "--device", "cpu", "--table-only") == 2  # no CPU fits logged: says so


def test_a_file_that_is_not_a_frames_file_is_refused_naming_what_it_lacks(tmp_path: Path) -> None:
    path = tmp_path / "other.npz"
    np.savez(path, frames=np.zeros((2, SIZE, SIZE, 3), np.uint8))
    completed = subprocess.run(
        [sys.executable, str(BENCHMARKS / "visual_scorer_scaling.py"), "fit", "--frames", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 2
    assert "lacks ['group', 'label', 'length', 'meta', 'split', 'start', 'success']" in completed.stderr


def test_a_device_this_machine_lacks_is_a_clear_error_before_any_fit(
    frames_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    device = "cuda" if not torch.cuda.is_available() else "mps"
    assert _fit(frames_file, tmp_path / "grid", "--device", device) == 2
    assert not (tmp_path / "grid").exists()
    assert f"device={device!r}" in capsys.readouterr().err


def test_hanley_mcneil_se_shrinks_with_more_rollouts_and_is_unknown_without_both_outcomes() -> None:
    small, large = scaling.hanley_mcneil_se(0.6, 10, 30), scaling.hanley_mcneil_se(0.6, 40, 120)
    assert small is not None and large is not None and large < small / 1.8
    assert scaling.hanley_mcneil_se(0.6, 0, 30) is None and scaling.hanley_mcneil_se(None, 5, 5) is None


@on_the_simulator(pytest.mark.long)
def test_render_writes_real_lift_episodes_that_the_fit_stage_reads(tmp_path: Path) -> None:
    small = ["--demos-per-policy", "1", "--held-out", "1", "--sft-seeds", "1", "--groups", "2"]
    small += ["--group-size", "2", "--horizon", "40", "--demo-steps", "40", "--out", str(tmp_path)]
    assert scaling.main(["render", *small]) == 0
    sets, meta = scaling.load_frames(tmp_path / "frames.npz")
    assert [len(sets[split].items) for split in scaling.SPLITS] == [3, 3, 4]
    assert meta["image_size"] == 64 and meta["sft"][0]["demo_episodes"] == 30
    assert sets["fit"].labels == ("expert", "noisy-expert", "random")
    assert set(sets["policy"].references) == {"sim-state", "approach", "approach-stale"}
    assert all(score is not None for score in sets["policy"].references["sim-state"])


def test_the_gpu_script_runs_the_scorer_tests_and_the_grid_with_the_device_it_is_given(
    frames_file: Path, tmp_path: Path
) -> None:
    script = BENCHMARKS.parent / "scripts" / "gpu_visual_scaling.sh"
    environment = {**os.environ, "FRAMES": str(frames_file), "DEVICE": "cpu"}
    environment["PATH"] = f"{Path(sys.executable).parent}:{environment['PATH']}"  # python3 = this Python
    out = tmp_path / "out"
    grid = ["--demos", "1", "--widths", "4", "--epochs", "2", "--seeds", "0"]
    completed = subprocess.run(
        ["bash", str(script), "run", str(out), *grid],
        capture_output=True,
        text=True,
        timeout=600,
        env=environment,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert " passed" in (out / "pytest.log").read_text()  # the scorer's tests ran, on the CPU here
    assert json.loads((out / "grid" / "table.json").read_text())["runs"][0]["device"] == "cpu"
    assert (out / "device.txt").read_text().startswith("torch ")
    usage = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2
    assert "usage: bash scripts/gpu_visual_scaling.sh pack | run OUT" in usage.stderr
