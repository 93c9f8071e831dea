"""What one Kaggle-style execution produced, the reward ladder, and the public task context.

Why one module: the real env (which executes and grades), the world models (which predict) and the
feedback parser (which reads a simulated log back) must agree on one vocabulary of statuses, one
reward ladder and one public context. The context holds only what a Kaggle participant sees: the
overview, the data inventory, the metric and the public leaderboard. Hidden answers never appear here.

Reward ladder (``docs/design.md``, section "Reward ladder"; configurable): malformed / syntax error 0.0,
runtime error or timeout 0.1, ran but no valid submission 0.2, valid 0.5 + 0.5 × leaderboard position
score. A timeout is the solution's own failure and gets the runtime-error rung, as the reference grader
does: were it unknown, wrapping a crash in ``except Exception: while True: pass`` would turn a 0.1 into
a trajectory that drops out of its group, and a policy would learn to stall. Only a failure of the
infrastructure (the sandbox crashed, a worker was lost) is unknown (``None``), never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "ExecutionStatus",
    "TaskType",
    "RewardLadder",
    "KaggleContext",
    "Outcome",
    "UNCACHED_STATUSES",
    "position_score",
]

ExecutionStatus = Literal[
    "malformed", "syntax_error", "runtime_error", "no_submission", "valid", "timeout", "sandbox_error"
]
"""``malformed``: no Python solution in the action. ``syntax_error``: it does not compile.
``runtime_error``: it raised or was killed by a resource limit. ``no_submission``: it ran but wrote no
valid submission (missing, wrong schema, NaNs...). ``valid``: graded. ``timeout``: it ran past the
wall-clock limit (the solution's failure: rewarded like ``runtime_error``). ``sandbox_error``: the
infrastructure failed; the outcome is unknown."""
UNCACHED_STATUSES: frozenset[ExecutionStatus] = frozenset({"sandbox_error", "timeout"})
"""Outcomes that say nothing definite about the code, so no execution cache stores them: an unknown one
(the infrastructure failed) and a timeout (on a loaded host it measures the host, not the code). The
next request for the same solution executes it again."""


TaskType = Literal["binary", "multiclass", "regression"]


def position_score(score: float, leaderboard: tuple[float, ...], higher_is_better: bool) -> float:
    """MLE-Dojo's leaderboard position score in [0, 1].

    Sort the leaderboard best first; p = 1 + index of the first entry the score beats or ties (N + 1
    if none); position = (N − p + 1) / N.

    >>> position_score(0.9, (0.95, 0.9, 0.8, 0.7), higher_is_better=True)
    0.75
    """
    if not leaderboard:
        return 0.0
    board = sorted(leaderboard, reverse=higher_is_better)
    n = len(board)
    p = n + 1
    for index, entry in enumerate(board):
        beats_or_ties = score >= entry if higher_is_better else score <= entry
        if beats_or_ties:
            p = index + 1
            break
    return (n - p + 1) / n


@dataclass(frozen=True)
class RewardLadder:
    """Maps an execution status and position score to a reward (``docs/design.md`` defaults).

    ``timeout`` shares the ``runtime_error`` rung; ``sandbox_error`` (and a valid submission without a
    position) is unknown.

    Example:
        >>> RewardLadder().reward("valid", 0.5)
        0.75
        >>> RewardLadder().reward("timeout", None)
        0.1
        >>> RewardLadder().reward("sandbox_error", None) is None
        True
    """

    malformed: float = 0.0
    syntax_error: float = 0.0
    runtime_error: float = 0.1
    no_submission: float = 0.2
    valid_base: float = 0.5
    valid_scale: float = 0.5

    def reward(self, status: ExecutionStatus, position: float | None) -> float | None:
        """The reward of an execution, or ``None`` when its outcome is unknown."""
        if status == "valid":
            if position is None:
                return None
            return self.valid_base + self.valid_scale * position
        if status == "sandbox_error":
            return None
        return {
            "malformed": self.malformed,
            "syntax_error": self.syntax_error,
            "runtime_error": self.runtime_error,
            "timeout": self.runtime_error,
            "no_submission": self.no_submission,
        }[status]


@dataclass(frozen=True)
class KaggleContext:
    """Public information about one competition and the episode so far (what a participant sees).

    Attributes:
        competition_id: the competition's id in its suite.
        overview: the task description (markdown).
        inventory: the data inventory text (files, shapes, columns, dtypes, a few rows).
        metric: the metric's name (e.g. ``"roc_auc"``, ``"rmse"``).
        higher_is_better: the metric's direction.
        task_type: binary, multiclass or regression.
        target: the target column's name.
        id_column: the id column's name.
        feature_columns: the feature columns of the training file.
        text_columns: feature columns holding free text (empty for tabular-only tasks).
        leaderboard: the public leaderboard's scores (for the position score).
        turn: 0-based index of the execution being predicted.
        history: feedback texts of the previous executions of this episode.
        previous_solutions: the agent's previous solutions of this episode.
    """

    competition_id: str
    overview: str
    inventory: str
    metric: str
    higher_is_better: bool
    task_type: TaskType
    target: str
    id_column: str
    feature_columns: tuple[str, ...]
    text_columns: tuple[str, ...] = ()
    leaderboard: tuple[float, ...] = ()
    turn: int = 0
    history: tuple[str, ...] = ()
    previous_solutions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Outcome:
    """The result of one execution, real or predicted.

    Attributes:
        status: see :data:`ExecutionStatus`.
        score: the graded metric value (private split: the reward's source), ``None`` unless valid.
        public_score: the score on the public split (the only score shown to the agent).
        position: leaderboard position score in [0, 1] of ``score``.
        medal: ``"gold"``, ``"silver"``, ``"bronze"`` or ``None`` (MLE-bench thresholds).
        above_median: whether ``score`` beats the leaderboard median.
        stdout_tail / stderr_tail: the tails of the captured streams.
        traceback: the last Python traceback found in stderr, if any.
        exit_code: the process exit code, when it exited by itself.
        wall_s: execution seconds.
        detail: why a submission was rejected, which limit was hit, etc.
        extra: numeric measurements (``cpu_s``, ``max_rss_mb``, ``public_position``).
        backend: the sandbox backend that ran it (``""`` for a predicted outcome); ``"unsafe"`` means
            the solution ran unisolated and its answers were reachable.
    """

    status: ExecutionStatus
    score: float | None = None
    public_score: float | None = None
    position: float | None = None
    medal: str | None = None
    above_median: bool | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    traceback: str = ""
    exit_code: int | None = None
    wall_s: float = 0.0
    detail: str = ""
    extra: dict[str, float] = field(default_factory=dict)
    backend: str = ""
