"""The contract between a trainable policy and the trainer (:mod:`wmrl_adapters.train`).

Why a Protocol and not a base class: the trainer must drive two very different policies with the same
GRPO loop: the CPU design-space agent (a small torch network choosing a solution design) and an LLM
code agent (a causal LM behind transformers/peft, :mod:`wmrl_adapters.llm_agent`). Both only need to
sample actions for a batch, re-score their own past actions under the current parameters, expose their
parameters to an optimiser and round-trip their full state through a checkpoint.

The log-prob contract is what makes GRPO policy-agnostic: ``logprobs`` returns a ``(B, T)`` tensor of
per-token (LLM) or per-decision (design agent) log-probs and a ``(B, T)`` float mask, which go straight
into :func:`wmrl_algos.grpo.grpo_loss`. ``logprobs`` must be *stateless*: it recovers what was decided
from the trajectories' actions (and observations) alone, so old log-probs computed before an update and
new ones after it refer to the same decisions, and a resumed run needs no cache of sampled tokens.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import torch

from wmrl_envs.rollouts import Trajectory

__all__ = ["TrainablePolicy"]


@runtime_checkable
class TrainablePolicy(Protocol):
    """A batched, trainable policy the GRPO trainer can drive.

    ``act`` is called by :class:`wmrl_envs.rollouts.GroupedRollout` once per turn for all live
    trajectories; ``contexts`` (one :class:`wmrl_envs.rollouts.TurnContext` per observation: the
    trajectory's id, task, group, index and its full history of observations, actions and infos) is
    passed when the rollout supports it, so a multi-turn policy can revise its previous answer.

    Example:
        >>> from wmrl_adapters.train.kaggle.design_policy import DesignPolicy
        >>> isinstance(DesignPolicy(seed=0), TrainablePolicy)
        True
    """

    def act(
        self,
        observations: Sequence[Any],
        infos: Sequence[Mapping[str, Any]],
        contexts: Sequence[Any] | None = None,
    ) -> list[Any]:
        """Sample one action per observation (``contexts[i]`` is trajectory i's history, or ``None``)."""
        ...

    def logprobs(self, trajectories: Sequence[Trajectory]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B, T)`` log-probs of each trajectory's actions under the CURRENT parameters (with gradient),
        and a ``(B, T)`` float mask (1 where a token/decision exists). Stateless: recomputed from the
        trajectories alone."""
        ...

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        """The parameters the optimiser updates."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume exactly: weights and the sampling RNG state."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        ...
