"""Scorer fidelity on the embodied track: do progress scorers rank successes above failures?

Two measurements on robosuite's Lift, rendered from the agent-view camera (the input Robometer gets):

1. *On the demonstrations' distribution.* The scripted expert, the expert with action noise and random
   actions are rolled out (successes, near misses and clear failures). The scorers that learn (the
   online state scorer and the visual scorer) are fitted on one half of these episodes, and every
   scorer is measured on the other half.
2. *On the policy's own rollouts*, where the learned scorers are off their training distribution: an SFT
   policy (behaviour cloning of noisy expert demonstrations, the trainer's first stage) is rolled out in
   GRPO groups (every member of a group resets to the same placement; only the policy's sampling
   differs). Per scorer: AUROC of the collapsed score for success vs failure, and the within-group
   Spearman rank correlation of the score with success (what GRPO's group baseline uses), averaged over
   the groups that have both outcomes.

Scorers: ``sim-state`` (privileged state; the upper bound), ``learned`` (the online state scorer),
``visual`` (the small CNN on camera frames; :mod:`wmrl_envs.embodied.visual`) and ``approach``
(deliberately hackable: credit for reaching the cube, grasped or not; :mod:`wmrl_envs.embodied.hackable`).
Nothing is tuned to these numbers. Writes ``fidelity.md``, ``fidelity.json``, the curves of both
measurements and the trained visual scorer (``visual_scorer.pt``, git-ignored; loadable with
``VisualProgressScorer.load``).

    nice -n 10 python benchmarks/embodied_fidelity.py     # the committed results (~15-30 min, 2 busy cores)
    python benchmarks/embodied_fidelity.py --episodes 2 --demos 4 --groups 1 --group-size 2 --out /tmp/x

Needs the embodied stack (``bash scripts/embodied.sh``).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium.wrappers import TimeLimit
from tqdm import tqdm
from wmrl_adapters.train.embodied.policy import GaussianMLPPolicy, behaviour_cloning

from wmrl_algos.errors import ConfigError
from wmrl_envs.embodied.demos import collect_demonstrations
from wmrl_envs.embodied.envs import RobosuiteEnv
from wmrl_envs.embodied.fidelity import (
    Episode,
    auroc,
    collect_episodes,
    fidelity_table,
    plot_progress_curves,
    scorer_fidelity,
    within_group_rank_correlation,
)
from wmrl_envs.embodied.hackable import ApproachProgressScorer
from wmrl_envs.embodied.learned import LearnedProgressConfig, LearnedProgressScorer
from wmrl_envs.embodied.policies import NoisyPolicy, RandomPolicy, ScriptedLiftPolicy
from wmrl_envs.embodied.progress import (
    ProgressScorer,
    SimStateProgressScorer,
    collapse_progress,
    progress_input,
)
from wmrl_envs.embodied.visual import VisualProgressConfig, VisualProgressScorer

RESULTS = Path(__file__).resolve().parent / "results" / "embodied_fidelity"
COLLAPSES = ("potential", "max")


@dataclass
class Args:
    """What the fidelity run does."""

    episodes: int = field(default=6, metadata={"help": "episodes per demo policy (half fit, half measure)"})
    max_steps: int = field(default=60, metadata={"help": "step limit per Lift episode (trainer default)"})
    noise: float = field(default=0.3, metadata={"help": "action noise of the noisy-scripted policy"})
    image_size: int = field(default=64, metadata={"help": "side of the agent-view frames"})
    visual_epochs: int = field(default=30, metadata={"help": "training epochs of the visual scorer"})
    demos: int = field(default=30, metadata={"help": "SFT demonstration episodes (the trainer's default)"})
    bc_epochs: int = field(default=200, metadata={"help": "SFT behaviour-cloning epochs"})
    init_std: float = field(default=0.3, metadata={"help": "the SFT policy's action standard deviation"})
    groups: int = field(default=6, metadata={"help": "GRPO groups of the SFT policy's rollouts"})
    group_size: int = field(default=4, metadata={"help": "rollouts per group (same placement)"})
    k: int = field(default=4, metadata={"help": "window of the potential collapse"})
    seed: int = field(default=0, metadata={"help": "seeds resets, noise, the scorers and the policy"})
    robometer_tiny: bool = field(default=False, metadata={"help": "add a tiny random Robometer"})
    out: Path = field(default=RESULTS, metadata={"help": "output folder"})


def parse_args(argv: list[str] | None = None) -> Args:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, spec in Args.__dataclass_fields__.items():
        flag = "--" + name.replace("_", "-")
        if spec.type in ("bool", bool):
            parser.add_argument(flag, action="store_true", help=spec.metadata["help"])
        else:
            kind = {"int": int, "float": float, "Path": Path}[str(spec.type)]
            parser.add_argument(flag, type=kind, default=spec.default, help=spec.metadata["help"])
    return Args(**vars(parser.parse_args(argv)))


class SampledPolicy:
    """A Gaussian policy's sampled actions (its own noise generator), as a ``Policy`` for rollouts."""

    def __init__(self, policy: GaussianMLPPolicy, seed: int) -> None:
        self.policy = policy
        self._generator = torch.Generator().manual_seed(seed)

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]) -> list[np.ndarray]:
        with torch.no_grad():
            base = self.policy.distribution(list(observations)).base_dist
            noise = torch.randn(base.mean.shape, generator=self._generator)
            return list((base.mean + base.stddev * noise).numpy().astype(np.float32))


