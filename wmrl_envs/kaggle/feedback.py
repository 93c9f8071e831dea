"""The sandbox log format: what the agent reads after an execution, and what a world model imitates.

Why a fixed, parseable format: in simulate mode a world model must emit "what the sandbox would have
printed"; if the real env and the world model speak the same format, the agent cannot tell them apart
(its prompt distribution does not shift), and the predicted status and score can be read back from the
text with :func:`parse_feedback`. Only the public score is ever shown; the private score is the reward.

Example:
    >>> from wmrl_envs.kaggle.outcome import Outcome
    >>> text = format_feedback(Outcome(status="valid", public_score=0.8125, exit_code=0, wall_s=3.2))
    >>> parse_feedback(text).public_score
    0.8125
"""

from __future__ import annotations

import re

from wmrl_envs.kaggle.outcome import ExecutionStatus, Outcome

__all__ = ["format_feedback", "parse_feedback", "FEEDBACK_HEADER"]

FEEDBACK_HEADER = "=== execution report ==="
_STATUSES: tuple[ExecutionStatus, ...] = (
    "malformed", "syntax_error", "runtime_error", "no_submission", "valid", "timeout", "sandbox_error"
)
_FIELD = re.compile(r"^(status|exit_code|wall_time_s|public_score|detail):[ \t]*(.*)$", re.MULTILINE)


def format_feedback(outcome: Outcome, *, max_chars: int = 4000) -> str:
    """Render an outcome as the sandbox log the agent sees (public information only).

    Args:
        outcome: the execution's outcome; its private ``score`` is never printed.
        max_chars: the stdout and stderr tails are cut so the whole text stays around this size.
    """
    budget = max(200, max_chars // 2)
    lines = [
        FEEDBACK_HEADER,
        f"status: {outcome.status}",
        f"exit_code: {'none' if outcome.exit_code is None else outcome.exit_code}",
        f"wall_time_s: {outcome.wall_s:.1f}",
        f"public_score: {'none' if outcome.public_score is None else f'{outcome.public_score:.6g}'}",
    ]
    if outcome.detail:
        lines.append(f"detail: {' '.join(outcome.detail.split())}")
    lines.append("--- stdout (tail) ---")
    lines.append(outcome.stdout_tail[-budget:].rstrip())
    lines.append("--- stderr (tail) ---")
    lines.append((outcome.traceback or outcome.stderr_tail)[-budget:].rstrip())
    lines.append("=== end of report ===")
    return "\n".join(lines)


def parse_feedback(text: str) -> Outcome | None:
    """Read a status and public score back from a (real or simulated) log; ``None`` if unparseable.

    Tolerant of extra prose around the report (LLM world models ramble), strict about the fields: an
    unknown status or a non-numeric score makes the whole parse fail rather than guess.
    """
    fields: dict[str, str] = {}
    for match in _FIELD.finditer(text):
        fields.setdefault(match.group(1), match.group(2).strip())
    status = fields.get("status", "").strip().strip("`*\"'").lower()
    if status not in _STATUSES:
        return None
    score_text = fields.get("public_score", "none").strip().strip("`*\"'").lower()
    public_score: float | None
    if score_text in ("", "none", "null", "n/a", "-"):
        public_score = None
    else:
        try:
            public_score = float(score_text)
        except ValueError:
            return None
        if public_score != public_score or public_score in (float("inf"), float("-inf")):
            return None
    if status == "valid" and public_score is None:
        return None
    exit_text = fields.get("exit_code", "none")
    exit_code = int(exit_text) if re.fullmatch(r"-?\d+", exit_text) else None
    try:
        wall_s = float(fields.get("wall_time_s", "0") or 0)
    except ValueError:
        wall_s = 0.0
    stdout, _, rest = text.partition("--- stdout (tail) ---")[2].partition("--- stderr (tail) ---")
    stderr = rest.partition("=== end of report ===")[0]
    return Outcome(
        status=status,  # type: ignore[arg-type]
        score=public_score,
        public_score=public_score,
        exit_code=exit_code,
        wall_s=wall_s,
        stdout_tail=stdout.strip(),
        stderr_tail=stderr.strip(),
        detail=fields.get("detail", ""),
    )
