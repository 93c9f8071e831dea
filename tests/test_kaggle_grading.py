"""Grading: strict submission checks with clear details, private vs public scores, statuses."""

from __future__ import annotations

import os
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from wmrl_algos.errors import DataError
from wmrl_envs.kaggle.competition import Competition
from wmrl_envs.kaggle.grading import (
    DEFAULT_MAX_SUBMISSION_BYTES,
    MAX_CELL_CHARS,
    SubmissionRejected,
    grade_execution,
    read_submission,
    score_submission,
)
from wmrl_envs.kaggle.leaderboard import Leaderboard
from wmrl_envs.kaggle.metrics import METRICS, Metric, get_metric
from wmrl_envs.kaggle.suite import KaggleSuite, build_suite
from wmrl_envs.sandbox.base import ExecutionResult

IDS = ["concrete-strength", "titanic-survival", "telco-churn", "diamond-cut"]


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> KaggleSuite:
    return KaggleSuite(build_suite(tmp_path_factory.mktemp("suite"), ids=IDS, progress=False))


def _competition(suite: KaggleSuite, competition_id: str) -> Competition:
    competition = suite.get(competition_id, with_leaderboard=False)
    higher = competition.higher_is_better
    board = Leaderboard((0.1, 0.5, 0.9, 5.0, 10.0, 20.0), higher)
    return replace(competition, leaderboard=board, public_leaderboard=board)


def _answers_frame(competition: Competition) -> pd.DataFrame:
    answers = competition.load_answers()
    return answers[[competition.id_column, competition.target]].copy()


def _write(path: Path, frame: pd.DataFrame) -> Path:
    frame.to_csv(path, index=False)
    return path


def test_perfect_submission_gets_the_best_score_and_a_gold_medal(suite: KaggleSuite, tmp_path: Path) -> None:
    competition = _competition(suite, "concrete-strength")
    report = score_submission(_write(tmp_path / "s.csv", _answers_frame(competition)), competition)
    assert report.score == 0.0 and report.public_score == 0.0
    assert report.position == 1.0 and report.medal == "gold" and report.above_median is True


def test_private_and_public_scores_come_from_disjoint_rows(suite: KaggleSuite, tmp_path: Path) -> None:
    competition = _competition(suite, "concrete-strength")
    answers = competition.load_answers()
    frame = _answers_frame(competition)
    frame.loc[(answers["Usage"] == "Private").to_numpy(), competition.target] += 10.0
    report = score_submission(_write(tmp_path / "s.csv", frame), competition)
    assert report.public_score == 0.0
    assert report.score == pytest.approx(10.0)


def test_row_order_does_not_matter(suite: KaggleSuite, tmp_path: Path) -> None:
    competition = _competition(suite, "titanic-survival")
    frame = _answers_frame(competition).sample(frac=1.0, random_state=1)
    assert score_submission(_write(tmp_path / "s.csv", frame), competition).score == 1.0


def _rejection(path: Path | None, competition: Competition, max_bytes: int = 200_000) -> str:
    with pytest.raises(SubmissionRejected) as error:
        read_submission(path, competition, max_bytes=max_bytes)
    return error.value.detail


def test_submission_symlink_fifo_duplicates_nans_wrong_header_rejected(
    suite: KaggleSuite, tmp_path: Path
) -> None:
    competition = _competition(suite, "concrete-strength")
    good = _write(tmp_path / "good.csv", _answers_frame(competition))
    read_submission(good, competition)

    link = tmp_path / "link.csv"
    link.symlink_to(good)
    assert "symbolic link" in _rejection(link, competition)

    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    assert "not a regular file" in _rejection(fifo, competition)

    frame = _answers_frame(competition)
    duplicated = pd.concat([frame, frame.head(1)])
    assert "duplicated ids" in _rejection(_write(tmp_path / "dup.csv", duplicated), competition)

    with_nan = frame.copy()
    with_nan[competition.target] = with_nan[competition.target].astype(float)
    with_nan.iloc[3, 1] = np.nan
    assert "not finite" in _rejection(_write(tmp_path / "nan.csv", with_nan), competition)

    with_inf = frame.copy()
    with_inf.iloc[0, 1] = np.inf
    assert "not finite" in _rejection(_write(tmp_path / "inf.csv", with_inf), competition)

    wrong_header = frame.rename(columns={competition.target: "prediction"})
    assert "expected exactly" in _rejection(_write(tmp_path / "hdr.csv", wrong_header), competition)

    extra = frame.assign(note="x")
    assert "expected exactly" in _rejection(_write(tmp_path / "extra.csv", extra), competition)

    missing = frame.iloc[1:]
    assert "1 missing" in _rejection(_write(tmp_path / "missing.csv", missing), competition)

    renamed = frame.copy()
    renamed.iloc[0, 0] = "999999"
    assert "1 unexpected" in _rejection(_write(tmp_path / "unexpected.csv", renamed), competition)

    assert "no ./submission.csv" in _rejection(None, competition)
    assert "no ./submission.csv" in _rejection(tmp_path / "absent.csv", competition)
    (tmp_path / "empty.csv").write_text("")
    assert "empty" in _rejection(tmp_path / "empty.csv", competition)
    big = tmp_path / "big.csv"
    big.write_text("x" * 300_000)
    assert "limit" in _rejection(big, competition)
    (tmp_path / "bin.csv").write_bytes(b"\xff\xfe\x00garbage\x00\n\x01")
    assert _rejection(tmp_path / "bin.csv", competition)


