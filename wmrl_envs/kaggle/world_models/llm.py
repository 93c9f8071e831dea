"""LLM world models: a prompted execution simulator, and a one-forward-pass score estimator.

Why this module: WMRL's world model is a language model prompted, not fine-tuned, to play the
sandbox (docs/method.md). It reads the task's public description and the agent's solution and prints
what the sandbox would have printed, in the env's own feedback format, so the predicted status and
score can be read back with the same parser the real env's logs go through. Everything that can go
wrong with an LLM answer (rambling past the token budget, prose instead of a report, a solution longer
than the context) becomes a ``None`` reward that is counted and logged, never a 0: a zero would be a
confident claim that the solution is bad.

Layers, from pure to composed:

* pure helpers: :func:`chatml`, :func:`truncate_middle`, :func:`distribution_from_logprobs`;
* the pluggable parts as protocols: :class:`TextGenerator` (text out, with finish reason and token
  counts) and :class:`ScoreDistribution` (next-token probabilities over a few candidate labels), both
  implemented by the adapters (transformers, vLLM, OpenAI-compatible HTTP), and :class:`PromptTemplate`
  (how a task and an action become a prompt and an answer becomes a :class:`Prediction`);
* :class:`KaggleExecutionTemplate`, the template for the Kaggle env (few-shot feedback format,
  structured-output grammar, leaderboard-position buckets);
* :class:`LLMWorldModel` (simulate: generate a report, parse it) and :class:`LLMScoreWorldModel`
  (score: expected leaderboard-position bucket, optionally weighted by a status distribution, from
  next-token probabilities, no generation).

The part of the prompt that only depends on the task (system message, overview, inventory) comes
first and is identical for every query of a batch, so backends with prefix caching (vLLM,
llama.cpp) reuse it; queries are sent grouped by that prefix.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, runtime_checkable

from wmrl_algos.errors import ConfigError, WorldModelError
from wmrl_envs.kaggle.feedback import FEEDBACK_HEADER, format_feedback, parse_feedback
from wmrl_envs.kaggle.outcome import ExecutionStatus, KaggleContext, Outcome, RewardLadder, position_score
from wmrl_envs.world_model import Prediction, WorldModelQuery

__all__ = [
    "FinishReason",
    "GenerationResult",
    "OutputConstraint",
    "CandidateDistribution",
    "PromptParts",
    "PromptFormatter",
    "TextGenerator",
    "ScoreDistribution",
    "PromptTemplate",
    "KaggleExecutionTemplate",
    "LLMWorldModelConfig",
    "LLMWorldModel",
    "LLMScoreWorldModel",
    "chatml",
    "truncate_middle",
    "distribution_from_logprobs",
    "REPORT_END",
]

logger = logging.getLogger(__name__)

FinishReason = Literal["stop", "length", "error"]
"""``stop``: the model ended its answer (end-of-sequence or a stop string). ``length``: it hit the
token budget. ``error``: the backend failed for this prompt (timeout, HTTP error); the text is empty."""

REPORT_END = "=== end of report ==="
"""The last line of a sandbox report; a report without it (or without a natural stop) is incomplete."""

_PREDICTABLE_STATUSES: tuple[ExecutionStatus, ...] = (
    "malformed",
    "syntax_error",
    "runtime_error",
    "no_submission",
    "valid",
)


@dataclass(frozen=True)
class GenerationResult:
    """What a backend generated for one prompt.

    Attributes:
        text: the generated continuation (without the prompt, without a matched stop string).
        finish_reason: see :data:`FinishReason`.
        prompt_tokens: tokens in the prompt (0 if the backend did not say).
        completion_tokens: tokens generated.
        error: why the generation failed, when ``finish_reason == "error"``.
    """

    text: str
    finish_reason: FinishReason
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None


@dataclass(frozen=True)
class OutputConstraint:
    """A structured-output constraint on the generated continuation; each backend uses what it supports.

    Attributes:
        regex: a regular expression the continuation must match (vLLM guided decoding, SGLang).
        gbnf: the same language as a llama.cpp GBNF grammar (llama.cpp server ``grammar``).
        json_schema: a JSON schema (vLLM / SGLang / llama.cpp JSON modes), for templates that answer in JSON.
    """

    regex: str | None = None
    gbnf: str | None = None
    json_schema: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class CandidateDistribution:
    """Next-token probabilities over a few candidate labels (e.g. the digits ``"0"``..``"9"``).

    Attributes:
        probabilities: one probability per candidate, renormalised to sum to 1.
        covered_mass: the probability mass the candidates had before renormalising (how much the model
            "wanted" to answer with one of them at all; low values mean the prompt did not steer it).
    """

    probabilities: tuple[float, ...]
    covered_mass: float


@dataclass(frozen=True)
class PromptParts:
    """The pieces of one prompt, in the order they are rendered.

    Attributes:
        system: the system message (identical for every query of a task).
        shared: the start of the user message that only depends on the task (overview, inventory).
        query: the rest of the user message (history, the action to predict).
        answer_prefix: the forced start of the assistant's answer (a constrained prefix).
    """

    system: str
    shared: str
    query: str
    answer_prefix: str = ""


@runtime_checkable
class PromptFormatter(Protocol):
    """The part of a backend a prompt builder needs: its chat format, context size and tokenizer."""

    name: str
    context_window: int

    def format_chat(self, system: str, user: str) -> str:
        """The raw prompt text for a system and a user message, ending where the assistant's turn starts."""
        ...

    def count_tokens(self, text: str) -> int:
        """The number of tokens ``text`` takes in this backend's prompts (an estimate is allowed)."""
        ...


