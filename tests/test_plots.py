"""``training.png`` answers "did training help, and at what cost?": checked on the matplotlib Figure.

The metrics lines are shaped like a ``wmrl train`` run's ``metrics.jsonl`` (with or without the Kaggle
trainer's step-0 evaluation), with made-up values: what is checked is how the figure presents them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest
from wmrl_adapters.train.run.plots import (
    EMBODIED_PANELS,
    KAGGLE_PANELS,
    START_UNKNOWN,
    fair_baseline,
    plot_run,
    run_title,
    training_figure,
)


def _lines(steps: int, eval_steps: tuple[int, ...], *, spent_share: float) -> list[dict[str, float]]:
    lines = []
    for step in range(1, steps + 1):
        line = {
            "step": float(step),
            "compute/charged_total": 10.0 * step,
            "compute/spent_total": 10.0 * step * spent_share,
            "reward/real_mean": 0.5 + 0.01 * step,
            "wmrl/anchor_weight": 1.5,
            "losses/entropy": 1.0 / step,
        }
        if step in eval_steps:
            line["eval/position"] = 0.3 + 0.05 * step
        lines.append(line)
    return lines


def _axis(figure: Any, title: str) -> Any:
    return next(axis for axis in figure.axes if axis.get_title() == title)


def _labels(axis: Any) -> list[str]:
    return [line.get_label() for line in axis.get_lines() if not line.get_label().startswith("_")]


def _horizontal_at(axis: Any) -> set[float]:
    return {float(line.get_ydata()[0]) for line in axis.get_lines() if len(set(line.get_ydata())) == 1}


@pytest.fixture
def close_figures() -> Any:
    yield
    plt.close("all")


@pytest.mark.parametrize("eval_steps", [(4,), (2, 4)], ids=["one evaluation", "several evaluations"])
def test_the_held_out_panel_is_on_a_fixed_unit_scale_with_its_reference_lines(
    eval_steps: tuple[int, ...], close_figures: None
) -> None:
    figure = training_figure(_lines(4, eval_steps, spent_share=0.2), KAGGLE_PANELS)
    axis = _axis(figure, "held-out position score")
    low, high = axis.get_ylim()
    assert low <= 0.0 < 0.05 and 0.95 < 1.0 <= high <= 1.05, "not auto-scaled around the points"
    assert {0.5, 1.0} <= _horizontal_at(axis)
    texts = [text.get_text() for text in axis.texts]
    assert any("leaderboard median" in text for text in texts)
    assert any("best reference" in text for text in texts)
    position = next(line for line in axis.get_lines() if line.get_label() == "position")
    assert list(position.get_xdata()) == list(map(float, eval_steps))
    assert position.get_markersize() >= 6, "a single evaluation must read as a point, not a speck"
    assert START_UNKNOWN in _labels(axis), "no step-0 evaluation: the panel says the start is unknown"
    assert axis.get_xlim()[0] < 0 < 4 < axis.get_xlim()[1], "every panel spans step 0 to the last step"


def test_a_step_zero_evaluation_is_drawn_as_the_start(close_figures: None) -> None:
    lines = [{"step": 0.0, "eval/position": 0.25}, *_lines(3, (3,), spent_share=0.2)]
    axis = _axis(training_figure(lines, KAGGLE_PANELS), "held-out position score")
    assert START_UNKNOWN not in _labels(axis)
    assert "start 0.25" in [text.get_text() for text in axis.texts]


def test_each_evaluation_carries_its_standard_error_bar_and_one_without_has_none(close_figures: None) -> None:
    lines = [
        {"step": 0.0, "eval/position": 0.5, "eval/position_se": 0.05},
        {"step": 2.0, "eval/position": 0.7, "eval/position_se": float("nan")},  # one episode: no s.e.
        {"step": 4.0, "eval/position": 0.75, "eval/position_se": 0.02},
    ]
    axis = _axis(training_figure(lines, KAGGLE_PANELS), "held-out position score")
    [bars] = axis.collections
    spans = sorted(float(high - low) for (_, low), (_, high) in (segment for segment in bars.get_segments()))
    assert spans == pytest.approx([0.04, 0.1]), "± one s.e. at steps 0 and 4, nothing at step 2"


def test_compute_charged_equal_to_spent_is_one_labelled_line(close_figures: None) -> None:
    axis = _axis(training_figure(_lines(3, (3,), spent_share=1.0), KAGGLE_PANELS), "compute, CPU-s")
    assert _labels(axis) == ["charged_total = spent_total"]


def test_compute_charged_and_spent_that_differ_have_distinct_styles(close_figures: None) -> None:
    axis = _axis(training_figure(_lines(3, (3,), spent_share=0.3), KAGGLE_PANELS), "compute, CPU-s")
    lines = {line.get_label(): line for line in axis.get_lines()}
    assert {"charged_total", "spent_total"} <= set(lines)
    assert lines["charged_total"].get_linestyle() != lines["spent_total"].get_linestyle()


def test_the_embodied_success_panel_is_on_the_unit_scale_too(close_figures: None) -> None:
    lines = [{"step": 1.0, "eval/success_rate": 0.4, "diag/sim_success_rate": 0.3}]
    figure = training_figure(lines, EMBODIED_PANELS)
    axis = _axis(figure, "success rate")
    assert axis.get_ylim()[0] <= 0.0 and 1.0 <= axis.get_ylim()[1] <= 1.05
    unmeasured = _axis(figure, "anchor weight (IVD)")  # an sft run has no anchors
    assert [text.get_text() for text in unmeasured.texts] == ["not measured in this run"]
    assert not unmeasured.get_lines(), "no reference line in a panel with no data"


def test_the_png_of_a_run_directory_is_titled_with_env_algo_and_seed(tmp_path: Path) -> None:
    config = {"algo": "od", "seed": 3, "world_model": "rubric", "competitions": "train"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    [path] = plot_run(_lines(2, (2,), spent_share=0.5), tmp_path / "plots")
    assert path == tmp_path / "plots" / "training.png" and path.stat().st_size > 10_000
    assert run_title(config) == "Kaggle suite (train), algo od, world model rubric, seed 3"
    figure = training_figure(_lines(2, (2,), spent_share=0.5), title=run_title(config))
    assert figure.get_suptitle() == run_title(config)
    plt.close(figure)


def _compare_run(runs: Path, algo: str, seed: int, lines: list[dict[str, float]]) -> Path:
    """A run directory laid out as ``wmrl compare`` lays it out: ``<out>/runs/<algo>-s<seed>``."""
    run_dir = runs / f"{algo}-s{seed}"
    run_dir.mkdir(parents=True)
    config = {"algo": algo, "seed": seed, "world_model": "rubric", "competitions": "train"}
    (run_dir / "config.json").write_text(json.dumps(config))
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run_dir


def test_a_compare_run_shows_the_start_and_anchors_only_of_the_same_seed_as_its_fair_baseline(
    tmp_path: Path, close_figures: None
) -> None:
    runs = tmp_path / "compare" / "runs"
    start = {"step": 0.0, "eval/position": 0.25}
    baseline_lines = [start, *_lines(3, (3,), spent_share=1.0)]
    _compare_run(runs, "anchors", 0, baseline_lines)
    _compare_run(runs, "anchors", 1, [{"step": 3.0, "eval/position": 0.9}])
    wmrl = _compare_run(runs, "wmrl", 0, [start, *_lines(3, (3,), spent_share=0.2)])
    baseline = fair_baseline(wmrl)
    assert baseline is not None and "anchors-only" in baseline.label
    axis = _axis(training_figure(baseline_lines, KAGGLE_PANELS, baseline=baseline), "held-out position score")
    drawn = next(line for line in axis.get_lines() if line.get_label() == baseline.label)
    assert list(drawn.get_xdata()) == [0.0, 3.0], "seed 0's anchors-only run, from its start"
    assert START_UNKNOWN not in _labels(axis) and "start 0.25" in [text.get_text() for text in axis.texts]
    assert fair_baseline(runs / "anchors-s0") is None, "anchors-only is the baseline, it has none"
    assert fair_baseline(_compare_run(runs, "wmrl", 2, [start])) is None, "no anchors-only run of seed 2"
    [path] = plot_run([start, *_lines(3, (3,), spent_share=0.2)], wmrl / "plots")
    assert path.is_file()


def test_a_run_outside_a_comparison_has_no_baseline(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"algo": "wmrl", "seed": 0}))
    assert fair_baseline(tmp_path) is None
