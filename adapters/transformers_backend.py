"""The transformers backend of the LLM world models: batched generation and next-token scores, CPU or GPU.

Why it is the default: it needs nothing but pip-installed packages and runs on any machine, including
these CPU-only ones, from the offline SmolLM2-135M-Instruct weights (see :mod:`wmrl_adapters.models`).
It implements both :class:`~wmrl_envs.kaggle.world_models.llm.TextGenerator` (left-padded batched greedy
generation with stop strings, so a batch of prompts costs about one long prompt) and
:class:`~wmrl_envs.kaggle.world_models.llm.ScoreDistribution` (one forward pass, softmax over the candidate
label tokens). transformers has no prefix cache across calls, so batches are only as cheap as their
padding: the world models send prompts grouped by task prefix and sorted by length.

Structured output is the forced answer prefix (the prompt ends inside the report); grammars are not
enforced here (vLLM and llama.cpp enforce them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from wmrl_algos.errors import ConfigError, WorldModelError, require
from wmrl_envs.kaggle.world_models.llm import CandidateDistribution, GenerationResult, OutputConstraint

__all__ = ["TransformersConfig", "TransformersBackend"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TransformersConfig:
    """Settings of :class:`TransformersBackend`.

    Attributes:
        model: a local folder (or hub id, if a hub is reachable) for ``from_pretrained``; ``None`` uses the
            offline SmolLM2-135M-Instruct (dequantised once into ``~/.cache/wmrl/models``).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...
        dtype: weights dtype; ``float32`` on CPU (bf16 matmuls are slow on most CPUs), ``bfloat16`` on GPU.
        batch_size: prompts per forward pass; larger batches raise throughput until memory or padding bite.
        context_window: tokens of prompt plus answer; ``None`` uses the model's ``max_position_embeddings``.
        num_threads: torch CPU threads; ``None`` leaves torch's default.
        name: the backend's name in logs and metrics.
    """

    model: str | None = None
    device: str = "cpu"
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    batch_size: int = 8
    context_window: int | None = None
    num_threads: int | None = None
    name: str = field(default="transformers")

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ConfigError(f"batch_size={self.batch_size} must be >= 1 (try 8 on CPU, 32+ on GPU)")
        if self.context_window is not None and self.context_window < 16:
            raise ConfigError(f"context_window={self.context_window} is too small; use >= 16 or None")
        if self.num_threads is not None and self.num_threads < 1:
            raise ConfigError(f"num_threads={self.num_threads} must be >= 1 or None")
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ConfigError(f"dtype={self.dtype!r} must be 'float32', 'bfloat16' or 'float16'")


class TransformersBackend:
    """A causal LM behind the world-model backend protocols (generation and next-token scores).

    Args:
        config: settings; default loads the offline SmolLM2-135M-Instruct on CPU.
        model: an already loaded ``PreTrainedModel`` (then ``tokenizer`` is required too).
        tokenizer: its tokenizer.

    Raises:
        MissingDependencyError: transformers (or, for the default model, gguf/accelerate) is missing.

    Example:
        >>> backend = TransformersBackend()  # doctest: +SKIP
        >>> prompt = backend.format_chat("Be brief.", "Say hi.")  # doctest: +SKIP
        >>> backend.generate([prompt], 8)[0].finish_reason  # doctest: +SKIP
        'length'
    """

    def __init__(
        self, config: TransformersConfig | None = None, *, model: Any = None, tokenizer: Any = None
    ) -> None:
        self._config = config if config is not None else TransformersConfig()
        self._torch = require("torch", "llm")
        transformers = require("transformers", "llm")
        if (model is None) != (tokenizer is None):
            raise ConfigError("pass both model= and tokenizer=, or neither (then config.model is loaded)")
        if self._config.num_threads is not None:
            self._torch.set_num_threads(self._config.num_threads)
        if model is None:
            source = self._config.model
            if source is None:
                from wmrl_adapters.models import dequantised_model_dir

                source = str(dequantised_model_dir())
            started = time.perf_counter()
            tokenizer = transformers.AutoTokenizer.from_pretrained(source)
            model = transformers.AutoModelForCausalLM.from_pretrained(
                source, dtype=getattr(self._torch, self._config.dtype)
            )
            logger.info("loaded %s in %.1f s", source, time.perf_counter() - started)
            self.model_source = str(source)
        else:
            self.model_source = getattr(model, "name_or_path", "in-memory model")
        self._model = model.to(self._config.device).eval()
        self._tokenizer = tokenizer
        self._tokenizer.padding_side = "left"
        if self._tokenizer.pad_token_id is None:
            self._tokenizer.pad_token = self._tokenizer.eos_token
        window = self._config.context_window or getattr(model.config, "max_position_embeddings", None)
        self.context_window: int = int(window or 2048)
        self.name: str = self._config.name
        self._end_ids = self._eos_ids()

    @property
    def config(self) -> TransformersConfig:
        """The configuration."""
        return self._config

    def _eos_ids(self) -> set[int]:
        ids = self._model.generation_config.eos_token_id
        if ids is None:
            ids = self._tokenizer.eos_token_id
        found = {ids} if isinstance(ids, int) else set(ids or ())
        if self._tokenizer.eos_token_id is not None:
            found.add(self._tokenizer.eos_token_id)
        return found

    def format_chat(self, system: str, user: str) -> str:
        """The model's own chat template, up to the start of the assistant's turn."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        if self._tokenizer.chat_template:
            return str(
                self._tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            )
        return f"{system}\n\n{user}\n\n"

    def count_tokens(self, text: str) -> int:
        """Exact token count with this model's tokenizer."""
        return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    def _batches(self, prompts: Sequence[str]) -> list[list[int]]:
        size = self._config.batch_size
        return [list(range(start, min(start + size, len(prompts)))) for start in range(0, len(prompts), size)]

    def _encode(self, texts: Sequence[str]) -> Any:
        encoded = self._tokenizer(list(texts), return_tensors="pt", padding=True, add_special_tokens=False)
        return {key: value.to(self._config.device) for key, value in encoded.items()}

    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int,
        *,
        stop: Sequence[str] = (),
        constraint: OutputConstraint | None = None,
    ) -> list[GenerationResult]:
        """Greedy continuations, batched with left padding; ``constraint`` is not enforced by transformers.

        A prompt longer than the context window, or a batch that fails (e.g. out of memory), yields
        ``finish_reason="error"`` results with the reason rather than raising.
        """
        if max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens={max_new_tokens} must be >= 1")
        results: list[GenerationResult | None] = [None] * len(prompts)
        for batch in self._batches(prompts):
            try:
                produced = self._generate_batch([prompts[i] for i in batch], max_new_tokens, tuple(stop))
            except (RuntimeError, ValueError, WorldModelError) as exc:
                logger.warning("transformers generation failed for a batch of %d: %s", len(batch), exc)
                produced = [
                    GenerationResult("", "error", error=f"{type(exc).__name__}: {exc}") for _ in batch
                ]
            for index, result in zip(batch, produced, strict=True):
                results[index] = result
        return [result for result in results if result is not None]

    def _generate_batch(
        self, texts: Sequence[str], max_new_tokens: int, stop: tuple[str, ...]
    ) -> list[GenerationResult]:
        torch = self._torch
        encoded = self._encode(texts)
        prompt_lengths = encoded["attention_mask"].sum(dim=1).tolist()
        width = encoded["input_ids"].shape[1]
        if width + max_new_tokens > self.context_window:
            raise WorldModelError(
                f"prompt of {width} tokens + {max_new_tokens} new tokens exceeds the context window "
                f"({self.context_window})"
            )
        kwargs: dict[str, Any] = {
            "max_new_tokens": max_new_tokens,
            "do_sample": False,
            "pad_token_id": self._tokenizer.pad_token_id,
            "eos_token_id": sorted(self._end_ids),
        }
        if stop:
            kwargs["stop_strings"] = list(stop)
            kwargs["tokenizer"] = self._tokenizer
        with torch.inference_mode():
            output = self._model.generate(**encoded, **kwargs, temperature=None, top_p=None, top_k=None)
        results = []
        pad = self._tokenizer.pad_token_id
        for row, prompt_tokens in zip(output[:, width:].tolist(), prompt_lengths, strict=True):
            tokens: list[int] = []
            eos_hit = False
            for token in row:
                if token in self._end_ids or token == pad:
                    eos_hit = token in self._end_ids
                    break
                tokens.append(token)
            text = self._tokenizer.decode(tokens, skip_special_tokens=True)
            cut = min((text.find(s) for s in stop if s in text), default=-1)
            if cut >= 0:
                text = text[:cut]
            stopped = eos_hit or cut >= 0 or len(tokens) < max_new_tokens
            finish: Literal["stop", "length"] = "stop" if stopped else "length"
            results.append(GenerationResult(text, finish, int(prompt_tokens), len(tokens) + int(eos_hit)))
        return results

    def _candidate_ids(self, candidates: Sequence[str]) -> list[list[int]]:
        """Token ids that start each candidate (``"5"`` and ``" 5"`` variants); ids must not overlap."""
        ids: list[list[int]] = []
        owner: dict[int, str] = {}
        for label in candidates:
            variants: list[int] = []
            for spelled in (label, " " + label):
                encoded = self._tokenizer(spelled, add_special_tokens=False)["input_ids"]
                if encoded and self._tokenizer.decode(encoded[:1]).strip():
                    variants.append(int(encoded[0]))
            for token in set(variants):
                if owner.setdefault(token, label) != label:
                    raise ConfigError(
                        f"candidates {owner[token]!r} and {label!r} start with the same token; "
                        "their probabilities cannot be told apart: use labels with distinct first tokens"
                    )
            ids.append(sorted(set(variants)))
        return ids

    def next_token_distribution(
        self, prompts: Sequence[str], candidates: Sequence[str]
    ) -> list[CandidateDistribution | None]:
        """One forward pass per batch; the softmax mass of each candidate's first token(s), renormalised."""
        torch = self._torch
        candidate_ids = self._candidate_ids(candidates)
        found: list[CandidateDistribution | None] = [None] * len(prompts)
        for batch in self._batches(prompts):
            encoded = self._encode([prompts[i] for i in batch])
            if encoded["input_ids"].shape[1] > self.context_window:
                logger.warning(
                    "score prompts of %d tokens exceed the context window", encoded["input_ids"].shape[1]
                )
                continue
            with torch.inference_mode():
                logits = self._model(**encoded).logits[:, -1, :].float()
            probabilities = torch.softmax(logits, dim=-1)
            for row, index in enumerate(batch):
                mass = [float(probabilities[row, ids].sum()) if ids else 0.0 for ids in candidate_ids]
                covered = sum(mass)
                if covered > 0.0:
                    found[index] = CandidateDistribution(tuple(m / covered for m in mass), min(covered, 1.0))
        return found

    def __repr__(self) -> str:
        return f"TransformersBackend(model={Path(self.model_source).name!r}, device={self._config.device!r})"