@runtime_checkable
class TextGenerator(PromptFormatter, Protocol):
    """A batched text-generation backend (transformers, vLLM, an OpenAI-compatible server)."""

    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int,
        *,
        stop: Sequence[str] = (),
        constraint: OutputConstraint | None = None,
    ) -> list[GenerationResult]:
        """Greedy continuations of raw prompts, one result per prompt, in order; never raises per prompt."""
        ...


@runtime_checkable
class ScoreDistribution(PromptFormatter, Protocol):
    """A backend that reads next-token probabilities in one forward pass (no generation)."""

    def next_token_distribution(
        self, prompts: Sequence[str], candidates: Sequence[str]
    ) -> list[CandidateDistribution | None]:
        """For each prompt, the probability of each candidate label as the next token (``None``: unknown)."""
        ...


@runtime_checkable
class PromptTemplate(Protocol):
    """How an env's context and action become a prompt, and an answer becomes a :class:`Prediction`.

    A non-Kaggle env supplies its own implementation; :class:`KaggleExecutionTemplate` is the reference.
    """

    def action_text(self, action: Any) -> str:
        """The part of the action the model reads (the part that may be cut to fit the context)."""
        ...

    def simulate_parts(self, context: Any, action_text: str) -> PromptParts:
        """The prompt asking the model to print the env's feedback for ``action_text``."""
        ...

    def simulate_constraint(self) -> OutputConstraint | None:
        """The structured-output constraint on the continuation of ``answer_prefix``, if any."""
        ...

    def stop_strings(self) -> tuple[str, ...]:
        """Strings that end a simulated answer."""
        ...

    def is_complete(self, answer: str) -> bool:
        """Whether an answer cut by the token budget still holds a complete report."""
        ...

    def parse(self, answer: str, context: Any) -> Prediction:
        """The prediction read from a full answer (``answer_prefix`` + generated text); reward ``None``
        and ``info["parse_error"]`` set when it cannot be read."""
        ...

    def bucket_parts(self, context: Any, action_text: str) -> PromptParts:
        """A prompt whose next token is one of :meth:`bucket_labels` (the score bucket)."""
        ...

    def bucket_labels(self) -> tuple[str, ...]:
        """The candidate next tokens of :meth:`bucket_parts`, worst bucket first."""
        ...

    def bucket_prediction(
        self, buckets: CandidateDistribution, statuses: CandidateDistribution | None, context: Any
    ) -> Prediction:
        """The prediction from a bucket distribution (and optionally a status distribution)."""
        ...

    def status_parts(self, context: Any, action_text: str) -> PromptParts:
        """A prompt whose next token names the execution status (first token of each status label)."""
        ...

    def status_labels(self) -> tuple[str, ...]:
        """The candidate labels of :meth:`status_parts`."""
        ...


def chatml(system: str, user: str) -> str:
    """Render a system and a user message in the ChatML format (SmolLM2, Qwen), up to the assistant turn.

    >>> chatml("S", "U").endswith("<|im_start|>assistant\\n")
    True
    """
    return (
        f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
    )


def truncate_middle(text: str, keep_chars: int, *, marker: str = "[... {cut} characters cut ...]") -> str:
    """Keep the head and the tail of ``text`` within ``keep_chars`` characters, with a marker between.

    The middle of a solution is cut rather than its end because the end of a Kaggle solution (fit,
    predict, write the submission) is what decides most outcomes, and its start holds the imports.

    Args:
        text: the text to shorten.
        keep_chars: the length of the result, marker included; ``text`` is returned unchanged if it fits.
        marker: put where the middle was; ``{cut}`` is replaced by the number of characters removed.

    Returns:
        The shortened text.

    Raises:
        ConfigError: ``keep_chars`` is too small to hold the marker.

    >>> truncate_middle("abcdefghijklmnopqrstuvwxyz", 16, marker="[-{cut}]")
    'abcdef[-15]vwxyz'
    """
    if len(text) <= keep_chars:
        return text
    cut = len(text) - keep_chars
    for _ in range(3):
        label = marker.format(cut=cut)
        room = keep_chars - len(label)
        if room < 0:
            raise ConfigError(
                f"keep_chars={keep_chars} cannot even hold the truncation marker {label!r}; "
                "pass a larger value"
            )
        cut = len(text) - room
    head = room - room // 2 if room else 0
    tail = room // 2
    return text[:head] + marker.format(cut=cut) + (text[len(text) - tail :] if tail else "")