def policy_rollouts(env: Any, policy: GaussianMLPPolicy, args: Args) -> tuple[list[Episode], list[int]]:
    """The SFT policy's GRPO groups: one placement per group, one sampling seed per member."""
    limited = TimeLimit(env, args.max_steps)
    episodes, groups = [], []
    jobs = [(g, m) for g in range(args.groups) for m in range(args.group_size)]
    for group, member in tqdm(jobs, desc="policy rollouts"):
        sampler = SampledPolicy(policy, seed=args.seed * 1_000 + group * args.group_size + member)
        reset_seed = 500_000 + args.seed * 1_000 + group
        [episode] = collect_episodes(limited, sampler, 1, label="sft", seed=reset_seed)
        if episode.sim_error is None:  # an unknown outcome is left out, not counted as a failure
            episodes.append(episode)
            groups.append(group)
    return episodes, groups


def policy_fidelity(
    episodes: Sequence[Episode], groups: Sequence[int], scorers: Sequence[ProgressScorer], k: int
) -> tuple[list[dict[str, Any]], dict[str, list[Any]]]:
    """AUROC and within-group rank correlation of every scorer on the policy's rollouts."""
    batch = [progress_input(list(episode.observations)) for episode in episodes]
    successes = [episode.success for episode in episodes]
    rows, curves_by_scorer = [], {}
    for scorer in scorers:
        curves = list(scorer.progress(batch))
        curves_by_scorer[scorer.name] = curves
        for collapse in COLLAPSES:
            scores = [None if c is None else collapse_progress(c.progress, collapse, k) for c in curves]
            correlation, used = within_group_rank_correlation(scores, successes, groups)
            rows.append(
                {
                    "scorer": scorer.name,
                    "collapse": collapse,
                    "auroc": auroc(scores, successes),
                    "within_group_spearman": correlation,
                    "groups_used": used,
                    "scored": sum(s is not None for s in scores),
                    "unknown": sum(s is None for s in scores),
                }
            )
    return rows, curves_by_scorer