def test_probabilities_must_lie_in_the_unit_interval(suite: KaggleSuite, tmp_path: Path) -> None:
    competition = _competition(suite, "telco-churn")
    frame = _answers_frame(competition).astype({competition.target: float})
    frame.iloc[0, 1] = 1.5
    assert "outside [0, 1]" in _rejection(_write(tmp_path / "p.csv", frame), competition)
    frame.iloc[0, 1] = 1.0
    assert score_submission(_write(tmp_path / "ok.csv", frame), competition).score == 1.0


def test_labels_must_be_training_labels(suite: KaggleSuite, tmp_path: Path) -> None:
    competition = _competition(suite, "diamond-cut")
    frame = _answers_frame(competition)
    frame.iloc[0, 1] = "Flawless"
    assert "not valid labels" in _rejection(_write(tmp_path / "l.csv", frame), competition)


def test_integer_labels_written_as_floats_are_accepted(suite: KaggleSuite, tmp_path: Path) -> None:
    competition = _competition(suite, "titanic-survival")
    frame = _answers_frame(competition).astype({competition.target: float})
    assert score_submission(_write(tmp_path / "f.csv", frame), competition).score == 1.0


def _result(status: str, *, output: Path | None = None, stderr: str = "", exit_code: int | None = 0,
            rejected: str | None = None) -> ExecutionResult:
    return ExecutionResult(status=status, exit_code=exit_code, stdout="hello\n", stderr=stderr, wall_s=1.5,
                           cpu_s=1.2, max_rss_mb=80.0, output=output, output_rejected=rejected)


def test_execution_statuses_map_to_outcome_statuses(suite: KaggleSuite, tmp_path: Path) -> None:
    competition = _competition(suite, "concrete-strength")
    good = _write(tmp_path / "good.csv", _answers_frame(competition))
    valid = grade_execution(_result("ok", output=good), competition)
    assert valid.status == "valid" and valid.score == 0.0 and valid.position == 1.0
    assert valid.extra["cpu_s"] == 1.2 and valid.extra["max_rss_mb"] == 80.0

    crash = "Traceback (most recent call last):\n  File \"solution.py\", line 3\nKeyError: 'x'\n"
    runtime = grade_execution(_result("error", stderr=crash, exit_code=1, output=good), competition)
    assert runtime.status == "runtime_error" and runtime.score is None
    assert runtime.traceback.startswith("Traceback") and "KeyError" in runtime.traceback

    syntax = '  File "/sandbox/solution.py", line 1\n    x = (\n        ^\n'
    syntax += "SyntaxError: '(' was never closed\n"
    assert grade_execution(_result("error", stderr=syntax, exit_code=1), competition).status == "syntax_error"
    assert grade_execution(_result("killed", exit_code=None), competition).status == "runtime_error"
    assert grade_execution(_result("timeout", exit_code=None), competition).status == "timeout"
    assert grade_execution(_result("sandbox_error", exit_code=None), competition).status == "sandbox_error"

    missing = grade_execution(_result("ok"), competition)
    assert missing.status == "no_submission" and "no ./submission.csv" in missing.detail
    refused = grade_execution(_result("ok", rejected="symlink"), competition)
    assert refused.status == "no_submission" and "symlink" in refused.detail
    bad = _write(tmp_path / "bad.csv", _answers_frame(competition).iloc[2:])
    invalid = grade_execution(_result("ok", output=bad), competition)
    assert invalid.status == "no_submission" and "2 missing" in invalid.detail