def distribution_from_logprobs(
    top_logprobs: Mapping[str, float], candidates: Sequence[str]
) -> CandidateDistribution | None:
    """Candidate probabilities from a backend's top next-token log-probabilities.

    A token counts for a candidate when its stripped text is a non-empty prefix of exactly one
    candidate (``" mal"`` counts for ``"malformed"``, ``"5"`` and ``" 5"`` for ``"5"``); tokens that
    match several candidates or none are ignored.

    Args:
        top_logprobs: token text → natural-log probability (the ``top_logprobs`` of one position).
        candidates: the labels.

    Returns:
        The renormalised distribution, or ``None`` if no listed token matches a candidate.

    >>> top = {"1": math.log(0.3), " 2": math.log(0.1), "x": math.log(0.6)}
    >>> d = distribution_from_logprobs(top, ["1", "2"])
    >>> [round(p, 2) for p in d.probabilities], round(d.covered_mass, 2)
    ([0.75, 0.25], 0.4)
    """
    mass = [0.0] * len(candidates)
    for token, logprob in top_logprobs.items():
        stripped = token.strip()
        if not stripped or logprob is None or not math.isfinite(logprob):
            continue
        matches = [i for i, label in enumerate(candidates) if label.startswith(stripped)]
        if len(matches) == 1:
            mass[matches[0]] += math.exp(logprob)
    covered = sum(mass)
    if covered <= 0.0:
        return None
    return CandidateDistribution(tuple(m / covered for m in mass), min(covered, 1.0))


def _few_shot_reports() -> str:
    """Example reports in the sandbox's own format (rendered by the real formatter, so they never drift)."""
    examples = (
        Outcome(
            status="valid",
            public_score=0.8312,
            exit_code=0,
            wall_s=14.2,
            stdout_tail="fold 0 auc 0.829\nfold 1 auc 0.834\nwrote submission.csv (2000 rows)",
        ),
        Outcome(
            status="runtime_error",
            exit_code=1,
            wall_s=2.1,
            traceback='Traceback (most recent call last):\n  File "solution.py", line 12, in <module>\n'
            "    X = train[features]\nKeyError: \"['Age_bin'] not in index\"",
        ),
        Outcome(
            status="no_submission",
            exit_code=0,
            wall_s=6.8,
            detail="submission.csv not found",
            stdout_tail="validation rmse 0.412",
        ),
    )
    return "\n\n".join(format_feedback(example, max_chars=600) for example in examples)


def _score_grammar_pieces() -> tuple[str, str]:
    """The continuation after ``status:`` of a report, as a regex and as a GBNF grammar.

    A ``valid`` report must carry a numeric public score and every other status ``none`` (the parser
    rejects anything else), and the tails are short (4 lines of 120 characters) so that a small model
    that fills every allowed line still ends its report within a few hundred tokens.
    """
    failed = "|".join(status for status in _PREDICTABLE_STATUSES if status != "valid")
    fields = r"\nexit_code: (none|-?[0-9]{1,3})\nwall_time_s: [0-9]{1,5}\.[0-9]\npublic_score: "
    line = r"[^=\n][^\n]{0,119}\n"
    regex = (
        rf" (valid{fields}-?[0-9]{{1,6}}(\.[0-9]{{1,6}})?|({failed}){fields}none)\n"
        r"(detail: [^\n]{0,120}\n)?"
        rf"--- stdout \(tail\) ---\n({line}){{0,4}}--- stderr \(tail\) ---\n({line}){{0,4}}{REPORT_END}"
    )
    failed_rule = " | ".join(f'"{status}"' for status in _PREDICTABLE_STATUSES if status != "valid")
    gbnf = "\n".join(
        (
            'root ::= " " (valid | failed) "\\n" detail? "--- stdout (tail) ---\\n" line{0,4} '
            f'"--- stderr (tail) ---\\n" line{{0,4}} "{REPORT_END}"',
            'valid ::= "valid" fields "-"? [0-9]{1,6} ("." [0-9]{1,6})?',
            f'failed ::= ({failed_rule}) fields "none"',
            'fields ::= "\\nexit_code: " ("none" | "-"? [0-9]{1,3}) "\\nwall_time_s: " [0-9]{1,5} "." [0-9] '
            '"\\npublic_score: "',
            'detail ::= "detail: " [^\\n]{0,120} "\\n"',
            'line ::= [^=\\n] [^\\n]{0,119} "\\n"',
        )
    )
    return regex, gbnf


