"""How much does evaluating the Gaussian policy at its mean action under-report what its samples do?

The embodied evaluation plays the policy's *mean* action from fixed states, as the issue asked: it is
deterministic, so two methods differ only by what they learned. But a behaviour-cloned Gaussian's mean is
not the policy it was trained as. This benchmark measures the gap on the same states: for every run
directory of one method (``<method>-s<seed>``: its ``config.json`` and ``policy.pt``), the success of the
mean action and of a sampled action (the policy's own noise, seeded per state), paired by state, then
over seeds. A positive gap means the mean-action table understates the stochastic policy, and an RL
method can gain at the mean by learning what the noise did.

    python benchmarks/embodied_eval_modes.py --runs benchmarks/results/embodied_lift_hack_stale/runs \\
        --out benchmarks/results/embodied_eval_modes

Writes ``table.md``, ``table.json`` and ``eval_modes.png``. Needs the embodied stack and the runs'
``policy.pt`` files, which are git-ignored: ``benchmarks/embodied_table2.py`` re-makes them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from embodied_table2 import _seed_dirs
from tqdm import tqdm
from wmrl_adapters.train.embodied.config import EmbodiedConfig
from wmrl_adapters.train.embodied.trainer import EVAL_SEED, POLICY_FILE, embodied_policy, play_episode
from wmrl_adapters.train.run.measure import mean_se
from wmrl_adapters.train.run.state_io import load_state

from wmrl_algos.errors import ConfigError
from wmrl_envs.embodied.envs import RobosuiteEnv
from wmrl_envs.embodied.outcomes import outcome_success

MODES = ("mean", "sampled")


def run_dirs(runs: Path, method: str) -> list[Path]:
    """``method``'s run directories that hold a policy, in seed order."""
    found = _seed_dirs(runs, method)
    return [p for p in found if (p / POLICY_FILE).is_file() and (p / "config.json").is_file()]


def evaluate(run_dir: Path) -> dict[str, Any]:
    """Mean-action and sampled-action success of one run's policy on its evaluation states."""
    saved = json.loads((run_dir / "config.json").read_text())
    config = EmbodiedConfig(**{k: v for k, v in saved.items() if k in EmbodiedConfig.__dataclass_fields__})
    if config.kind != "robosuite":
        raise ConfigError(f"{run_dir}: env {config.env!r}; this benchmark evaluates robosuite runs")
    env = RobosuiteEnv(config.name, cameras=(), object_states=True)
    outcomes: dict[str, list[bool | None]] = {mode: [] for mode in MODES}
    try:
        policy = embodied_policy(config, env.observation_space)
        policy.load_state_dict(load_state(run_dir / POLICY_FILE, if_older="re-make the run with this wmrl"))
        for index in range(config.eval_samples):
            for mode in MODES:
                generator = (
                    None if mode == "mean" else torch.Generator().manual_seed(config.seed * 10_000 + index)
                )
                outcome, _ = play_episode(env, policy, (EVAL_SEED + index, {}), config.horizon, generator)
                outcomes[mode].append(outcome_success(outcome))
    finally:
        env.close()
    pairs = [(m, s) for m, s in zip(outcomes["mean"], outcomes["sampled"], strict=True) if None not in (m, s)]
    gap, gap_se, _ = mean_se([float(s) - float(m) for m, s in pairs])
    summary_path = run_dir / "summary.json"
    recorded = json.loads(summary_path.read_text()).get("eval", {}) if summary_path.is_file() else {}
    return {
        "run": run_dir.name,
        "seed": config.seed,
        "states": config.eval_samples,
        "paired": len(pairs),
        "mean": mean_se([float(m) for m, _ in pairs])[0],
        "sampled": mean_se([float(s) for _, s in pairs])[0],
        "gap": gap,
        "gap_se": gap_se,
        # The run's own evaluation (mean action, same states): equal to "mean" if this one reproduces it.
        "recorded_mean": recorded.get("eval/success_rate"),
        "outcomes": outcomes,
    }


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """Over seeds: each mode's mean success and the gap, ± s.e. over seeds."""
    result: dict[str, float | None] = {"seeds": float(len(rows))}
    for name in ("mean", "sampled", "gap"):
        result[name], result[f"{name}_se"], _ = mean_se([r[name] for r in rows])
    return result


def _cell(value: float | None, se: float | None = None, signed: bool = False) -> str:
    if value is None:
        return "–"
    text = f"{value:+.3f}" if signed else f"{value:.3f}"
    return text + (f" ± {se:.3f}" if se is not None else "")


def write_outputs(rows: Sequence[dict[str, Any]], out: Path, args: argparse.Namespace) -> str:
    """``table.md``, ``table.json`` and the plot; returns the markdown."""
    over = summary(rows)
    lines = [
        f"Runs: `{args.runs}`, method `{args.method}`. Each run's evaluation states, the same for both "
        "modes; "
        "sampled: one draw of the policy's own noise per state (seeded). Gap = sampled − mean, ± paired "
        "s.e. over states (per seed) or over seeds (last row).",
        "",
        "| run | states | mean action (the run's own evaluation) | sampled action | gap |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['run']} | {row['paired']} | {_cell(row['mean'])} ({_cell(row['recorded_mean'])}) | "
            f"{_cell(row['sampled'])} | "
            f"{_cell(row['gap'], row['gap_se'], signed=True)} |"
        )
    lines.append(
        f"| **over {int(over['seeds'] or 0)} seeds** | | {_cell(over['mean'], over['mean_se'])} | "
        f"{_cell(over['sampled'], over['sampled_se'])} | "
        f"**{_cell(over['gap'], over['gap_se'], signed=True)}** |"
    )
    text = "\n".join(lines) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text(text)
    settings = {key: str(value) for key, value in vars(args).items()}
    (out / "table.json").write_text(
        json.dumps({"settings": settings, "summary": over, "rows": rows}, indent=2)
    )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 3.5))
    positions = np.arange(len(rows))
    for offset, mode in ((-0.2, "mean"), (0.2, "sampled")):
        values = [row[mode] if row[mode] is not None else np.nan for row in rows]
        axis.bar(positions + offset, values, width=0.4, label=f"{mode} action")
    axis.set_xticks(positions, [row["run"] for row in rows], rotation=45, fontsize=8)
    axis.set_ylabel("success on the evaluation states")
    axis.set_ylim(0, 1)
    axis.legend(fontsize=8)
    axis.set_title(f"mean vs sampled action (gap {_cell(over['gap'], over['gap_se'], signed=True)})")
    figure.tight_layout()
    figure.savefig(out / "eval_modes.png", dpi=90)
    plt.close(figure)
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, required=True, help="a runs/ folder of embodied_table2.py")
    parser.add_argument("--method", default="sft", help="which runs: sft, wm, wmrl, anchors, grpo")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--torch-threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.torch_threads)
    dirs = run_dirs(args.runs, args.method)
    if not dirs:
        print(f"error: no {args.method}-s* run with {POLICY_FILE} under {args.runs}", file=sys.stderr)
        return 2
    try:
        rows = [evaluate(run_dir) for run_dir in tqdm(dirs, desc="runs")]
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(write_outputs(rows, args.out, args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
