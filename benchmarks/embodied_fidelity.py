"""Scorer fidelity on the embodied track: do progress scorers rank successes above failures?

Rolls out scripted, noisy-scripted and random policies on robosuite's Lift (successes, near misses and
clear failures), fits the learned scorer on half of the episodes, and measures every scorer on the
other half: AUROC and correlation of the collapsed score with success, mean scores, cost per frame,
for the potential collapse (the default) and the hackable max collapse. Writes a Markdown table, a
JSON file and a plot of the progress curves of successful vs failed episodes.

    python benchmarks/embodied_fidelity.py                  # the committed results (~20 min, 2 busy cores)
    python benchmarks/embodied_fidelity.py --episodes 2 --out /tmp/x   # smoke size
    python benchmarks/embodied_fidelity.py --robometer-tiny     # + a tiny random Robometer (code path only)

Needs the embodied stack (``bash scripts/embodied.sh``).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gymnasium.wrappers import TimeLimit

from wmrl_envs.embodied.envs import RobosuiteEnv
from wmrl_envs.embodied.fidelity import (
    Episode,
    collect_episodes,
    fidelity_table,
    plot_progress_curves,
    scorer_fidelity,
)
from wmrl_envs.embodied.learned import LearnedProgressConfig, LearnedProgressScorer
from wmrl_envs.embodied.policies import NoisyPolicy, RandomPolicy, ScriptedLiftPolicy
from wmrl_envs.embodied.progress import SimStateProgressScorer

RESULTS = Path(__file__).resolve().parent / "results" / "embodied_fidelity"


@dataclass
class Args:
    """What the fidelity run does."""

    episodes: int = field(default=6, metadata={"help": "episodes per policy (half fit, half measure)"})
    max_steps: int = field(default=120, metadata={"help": "step limit per Lift episode"})
    noise: float = field(default=0.3, metadata={"help": "action noise of the noisy-scripted policy"})
    k: int = field(default=4, metadata={"help": "window of the potential collapse"})
    seed: int = field(default=0, metadata={"help": "seeds resets, noise and the learned scorer"})
    robometer_tiny: bool = field(
        default=False, metadata={"help": "add a tiny random Robometer (needs cameras)"}
    )
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


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    cameras = ("agentview",) if args.robometer_tiny else ()
    env = RobosuiteEnv("Lift", cameras=cameras, image_size=64)
    policies = {
        "scripted": ScriptedLiftPolicy(),
        "noisy-scripted": NoisyPolicy(ScriptedLiftPolicy(), noise=args.noise, seed=args.seed),
        "random": RandomPolicy(seed=args.seed),
    }
    start = time.perf_counter()
    episodes: list[Episode] = []
    limited = TimeLimit(env, args.max_steps)
    for label, policy in policies.items():
        episodes += collect_episodes(limited, policy, args.episodes, label=label, seed=args.seed)
    rollout_seconds = time.perf_counter() - start
    env.close()
    fit, held_out = episodes[0::2], episodes[1::2]
    learned = LearnedProgressScorer(LearnedProgressConfig(seed=args.seed))
    for episode in fit:
        learned.push(list(episode.observations), success=episode.success)
    learned.refit()
    scorers: list[Any] = [SimStateProgressScorer(), learned]
    robometer = None
    if args.robometer_tiny:
        from wmrl_adapters.robometer import RobometerScorer

        robometer = RobometerScorer(tiny_random=True, stride=16)
        scorers.append(robometer)
    results = []
    curves: dict[str, Any] = {}
    for collapse in ("potential", "max"):
        rows, curves_now = scorer_fidelity(held_out, scorers, collapse=collapse, k=args.k)
        results += rows
        curves = curves or curves_now
    if robometer is not None:
        robometer.close()
    args.out.mkdir(parents=True, exist_ok=True)
    table = fidelity_table(results)
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
    }
    (args.out / "fidelity.md").write_text(
        f"Lift, {args.episodes} episodes per policy, success rates {outcomes}; "
        f"{len(held_out)} held-out episodes ({summary['held_out_successes']} successes).\n\n" + table
    )
    (args.out / "fidelity.json").write_text(json.dumps(summary, indent=2))
    plot_progress_curves(held_out, curves, args.out / "progress_curves.png")
    print(table)
    print(json.dumps(outcomes))
    return summary


if __name__ == "__main__":
    main()