@dataclass(frozen=True)
class KaggleExecutionTemplate:
    """Prompts an LLM to play the Kaggle sandbox, and reads its answer back as a reward.

    The context is a :class:`~wmrl_envs.kaggle.outcome.KaggleContext`, the action the agent's message.
    The model continues ``=== execution report ===\\nstatus:``; the answer is parsed with
    :func:`~wmrl_envs.kaggle.feedback.parse_feedback`, and the reward is
    ``ladder.reward(status, position_score(public_score, leaderboard, higher_is_better))``.

    Attributes:
        ladder: the reward ladder (docs/design.md, the reward ladder defaults).
        history_turns: how many previous feedback reports of the episode the prompt shows.
        history_chars: each shown report is cut to this many characters.
        few_shot: whether the system message shows example reports (the format is few-shot).
        buckets: number of leaderboard-position buckets in score mode (labels ``"0"``..``str(buckets-1)``).

    Example:
        >>> from wmrl_envs.kaggle.outcome import KaggleContext
        >>> context = KaggleContext("titanic", "Predict survival.", "train.csv 891x12", "accuracy", True,
        ...                         "binary", "Survived", "PassengerId", ("Age",), leaderboard=(0.8, 0.7))
        >>> template = KaggleExecutionTemplate()
        >>> prefix = template.simulate_parts(context, "print(1)").answer_prefix
        >>> answer = prefix + " valid\\npublic_score: 0.75"
        >>> template.parse(answer, context).reward
        0.75
    """

    ladder: RewardLadder = field(default_factory=RewardLadder)
    history_turns: int = 1
    history_chars: int = 1200
    few_shot: bool = True
    buckets: int = 10

    def __post_init__(self) -> None:
        if self.history_turns < 0:
            raise ConfigError(
                f"history_turns={self.history_turns} must be >= 0 (0 hides the episode's history)"
            )
        if self.history_chars < 100:
            raise ConfigError(f"history_chars={self.history_chars} is too small to show a report; use >= 100")
        if not 2 <= self.buckets <= 10:
            raise ConfigError(
                f"buckets={self.buckets} must be in [2, 10] so every bucket label is one digit token"
            )

    def action_text(self, action: Any) -> str:
        """The agent's message as text (the env extracts the code itself; the model sees the message)."""
        return action if isinstance(action, str) else str(action)

    def _system(self, task: str) -> str:
        lines = [
            "You are the execution sandbox of a Kaggle-style competition. You receive the task, its data "
            "inventory and a participant's solution. You do not explain: you print exactly the report the "
            "sandbox prints after running the solution, and nothing else.",
            f"Statuses: {', '.join(_PREDICTABLE_STATUSES)}. public_score is the metric on the public "
            "split, or none when there is no valid submission.",
            task,
        ]
        if self.few_shot:
            lines.append("Example reports:\n\n" + _few_shot_reports())
        return "\n\n".join(lines)

    def _shared(self, context: KaggleContext) -> str:
        direction = "higher is better" if context.higher_is_better else "lower is better"
        board = sorted(context.leaderboard, reverse=context.higher_is_better)
        board_text = (
            f"{len(board)} entries; best {board[0]:.6g}, median {board[len(board) // 2]:.6g}, "
            f"worst {board[-1]:.6g}"
            if board
            else "empty"
        )
        return (
            f"# Competition: {context.competition_id}\n\n## Overview\n{context.overview.strip()}\n\n"
            f"## Data inventory\n{context.inventory.strip()}\n\n"
            f"Metric: {context.metric} ({direction}). Task type: {context.task_type}; target column "
            f"{context.target!r}; id column {context.id_column!r}.\nPublic leaderboard: {board_text}.\n\n"
        )

    def _query(self, context: KaggleContext, action_text: str, instruction: str) -> str:
        parts = []
        shown = context.history[-self.history_turns :] if self.history_turns else ()
        for offset, report in enumerate(shown):
            turn = context.turn - len(shown) + offset
            parts.append(f"## Report of execution {turn}\n{truncate_middle(report, self.history_chars)}\n")
        parts.append(
            f"## Execution {context.turn}: the participant's message\n{action_text}\n\n{instruction}"
        )
        return "\n".join(parts)

    def simulate_parts(self, context: KaggleContext, action_text: str) -> PromptParts:
        """Prompt for the report of running ``action_text``; the answer starts with the report header."""
        return PromptParts(
            system=self._system("Answer with one report in the exact format of the examples."),
            shared=self._shared(context),
            query=self._query(context, action_text, "Print the sandbox report of this execution."),
            answer_prefix=f"{FEEDBACK_HEADER}\nstatus:",
        )

    def simulate_constraint(self) -> OutputConstraint:
        """The report format as a regex and a GBNF grammar (statuses limited to the predictable ones)."""
        regex, gbnf = _score_grammar_pieces()
        return OutputConstraint(regex=regex, gbnf=gbnf)

    def stop_strings(self) -> tuple[str, ...]:
        """A report ends at its end line."""
        return (REPORT_END,)

    def is_complete(self, answer: str) -> bool:
        """A budget-cut answer is complete only if the end line was printed."""
        return REPORT_END in answer

    def parse(self, answer: str, context: KaggleContext) -> Prediction:
        """Parse a report; reward from the ladder and the leaderboard position of the public score."""
        outcome = parse_feedback(answer)
        if outcome is None:
            return Prediction(
                reward=None,
                info={
                    "outcome": None,
                    "raw_text": answer,
                    "parse_error": "no status/public_score report found",
                },
            )
        position = (
            position_score(outcome.public_score, context.leaderboard, context.higher_is_better)
            if outcome.public_score is not None
            else None
        )
        outcome = replace(outcome, position=position)
        reward = self.ladder.reward(outcome.status, position)
        return Prediction(
            reward=reward,
            observation=format_feedback(outcome),
            info={"outcome": outcome, "raw_text": answer, "parse_error": None},
        )

    def bucket_labels(self) -> tuple[str, ...]:
        """``"0"``..``"9"`` (or fewer): bucket ``k`` covers positions ``[k/B, (k+1)/B)``."""
        return tuple(str(k) for k in range(self.buckets))

    def bucket_parts(self, context: KaggleContext, action_text: str) -> PromptParts:
        """Prompt whose next token is the predicted leaderboard-position bucket."""
        last = self.buckets - 1
        instruction = (
            f"If this solution produced a valid submission, where would its score land on the leaderboard? "
            f"Answer with one digit from 0 (last place) to {last} (first place)."
        )
        return PromptParts(
            system=self._system("Answer with a single digit."),
            shared=self._shared(context),
            query=self._query(context, action_text, instruction),
            answer_prefix=f"Predicted leaderboard position bucket (0-{last}): ",
        )

    def status_labels(self) -> tuple[ExecutionStatus, ...]:
        """The predictable statuses (their first tokens differ)."""
        return _PREDICTABLE_STATUSES

    def status_parts(self, context: KaggleContext, action_text: str) -> PromptParts:
        """Prompt whose next token starts the predicted status."""
        return PromptParts(
            system=self._system("Answer with one report in the exact format of the examples."),
            shared=self._shared(context),
            query=self._query(context, action_text, "Print the sandbox report of this execution."),
            answer_prefix=f"{FEEDBACK_HEADER}\nstatus:",
        )

    def bucket_prediction(
        self, buckets: CandidateDistribution, statuses: CandidateDistribution | None, context: KaggleContext
    ) -> Prediction:
        """Expected bucket → position (bucket centre) → reward; with statuses, the expected ladder reward."""
        expected_bucket = sum(k * p for k, p in enumerate(buckets.probabilities))
        position = min(1.0, max(0.0, (expected_bucket + 0.5) / self.buckets))
        info: dict[str, Any] = {
            "expected_bucket": expected_bucket,
            "position": position,
            "bucket_probabilities": buckets.probabilities,
            "bucket_mass": buckets.covered_mass,
            "raw_text": None,
            "parse_error": None,
        }
        if statuses is None:
            return Prediction(reward=self.ladder.reward("valid", position), info=info)
        rewards = [self.ladder.reward(status, position) for status in self.status_labels()]
        known = [reward for reward in rewards if reward is not None]
        info["status_probabilities"] = dict(zip(self.status_labels(), statuses.probabilities, strict=True))
        if len(known) != len(rewards):
            info["parse_error"] = "a predicted status has no known reward on the ladder"
            return Prediction(reward=None, info=info)
        reward = sum(p * r for p, r in zip(statuses.probabilities, known, strict=True))
        info["status_mass"] = statuses.covered_mass
        return Prediction(reward=reward, info=info)


