"""Tests of the GRPO-family losses: gradients, clipping by hand, KL, and the four TRL aggregations."""

from __future__ import annotations

import math
from dataclasses import fields

import pytest
import torch

from wmrl_algos.errors import ConfigError
from wmrl_algos.grpo import GRPOConfig, grpo_loss, grpo_update


def random_batch(seed: int = 0, batch: int = 4, length: int = 6) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    old = -torch.rand(batch, length, generator=generator) * 3
    logprobs = (old + 0.3 * torch.randn(batch, length, generator=generator)).requires_grad_(True)
    mask = torch.ones(batch, length)
    mask[0, 4:] = 0
    mask[2, 2:] = 0
    return {
        "logprobs": logprobs,
        "old_logprobs": old,
        "advantages": torch.randn(batch, generator=generator),
        "mask": mask,
    }


def test_gradients_flow_to_the_current_log_probs_only_on_masked_tokens() -> None:
    batch = random_batch()
    loss, _ = grpo_loss(**batch)
    loss.backward()
    gradient = batch["logprobs"].grad
    assert gradient is not None
    assert gradient[batch["mask"] == 0].abs().sum() == 0
    assert gradient[batch["mask"] == 1].abs().sum() > 0


def test_a_gradient_step_raises_the_likelihood_of_positive_advantage_sequences() -> None:
    logits = torch.zeros(2, 3, requires_grad=True)
    old = logits.detach().clone() - 1.0
    loss, _ = grpo_loss(logits - 1.0, old, torch.tensor([1.0, -1.0]), torch.ones(2, 3))
    loss.backward()
    assert logits.grad is not None
    assert (logits.grad[0] < 0).all() and (logits.grad[1] > 0).all()


def test_clipping_matches_a_hand_computation() -> None:
    old = torch.zeros(1, 4)
    ratios = torch.tensor([[0.5, 0.9, 1.1, 1.5]])
    logprobs = torch.log(ratios).requires_grad_(True)
    config = GRPOConfig(epsilon_low=0.2, epsilon_high=0.28)
    for advantage in (2.0, -2.0):
        loss, metrics = grpo_loss(logprobs, old, torch.tensor([advantage]), torch.ones(1, 4), config=config)
        clipped = [min(max(r, 0.8), 1.28) for r in ratios[0].tolist()]
        per_token = [
            -min(r * advantage, c * advantage) for r, c in zip(ratios[0].tolist(), clipped, strict=True)
        ]
        assert loss.item() == pytest.approx(sum(per_token) / 4)
        assert metrics["charts/clip_fraction"] == pytest.approx(0.25)
        (gradient,) = torch.autograd.grad(loss, logprobs)
        active = [1.0, 1.0, 1.0, 0.0] if advantage > 0 else [0.0, 1.0, 1.0, 1.0]
        expected = [-advantage * r * a / 4 for r, a in zip(ratios[0].tolist(), active, strict=True)]
        assert gradient[0].tolist() == pytest.approx(expected, abs=1e-6)


def test_kl_is_zero_when_reference_equals_current() -> None:
    batch = random_batch(1)
    config = GRPOConfig(beta=0.5)
    loss_with_kl, metrics = grpo_loss(**batch, ref_logprobs=batch["logprobs"].detach(), config=config)
    loss_without, _ = grpo_loss(**batch)
    assert metrics["losses/kl"] == pytest.approx(0.0, abs=1e-7)
    assert loss_with_kl.item() == pytest.approx(loss_without.item(), abs=1e-7)


def test_kl_is_positive_and_matches_k3_when_reference_differs() -> None:
    logprobs = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    reference = torch.tensor([[-1.5, -1.0]])
    _, metrics = grpo_loss(
        logprobs, logprobs.detach(), torch.zeros(1), torch.ones(1, 2), ref_logprobs=reference
    )
    expected = sum(math.exp(d) - d - 1 for d in (-0.5, 1.0)) / 2
    assert metrics["losses/kl"] == pytest.approx(expected)
    loss, _ = grpo_loss(
        logprobs, logprobs.detach(), torch.zeros(1), torch.ones(1, 2), ref_logprobs=reference,
        config=GRPOConfig(beta=0.1),
    )  # fmt: skip
    assert loss.item() == pytest.approx(0.1 * expected)


def test_loss_types_aggregate_as_trl_names_them() -> None:
    logprobs = torch.zeros(2, 4, requires_grad=True)
    old = torch.zeros(2, 4)
    advantages = torch.tensor([1.0, 2.0])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0]])

    def loss_of(num_items_in_batch: float | None = None, **kwargs: object) -> float:
        config = GRPOConfig(**kwargs)  # type: ignore[arg-type]
        loss, _ = grpo_loss(
            logprobs, old, advantages, mask, config=config, num_items_in_batch=num_items_in_batch
        )
        return loss.item()

    token_sum = float((-torch.tensor([[1.0] * 4, [2.0] * 4]) * mask).sum())
    assert loss_of(loss_type="grpo") == pytest.approx(((-1.0) + (-2.0)) / 2)
    assert loss_of(loss_type="bnpo") == pytest.approx(token_sum / 5), "this batch's 5 tokens"
    assert loss_of(20.0, loss_type="dapo") == pytest.approx(token_sum / 20), "the accumulated batch's 20"
    assert loss_of(loss_type="dr_grpo", max_completion_length=10) == pytest.approx(token_sum / (2 * 10))