@pytest.mark.parametrize(
    ("name", "truth", "prediction", "expected"),
    [
        ("rmse", [1.0, 2.0, 3.0], [1.0, 2.0, 5.0], (4 / 3) ** 0.5),
        ("mae", [1.0, 2.0, 3.0], [2.0, 2.0, 1.0], 1.0),
        ("rmsle", [0.0, np.e - 1], [0.0, 0.0], (0.5) ** 0.5),
        ("accuracy", ["a", "b"], ["a", "a"], 0.5),
        ("log_loss", [1, 0], [0.5, 0.5], np.log(2)),
        ("roc_auc", [0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], 0.75),
        ("macro_f1", ["a", "a", "b", "b"], ["a", "a", "a", "b"], (0.8 + 2 / 3) / 2),
    ],
)
def test_metrics_compute_their_textbook_values(
    name: str, truth: list[object], prediction: list[object], expected: float
) -> None:
    assert get_metric(name).compute(truth, prediction) == pytest.approx(expected)


@pytest.mark.parametrize("label", ["1e300", "9223372036854775808", "-1e309", "1" * 1000])
def test_huge_numbers_as_labels_are_rejected_with_a_detail(
    suite: KaggleSuite, tmp_path: Path, label: str
) -> None:
    competition = _competition(suite, "titanic-survival")
    frame = _answers_frame(competition).astype({competition.target: str})
    frame.iloc[0, 1] = label
    assert "not valid labels" in _rejection(_write(tmp_path / "huge.csv", frame), competition)


def test_a_hundred_thousand_column_header_is_rejected_with_bounded_work(
    suite: KaggleSuite, tmp_path: Path
) -> None:
    competition = _competition(suite, "titanic-survival")
    wide = tmp_path / "wide.csv"
    row = ",".join("1" for _ in range(100_000)) + "\n"
    wide.write_text(",".join(f"c{i}" for i in range(100_000)) + "\n" + row * 150)  # ≈ 30 MB
    tracemalloc.start()
    started = time.perf_counter()
    detail = _rejection(wide, competition, max_bytes=DEFAULT_MAX_SUBMISSION_BYTES)
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert "100,000 columns" in detail and "99,995 more" in detail and len(detail) < 300
    assert elapsed < 2.0 and peak < 64 * 2**20, (elapsed, peak)


def test_rows_cells_and_row_counts_are_bounded(suite: KaggleSuite, tmp_path: Path) -> None:
    competition = _competition(suite, "concrete-strength")
    frame = _answers_frame(competition)
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("id,compressive_strength\n1,2,3\n")
    assert "has 3 cells; expected 2" in _rejection(ragged, competition)
    long_cell = frame.astype({competition.target: str})
    long_cell.iloc[0, 1] = "9" * (MAX_CELL_CHARS + 1)
    too_long = _rejection(_write(tmp_path / "cell.csv", long_cell), competition)
    assert f"over {MAX_CELL_CHARS} characters" in too_long
    repeated = pd.concat([frame] * 3)
    assert "more than" in _rejection(_write(tmp_path / "rows.csv", repeated), competition)


def test_a_grader_failure_on_the_file_is_a_status_and_a_broken_competition_is_raised(
    suite: KaggleSuite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    competition = _competition(suite, "concrete-strength")
    good = _write(tmp_path / "good.csv", _answers_frame(competition))

    def overflowing(truth: np.ndarray, prediction: np.ndarray) -> float:
        raise OverflowError("int too large to convert to float")

    # A grader bug cannot be produced on demand: a registered metric that raises stands in for one.
    monkeypatch.setitem(METRICS, "overflowing", Metric("overflowing", False, "number", overflowing))
    outcome = grade_execution(_result("ok", output=good), replace(competition, metric="overflowing"))
    assert outcome.status == "no_submission" and "OverflowError" in outcome.detail, outcome
    missing_answers = replace(competition, answers_path=tmp_path / "absent.csv")
    with pytest.raises(DataError, match="hidden answers"):
        grade_execution(_result("ok", output=good), missing_answers)
