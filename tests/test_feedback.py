"""The sandbox log format round-trips, shows only the public score, and rejects what it cannot read."""

from __future__ import annotations

import pytest

from wmrl_envs.kaggle.feedback import format_feedback, parse_feedback
from wmrl_envs.kaggle.outcome import Outcome


def test_feedback_round_trips_status_and_public_score() -> None:
    outcome = Outcome(
        status="valid", score=0.91, public_score=0.875, exit_code=0, wall_s=2.5, stdout_tail="cv 0.87"
    )
    parsed = parse_feedback(format_feedback(outcome))
    assert parsed is not None
    assert parsed.status == "valid"
    assert parsed.public_score == pytest.approx(0.875)
    assert parsed.exit_code == 0
    assert "cv 0.87" in parsed.stdout_tail


def test_only_the_public_score_is_printed() -> None:
    text = format_feedback(Outcome(status="valid", score=0.123456, public_score=0.654321))
    assert "0.654321" in text
    assert "0.123456" not in text


def test_parse_tolerates_prose_around_the_report() -> None:
    report = format_feedback(Outcome(status="runtime_error", exit_code=1, traceback="ValueError: bad"))
    parsed = parse_feedback("Sure! Here is what the sandbox prints:\n" + report + "\nHope this helps.")
    assert parsed is not None and parsed.status == "runtime_error"
    assert "ValueError" in parsed.stderr_tail


@pytest.mark.parametrize(
    "text",
    [
        "",
        "the code looks fine, probably around 0.8",
        "status: excellent\npublic_score: 0.9",
        "status: valid\npublic_score: none",
        "status: valid\npublic_score: high",
        "status: valid\npublic_score: nan",
    ],
)
def test_unparseable_reports_are_none_not_a_guess(text: str) -> None:
    assert parse_feedback(text) is None


def test_long_streams_are_cut_to_the_budget() -> None:
    text = format_feedback(Outcome(status="runtime_error", stdout_tail="x" * 100_000), max_chars=1000)
    assert len(text) < 2000
