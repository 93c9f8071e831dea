"""GRPO-family policy losses, policy-agnostic: per-token log-probs and per-sequence advantages in, loss out.

Why separate from any trainer: the corrections of WMRL end in one advantage per trajectory (already
weighted, zero where unknown). Everything after that is the ordinary clipped surrogate, so the loss is
a pure function any policy (a transformers LM, a small MLP, a TRL trainer's model) can call.

The three aggregations differ in how tokens are averaged, which matters once completions differ in
length:

* ``"grpo"``: mean over each sequence's tokens, then mean over sequences (DeepSeekMath). Long answers
  get a smaller per-token gradient, which biases towards length on negative advantages.
* ``"dr_grpo"``: sum over all tokens divided by ``B * max_completion_length`` (Dr. GRPO): a constant
  normaliser, no length bias.
* ``"dapo"``: sum over all tokens divided by the number of tokens (DAPO's token-level mean), usually
  with an asymmetric clip (``epsilon_high=0.28``).

The KL penalty to a reference policy uses the k3 estimator ``exp(ref - logp) - (ref - logp) - 1``,
which is non-negative and zero exactly when the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import Tensor

from wmrl_algos.errors import ConfigError

__all__ = ["LossType", "GRPOConfig", "grpo_loss"]

LossType = Literal["grpo", "dr_grpo", "dapo"]


@dataclass(frozen=True)
class GRPOConfig:
    """Settings of :func:`grpo_loss`.

    Example:
        >>> GRPOConfig(loss_type="dapo", epsilon_high=0.28).epsilon_high
        0.28
    """

    epsilon_low: float = field(
        default=0.2,
        metadata={"help": "Lower clip range: the ratio is clipped at 1 - epsilon_low, in [0, 1)."},
    )
    epsilon_high: float = field(
        default=0.2,
        metadata={
            "help": "Upper clip range: the ratio is clipped at 1 + epsilon_high (>= 0). DAPO's clip-higher "
            "uses 0.28 to keep low-probability tokens exploring."
        },
    )
    beta: float = field(
        default=0.0,
        metadata={
            "help": "Coefficient of the k3 KL penalty to the reference policy (>= 0). 0 (no reference "
            "model needed) is the common choice for verifiable rewards."
        },
    )
    loss_type: LossType = field(
        default="grpo",
        metadata={
            "help": "'grpo': per-sequence token mean, then mean over sequences; 'dr_grpo': token sum / "
            "(B * max_completion_length), no length bias; 'dapo': token sum / number of tokens."
        },
    )
    max_completion_length: int | None = field(
        default=None,
        metadata={
            "help": "The dr_grpo normaliser's length (>= 1); None uses the tensors' token dimension T. "
            "Set it to the generation budget so the normaliser is constant across batches."
        },
    )

    def __post_init__(self) -> None:
        if not (0.0 <= self.epsilon_low < 1.0):
            raise ConfigError(
                f"epsilon_low={self.epsilon_low!r} is outside [0, 1); the lower clip 1 - epsilon_low must "
                "stay positive, e.g. 0.2"
            )
        if not self.epsilon_high >= 0.0:
            raise ConfigError(f"epsilon_high={self.epsilon_high!r} is negative; pass >= 0, e.g. 0.2 or 0.28")
        if not self.beta >= 0.0:
            raise ConfigError(f"beta={self.beta!r} is negative; pass 0 (no KL) or a positive KL coefficient")
        if self.loss_type not in ("grpo", "dr_grpo", "dapo"):
            raise ConfigError(f"loss_type={self.loss_type!r} is unknown; pass 'grpo', 'dr_grpo' or 'dapo'")
        if self.max_completion_length is not None and self.max_completion_length < 1:
            raise ConfigError(
                f"max_completion_length={self.max_completion_length!r}; pass None or the generation budget "
                "in tokens (>= 1)"
            )


def _aggregate(per_token: Tensor, mask: Tensor, config: GRPOConfig) -> Tensor:
    masked = per_token * mask
    if config.loss_type == "grpo":
        return (masked.sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)).mean()
    if config.loss_type == "dr_grpo":
        length = config.max_completion_length or per_token.shape[1]
        return masked.sum() / (per_token.shape[0] * length)
    return masked.sum() / mask.sum().clamp(min=1.0)


def grpo_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    ref_logprobs: Tensor | None = None,
    config: GRPOConfig | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """Clipped-surrogate GRPO loss (to minimise) with an optional k3 KL penalty.

    Args:
        logprobs: ``(B, T)`` per-token log-probs under the current policy (with gradient).
        old_logprobs: ``(B, T)`` log-probs under the policy that generated the samples (no gradient).
        advantages: ``(B,)`` one advantage per sequence (from the correction loop, weighted).
        mask: ``(B, T)`` bool or float completion mask (1 for completion tokens to train on).
        ref_logprobs: ``(B, T)`` reference-policy log-probs; required when ``config.beta > 0``.
        config: the loss settings (defaults: symmetric clip 0.2, no KL, ``"grpo"`` aggregation).

    Returns:
        ``(loss, metrics)`` with metrics ``losses/policy``, ``losses/kl`` (masked token mean of the k3
        KL, 0.0 without a reference) and ``charts/clip_fraction`` (share of masked tokens whose
        gradient the clip removed), all plain floats.

    Raises:
        ConfigError: mismatched shapes, a ``T`` longer than ``max_completion_length`` for ``dr_grpo``,
            or ``beta > 0`` without ``ref_logprobs``.

    Example:
        >>> logprobs = torch.zeros(2, 3, requires_grad=True)
        >>> advantages = torch.tensor([1.0, -1.0])
        >>> loss, metrics = grpo_loss(logprobs, logprobs.detach(), advantages, torch.ones(2, 3))
        >>> loss.item(), metrics["charts/clip_fraction"]
        (0.0, 0.0)
    """
    config = GRPOConfig() if config is None else config
    if logprobs.dim() != 2:
        raise ConfigError(
            f"logprobs has shape {tuple(logprobs.shape)}; pass per-token log-probs of shape (B, T)"
        )
    named = {"old_logprobs": old_logprobs, "mask": mask}
    if ref_logprobs is not None:
        named["ref_logprobs"] = ref_logprobs
    for name, tensor in named.items():
        if tensor.shape != logprobs.shape:
            raise ConfigError(
                f"{name} has shape {tuple(tensor.shape)} but logprobs has {tuple(logprobs.shape)}; pass "
                "per-token tensors of the same (B, T) shape"
            )
    if advantages.shape != (logprobs.shape[0],):
        raise ConfigError(
            f"advantages has shape {tuple(advantages.shape)}; pass one advantage per sequence, shape "
            f"({logprobs.shape[0]},)"
        )
    if config.beta > 0.0 and ref_logprobs is None:
        raise ConfigError(f"beta={config.beta!r} needs ref_logprobs; pass them or set beta=0")
    if (
        config.loss_type == "dr_grpo"
        and config.max_completion_length is not None
        and logprobs.shape[1] > config.max_completion_length
    ):
        raise ConfigError(
            f"T={logprobs.shape[1]} exceeds max_completion_length={config.max_completion_length}; raise "
            "max_completion_length to the generation budget"
        )

    mask = mask.to(logprobs.dtype)
    advantage = advantages.to(logprobs.dtype).unsqueeze(1)
    ratio = torch.exp(logprobs - old_logprobs.detach())
    clipped_ratio = torch.clamp(ratio, 1.0 - config.epsilon_low, 1.0 + config.epsilon_high)
    policy_per_token = -torch.min(ratio * advantage, clipped_ratio * advantage)
    policy_loss = _aggregate(policy_per_token, mask, config)

    if ref_logprobs is not None:
        log_ratio_ref = ref_logprobs.detach() - logprobs
        kl_per_token = torch.exp(log_ratio_ref) - log_ratio_ref - 1.0
    else:
        kl_per_token = torch.zeros_like(logprobs)
    loss = policy_loss
    if config.beta > 0.0:
        loss = loss + config.beta * _aggregate(kl_per_token, mask, config)

    with torch.no_grad():
        n_tokens = mask.sum().clamp(min=1.0)
        clipped = ((ratio < 1.0 - config.epsilon_low) & (advantage < 0)) | (
            (ratio > 1.0 + config.epsilon_high) & (advantage > 0)
        )
        metrics = {
            "losses/policy": float(policy_loss.detach()),
            "losses/kl": float((kl_per_token.detach() * mask).sum() / n_tokens),
            "charts/clip_fraction": float((clipped.to(mask.dtype) * mask).sum() / n_tokens),
        }
    return loss, metrics