@dataclass(frozen=True)
class LLMWorldModelConfig:
    """Settings of the LLM world models.

    Attributes:
        max_new_tokens: generation budget per prediction (the paper: 1024). An answer cut by it without
            a complete report is ``None``. Lower it for speed on small machines.
        context_window: tokens the prompt plus the answer may take; ``None`` uses the backend's. Lower
            it to keep prompts short (faster) at the price of cutting long solutions.
        structured: ask the backend for structured output (grammar / regex / JSON schema) where it
            supports it; the forced answer prefix is always used.
        min_action_chars: if the action must be cut below this many characters to fit, the prediction
            is ``None`` (logged) instead: a solution cut that far is not the solution any more.
        safety_margin_tokens: tokens kept free besides the answer budget (token counts of HTTP
            backends are estimates).
        name: the world model's name in logs and metrics.
    """

    max_new_tokens: int = 1024
    context_window: int | None = None
    structured: bool = True
    min_action_chars: int = 200
    safety_margin_tokens: int = 16
    name: str = "llm"

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens={self.max_new_tokens} must be >= 1 (the paper uses 1024)")
        if self.context_window is not None and self.context_window <= self.max_new_tokens:
            raise ConfigError(
                f"context_window={self.context_window} leaves no room for a prompt next to "
                f"max_new_tokens={self.max_new_tokens}; raise context_window or lower max_new_tokens"
            )
        if self.min_action_chars < 1:
            raise ConfigError(f"min_action_chars={self.min_action_chars} must be >= 1")
        if self.safety_margin_tokens < 0:
            raise ConfigError(f"safety_margin_tokens={self.safety_margin_tokens} must be >= 0")


