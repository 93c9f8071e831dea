"""The vLLM offline-engine backend of the LLM world models (GPU).

Why vLLM: on a GPU it is the fastest way to run the paper's setting (the policy's own backbone as the
world model, 12k-token prompts, 1024-token reports): continuous batching decodes a whole group of
predictions at once, automatic prefix caching computes the shared task prefix (system message,
overview, data inventory) once per batch, and guided decoding forces the report format so almost no
answer is unparseable.

vLLM needs CUDA; nothing here runs it on a CPU. The request building and the reading of its outputs
are pure functions (:func:`sampling_kwargs`, :func:`score_kwargs`, :func:`result_from_output`,
:func:`top_logprobs_from_output`) so they are tested without vLLM; the engine itself is written
against vLLM's documented offline API (``vllm.LLM``, ``SamplingParams`` with
``structured_outputs=StructuredOutputsParams(...)``, or ``guided_decoding=GuidedDecodingParams(...)``
on versions before the rename).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from wmrl_algos.errors import BackendUnavailableError, ConfigError, require
from wmrl_envs.kaggle.world_models.llm import (
    CandidateDistribution,
    FinishReason,
    GenerationResult,
    OutputConstraint,
    chatml,
    distribution_from_logprobs,
)

__all__ = [
    "VLLMConfig",
    "VLLMBackend",
    "sampling_kwargs",
    "score_kwargs",
    "result_from_output",
    "top_logprobs_from_output",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class VLLMConfig:
    """Settings of :class:`VLLMBackend`.

    Attributes:
        model: a local model folder (or hub id where a hub is reachable).
        max_model_len: the engine's context window in tokens (the paper: 12k prompt + 1k answer).
        gpu_memory_utilization: GPU memory fraction vLLM may take (lower it when the policy shares the GPU).
        tensor_parallel_size: GPUs to shard the model over.
        enable_prefix_caching: reuse the KV cache of the shared task prefix across prompts (keep it on).
        dtype: weights dtype (``auto`` takes the checkpoint's).
        chat_format: ``tokenizer`` uses the model's own chat template; ``chatml`` / ``plain`` render by hand.
        top_logprobs: top next tokens read in score mode.
        seed: the engine's seed.
        name: the backend's name in logs and metrics.

    Example:
        >>> VLLMConfig(model="Qwen/Qwen3-4B", max_model_len=13312).enable_prefix_caching
        True
    """

    model: str
    max_model_len: int = 13312
    gpu_memory_utilization: float = 0.85
    tensor_parallel_size: int = 1
    enable_prefix_caching: bool = True
    dtype: str = "auto"
    chat_format: Literal["tokenizer", "chatml", "plain"] = "tokenizer"
    top_logprobs: int = 20
    seed: int = 0
    name: str = "vllm"

    def __post_init__(self) -> None:
        if not self.model:
            raise ConfigError("model='' : pass a model folder or id, e.g. VLLMConfig(model='Qwen/Qwen3-4B')")
        if self.max_model_len < 16:
            raise ConfigError(f"max_model_len={self.max_model_len} is too small (the paper uses 12k + 1k)")
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise ConfigError(f"gpu_memory_utilization={self.gpu_memory_utilization} must be in (0, 1]")
        if self.tensor_parallel_size < 1:
            raise ConfigError(f"tensor_parallel_size={self.tensor_parallel_size} must be >= 1")
        if not 1 <= self.top_logprobs <= 100:
            raise ConfigError(f"top_logprobs={self.top_logprobs} must be in [1, 100]")
        if self.chat_format not in ("tokenizer", "chatml", "plain"):
            raise ConfigError(f"chat_format={self.chat_format!r} must be 'tokenizer', 'chatml' or 'plain'")


def sampling_kwargs(
    max_new_tokens: int, stop: Sequence[str] = (), constraint: OutputConstraint | None = None
) -> dict[str, Any]:
    """Keyword arguments of a greedy ``SamplingParams``; the constraint under ``structured_outputs``.

    A regex is preferred (it pins the report format exactly), then a JSON schema, then a grammar.

    >>> sampling_kwargs(64, ("END",), OutputConstraint(regex="a+", gbnf="root ::= 'a'"))
    {'max_tokens': 64, 'temperature': 0.0, 'stop': ['END'], 'structured_outputs': {'regex': 'a+'}}
    """
    if max_new_tokens < 1:
        raise ConfigError(f"max_new_tokens={max_new_tokens} must be >= 1")
    kwargs: dict[str, Any] = {"max_tokens": max_new_tokens, "temperature": 0.0}
    if stop:
        kwargs["stop"] = list(stop)
    if constraint is not None:
        if constraint.regex:
            kwargs["structured_outputs"] = {"regex": constraint.regex}
        elif constraint.json_schema is not None:
            kwargs["structured_outputs"] = {"json": dict(constraint.json_schema)}
        elif constraint.gbnf:
            kwargs["structured_outputs"] = {"grammar": constraint.gbnf}
    return kwargs


def score_kwargs(top_logprobs: int) -> dict[str, Any]:
    """Keyword arguments of the one-token ``SamplingParams`` that exposes the top next-token log-probs.

    >>> score_kwargs(20)
    {'max_tokens': 1, 'temperature': 0.0, 'logprobs': 20}
    """
    return {"max_tokens": 1, "temperature": 0.0, "logprobs": top_logprobs}


def result_from_output(output: Any) -> GenerationResult:
    """A :class:`GenerationResult` from one vLLM ``RequestOutput`` (first completion)."""
    completion = output.outputs[0]
    finish: FinishReason = "length" if completion.finish_reason == "length" else "stop"
    return GenerationResult(
        text=completion.text,
        finish_reason=finish,
        prompt_tokens=len(output.prompt_token_ids or ()),
        completion_tokens=len(completion.token_ids or ()),
    )


def top_logprobs_from_output(output: Any) -> dict[str, float]:
    """Decoded token → log-probability at the first generated position of a vLLM ``RequestOutput``."""
    positions = output.outputs[0].logprobs or []
    if not positions:
        return {}
    found: dict[str, float] = {}
    for token_id, entry in positions[0].items():
        text = entry.decoded_token if entry.decoded_token is not None else str(token_id)
        found[text] = max(found.get(text, float("-inf")), float(entry.logprob))
    return found


def _sampling_params(vllm: Any, kwargs: dict[str, Any]) -> Any:
    """Build ``SamplingParams``, mapping ``structured_outputs`` onto whichever API this vLLM has."""
    kwargs = dict(kwargs)
    structured = kwargs.pop("structured_outputs", None)
    if structured is not None:
        module = importlib.import_module("vllm.sampling_params")
        if hasattr(module, "StructuredOutputsParams"):
            kwargs["structured_outputs"] = module.StructuredOutputsParams(**structured)
        else:
            kwargs["guided_decoding"] = module.GuidedDecodingParams(**structured)
    return vllm.SamplingParams(**kwargs)


class VLLMBackend:
    """vLLM's offline engine behind the world-model backend protocols (generation and next-token scores).

    Args:
        config: the model and engine settings.
        llm: an already built ``vllm.LLM`` (e.g. shared with the policy's rollout engine).

    Raises:
        MissingDependencyError: vLLM is not installed (extra ``vllm``).
        BackendUnavailableError: no CUDA device is visible (vLLM cannot run on this machine).

    Example:
        >>> backend = VLLMBackend(VLLMConfig(model="Qwen/Qwen3-4B"))  # doctest: +SKIP
        >>> LLMWorldModel(backend).predict(queries)  # doctest: +SKIP
    """

    def __init__(self, config: VLLMConfig, *, llm: Any = None) -> None:
        self._config = config
        self._vllm = require("vllm", "vllm")
        if llm is None:
            torch = require("torch", "vllm")
            if not torch.cuda.is_available():
                raise BackendUnavailableError(
                    "vLLM needs a CUDA GPU and none is visible here; use the transformers backend "
                    "(wmrl_adapters.transformers_backend) or an OpenAI-compatible server instead"
                )
            llm = self._vllm.LLM(
                model=config.model,
                max_model_len=config.max_model_len,
                gpu_memory_utilization=config.gpu_memory_utilization,
                tensor_parallel_size=config.tensor_parallel_size,
                enable_prefix_caching=config.enable_prefix_caching,
                dtype=config.dtype,
                seed=config.seed,
            )
        self._llm = llm
        self._tokenizer = llm.get_tokenizer()
        self.context_window: int = config.max_model_len
        self.name: str = config.name

    @property
    def config(self) -> VLLMConfig:
        """The configuration."""
        return self._config

    def format_chat(self, system: str, user: str) -> str:
        """The model's chat template (or ChatML / plain), up to the start of the assistant's turn."""
        if self._config.chat_format == "chatml":
            return chatml(system, user)
        if self._config.chat_format == "plain":
            return f"{system}\n\n{user}\n\n"
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return str(self._tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))

    def count_tokens(self, text: str) -> int:
        """Exact token count with the engine's tokenizer."""
        return len(self._tokenizer.encode(text, add_special_tokens=False))

    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int,
        *,
        stop: Sequence[str] = (),
        constraint: OutputConstraint | None = None,
    ) -> list[GenerationResult]:
        """All prompts in one engine call (continuous batching, prefix caching, guided decoding)."""
        params = _sampling_params(self._vllm, sampling_kwargs(max_new_tokens, stop, constraint))
        try:
            outputs = self._llm.generate(list(prompts), params, use_tqdm=False)
        except (RuntimeError, ValueError) as exc:
            logger.warning("vLLM generation failed for %d prompts: %s", len(prompts), exc)
            return [GenerationResult("", "error", error=f"{type(exc).__name__}: {exc}") for _ in prompts]
        return [result_from_output(output) for output in outputs]

    def next_token_distribution(
        self, prompts: Sequence[str], candidates: Sequence[str]
    ) -> list[CandidateDistribution | None]:
        """Candidate probabilities from the top ``top_logprobs`` of a one-token generation."""
        params = _sampling_params(self._vllm, score_kwargs(self._config.top_logprobs))
        outputs = self._llm.generate(list(prompts), params, use_tqdm=False)
        return [
            distribution_from_logprobs(top_logprobs_from_output(output), candidates) for output in outputs
        ]
