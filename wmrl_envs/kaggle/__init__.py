"""Kaggle-style competitions: the format, the built-in offline suite, grading, leaderboards, ``KaggleEnv``.

Why a subpackage: the code-agent setting of the paper (an agent writes a solution, a sandbox runs it,
a grader scores it against hidden answers) has many parts that must agree on one vocabulary; they
live together here. See ``LEADERBOARD.md`` for what a position score means on the built-in suite.
"""

from wmrl_envs.kaggle.competition import (
    Competition,
    load_competition,
    load_mlebench_competition,
    load_mledojo_competition,
)
from wmrl_envs.kaggle.env import KaggleEnv, KaggleEnvConfig, extract_code
from wmrl_envs.kaggle.feedback import format_feedback, parse_feedback
from wmrl_envs.kaggle.grading import GradeReport, SubmissionRejected, grade_execution, score_submission
from wmrl_envs.kaggle.leaderboard import Leaderboard, medal_positions
from wmrl_envs.kaggle.metrics import METRICS, Metric, get_metric
from wmrl_envs.kaggle.outcome import KaggleContext, Outcome, RewardLadder, position_score
from wmrl_envs.kaggle.suite import SPECS, KaggleSuite, build_suite, default_suite_dir, load_suite

__all__ = [
    "Competition",
    "load_competition",
    "load_mlebench_competition",
    "load_mledojo_competition",
    "KaggleEnv",
    "KaggleEnvConfig",
    "extract_code",
    "format_feedback",
    "parse_feedback",
    "GradeReport",
    "SubmissionRejected",
    "grade_execution",
    "score_submission",
    "Leaderboard",
    "medal_positions",
    "METRICS",
    "Metric",
    "get_metric",
    "KaggleContext",
    "Outcome",
    "RewardLadder",
    "position_score",
    "SPECS",
    "KaggleSuite",
    "build_suite",
    "default_suite_dir",
    "load_suite",
]