@dataclass
class _Counters:
    predictions: int = 0
    parsed: int = 0
    unparseable: int = 0
    truncated_answers: int = 0
    backend_errors: int = 0
    cut_actions: int = 0
    too_long: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class _Built:
    index: int
    group: str
    prompt: str | None
    reason: str | None
    cut: bool


class _PromptBuilder:
    """Renders prompt parts with a backend's chat format, cutting the action's middle to fit."""

    def __init__(
        self,
        backend: PromptFormatter,
        template: PromptTemplate,
        config: LLMWorldModelConfig,
        answer_tokens: int,
    ) -> None:
        self._backend = backend
        self._template = template
        self._config = config
        window = config.context_window or backend.context_window
        self.budget = window - answer_tokens - config.safety_margin_tokens

    def render(self, parts: PromptParts) -> str:
        return self._backend.format_chat(parts.system, parts.shared + parts.query) + parts.answer_prefix

    def build(
        self, index: int, query: WorldModelQuery, which: Literal["simulate", "bucket", "status"]
    ) -> _Built:
        make = {
            "simulate": self._template.simulate_parts,
            "bucket": self._template.bucket_parts,
            "status": self._template.status_parts,
        }[which]
        text = self._template.action_text(query.action)
        parts = make(query.context, text)
        group = parts.system + parts.shared
        prompt = self.render(parts)
        tokens = self._backend.count_tokens(prompt)
        cut = False
        for _ in range(6):
            if tokens <= self.budget:
                return _Built(index, group, prompt, None, cut)
            action_tokens = max(1, self._backend.count_tokens(text))
            chars_per_token = max(len(text), 1) / action_tokens
            overflow_chars = math.ceil((tokens - self.budget) * chars_per_token * 1.1) + 64
            keep = len(text) - overflow_chars
            if keep < self._config.min_action_chars:
                break
            text = truncate_middle(text, keep, marker="\n[... {cut} characters cut to fit the context ...]\n")
            cut = True
            parts = make(query.context, text)
            prompt = self.render(parts)
            tokens = self._backend.count_tokens(prompt)
        reason = (
            f"prompt needs {tokens} tokens but only {self.budget} fit next to the answer budget; the action "
            f"would have to be cut below min_action_chars={self._config.min_action_chars}"
        )
        return _Built(index, group, None, reason, cut)


def _ordered(built: Sequence[_Built]) -> list[_Built]:
    """Buildable prompts grouped by shared prefix (first-seen order), shortest first within a group."""
    first_seen: dict[str, int] = {}
    for item in built:
        first_seen.setdefault(item.group, len(first_seen))
    ready = [item for item in built if item.prompt is not None]
    return sorted(ready, key=lambda item: (first_seen[item.group], len(item.prompt or "")))


