"""Grade one execution: validate the copied-out submission strictly, score it, rank it, build an Outcome.

Why grading lives outside the sandbox: the hidden answers must never be reachable from the solution's
process, so the grader reads only the file the sandbox copied out (``ExecutionResult.output``) and
nothing else the solution wrote. Why so strict: a reward computed on a half-valid file (a missing row
filled in, a NaN read as 0, a duplicated id counted twice) is a reward the policy learns to exploit.
Every rejection says exactly what was wrong, because that text becomes the agent's feedback.

Checks, in order: a file exists; it is a regular file (no symlink, FIFO or device); it is at most
``max_bytes``; it parses as UTF-8 CSV with bounded work (the header is refused unless it has two
columns, every row has two cells of at most :data:`MAX_CELL_CHARS` characters, reading stops past the
test set's row count); its header is exactly ``{id_column, target}``; ids are unique; the id set
equals the test set's; every prediction is valid for the metric (a finite number, a probability in
[0, 1], or one of the training labels; a label's number such as ``1e300`` or ``2**63`` is just not a
label). The file is untrusted: whatever it makes the grader raise becomes a status with a detail.

Scores: the private rows of the answers give ``score`` (the reward's source, never shown); the public
rows give ``public_score`` (the only score the agent sees). The position score, medal and above-median
come from the private leaderboard.
"""

from __future__ import annotations

import csv
import math
import os
import re
import stat
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from wmrl_algos.errors import DataError
from wmrl_envs.kaggle.competition import Competition
from wmrl_envs.kaggle.metrics import get_metric
from wmrl_envs.kaggle.outcome import ExecutionStatus, Outcome
from wmrl_envs.sandbox.base import ExecutionResult

__all__ = [
    "DEFAULT_MAX_SUBMISSION_BYTES",
    "MAX_CELL_CHARS",
    "SubmissionRejected",
    "GradeReport",
    "read_submission",
    "score_submission",
    "grade_execution",
    "extract_traceback",
]

DEFAULT_MAX_SUBMISSION_BYTES = 32 * 1024 * 1024
MAX_CELL_CHARS = 1024
"""Longest id or prediction cell accepted (a probability, a number or a label is far shorter)."""
_MAX_EXACT_INTEGER = 2**53
_SYNTAX_ERRORS = re.compile(r"^(SyntaxError|IndentationError|TabError)\b")
_TRACEBACK_HEADER = "Traceback (most recent call last):"


