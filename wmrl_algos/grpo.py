"""GRPO-family policy losses, policy-agnostic: per-token log-probs and per-sequence advantages in, loss out.

Why separate from any trainer: the corrections of WMRL end in one advantage per trajectory (already
weighted, zero where unknown). Everything after that is the ordinary clipped surrogate, so the loss is
a pure function any policy (a transformers LM, a small MLP, a TRL trainer's model) can call.

The four aggregations differ in how tokens are averaged, which matters once completions differ in
length. They are named and computed as in TRL's ``GRPOTrainer``, so a setting means the same in both:

* ``"grpo"``: mean over each sequence's tokens, then mean over sequences (DeepSeekMath). Long answers
  get a smaller per-token gradient, which biases towards length on negative advantages.
* ``"bnpo"``: sum over the tokens of *this* (micro-)batch divided by their number: a token-level mean
  per call. With gradient accumulation, each micro-batch is normalised by its own token count.
* ``"dapo"``: sum over the tokens divided by the token count of the *whole* accumulated batch
  (``num_items_in_batch``, a required argument then): DAPO's token-level mean over everything one
  optimiser step sees, whatever the micro-batching.
* ``"dr_grpo"``: sum over all tokens divided by ``B * max_completion_length`` (Dr. GRPO): a constant
  normaliser, no length bias. It needs the generation budget ``max_completion_length``: the padded
  width of a batch changes from batch to batch and would reintroduce a length dependence.

DAPO's recipe also uses an asymmetric clip (``epsilon_high=0.28``), set independently.

The KL penalty to a reference policy uses the k3 estimator ``exp(ref - logp) - (ref - logp) - 1``,
which is non-negative and zero exactly when the two agree.

:func:`grpo_update` is the update both ``wmrl train`` trainers run on top of the loss: a few clipped
epochs on one batch, with a gradient-norm clip, reporting the loss and the approximate KL it moved.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import Tensor

from wmrl_algos.errors import ConfigError

__all__ = ["LossType", "GRPOConfig", "grpo_loss", "grpo_update"]

LossType = Literal["grpo", "bnpo", "dapo", "dr_grpo"]


@dataclass(frozen=True)
class GRPOConfig:
    """Settings of :func:`grpo_loss`.

    Example:
        >>> GRPOConfig(loss_type="bnpo", epsilon_high=0.28).epsilon_high
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
            "help": "As TRL: 'grpo': per-sequence token mean, then mean over sequences; 'bnpo': token sum / "
            "tokens of this batch; 'dapo': token sum / tokens of the whole accumulated batch (pass "
            "num_items_in_batch); 'dr_grpo': token sum / (B * max_completion_length), no length bias."
        },
    )
    max_completion_length: int | None = field(
        default=None,
        metadata={
            "help": "The generation budget in tokens (>= 1), dr_grpo's constant normaliser; required for "
            "dr_grpo (the padded width T changes between batches)."
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
        if self.loss_type not in ("grpo", "bnpo", "dapo", "dr_grpo"):
            raise ConfigError(
                f"loss_type={self.loss_type!r} is unknown; pass 'grpo', 'bnpo', 'dapo' or 'dr_grpo' (as TRL)"
            )
        if self.loss_type == "dr_grpo" and self.max_completion_length is None:
            raise ConfigError(
                "loss_type='dr_grpo' needs max_completion_length (the generation budget in tokens): its "
                "normaliser must not change with each batch's padded width"
            )
        if self.max_completion_length is not None and self.max_completion_length < 1:
            raise ConfigError(
                f"max_completion_length={self.max_completion_length!r}; pass None or the generation budget "
                "in tokens (>= 1)"
            )


def _aggregate(
    per_token: Tensor, mask: Tensor, config: GRPOConfig, num_items_in_batch: float | None
) -> Tensor:
    masked = per_token * mask
    if config.loss_type == "grpo":
        return (masked.sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)).mean()
    if config.loss_type == "dr_grpo":
        return masked.sum() / (per_token.shape[0] * (config.max_completion_length or per_token.shape[1]))
    if config.loss_type == "dapo":
        return masked.sum() / max(float(num_items_in_batch or 1.0), 1.0)
    return masked.sum() / mask.sum().clamp(min=1.0)


def grpo_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    ref_logprobs: Tensor | None = None,
    config: GRPOConfig | None = None,
    num_items_in_batch: float | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """Clipped-surrogate GRPO loss (to minimise) with an optional k3 KL penalty.

    Args:
        logprobs: ``(B, T)`` per-token log-probs under the current policy (with gradient).
        old_logprobs: ``(B, T)`` log-probs under the policy that generated the samples (no gradient).
        advantages: ``(B,)`` one advantage per sequence (from the correction loop, weighted).
        mask: ``(B, T)`` bool or float completion mask (1 for completion tokens to train on).
        ref_logprobs: ``(B, T)`` reference-policy log-probs; required when ``config.beta > 0``.
        config: the loss settings (defaults: symmetric clip 0.2, no KL, ``"grpo"`` aggregation).
        num_items_in_batch: for ``"dapo"`` (required there, ignored otherwise): the completion tokens of
            the whole batch one optimiser step accumulates over, divided by the number of data-parallel
            processes when their gradients are averaged (as TRL does).

    Returns:
        ``(loss, metrics)`` with metrics ``losses/policy``, ``losses/kl`` (masked token mean of the k3
        KL, 0.0 without a reference) and ``charts/clip_fraction`` (share of masked tokens whose
        gradient the clip removed), all plain floats.

    Raises:
        ConfigError: mismatched shapes, a ``T`` longer than ``max_completion_length`` for ``dr_grpo``,
            ``"dapo"`` without a positive ``num_items_in_batch``, or ``beta > 0`` without ``ref_logprobs``.

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
    if config.loss_type == "dapo" and not (
        num_items_in_batch is not None
        and math.isfinite(float(num_items_in_batch))
        and float(num_items_in_batch) > 0
    ):
        raise ConfigError(
            f"loss_type='dapo' got num_items_in_batch={num_items_in_batch!r}; pass the completion-token "
            "count of the whole accumulated batch (> 0), or use 'bnpo' for a per-batch token mean"
        )
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
    policy_loss = _aggregate(policy_per_token, mask, config, num_items_in_batch)

    if ref_logprobs is not None:
        log_ratio_ref = ref_logprobs.detach() - logprobs
        kl_per_token = torch.exp(log_ratio_ref) - log_ratio_ref - 1.0
    else:
        kl_per_token = torch.zeros_like(logprobs)
    loss = policy_loss
    if config.beta > 0.0:
        loss = loss + config.beta * _aggregate(kl_per_token, mask, config, num_items_in_batch)

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


def grpo_update(
    logprobs: Callable[[], tuple[Tensor, Tensor]],
    optimizer: torch.optim.Optimizer,
    parameters: Sequence[torch.nn.Parameter],
    advantages: Tensor,
    *,
    clip: float,
    epochs: int,
    max_grad_norm: float,
) -> dict[str, float]:
    """``epochs`` clipped GRPO steps (:func:`grpo_loss`) on one batch; returns the loss metrics.

    A batch in which no trajectory has a non-zero advantage (every group all-success or all-failure, a
    calibration map that is flat on the batch, the anchors of a run that has not seen a success) takes
    no step at all. Its gradient is 0, but an Adam step would still move the policy by its momentum:
    measured on ``libero_spatial``, GRPO on one anchor group a step went on moving the policy over six
    such steps (approximate KL 0.066 falling to 0.003) while its rollouts never succeeded.

    Args:
        logprobs: recomputes the batch's ``(B, T)`` log-probs and mask under the current parameters.
        optimizer: steps ``parameters``.
        parameters: what the gradient-norm clip applies to.
        advantages: ``(B,)``, one per trajectory, broadcast over its steps by the loss.
        clip: the symmetric ratio clip.
        epochs: gradient steps on the batch.
        max_grad_norm: the gradient-norm clip.

    Returns:
        :func:`grpo_loss`'s metrics of the last epoch plus ``losses/loss``, ``losses/grad_norm`` and
        ``losses/approx_kl`` (the k3 KL between the batch's old and updated log-probs); all three are
        0.0 for a batch without signal, which takes no step.

    Example:
        >>> weight = torch.nn.Parameter(torch.zeros(1))
        >>> def logprobs():
        ...     return torch.stack([weight, -weight]).expand(2, 3), torch.ones(2, 3)
        >>> optimizer = torch.optim.SGD([weight], lr=0.1)
        >>> metrics = grpo_update(logprobs, optimizer, [weight], torch.tensor([1.0, -1.0]),
        ...                       clip=0.2, epochs=1, max_grad_norm=1.0)
        >>> weight.item() > 0, metrics["losses/approx_kl"] > 0
        (True, True)
    """
    loss_config = GRPOConfig(epsilon_low=clip, epsilon_high=clip)
    with torch.no_grad():
        old, mask = logprobs()
    advantages = advantages.to(old.device)  # the policy may live on a GPU; the advantages come from numpy
    if not bool((advantages.ne(0) & mask.sum(dim=1).gt(0)).any()):
        # No trajectory carries an advantage, so the loss and its gradient are 0 whatever the parameters.
        # An optimiser step would still move them: Adam's momentum replays the earlier steps' direction.
        _, metrics = grpo_loss(old, old, advantages, mask, config=loss_config)
        return {**metrics, "losses/loss": 0.0, "losses/grad_norm": 0.0, "losses/approx_kl": 0.0}
    metrics: dict[str, float] = {}
    for _ in range(epochs):
        new, mask = logprobs()
        loss, metrics = grpo_loss(new, old, advantages, mask, config=loss_config)
        optimizer.zero_grad()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(list(parameters), max_grad_norm)
        optimizer.step()
        metrics = {**metrics, "losses/loss": float(loss.detach()), "losses/grad_norm": float(norm)}
    with torch.no_grad():
        new, mask = logprobs()
        log_ratio = old - new
        kl = ((torch.exp(log_ratio) - log_ratio - 1.0) * mask).sum() / mask.sum().clamp(min=1.0)
    metrics["losses/approx_kl"] = float(kl)
    return metrics