class LLMWorldModel:
    """Simulate mode: an LLM prints the env's feedback for each action; the reward is parsed from it.

    One :meth:`predict` call renders every query (shared task prefix first, action cut in the middle
    when too long), sends them to the backend grouped by prefix, and parses each answer with the
    template. Unknown outcomes (unparseable, cut by the token budget, too long to prompt, backend error)
    are ``None`` rewards with the reason in ``info["parse_error"]``, counted in :meth:`metrics` and logged.

    Args:
        generator: the text-generation backend.
        template: prompt and parser; default :class:`KaggleExecutionTemplate`.
        config: budgets and options.

    Example:
        >>> class Echo:  # a stand-in backend that always prints the same report
        ...     name, context_window = "echo", 4096
        ...     def format_chat(self, system, user): return chatml(system, user)
        ...     def count_tokens(self, text): return len(text) // 4
        ...     def generate(self, prompts, max_new_tokens, *, stop=(), constraint=None):
        ...         return [GenerationResult(" valid\\npublic_score: 0.75\\n", "stop") for _ in prompts]
        >>> from wmrl_envs.kaggle.outcome import KaggleContext
        >>> context = KaggleContext("t", "o", "i", "accuracy", True, "binary", "y", "id", ("x",),
        ...                         leaderboard=(0.8, 0.7))
        >>> model = LLMWorldModel(Echo(), config=LLMWorldModelConfig(max_new_tokens=64))
        >>> model.predict([WorldModelQuery(context, "print(1)")])[0].reward
        0.75
    """

    def __init__(
        self,
        generator: TextGenerator,
        template: PromptTemplate | None = None,
        config: LLMWorldModelConfig | None = None,
    ) -> None:
        if not isinstance(generator, TextGenerator):
            raise ConfigError(
                f"generator={generator!r} does not implement TextGenerator (name, context_window, "
                "format_chat, "
                "count_tokens, generate); pass a backend from wmrl_adapters"
            )
        self._generator = generator
        self._template: PromptTemplate = template if template is not None else KaggleExecutionTemplate()
        self._config = config if config is not None else LLMWorldModelConfig()
        self._builder = _PromptBuilder(generator, self._template, self._config, self._config.max_new_tokens)
        if self._builder.budget < 1:
            raise ConfigError(
                f"the backend's context_window={generator.context_window} leaves no room for a prompt "
                "next to "
                f"max_new_tokens={self._config.max_new_tokens}; lower max_new_tokens"
            )
        self._counters = _Counters()
        self.name = f"{self._config.name}:{generator.name}"

    @property
    def config(self) -> LLMWorldModelConfig:
        """The configuration."""
        return self._config

    def metrics(self) -> dict[str, float]:
        """Cumulative counters under ``world_model/`` (predictions, unknown outcomes by cause, tokens)."""
        counters = self._counters
        return {f"world_model/{key}": float(value) for key, value in vars(counters).items()}

    def predict(self, queries: Sequence[WorldModelQuery]) -> list[Prediction]:
        """Predict every query's outcome in one batched backend call; one prediction per query, in order."""
        built = [self._builder.build(index, query, "simulate") for index, query in enumerate(queries)]
        predictions: list[Prediction | None] = [None] * len(queries)
        for item in built:
            if item.prompt is None:
                self._counters.too_long += 1
                logger.warning(
                    "world model %s: query %s is unknown: %s", self.name, queries[item.index].key, item.reason
                )
                info = {"finish_reason": None, "action_cut": item.cut, "completion_tokens": 0}
                predictions[item.index] = Prediction(
                    reward=None, info={**info, "outcome": None, "raw_text": None, "parse_error": item.reason}
                )
        ready = _ordered(built)
        constraint = self._template.simulate_constraint() if self._config.structured else None
        results = self._generator.generate(
            [item.prompt or "" for item in ready],
            self._config.max_new_tokens,
            stop=self._template.stop_strings(),
            constraint=constraint,
        )
        if len(results) != len(ready):
            raise WorldModelError(
                f"backend {self._generator.name!r} returned {len(results)} results for {len(ready)} prompts; "
                "the batch cannot be matched to its queries"
            )
        answer_prefix = self._answer_prefix
        for item, result in zip(ready, results, strict=True):
            query = queries[item.index]
            predictions[item.index] = self._to_prediction(query, result, answer_prefix(query), item.cut)
        self._counters.predictions += len(queries)
        return [prediction for prediction in predictions if prediction is not None]

    def _answer_prefix(self, query: WorldModelQuery) -> str:
        return self._template.simulate_parts(query.context, "").answer_prefix

    def _to_prediction(
        self, query: WorldModelQuery, result: GenerationResult, answer_prefix: str, cut: bool
    ) -> Prediction:
        counters = self._counters
        counters.prompt_tokens += result.prompt_tokens
        counters.completion_tokens += result.completion_tokens
        counters.cut_actions += int(cut)
        base_info = {
            "finish_reason": result.finish_reason,
            "action_cut": cut,
            "completion_tokens": result.completion_tokens,
        }
        if result.finish_reason == "error":
            counters.backend_errors += 1
            reason = f"backend error: {result.error}"
            logger.warning("world model %s: query %s is unknown: %s", self.name, query.key, reason)
            return Prediction(
                reward=None, info={**base_info, "outcome": None, "raw_text": "", "parse_error": reason}
            )
        answer = answer_prefix + result.text
        if result.finish_reason == "length" and not self._template.is_complete(answer):
            counters.truncated_answers += 1
            reason = f"answer cut by the token budget ({self._config.max_new_tokens}) before the report ended"
            logger.info("world model %s: query %s is unknown: %s", self.name, query.key, reason)
            return Prediction(
                reward=None, info={**base_info, "outcome": None, "raw_text": answer, "parse_error": reason}
            )
        prediction = self._template.parse(answer, query.context)
        if prediction.reward is None:
            counters.unparseable += 1
            logger.info(
                "world model %s: query %s is unknown: %s",
                self.name,
                query.key,
                prediction.info.get("parse_error"),
            )
        else:
            counters.parsed += 1
        return replace(prediction, info={**base_info, **prediction.info})