def test_dapo_over_micro_batches_equals_one_token_mean_over_the_whole_batch() -> None:
    batch = random_batch(7, batch=4)
    total_tokens = float(batch["mask"].sum())
    whole, _ = grpo_loss(**batch, config=GRPOConfig(loss_type="bnpo"))
    halves = [
        grpo_loss(
            **{key: value[rows] for key, value in batch.items()},
            config=GRPOConfig(loss_type="dapo"),
            num_items_in_batch=total_tokens,
        )[0]
        for rows in (slice(0, 2), slice(2, 4))
    ]
    assert (halves[0] + halves[1]).item() == pytest.approx(whole.item())
    per_micro_batch_bnpo = [
        grpo_loss(**{key: value[rows] for key, value in batch.items()}, config=GRPOConfig(loss_type="bnpo"))[
            0
        ]
        for rows in (slice(0, 2), slice(2, 4))
    ]
    assert (sum(per_micro_batch_bnpo) / 2).item() != pytest.approx(whole.item()), "bnpo is per micro-batch"


def test_dapo_without_the_global_token_count_and_dr_grpo_without_a_budget_raise() -> None:
    batch = random_batch(8)
    with pytest.raises(ConfigError, match="num_items_in_batch=None"):
        grpo_loss(**batch, config=GRPOConfig(loss_type="dapo"))
    with pytest.raises(ConfigError, match="needs max_completion_length"):
        GRPOConfig(loss_type="dr_grpo")


def test_fully_masked_sequences_contribute_nothing() -> None:
    batch = random_batch(2)
    batch["mask"][1] = 0
    loss, _ = grpo_loss(**batch)
    batch["advantages"][1] = 1000.0
    loss_changed, _ = grpo_loss(**batch)
    assert loss.item() == pytest.approx(loss_changed.item())


def test_boolean_mask_equals_float_mask() -> None:
    batch = random_batch(3)
    float_loss, _ = grpo_loss(**batch)
    batch["mask"] = batch["mask"].bool()
    bool_loss, _ = grpo_loss(**batch)
    assert float_loss.item() == pytest.approx(bool_loss.item())


def test_metrics_are_plain_floats() -> None:
    batch = random_batch(4)
    _, metrics = grpo_loss(**batch)
    assert set(metrics) == {"losses/policy", "losses/kl", "charts/clip_fraction"}
    assert all(type(value) is float for value in metrics.values())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"loss_type": "ppo"}, "loss_type='ppo'"),
        ({"epsilon_low": 1.0}, "epsilon_low=1.0"),
        ({"epsilon_high": -0.1}, "epsilon_high=-0.1"),
        ({"beta": -1.0}, "beta=-1.0"),
        ({"max_completion_length": 0}, "max_completion_length=0"),
    ],
)
def test_invalid_config_raises_config_error_naming_the_value(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        GRPOConfig(**kwargs)


def test_every_config_field_has_help_text() -> None:
    assert all(field.metadata.get("help") for field in fields(GRPOConfig))


def test_mismatched_shapes_and_missing_reference_raise() -> None:
    batch = random_batch(5)
    with pytest.raises(ConfigError, match="mask has shape"):
        grpo_loss(**{**batch, "mask": batch["mask"][:, :3]})
    with pytest.raises(ConfigError, match="advantages has shape"):
        grpo_loss(**{**batch, "advantages": torch.zeros(3)})
    with pytest.raises(ConfigError, match="needs ref_logprobs"):
        grpo_loss(**batch, config=GRPOConfig(beta=0.1))
    with pytest.raises(ConfigError, match="exceeds max_completion_length"):
        grpo_loss(**batch, config=GRPOConfig(loss_type="dr_grpo", max_completion_length=3))


def _two_sequence_logprobs(weight: torch.nn.Parameter) -> torch.Tensor:
    """``(2, 3)`` log-probs: the first sequence's rise with ``weight``, the second's fall."""
    return weight.unsqueeze(0).expand(2, 3) * torch.tensor([[1.0], [-1.0]])


def _adam_after_one_informative_step() -> tuple[torch.nn.Parameter, torch.optim.Optimizer]:
    weight = torch.nn.Parameter(torch.zeros(3))
    optimizer = torch.optim.Adam([weight], lr=0.1)
    grpo_update(
        lambda: (_two_sequence_logprobs(weight), torch.ones(2, 3)),
        optimizer,
        [weight],
        torch.tensor([1.0, -1.0]),
        clip=0.2,
        epochs=1,
        max_grad_norm=1.0,
    )
    return weight, optimizer


def test_a_batch_without_signal_leaves_the_policy_where_it_is_despite_adams_momentum() -> None:
    weight, optimizer = _adam_after_one_informative_step()
    before = weight.detach().clone()
    for advantages, mask in (
        (torch.zeros(2), torch.ones(2, 3)),  # every group all-success or all-failure
        (torch.tensor([1.0, -1.0]), torch.zeros(2, 3)),  # advantages only on sequences with no tokens
    ):
        metrics = grpo_update(
            lambda: (_two_sequence_logprobs(weight), mask),  # noqa: B023 (called within the iteration)
            optimizer,
            [weight],
            advantages,
            clip=0.2,
            epochs=4,
            max_grad_norm=1.0,
        )
        assert torch.equal(weight.detach(), before), "no step: momentum would have moved it"
        assert metrics["losses/approx_kl"] == 0.0 and metrics["losses/grad_norm"] == 0.0
        assert set(metrics) >= {"losses/policy", "charts/clip_fraction", "losses/loss"}


def test_a_zero_gradient_adam_step_would_have_moved_the_policy() -> None:
    """The reason for the skip, measured on the same optimiser: a plain step with zero gradient moves."""
    weight, optimizer = _adam_after_one_informative_step()
    before = weight.detach().clone()
    optimizer.zero_grad()
    weight.grad = torch.zeros_like(weight)
    optimizer.step()
    assert not torch.equal(weight.detach(), before)
