"""Leaderboards: MLE-Dojo position score, MLE-bench medal thresholds, above-median, CSV reading."""

from __future__ import annotations

from pathlib import Path

import pytest

from wmrl_algos.errors import DataError
from wmrl_envs.kaggle.leaderboard import Leaderboard, medal_positions, read_leaderboard_csv
from wmrl_envs.kaggle.outcome import position_score


def _mle_dojo_position(score: float, scores: list[float], higher_is_better: bool) -> float:
    """MLE-Dojo's definition written independently: count the entries strictly better than the score."""
    better = sum(1 for entry in scores if (entry > score if higher_is_better else entry < score))
    n = len(scores)
    p = better + 1
    return (n - p + 1) / n


@pytest.mark.parametrize("higher_is_better", [True, False])
def test_position_score_matches_mle_dojo_definition(higher_is_better: bool) -> None:
    scores = [0.91, 0.85, 0.85, 0.7, 0.66, 0.5, 0.42, 0.3]
    board = Leaderboard(tuple(scores), higher_is_better)
    for score in [1.0, 0.91, 0.9, 0.85, 0.8, 0.5, 0.31, 0.3, 0.1, 0.0]:
        expected = _mle_dojo_position(score, scores, higher_is_better)
        assert board.position(score) == pytest.approx(expected)
        assert position_score(score, tuple(scores), higher_is_better) == pytest.approx(expected)


def test_position_score_ties_count_as_beating_the_tied_entry() -> None:
    board = Leaderboard((0.9, 0.8, 0.7, 0.6), higher_is_better=True)
    assert board.position(0.8) == 0.75
    assert board.position(0.79) == 0.5
    assert board.position(0.95) == 1.0
    assert board.position(0.1) == 0.0


@pytest.mark.parametrize(
    ("teams", "expected"),
    [
        (1, (1, 1, 1)),
        (9, (1, 1, 3)),
        (14, (1, 2, 5)),
        (99, (9, 19, 39)),
        (100, (10, 20, 40)),
        (249, (10, 49, 99)),
        (250, (10, 50, 100)),
        (999, (11, 50, 100)),
        (1000, (12, 50, 100)),
        (4321, (18, 216, 432)),
    ],
)
def test_medal_thresholds_follow_mle_bench(teams: int, expected: tuple[int, int, int]) -> None:
    assert medal_positions(teams) == expected


def test_medals_are_awarded_by_the_score_at_the_threshold_position() -> None:
    scores = tuple(float(100 - i) for i in range(120))  # 100, 99, ..., -19: 120 teams
    board = Leaderboard(scores, higher_is_better=True)
    thresholds = board.thresholds()
    assert (thresholds.gold, thresholds.silver, thresholds.bronze) == (91.0, 77.0, 53.0)
    assert board.medal(91.0) == "gold"
    assert board.medal(90.5) == "silver"
    assert board.medal(77.0) == "silver"
    assert board.medal(76.9) == "bronze"
    assert board.medal(52.9) is None
    assert board.above_median(41.0) is True
    assert board.above_median(40.5) is False


def test_lower_is_better_medals_mirror_higher_is_better() -> None:
    board = Leaderboard((0.2, 0.1, 0.4, 0.3, 0.5), higher_is_better=False)
    assert board.scores == (0.1, 0.2, 0.3, 0.4, 0.5)
    assert board.medal(0.1) == "gold"
    assert board.medal(0.15) == "bronze"  # 5 teams: gold and silver at position 1, bronze at 2
    assert board.medal(0.2) == "bronze"
    assert board.medal(0.25) is None
    assert board.above_median(0.25) is True
    assert board.above_median(0.3) is False


def test_unknown_score_gets_no_medal() -> None:
    board = Leaderboard((1.0, 2.0), higher_is_better=True)
    assert board.medal(None) is None
    assert board.above_median(None) is None


def test_non_finite_leaderboard_scores_are_rejected() -> None:
    with pytest.raises(DataError, match="finite"):
        Leaderboard((1.0, float("nan")), higher_is_better=True)


def test_leaderboard_csv_direction_is_inferred_like_mle_bench(tmp_path: Path) -> None:
    path = tmp_path / "leaderboard.csv"
    path.write_text("teamName,score\na,0.12\nb,0.15\nc,\nd,0.30\n")
    board = read_leaderboard_csv(path)
    assert board.higher_is_better is False
    assert board.scores == (0.12, 0.15, 0.30)
    assert board.names == ("a", "b", "d")
    with pytest.raises(DataError, match="score"):
        (tmp_path / "bad.csv").write_text("team,points\na,1\n")
        read_leaderboard_csv(tmp_path / "bad.csv")
