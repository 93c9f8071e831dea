"""Leaderboards: where a score ranks, the MLE-Dojo position score, MLE-bench medals and above-median.

Why here and not in the grader: the same ranking serves three readers. The env's reward ladder needs
the position score of the private score, the evaluation report needs medals and above-median exactly
as MLE-bench computes them (``mlebench/grade_helpers.py``, after kaggle.com/progression), and the world
model sees the public leaderboard to judge what a good score looks like.

Medal rule (MLE-bench), by the number of teams N on the leaderboard, best first; "top k" means the
score at 1-based position k is the threshold, and a score that ties or beats it earns the medal:

=============  ======================  ==============  ==============
teams N        gold                    silver          bronze
=============  ======================  ==============  ==============
1 - 99         top max(1, ⌊0.1 N⌋)     top ⌊0.2 N⌋     top ⌊0.4 N⌋
100 - 249      top 10                  top ⌊0.2 N⌋     top ⌊0.4 N⌋
250 - 999      top 10 + ⌊0.002 N⌋      top 50          top 100
1000 and more  top 10 + ⌊0.002 N⌋      top ⌊0.05 N⌋    top ⌊0.1 N⌋
=============  ======================  ==============  ==============

(silver and bronze positions are also floored at 1). Above-median means strictly better than the
median of the leaderboard's scores.
"""

from __future__ import annotations

import csv
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from wmrl_algos.errors import DataError
from wmrl_envs.kaggle.outcome import position_score

__all__ = ["Medal", "MedalThresholds", "Leaderboard", "medal_positions", "read_leaderboard_csv"]

Medal = Literal["gold", "silver", "bronze"]


def medal_positions(num_teams: int) -> tuple[int, int, int]:
    """The 1-based leaderboard positions whose scores are the gold, silver and bronze thresholds.

    >>> medal_positions(20), medal_positions(150), medal_positions(500), medal_positions(2000)
    ((2, 4, 8), (10, 30, 60), (11, 50, 100), (14, 100, 200))

    Raises:
        DataError: ``num_teams`` < 1.
    """
    if num_teams < 1:
        raise DataError(f"a leaderboard needs at least one team to award medals, got {num_teams}")
    if num_teams < 100:
        return (
            max(1, int(num_teams * 0.1)),
            max(1, int(num_teams * 0.2)),
            max(1, int(num_teams * 0.4)),
        )
    if num_teams < 250:
        return 10, max(1, int(num_teams * 0.2)), max(1, int(num_teams * 0.4))
    if num_teams < 1000:
        return 10 + int(num_teams * 0.002), 50, 100
    return 10 + int(num_teams * 0.002), max(1, int(num_teams * 0.05)), max(1, int(num_teams * 0.1))


@dataclass(frozen=True)
class MedalThresholds:
    """The scores a submission must tie or beat for each medal, and the median it must beat."""

    gold: float
    silver: float
    bronze: float
    median: float


@dataclass(frozen=True)
class Leaderboard:
    """A competition's leaderboard: the scores of its teams (here: reference solutions), best first.

    Attributes:
        scores: the teams' scores, sorted best first (the constructor sorts them).
        higher_is_better: the metric's direction.
        names: optional team names aligned with ``scores``.

    Example:
        >>> board = Leaderboard((0.7, 0.9, 0.8, 0.95), higher_is_better=True)
        >>> board.scores
        (0.95, 0.9, 0.8, 0.7)
        >>> board.position(0.9), board.medal(0.96), board.above_median(0.86)
        (0.75, 'gold', True)
    """

    scores: tuple[float, ...]
    higher_is_better: bool
    names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if any(not math.isfinite(score) for score in self.scores):
            raise DataError(f"leaderboard scores must be finite numbers, got {self.scores}")
        if self.names and len(self.names) != len(self.scores):
            raise DataError(f"{len(self.names)} team names for {len(self.scores)} scores; give one each")
        order = sorted(range(len(self.scores)), key=lambda i: self.scores[i], reverse=self.higher_is_better)
        object.__setattr__(self, "scores", tuple(float(self.scores[i]) for i in order))
        if self.names:
            object.__setattr__(self, "names", tuple(self.names[i] for i in order))

    def __len__(self) -> int:
        return len(self.scores)

    def position(self, score: float) -> float:
        """MLE-Dojo position score in [0, 1] (see :func:`~wmrl_envs.kaggle.outcome.position_score`)."""
        return position_score(score, self.scores, self.higher_is_better)

    def thresholds(self) -> MedalThresholds:
        """MLE-bench's medal thresholds and median for this leaderboard."""
        gold, silver, bronze = medal_positions(len(self.scores))
        last = len(self.scores)
        return MedalThresholds(
            gold=self.scores[min(gold, last) - 1],
            silver=self.scores[min(silver, last) - 1],
            bronze=self.scores[min(bronze, last) - 1],
            median=float(statistics.median(self.scores)),
        )

    def _ties_or_beats(self, score: float, threshold: float) -> bool:
        return score >= threshold if self.higher_is_better else score <= threshold

    def medal(self, score: float | None) -> Medal | None:
        """The medal ``score`` earns (the best one whose threshold it ties or beats), or ``None``."""
        if score is None or not self.scores:
            return None
        thresholds = self.thresholds()
        for medal, threshold in (
            ("gold", thresholds.gold),
            ("silver", thresholds.silver),
            ("bronze", thresholds.bronze),
        ):
            if self._ties_or_beats(score, threshold):
                return medal  # type: ignore[return-value]
        return None

    def above_median(self, score: float | None) -> bool | None:
        """Whether ``score`` is strictly better than the leaderboard median (``None`` if unknown)."""
        if score is None or not self.scores:
            return None
        median = self.thresholds().median
        return score > median if self.higher_is_better else score < median


def read_leaderboard_csv(path: Path, higher_is_better: bool | None = None) -> Leaderboard:
    """Read a Kaggle/MLE-bench/MLE-Dojo leaderboard CSV (a ``score`` column, any letter case).

    Args:
        path: the CSV file. Rows with an empty or non-numeric score are skipped.
        higher_is_better: the direction; ``None`` infers it as MLE-bench does (the file is sorted
            best first, so the first score being smaller than the last means lower is better).

    Raises:
        DataError: no ``score`` column or no numeric score.
    """
    with Path(path).open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        columns = {name.strip().lower(): name for name in reader.fieldnames or ()}
        if "score" not in columns:
            raise DataError(f"leaderboard {path} has no 'score' column (columns: {reader.fieldnames})")
        name_column = columns.get("teamname") or columns.get("team_name") or columns.get("name")
        scores: list[float] = []
        names: list[str] = []
        for row in reader:
            try:
                value = float(row[columns["score"]])
            except (TypeError, ValueError):
                continue
            if math.isfinite(value):
                scores.append(value)
                names.append(str(row.get(name_column, "")) if name_column else "")
    if not scores:
        raise DataError(f"leaderboard {path} has no numeric score")
    if higher_is_better is None:
        higher_is_better = not scores[0] < scores[-1]
    return Leaderboard(tuple(scores), higher_is_better, tuple(names) if name_column else ())