class SubmissionRejected(DataError):
    """The submission file is not gradable; ``detail`` says why in one sentence."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass(frozen=True)
class GradeReport:
    """The grade of a valid submission.

    Attributes:
        score: the metric on the private rows (the reward's source).
        public_score: the metric on the public rows (shown to the agent).
        position: MLE-Dojo position score of ``score`` on the private leaderboard (``None`` if the
            competition has no leaderboard).
        public_position: position score of ``public_score`` on the public leaderboard.
        medal: MLE-bench medal on the private leaderboard, or ``None``.
        above_median: whether ``score`` beats the private leaderboard's median.
    """

    score: float
    public_score: float
    position: float | None
    public_position: float | None
    medal: str | None
    above_median: bool | None


def _check_file(path: Path | None, max_bytes: int) -> Path:
    if path is None:
        raise SubmissionRejected("no ./submission.csv was written")
    path = Path(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise SubmissionRejected("no ./submission.csv was written") from None
    if stat.S_ISLNK(info.st_mode):
        raise SubmissionRejected("submission.csv is a symbolic link; write a regular file")
    if not stat.S_ISREG(info.st_mode):
        raise SubmissionRejected("submission.csv is not a regular file (FIFO, device or directory)")
    if info.st_size > max_bytes:
        raise SubmissionRejected(f"submission.csv is {info.st_size:,} bytes; the limit is {max_bytes:,}")
    if info.st_size == 0:
        raise SubmissionRejected("submission.csv is empty")
    return path


def _normalise_label(text: str) -> str:
    """``"1.0"`` and ``" 1 "`` -> ``"1"`` (an exactly representable integral number); else stripped."""
    text = text.strip()
    try:
        number = float(text)
    except ValueError:
        return text
    if math.isfinite(number) and number.is_integer() and abs(number) <= _MAX_EXACT_INTEGER:
        return str(int(number))
    return text


def _normalise_labels(values: pd.Series, labels: tuple[str, ...]) -> pd.Series:
    if labels and all(re.fullmatch(r"-?\d+", label) for label in labels):
        return values.map(_normalise_label)
    return values.str.strip()


def _shown(columns: list[str]) -> str:
    """A column list for a one-sentence detail: at most five names, each cut to 40 characters."""
    names = [name if len(name) <= 40 else name[:40] + "..." for name in columns[:5]]
    more = f" and {len(columns) - 5:,} more" if len(columns) > 5 else ""
    return f"{names}{more}"


def _read_table(path: Path, expected: list[str], test_rows: int) -> tuple[list[str], list[list[str]]]:
    """Parse the CSV with bounded work: the header, then rows of ``len(expected)`` cells, a bounded number.

    Why not ``pandas.read_csv``: it materialises whatever the file declares (a 100,000-column header
    cost 54 s and 380 MB of the trainer's memory) before any check can run. Here the header is
    refused at once unless it has the expected width, each row must have that width, each cell is at
    most :data:`MAX_CELL_CHARS` characters, and reading stops past twice the test set's size (room
    to report duplicated ids): the work is linear in the (size-capped) file and the memory linear in
    the test set.
    """
    width = len(expected)
    max_rows = 2 * test_rows + 100
    rows: list[list[str]] = []
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle, strict=True)
            header: list[str] | None = None
            for cells in reader:
                if not cells or (len(cells) == 1 and not cells[0].strip()):
                    continue
                if header is None:
                    header = [cell.strip() for cell in cells]
                    if len(header) != width:
                        raise SubmissionRejected(
                            f"submission.csv has {len(header):,} columns {_shown(header)}; expected exactly "
                            f"{expected}"
                        )
                    continue
                if len(cells) != width:
                    raise SubmissionRejected(
                        f"row {reader.line_num} of submission.csv has {len(cells)} cells; expected {width} "
                        f"({','.join(expected)})"
                    )
                if any(len(cell) > MAX_CELL_CHARS for cell in cells):
                    raise SubmissionRejected(
                        f"row {reader.line_num} of submission.csv has a cell over {MAX_CELL_CHARS} characters"
                    )
                if len(rows) >= max_rows:
                    raise SubmissionRejected(
                        f"submission.csv has more than {max_rows:,} rows for a test set of {test_rows:,}; "
                        "write one row per test id"
                    )
                rows.append(cells)
    except (csv.Error, UnicodeDecodeError) as exc:
        reason = " ".join(str(exc).split())[:200]
        raise SubmissionRejected(f"submission.csv is not a readable UTF-8 CSV ({reason})") from None
    if header is None:
        raise SubmissionRejected("submission.csv has no header row")
    return header, rows


def read_submission(
    path: Path | None, competition: Competition, *, max_bytes: int = DEFAULT_MAX_SUBMISSION_BYTES
) -> pd.Series:
    """Validate a submission file and return its predictions indexed by id, in the answers' order.

    Returns:
        A Series of floats (probability / number metrics) or strings (label metrics).

    Raises:
        SubmissionRejected: the first problem found, with a one-sentence ``detail``.
    """
    path = _check_file(path, max_bytes)
    expected = [competition.id_column, competition.target]
    answers = competition.load_answers()
    columns, rows = _read_table(path, expected, test_rows=len(answers))
    if sorted(columns) != sorted(expected):
        raise SubmissionRejected(f"submission.csv has columns {_shown(columns)}; expected exactly {expected}")
    frame = pd.DataFrame(rows, columns=columns, dtype=str)
    ids = frame[competition.id_column].str.strip()
    duplicated = ids[ids.duplicated()]
    if len(duplicated):
        raise SubmissionRejected(
            f"submission.csv has {len(duplicated)} duplicated ids (e.g. {duplicated.iloc[0]!r}); "
            "write one row per id"
        )
    expected_ids = answers[competition.id_column].astype(str)
    missing = sorted(set(expected_ids) - set(ids))
    unexpected = sorted(set(ids) - set(expected_ids))
    if missing or unexpected:
        raise SubmissionRejected(
            f"submission.csv ids do not match the test set: {len(missing)} missing (e.g. {missing[:3]}), "
            f"{len(unexpected)} unexpected (e.g. {unexpected[:3]}); predict every test id exactly once"
        )
    values = frame[competition.target]
    values.index = ids
    values = values.loc[expected_ids]
    kind = get_metric(competition.metric).kind
    if kind == "label":
        labels = _normalise_labels(values, competition.labels)
        invalid = labels[~labels.isin(competition.labels)]
        if len(invalid):
            raise SubmissionRejected(
                f"{len(invalid)} predictions are not valid labels (e.g. {invalid.iloc[0]!r}); "
                f"use one of {list(competition.labels)[:10]}"
            )
        return labels
    numbers = pd.to_numeric(values.str.strip(), errors="coerce")
    invalid_numbers = numbers[~np.isfinite(numbers.to_numpy(dtype=float))]
    if len(invalid_numbers):
        bad = values.loc[invalid_numbers.index[0]]
        raise SubmissionRejected(
            f"{len(invalid_numbers)} predictions are not finite numbers (e.g. {bad!r} for id "
            f"{invalid_numbers.index[0]!r}); NaN, inf and empty cells are rejected"
        )
    if kind == "probability" and ((numbers < 0) | (numbers > 1)).any():
        out_of_range = numbers[(numbers < 0) | (numbers > 1)]
        raise SubmissionRejected(
            f"{len(out_of_range)} predictions are outside [0, 1] (e.g. {float(out_of_range.iloc[0])!r}); "
            "submit the probability of the positive class"
        )
    return numbers.astype(float)


def score_submission(
    path: Path | None, competition: Competition, *, max_bytes: int = DEFAULT_MAX_SUBMISSION_BYTES
) -> GradeReport:
    """Validate, score on the private and public rows, and rank a submission.

    Raises:
        SubmissionRejected: the file is not gradable.
    """
    predictions = read_submission(path, competition, max_bytes=max_bytes)
    answers = competition.load_answers()
    metric = get_metric(competition.metric)
    truth = answers[competition.target]
    if metric.kind == "label":
        truth = _normalise_labels(truth.astype(str), competition.labels)
    usage = answers["Usage"].astype(str).str.lower().to_numpy()
    prediction_values = predictions.to_numpy()
    truth_values = truth.to_numpy()
    private, public = usage == "private", usage == "public"
    score = round(metric.compute(truth_values[private], prediction_values[private]), 6)
    public_score = round(metric.compute(truth_values[public], prediction_values[public]), 6)
    board, public_board = competition.leaderboard, competition.public_leaderboard
    return GradeReport(
        score=score,
        public_score=public_score,
        position=board.position(score) if board else None,
        public_position=public_board.position(public_score) if public_board else None,
        medal=board.medal(score) if board else None,
        above_median=board.above_median(score) if board else None,
    )


def extract_traceback(stderr: str) -> str:
    """The last Python traceback in ``stderr`` (or the syntax-error report), or ``""``."""
    start = stderr.rfind(_TRACEBACK_HEADER)
    if start >= 0:
        return stderr[start:].strip()
    lines = stderr.rstrip().splitlines()
    if lines and _SYNTAX_ERRORS.match(lines[-1]):
        return "\n".join(lines[-6:])
    return ""


def _failure_status(result: ExecutionResult) -> ExecutionStatus:
    lines = result.stderr.rstrip().splitlines()
    if lines and _SYNTAX_ERRORS.match(lines[-1]) and _TRACEBACK_HEADER not in result.stderr:
        return "syntax_error"
    return "runtime_error"


def grade_execution(
    result: ExecutionResult,
    competition: Competition,
    *,
    max_bytes: int = DEFAULT_MAX_SUBMISSION_BYTES,
    tail_chars: int = 2000,
) -> Outcome:
    """Turn a sandbox result into an :class:`Outcome` (status, scores, ranks, log tails).

    ``ok`` runs are graded (``valid`` or ``no_submission``); a non-zero exit or a resource kill is a
    ``runtime_error`` (``syntax_error`` when Python could not compile the file); a timeout is
    ``timeout`` (rewarded like a runtime error); a sandbox failure is ``sandbox_error`` (unknown, never
    a low score). Whatever the submission file holds, this returns an outcome: an unexpected failure
    of the grader on it is a ``no_submission`` whose detail names the error.

    Raises:
        DataError: the competition's hidden answers are missing or broken (an infrastructure failure,
            checked before the untrusted file is read, so it is never mistaken for the solution's).
        ConfigError: the competition names an unknown metric.
    """
    extra: dict[str, float] = {}
    if result.cpu_s is not None:
        extra["cpu_s"] = float(result.cpu_s)
    if result.max_rss_mb is not None:
        extra["max_rss_mb"] = float(result.max_rss_mb)
    logs = Outcome(
        status="sandbox_error",
        backend=result.backend,
        stdout_tail=result.stdout[-tail_chars:],
        stderr_tail=result.stderr[-tail_chars:],
        traceback=extract_traceback(result.stderr)[-tail_chars:],
        exit_code=result.exit_code,
        wall_s=float(result.wall_s),
        extra=extra,
    )
    if result.status == "sandbox_error":
        return replace(logs, detail=result.detail or "the sandbox failed")
    if result.status == "timeout":
        return replace(logs, status="timeout", detail=result.detail or "wall-clock limit reached")
    if result.status == "killed":
        return replace(logs, status="runtime_error", detail=result.detail or "killed by a resource limit")
    if result.status == "error":
        return replace(logs, status=_failure_status(result), detail=result.detail)
    if result.output is None:
        detail = (
            f"submission.csv rejected by the sandbox: {result.output_rejected}"
            if result.output_rejected
            else "no ./submission.csv was written"
        )
        return replace(logs, status="no_submission", detail=detail)
    competition.load_answers()  # the competition itself must be sound: its failures are raised, not graded
    get_metric(competition.metric)
    try:
        report = score_submission(result.output, competition, max_bytes=max_bytes)
    except SubmissionRejected as rejection:
        return replace(logs, status="no_submission", detail=rejection.detail)
    except Exception as error:  # the file is hostile: whatever it triggers is a status, not a crash
        reason = " ".join(str(error).split())[:200]
        return replace(logs, status="no_submission",
                       detail=f"submission.csv could not be graded ({type(error).__name__}: {reason})")
    if report.public_position is not None:
        extra["public_position"] = report.public_position
    return replace(
        logs,
        status="valid",
        score=report.score,
        public_score=report.public_score,
        position=report.position,
        medal=report.medal,
        above_median=report.above_median,
    )
