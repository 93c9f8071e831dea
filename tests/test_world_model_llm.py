"""Tests of the LLM world models' core: prompts, truncation, parsing, unknown outcomes, score mode.

The backend here is a scripted one (``ScriptedBackend``) on purpose: these tests need exact control of
what "the model" answers (a clean report, prose, a budget-cut ramble, a backend error), which no real
model gives. The real backends run the same paths in test_transformers_backend.py and
test_openai_backend.py.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence

import pytest

from wmrl_algos.errors import ConfigError, WorldModelError
from wmrl_envs.kaggle.feedback import parse_feedback
from wmrl_envs.kaggle.outcome import KaggleContext, Outcome, RewardLadder, position_score
from wmrl_envs.kaggle.world_models.llm import (
    REPORT_END,
    CandidateDistribution,
    GenerationResult,
    KaggleExecutionTemplate,
    LLMScoreWorldModel,
    LLMWorldModel,
    LLMWorldModelConfig,
    OutputConstraint,
    ScoreDistribution,
    TextGenerator,
    chatml,
    distribution_from_logprobs,
    truncate_middle,
)
from wmrl_envs.world_model import WorldModel, WorldModelQuery

LEADERBOARD = (0.95, 0.9, 0.85, 0.8, 0.7, 0.6)


def make_context(competition: str = "titanic", **overrides: object) -> KaggleContext:
    fields: dict[str, object] = {
        "competition_id": competition,
        "overview": f"Predict who survived ({competition}).",
        "inventory": "train.csv: 891 rows x 12 columns\ntest.csv: 418 rows",
        "metric": "accuracy",
        "higher_is_better": True,
        "task_type": "binary",
        "target": "Survived",
        "id_column": "PassengerId",
        "feature_columns": ("Age", "Sex"),
        "leaderboard": LEADERBOARD,
    }
    fields.update(overrides)
    return KaggleContext(**fields)  # type: ignore[arg-type]


def report_body(status: str, score: str) -> str:
    """What a well-behaved model generates after the forced prefix ``...status:``."""
    return (
        f" {status}\nexit_code: 0\nwall_time_s: 3.0\npublic_score: {score}\n"
        "--- stdout (tail) ---\nok\n--- stderr (tail) ---\n"
    )


class ScriptedBackend:
    """A backend whose answers are chosen by a function of the prompt (see the module docstring)."""

    name = "scripted"

    def __init__(self, answer, context_window: int = 4096) -> None:  # type: ignore[no-untyped-def]
        self.answer = answer
        self.context_window = context_window
        self.calls: list[list[str]] = []
        self.constraints: list[OutputConstraint | None] = []
        self.stops: list[tuple[str, ...]] = []

    def format_chat(self, system: str, user: str) -> str:
        return chatml(system, user)

    def count_tokens(self, text: str) -> int:
        return math.ceil(len(text) / 4)

    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int,
        *,
        stop: Sequence[str] = (),
        constraint: OutputConstraint | None = None,
    ) -> list[GenerationResult]:
        self.calls.append(list(prompts))
        self.constraints.append(constraint)
        self.stops.append(tuple(stop))
        return [self.answer(prompt) for prompt in prompts]

    def next_token_distribution(
        self, prompts: Sequence[str], candidates: Sequence[str]
    ) -> list[CandidateDistribution | None]:
        self.calls.append(list(prompts))
        return [self.answer(prompt, candidates) for prompt in prompts]


def test_scripted_backend_satisfies_both_protocols_and_world_models_satisfy_world_model() -> None:
    backend = ScriptedBackend(lambda prompt: GenerationResult(report_body("valid", "0.9"), "stop"))
    assert isinstance(backend, TextGenerator)
    assert isinstance(backend, ScoreDistribution)
    assert isinstance(LLMWorldModel(backend), WorldModel)
    assert isinstance(LLMScoreWorldModel(backend), WorldModel)


def test_valid_report_becomes_ladder_reward_of_its_leaderboard_position() -> None:
    backend = ScriptedBackend(lambda prompt: GenerationResult(report_body("valid", "0.87"), "stop", 100, 30))
    model = LLMWorldModel(backend, config=LLMWorldModelConfig(max_new_tokens=128))
    context = make_context()
    [prediction] = model.predict([WorldModelQuery(context, "```python\nprint(1)\n```", key="g0/t0")])
    expected = RewardLadder().reward("valid", position_score(0.87, LEADERBOARD, True))
    assert prediction.reward == pytest.approx(expected)
    outcome = prediction.info["outcome"]
    assert isinstance(outcome, Outcome) and outcome.status == "valid" and outcome.public_score == 0.87
    assert parse_feedback(prediction.observation).public_score == 0.87
    assert prediction.info["parse_error"] is None
    assert prediction.info["raw_text"].startswith("=== execution report ===\nstatus: valid")
    assert model.metrics()["world_model/parsed"] == 1.0
    assert model.metrics()["world_model/completion_tokens"] == 30.0


@pytest.mark.parametrize(
    ("status", "expected"), [("syntax_error", 0.0), ("runtime_error", 0.1), ("no_submission", 0.2)]
)
def test_failed_statuses_map_to_their_ladder_rungs(status: str, expected: float) -> None:
    backend = ScriptedBackend(lambda prompt: GenerationResult(report_body(status, "none"), "stop"))
    [prediction] = LLMWorldModel(backend).predict([WorldModelQuery(make_context(), "x")])
    assert prediction.reward == expected


def test_prose_answer_is_unknown_not_zero_and_is_counted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    backend = ScriptedBackend(lambda prompt: GenerationResult(" I think this code will work well!", "stop"))
    model = LLMWorldModel(backend)
    with caplog.at_level(logging.INFO, logger="wmrl_envs.kaggle.world_models.llm"):
        [prediction] = model.predict([WorldModelQuery(make_context(), "x", key="g1/t2")])
    assert prediction.reward is None
    assert prediction.observation is None
    assert prediction.info["parse_error"]
    assert model.metrics()["world_model/unparseable"] == 1.0
    assert "g1/t2" in caplog.text


def test_rambling_past_the_budget_without_report_end_is_unknown() -> None:
    ramble = (
        " valid\nexit_code: 0\nwall_time_s: 3.0\npublic_score: 0.9\n--- stdout (tail) ---\n" + "epoch\n" * 50
    )
    backend = ScriptedBackend(lambda prompt: GenerationResult(ramble, "length", 100, 64))
    model = LLMWorldModel(backend, config=LLMWorldModelConfig(max_new_tokens=64))
    [prediction] = model.predict([WorldModelQuery(make_context(), "x")])
    assert prediction.reward is None
    assert "token budget" in prediction.info["parse_error"]
    assert model.metrics()["world_model/truncated_answers"] == 1.0


def test_budget_cut_answer_that_already_finished_its_report_is_still_read() -> None:
    complete = report_body("valid", "0.9") + REPORT_END + "\nextra words"
    backend = ScriptedBackend(lambda prompt: GenerationResult(complete, "length"))
    [prediction] = LLMWorldModel(backend).predict([WorldModelQuery(make_context(), "x")])
    assert prediction.reward == pytest.approx(
        RewardLadder().reward("valid", position_score(0.9, LEADERBOARD, True))
    )


def test_backend_error_is_unknown_with_its_reason() -> None:
    backend = ScriptedBackend(lambda prompt: GenerationResult("", "error", error="timed out after 3 tries"))
    model = LLMWorldModel(backend)
    [prediction] = model.predict([WorldModelQuery(make_context(), "x")])
    assert prediction.reward is None
    assert "timed out" in prediction.info["parse_error"]
    assert model.metrics()["world_model/backend_errors"] == 1.0


def test_predictions_keep_query_order_while_prompts_are_grouped_by_task_prefix() -> None:
    def answer(prompt: str) -> GenerationResult:
        score = re.search(r"SCORE=(\d\.\d+)", prompt)
        assert score is not None
        return GenerationResult(report_body("valid", score.group(1)), "stop")

    backend = ScriptedBackend(answer)
    contexts = [make_context("alpha"), make_context("beta")]
    queries = [WorldModelQuery(contexts[i % 2], f"SCORE=0.{60 + i}" + " pad" * (10 - i)) for i in range(8)]
    predictions = LLMWorldModel(backend).predict(queries)
    scores = [p.info["outcome"].public_score for p in predictions]
    assert scores == [float(f"0.{60 + i}") for i in range(8)]
    sent = backend.calls[0]
    groups = ["alpha" if "Competition: alpha" in prompt else "beta" for prompt in sent]
    assert groups == ["alpha"] * 4 + ["beta"] * 4
    prefix = sent[0][: sent[0].index("## Execution 0")]
    assert all(prompt.startswith(prefix) for prompt in sent[:4])


def test_task_prefix_comes_before_the_action_and_format_is_few_shot() -> None:
    backend = ScriptedBackend(lambda prompt: GenerationResult(report_body("valid", "0.9"), "stop"))
    LLMWorldModel(backend).predict([WorldModelQuery(make_context(), "MY_SOLUTION_TEXT")])
    prompt = backend.calls[0][0]
    assert prompt.index("Data inventory") < prompt.index("MY_SOLUTION_TEXT")
    assert prompt.count("=== execution report ===") >= 3
    assert prompt.endswith("=== execution report ===\nstatus:")
    assert backend.stops[0] == (REPORT_END,)


def test_structured_mode_sends_a_report_grammar_that_accepts_only_parseable_reports() -> None:
    backend = ScriptedBackend(lambda prompt: GenerationResult(report_body("valid", "0.9"), "stop"))
    LLMWorldModel(backend).predict([WorldModelQuery(make_context(), "x")])
    constraint = backend.constraints[0]
    assert constraint is not None and constraint.regex and constraint.gbnf
    assert re.fullmatch(constraint.regex, report_body("valid", "0.9") + REPORT_END)
    assert re.fullmatch(constraint.regex, report_body("runtime_error", "none") + REPORT_END)
    assert not re.fullmatch(constraint.regex, " great solution!")
    assert not re.fullmatch(constraint.regex, report_body("valid", "none") + REPORT_END)
    assert not re.fullmatch(constraint.regex, report_body("runtime_error", "0.5") + REPORT_END)
    LLMWorldModel(backend, config=LLMWorldModelConfig(structured=False)).predict(
        [WorldModelQuery(make_context(), "x")]
    )
    assert backend.constraints[1] is None


def test_history_of_the_episode_is_shown_to_the_model() -> None:
    backend = ScriptedBackend(lambda prompt: GenerationResult(report_body("valid", "0.9"), "stop"))
    context = make_context(turn=1, history=("=== execution report ===\nstatus: runtime_error\nPREVIOUS_LOG",))
    LLMWorldModel(backend).predict([WorldModelQuery(context, "x")])
    assert "PREVIOUS_LOG" in backend.calls[0][0]


def test_solution_longer_than_the_context_is_cut_in_the_middle_to_fit() -> None:
    backend = ScriptedBackend(
        lambda prompt: GenerationResult(report_body("valid", "0.9"), "stop"), context_window=2048
    )
    config = LLMWorldModelConfig(max_new_tokens=256)
    model = LLMWorldModel(backend, config=config)
    solution = "import pandas as pd  # HEAD\n" + "x = 1\n" * 3000 + "df.to_csv('submission.csv')  # TAIL\n"
    [prediction] = model.predict([WorldModelQuery(make_context(), solution)])
    prompt = backend.calls[0][0]
    assert backend.count_tokens(prompt) <= 2048 - 256
    assert "# HEAD" in prompt and "# TAIL" in prompt and "characters cut to fit the context" in prompt
    assert prediction.reward is not None and prediction.info["action_cut"] is True
    assert model.metrics()["world_model/cut_actions"] == 1.0


def test_prompt_that_cannot_fit_even_when_cut_is_unknown_and_never_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = ScriptedBackend(
        lambda prompt: GenerationResult(report_body("valid", "0.9"), "stop"), context_window=1200
    )
    model = LLMWorldModel(backend, config=LLMWorldModelConfig(max_new_tokens=256))
    huge_overview = make_context(overview="words " * 4000)
    with caplog.at_level(logging.WARNING):
        predictions = model.predict(
            [WorldModelQuery(huge_overview, "x" * 500), WorldModelQuery(make_context(), "y")]
        )
    assert predictions[0].reward is None and "tokens" in predictions[0].info["parse_error"]
    assert predictions[1].reward is not None
    assert len(backend.calls[0]) == 1
    assert model.metrics()["world_model/too_long"] == 1.0
    assert "unknown" in caplog.text


def test_backend_returning_the_wrong_count_is_a_world_model_error() -> None:
    class Short(ScriptedBackend):
        def generate(self, prompts, max_new_tokens, *, stop=(), constraint=None):  # type: ignore[no-untyped-def]
            return super().generate(prompts, max_new_tokens, stop=stop, constraint=constraint)[:-1]

    backend = Short(lambda prompt: GenerationResult(report_body("valid", "0.9"), "stop"))
    with pytest.raises(WorldModelError, match="returned 1 results for 2 prompts"):
        LLMWorldModel(backend).predict(
            [WorldModelQuery(make_context(), "a"), WorldModelQuery(make_context(), "b")]
        )


def test_non_backend_is_rejected_with_the_fix() -> None:
    with pytest.raises(ConfigError, match="does not implement TextGenerator"):
        LLMWorldModel(object())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_new_tokens": 0}, "max_new_tokens=0"),
        ({"max_new_tokens": 512, "context_window": 512}, "context_window=512"),
        ({"min_action_chars": 0}, "min_action_chars=0"),
        ({"safety_margin_tokens": -1}, "safety_margin_tokens=-1"),
    ],
)
def test_invalid_config_names_the_value(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        LLMWorldModelConfig(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"history_turns": -1}, "history_turns=-1"),
        ({"history_chars": 10}, "history_chars=10"),
        ({"buckets": 11}, "buckets=11"),
    ],
)
def test_invalid_template_settings_name_the_value(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        KaggleExecutionTemplate(**kwargs)  # type: ignore[arg-type]


def test_max_new_tokens_larger_than_the_backend_window_is_rejected_at_construction() -> None:
    backend = ScriptedBackend(lambda prompt: GenerationResult("", "stop"), context_window=512)
    with pytest.raises(ConfigError, match="lower max_new_tokens"):
        LLMWorldModel(backend, config=LLMWorldModelConfig(max_new_tokens=1024))


@pytest.mark.parametrize("keep", [10, 16, 25, 59])
def test_truncate_middle_keeps_head_and_tail_within_the_budget(keep: int) -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(60))
    cut = truncate_middle(text, keep, marker="<{cut}>")
    assert len(cut) <= keep
    assert cut.startswith(text[:3]) and cut.endswith(text[-3:])
    removed = int(re.search(r"<(\d+)>", cut).group(1))  # type: ignore[union-attr]
    assert len(cut) - len(f"<{removed}>") + removed == len(text)


def test_truncate_middle_leaves_short_text_alone_and_rejects_room_for_no_marker() -> None:
    assert truncate_middle("short", 10) == "short"
    with pytest.raises(ConfigError, match="keep_chars=3"):
        truncate_middle("a" * 50, 3)


def test_logprob_tokens_count_for_the_one_label_they_start() -> None:
    top = {" mal": math.log(0.2), "valid": math.log(0.5), " ": math.log(0.2), "v": math.log(0.05)}
    labels = ("malformed", "syntax_error", "runtime_error", "no_submission", "valid")
    found = distribution_from_logprobs(top, labels)
    assert found is not None
    assert found.probabilities[0] == pytest.approx(0.2 / 0.75)
    assert found.probabilities[4] == pytest.approx(0.55 / 0.75)
    assert found.covered_mass == pytest.approx(0.75)
    assert distribution_from_logprobs({"hello": 0.0}, labels) is None


def bucket_backend(
    probabilities: Sequence[float] | None, statuses: Sequence[float] | None = None
) -> ScriptedBackend:
    def answer(prompt: str, candidates: Sequence[str]) -> CandidateDistribution | None:
        chosen = statuses if candidates[0] == "malformed" else probabilities
        return None if chosen is None else CandidateDistribution(tuple(chosen), 0.9)

    return ScriptedBackend(answer)


def test_score_mode_maps_expected_bucket_to_position_and_reward() -> None:
    certain_top = [0.0] * 9 + [1.0]
    [top] = LLMScoreWorldModel(bucket_backend(certain_top)).predict([WorldModelQuery(make_context(), "x")])
    assert top.reward == pytest.approx(0.5 + 0.5 * 0.95)
    split = [0.5] + [0.0] * 8 + [0.5]
    [middle] = LLMScoreWorldModel(bucket_backend(split)).predict([WorldModelQuery(make_context(), "x")])
    assert middle.info["expected_bucket"] == pytest.approx(4.5)
    assert middle.reward == pytest.approx(0.75)


def test_score_prompt_ends_with_the_bucket_question() -> None:
    backend = bucket_backend([0.1] * 10)
    LLMScoreWorldModel(backend).predict([WorldModelQuery(make_context(), "x")])
    assert backend.calls[0][0].endswith("Predicted leaderboard position bucket (0-9): ")


def test_status_variant_takes_the_ladder_expectation_over_statuses() -> None:
    buckets = [0.0] * 9 + [1.0]
    statuses = [0.0, 0.0, 0.5, 0.0, 0.5]
    model = LLMScoreWorldModel(bucket_backend(buckets, statuses), with_status=True)
    [prediction] = model.predict([WorldModelQuery(make_context(), "x")])
    assert prediction.reward == pytest.approx(0.5 * 0.1 + 0.5 * (0.5 + 0.5 * 0.95))
    assert prediction.info["status_probabilities"]["runtime_error"] == 0.5


def test_score_mode_without_any_label_in_top_tokens_is_unknown() -> None:
    model = LLMScoreWorldModel(bucket_backend(None))
    [prediction] = model.predict([WorldModelQuery(make_context(), "x")])
    assert prediction.reward is None and "labels" in prediction.info["parse_error"]
    assert model.metrics()["world_model/unparseable"] == 1.0


class EchoTemplate:
    """A non-Kaggle template: the env is 'echo the action's number'; proves the model is template-generic."""

    def action_text(self, action: object) -> str:
        return str(action)

    def simulate_parts(self, context: object, action_text: str):  # type: ignore[no-untyped-def]
        from wmrl_envs.kaggle.world_models.llm import PromptParts

        return PromptParts("sys", f"env {context}\n", action_text, "reward=")

    def simulate_constraint(self) -> None:
        return None

    def stop_strings(self) -> tuple[str, ...]:
        return ("\n",)

    def is_complete(self, answer: str) -> bool:
        return True

    def parse(self, answer: str, context: object):  # type: ignore[no-untyped-def]
        from wmrl_envs.world_model import Prediction

        return Prediction(reward=float(answer.removeprefix("reward=")))

    bucket_parts = simulate_parts

    def bucket_labels(self) -> tuple[str, ...]:
        return ("0", "1")

    def bucket_prediction(self, buckets, statuses, context):  # type: ignore[no-untyped-def]
        from wmrl_envs.world_model import Prediction

        return Prediction(reward=buckets.probabilities[1])

    status_parts = simulate_parts

    def status_labels(self) -> tuple[str, ...]:
        return ("a", "b")


def test_a_non_kaggle_env_can_supply_its_own_template() -> None:
    backend = ScriptedBackend(lambda prompt: GenerationResult("0.25", "stop"))
    [prediction] = LLMWorldModel(backend, template=EchoTemplate()).predict(
        [WorldModelQuery("cartpole", "push")]
    )
    assert prediction.reward == 0.25
    assert backend.calls[0][0].endswith("reward=")