def _markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    def cell(value: Any) -> str:
        if value is None:
            return "–"
        return f"{value:.3f}" if isinstance(value, float) else str(value)

    names = list(rows[0])
    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    lines += ["| " + " | ".join(cell(row[name]) for name in names) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def sft_policy(args: Args) -> tuple[GaussianMLPPolicy, dict[str, float]]:
    """Behaviour cloning of noisy-expert demonstrations, as ``wmrl train --algo sft`` does."""
    env = RobosuiteEnv("Lift", cameras=(), object_states=True)
    try:
        demos = collect_demonstrations(
            env,
            ScriptedLiftPolicy(),
            episodes=args.demos,
            horizon=args.max_steps,
            noise=args.noise,
            seed=args.seed + 10_000,
        )
    finally:
        env.close()
    if not len(demos):
        raise ConfigError(
            f"none of the {demos.episodes} SFT demonstrations succeeded (noise={args.noise}, "
            f"max_steps={args.max_steps}); raise --demos or --max-steps, or lower --noise"
        )
    space = {"proprio": 9, "object_state": RobosuiteEnv.OBJECT_STATE_SIZES["Lift"]}
    policy = GaussianMLPPolicy(space, init_std=args.init_std, seed=args.seed)
    behaviour_cloning(policy, demos.observations, demos.actions, epochs=args.bc_epochs, seed=args.seed)
    return policy, {"demo_episodes": demos.episodes, "demo_success_rate": demos.success_rate}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    started = time.perf_counter()
    policy, sft = sft_policy(args)
    env = RobosuiteEnv("Lift", cameras=("agentview",), image_size=args.image_size, object_states=True)
    policies = {
        "scripted": ScriptedLiftPolicy(),
        "noisy-scripted": NoisyPolicy(ScriptedLiftPolicy(), noise=args.noise, seed=args.seed),
        "random": RandomPolicy(seed=args.seed),
    }
    episodes: list[Episode] = []
    limited = TimeLimit(env, args.max_steps)
    for label, demo_policy in tqdm(policies.items(), desc="demo policies"):
        episodes += collect_episodes(limited, demo_policy, args.episodes, label=label, seed=args.seed)
    rollouts, groups = policy_rollouts(env, policy, args)
    rollout_seconds = time.perf_counter() - started
    env.close()

    fit, held_out = episodes[0::2], episodes[1::2]
    learned = LearnedProgressScorer(LearnedProgressConfig(seed=args.seed))
    for episode in fit:
        learned.push(list(episode.observations), success=episode.success)
    learned.refit()
    visual = VisualProgressScorer(
        VisualProgressConfig(image_size=args.image_size, epochs=args.visual_epochs, seed=args.seed)
    )
    fit_outcomes = [e.success for e in fit]
    visual_fit: dict[str, float] = {"visual/frames": 0.0}
    if len(set(fit_outcomes)) == 2:  # else it stays untrained and says None (counted as unknown)
        visual_fit = visual.fit([progress_input(list(e.observations)) for e in fit], fit_outcomes)
    args.out.mkdir(parents=True, exist_ok=True)
    visual.save(args.out / "visual_scorer.pt")
    scorers: list[Any] = [SimStateProgressScorer(), learned, visual, ApproachProgressScorer()]
    robometer = None
    if args.robometer_tiny:
        from wmrl_adapters.robometer import RobometerScorer

        robometer = RobometerScorer(tiny_random=True, stride=16)
        scorers.append(robometer)

    results = []
    demo_curves: dict[str, Any] = {}
    for collapse in COLLAPSES:
        rows, curves_now = scorer_fidelity(held_out, scorers, collapse=collapse, k=args.k)
        results += rows
        demo_curves = demo_curves or curves_now
    policy_rows, policy_curves = policy_fidelity(rollouts, groups, scorers, args.k)
    if robometer is not None:
        robometer.close()

    outcomes = {
        label: sum(e.success for e in episodes if e.policy == label) / args.episodes for label in policies
    }
    summary = {
        "args": {k: str(v) for k, v in asdict(args).items()},
        "success_rate_by_policy": outcomes,
        "held_out_episodes": len(held_out),
        "held_out_successes": sum(e.success for e in held_out),
        "rollout_seconds": rollout_seconds,
        "results": [asdict(r) for r in results],
        "visual_fit": visual_fit,
        "sft": sft,
        "policy_rollouts": len(rollouts),
        "policy_successes": sum(e.success for e in rollouts),
        "policy_results": policy_rows,
    }
    table = fidelity_table(results)
    policy_table = _markdown(policy_rows)
    (args.out / "fidelity.md").write_text(
        f"Lift, agent-view camera {args.image_size}², step limit {args.max_steps}.\n\n"
        f"## On the demonstrations' distribution\n\n{args.episodes} episodes per policy, success rates "
        f"{outcomes}; the learned and visual scorers are fitted on half ({len(fit)} episodes, "
        f"{int(visual_fit['visual/frames'])} frames), all measured on the other {len(held_out)} "
        f"({summary['held_out_successes']} successes).\n\n" + table + "\n"
        f"## On the SFT policy's own rollouts (off the learned scorers' training distribution)\n\n"
        f"SFT: {sft['demo_episodes']} noisy demonstrations (success rate {sft['demo_success_rate']:.2f}), "
        f"{args.bc_epochs} behaviour-cloning epochs, action std {args.init_std}. {args.groups} groups of "
        f"{args.group_size} sampled rollouts ({summary['policy_rollouts']} episodes, "
        f"{summary['policy_successes']} successes). within_group_spearman: the Spearman correlation of the "
        "collapsed score with success inside a group, averaged over groups_used (the groups with both "
        "outcomes and untied scores).\n\n" + policy_table
    )
    (args.out / "fidelity.json").write_text(json.dumps(summary, indent=2))
    plot_progress_curves(held_out, demo_curves, args.out / "progress_curves.png")
    plot_progress_curves(rollouts, policy_curves, args.out / "policy_progress_curves.png")
    print(table)
    print(policy_table)
    print(json.dumps(outcomes))
    return summary


if __name__ == "__main__":
    main()
