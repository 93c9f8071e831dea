"""Tests of the vLLM backend's pure parts; the engine test skips here (vLLM needs CUDA).

The request builders and output readers are tested on their own. vLLM's ``RequestOutput`` cannot be
built without vLLM, so the readers get ``SimpleNamespace`` objects with the documented attribute
names (``outputs[0].text``, ``finish_reason``, ``token_ids``, ``logprobs[0][id].decoded_token``).
"""

from __future__ import annotations

import importlib.util
import math
import re
from types import SimpleNamespace

import pytest
from wmrl_adapters.vllm_backend import (
    VLLMBackend,
    VLLMConfig,
    result_from_output,
    sampling_kwargs,
    score_kwargs,
    top_logprobs_from_output,
)

from wmrl_algos.errors import ConfigError, MissingDependencyError
from wmrl_envs.kaggle.world_models.llm import (
    KaggleExecutionTemplate,
    OutputConstraint,
    distribution_from_logprobs,
)

HAS_VLLM = importlib.util.find_spec("vllm") is not None


def _has_cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def test_report_regex_is_what_guided_decoding_receives() -> None:
    constraint = KaggleExecutionTemplate().simulate_constraint()
    kwargs = sampling_kwargs(1024, ("=== end of report ===",), constraint)
    assert kwargs["structured_outputs"] == {"regex": constraint.regex}
    assert kwargs["temperature"] == 0.0 and kwargs["max_tokens"] == 1024
    assert kwargs["stop"] == ["=== end of report ==="]
    re.compile(kwargs["structured_outputs"]["regex"])


@pytest.mark.parametrize(
    ("constraint", "expected"),
    [
        (None, None),
        (OutputConstraint(json_schema={"type": "object"}), {"json": {"type": "object"}}),
        (OutputConstraint(gbnf='root ::= "a"'), {"grammar": 'root ::= "a"'}),
        (OutputConstraint(), None),
    ],
)
def test_constraint_falls_back_from_regex_to_json_to_grammar(
    constraint: OutputConstraint | None, expected: dict[str, object] | None
) -> None:
    assert sampling_kwargs(8, (), constraint).get("structured_outputs") == expected


def test_zero_token_budget_is_rejected() -> None:
    with pytest.raises(ConfigError, match="max_new_tokens=0"):
        sampling_kwargs(0)


def test_score_request_asks_one_token_with_top_logprobs() -> None:
    assert score_kwargs(20) == {"max_tokens": 1, "temperature": 0.0, "logprobs": 20}


def test_output_reader_keeps_text_finish_reason_and_token_counts() -> None:
    output = SimpleNamespace(
        prompt_token_ids=[1, 2, 3],
        outputs=[SimpleNamespace(text=" valid\n", finish_reason="length", token_ids=[7, 8], logprobs=None)],
    )
    result = result_from_output(output)
    assert (result.text, result.finish_reason, result.prompt_tokens, result.completion_tokens) == (
        " valid\n",
        "length",
        3,
        2,
    )
    stopped = SimpleNamespace(
        prompt_token_ids=[1], outputs=[SimpleNamespace(text="x", finish_reason="stop", token_ids=[1])]
    )
    assert result_from_output(stopped).finish_reason == "stop"


def test_logprob_reader_feeds_the_bucket_distribution() -> None:
    entry = SimpleNamespace
    output = SimpleNamespace(
        outputs=[
            SimpleNamespace(
                logprobs=[
                    {
                        17: entry(decoded_token="7", logprob=math.log(0.6)),
                        3: entry(decoded_token="3", logprob=math.log(0.2)),
                        99: entry(decoded_token="The", logprob=math.log(0.1)),
                    }
                ]
            )
        ]
    )
    top = top_logprobs_from_output(output)
    assert top["7"] == pytest.approx(math.log(0.6))
    found = distribution_from_logprobs(top, [str(k) for k in range(10)])
    assert found is not None and found.probabilities[7] == pytest.approx(0.75)
    assert top_logprobs_from_output(SimpleNamespace(outputs=[SimpleNamespace(logprobs=None)])) == {}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": ""}, "model=''"),
        ({"model": "m", "max_model_len": 8}, "max_model_len=8"),
        ({"model": "m", "gpu_memory_utilization": 1.5}, "gpu_memory_utilization=1.5"),
        ({"model": "m", "tensor_parallel_size": 0}, "tensor_parallel_size=0"),
        ({"model": "m", "top_logprobs": 0}, "top_logprobs=0"),
    ],
)
def test_invalid_engine_settings_name_the_value(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        VLLMConfig(**kwargs)  # type: ignore[arg-type]


@pytest.mark.skipif(
    HAS_VLLM, reason="vLLM is installed here; the missing-dependency path cannot be exercised"
)
def test_missing_vllm_names_the_pip_extra() -> None:
    with pytest.raises(MissingDependencyError, match=r"wmrl\[vllm\]"):
        VLLMBackend(VLLMConfig(model="anything"))


@pytest.mark.llm
@pytest.mark.integration
@pytest.mark.skipif(
    not HAS_VLLM or not _has_cuda(), reason="vLLM needs CUDA and a CUDA build of vLLM; unavailable here"
)
def test_engine_generates_reports_and_bucket_distributions() -> None:
    from wmrl_adapters.models import dequantised_model_dir

    from wmrl_envs.kaggle.outcome import KaggleContext
    from wmrl_envs.kaggle.world_models.llm import LLMScoreWorldModel, LLMWorldModel, LLMWorldModelConfig
    from wmrl_envs.world_model import WorldModelQuery

    backend = VLLMBackend(
        VLLMConfig(model=str(dequantised_model_dir()), max_model_len=4096, gpu_memory_utilization=0.3)
    )
    context = KaggleContext(
        "t",
        "Predict y.",
        "train.csv 100x3",
        "accuracy",
        True,
        "binary",
        "y",
        "id",
        ("x",),
        leaderboard=(0.9, 0.8),
    )
    queries = [WorldModelQuery(context, "print('hello')") for _ in range(4)]
    predictions = LLMWorldModel(backend, config=LLMWorldModelConfig(max_new_tokens=256)).predict(queries)
    assert len(predictions) == 4
    assert all(p.info["outcome"] is not None for p in predictions if p.info["finish_reason"] == "stop")
    scores = LLMScoreWorldModel(backend).predict(queries)
    assert all(p.reward is not None and 0.5 <= p.reward <= 1.0 for p in scores)