class LLMScoreWorldModel:
    """Score mode: the expected leaderboard-position bucket from one forward pass, no generation.

    The prompt ends with ``Predicted leaderboard position bucket (0-9):``; the backend's next-token
    probabilities over the digit tokens give an expected bucket, its centre a position score, and the
    ladder a reward (as if valid). With ``with_status=True`` a second forward pass reads the status
    distribution from a prompt ending in ``status:`` and the reward is the ladder's expectation over
    statuses. Cheap (no decoding loop), and never unparseable; ``None`` only when the prompt cannot fit
    or the backend exposes none of the labels among its top tokens.

    Args:
        scorer: a backend with next-token probabilities.
        template: prompt and bucket mapping; default :class:`KaggleExecutionTemplate`.
        config: context settings (``max_new_tokens`` is not used beyond one token).
        with_status: also weight by the predicted status distribution (one more forward pass).

    Example:
        >>> class Uniform:  # a stand-in backend: every label equally likely
        ...     name, context_window = "uniform", 4096
        ...     def format_chat(self, system, user): return chatml(system, user)
        ...     def count_tokens(self, text): return len(text) // 4
        ...     def next_token_distribution(self, prompts, candidates):
        ...         uniform = CandidateDistribution((1 / len(candidates),) * len(candidates), 1.0)
        ...         return [uniform for _ in prompts]
        >>> from wmrl_envs.kaggle.outcome import KaggleContext
        >>> context = KaggleContext("t", "o", "i", "accuracy", True, "binary", "y", "id", ("x",))
        >>> LLMScoreWorldModel(Uniform()).predict([WorldModelQuery(context, "print(1)")])[0].reward
        0.75
    """

    def __init__(
        self,
        scorer: ScoreDistribution,
        template: PromptTemplate | None = None,
        config: LLMWorldModelConfig | None = None,
        *,
        with_status: bool = False,
    ) -> None:
        if not isinstance(scorer, ScoreDistribution):
            raise ConfigError(
                f"scorer={scorer!r} does not implement ScoreDistribution (name, context_window, format_chat, "
                "count_tokens, next_token_distribution); pass a backend from wmrl_adapters"
            )
        self._scorer = scorer
        self._template: PromptTemplate = template if template is not None else KaggleExecutionTemplate()
        self._config = config if config is not None else LLMWorldModelConfig(max_new_tokens=1)
        self._builder = _PromptBuilder(scorer, self._template, self._config, 1)
        self._with_status = with_status
        self._counters = _Counters()
        self.name = f"{self._config.name}-score:{scorer.name}"

    def metrics(self) -> dict[str, float]:
        """Cumulative counters under ``world_model/``."""
        return {f"world_model/{key}": float(value) for key, value in vars(self._counters).items()}

    def _distributions(
        self, queries: Sequence[WorldModelQuery], which: Literal["bucket", "status"], labels: Sequence[str]
    ) -> tuple[list[CandidateDistribution | None], list[str | None]]:
        built = [self._builder.build(index, query, which) for index, query in enumerate(queries)]
        self._counters.too_long += sum(item.prompt is None for item in built)
        self._counters.cut_actions += sum(item.cut for item in built if item.prompt is not None)
        reasons: list[str | None] = [item.reason for item in built]
        ready = _ordered(built)
        found = self._scorer.next_token_distribution([item.prompt or "" for item in ready], labels)
        if len(found) != len(ready):
            raise WorldModelError(
                f"backend {self._scorer.name!r} returned {len(found)} distributions for {len(ready)} prompts"
            )
        distributions: list[CandidateDistribution | None] = [None] * len(queries)
        for item, distribution in zip(ready, found, strict=True):
            distributions[item.index] = distribution
            if distribution is None:
                reasons[item.index] = f"the backend's top tokens held none of the labels {list(labels)}"
        return distributions, reasons

    def predict(self, queries: Sequence[WorldModelQuery]) -> list[Prediction]:
        """One prediction per query, in order (one or two batched forward passes)."""
        buckets, reasons = self._distributions(queries, "bucket", self._template.bucket_labels())
        statuses: list[CandidateDistribution | None] = [None] * len(queries)
        if self._with_status:
            statuses, status_reasons = self._distributions(queries, "status", self._template.status_labels())
            reasons = [first or second for first, second in zip(reasons, status_reasons, strict=True)]
        predictions = []
        for query, bucket, status, reason in zip(queries, buckets, statuses, reasons, strict=True):
            self._counters.predictions += 1
            if bucket is None or reason is not None or (self._with_status and status is None):
                self._counters.unparseable += int(bucket is not None or "top tokens" in (reason or ""))
                logger.warning("world model %s: query %s is unknown: %s", self.name, query.key, reason)
                predictions.append(Prediction(reward=None, info={"raw_text": None, "parse_error": reason}))
                continue
            self._counters.parsed += 1
            predictions.append(self._template.bucket_prediction(bucket, status, query.context))
        return predictions
