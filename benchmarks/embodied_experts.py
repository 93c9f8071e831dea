"""How often each scripted expert solves each LIBERO task, and an SFT recipe that leaves room to improve.

Why: the SFT stage clones a scripted expert, so a task belongs in a run only where its expert succeeds
(:func:`wmrl_envs.embodied.policies.scripted_expert` accepts exactly the tasks this table measures as
solved); and RL can only show what it corrects when the cloned policy starts well below the ceiling
(the paper's SFT starts at 37 %). Two measurements, one script:

* the expert table: the clean expert (no noise) from each task's fixed initial states (the first
  ``--states`` of them, the ones the trainer's evaluation uses), success per task with its standard
  error -> ``table.md``, ``table.json``, ``experts.png``;
* ``--sft-calibration``: ``wmrl train --algo sft`` (scripted demos with DART noise, behaviour cloning,
  the deterministic evaluation: mean action, fixed initial states) over a grid of demonstration count x
  noise x epochs -> ``sft_calibration.md`` and ``.json``, with the settings whose success lies in
  0.3-0.5.

Run with the embodied stack built (``bash scripts/embodied.sh``)::

    nice -n 10 python benchmarks/embodied_experts.py --tasks 0,1,2,3,4,5,6,7,8,9 --states 10
    nice -n 10 python benchmarks/embodied_experts.py --sft-calibration
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm
from wmrl_adapters.train.run.measure import mean_se

from wmrl_algos.errors import ConfigError

__all__ = ["Args", "expert_table", "main", "parse_args", "sft_calibration"]

RESULTS = Path(__file__).resolve().parent / "results" / "embodied_experts"
SUITES = ("libero_object", "libero_spatial")
"""The LIBERO suites that have a scripted expert (:data:`~wmrl_envs.embodied.policies.SCRIPTED_EXPERTS`)."""
SUITE_TASKS = 10
INIT_STATES = 50
SOLVED = 0.8
"""Expert success from which a task counts as solved (and :func:`scripted_expert` accepts it)."""
SFT_TARGET = (0.3, 0.5)


@dataclass(frozen=True)
class Args:
    """The benchmark's settings (each one a command-line flag).

    Example:
        >>> Args(tasks=(0, 5), states=2).states
        2
    """

    suite: str = field(default=SUITES[0], metadata={"help": f"LIBERO suite of the expert table: {SUITES}"})
    tasks: tuple[int, ...] = field(
        default=tuple(range(SUITE_TASKS)), metadata={"help": "task ids to measure the expert on"}
    )
    states: int = field(default=10, metadata={"help": f"fixed initial states per task (1-{INIT_STATES})"})
    first_state: int = field(
        default=0, metadata={"help": "index of the first of them (10: states the expert was not tuned on)"}
    )
    horizon: int = field(default=280, metadata={"help": "step limit of an expert episode (libero_object's)"})
    out: Path | None = field(
        default=None,
        metadata={"help": f"results directory (default: {RESULTS}, a suite's own folder for other suites)"},
    )
    workers: int = field(default=2, metadata={"help": "simulator workers (at most 2 on a shared machine)"})
    sft_calibration: bool = field(default=False, metadata={"help": "run the SFT calibration grid instead"})
    sft_env: str = field(default="robosuite:Lift", metadata={"help": "env of the SFT calibration"})
    sft_demos: tuple[int, ...] = field(default=(2, 4, 8), metadata={"help": "demonstration counts to try"})
    sft_noise: tuple[float, ...] = field(default=(0.3,), metadata={"help": "DART noise levels to try"})
    sft_epochs: tuple[int, ...] = field(default=(100,), metadata={"help": "behaviour-cloning epochs to try"})
    sft_seeds: int = field(default=3, metadata={"help": "seeds per SFT setting"})
    sft_eval: int = field(default=50, metadata={"help": "evaluation episodes of each SFT run"})
    sft_horizon: int = field(default=50, metadata={"help": "step limit of the SFT demos and evaluation"})
    sft_runs: Path | None = field(
        default=None, metadata={"help": "keep the SFT run directories here (finished ones are reused)"}
    )

    def __post_init__(self) -> None:
        if self.suite not in SUITES:
            raise ConfigError(f"suite={self.suite!r}; the suites with a scripted expert: {list(SUITES)}")
        bad = [t for t in self.tasks if not 0 <= t < SUITE_TASKS]
        if not self.tasks or bad:
            raise ConfigError(f"tasks={list(self.tasks)!r}; pass task ids in 0-{SUITE_TASKS - 1}")
        if not 1 <= self.states <= INIT_STATES:
            raise ConfigError(f"states={self.states!r}; pass 1-{INIT_STATES} fixed initial states per task")
        if not 0 <= self.first_state <= INIT_STATES - self.states:
            raise ConfigError(
                f"first_state={self.first_state!r} with states={self.states!r}; a task has {INIT_STATES} "
                f"fixed initial states, so pass 0-{INIT_STATES - self.states}"
            )
        if not 1 <= self.workers <= 2:
            raise ConfigError(f"workers={self.workers!r}; pass 1 or 2 (the machine is shared)")
        for name in ("horizon", "sft_seeds", "sft_eval", "sft_horizon"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)!r}; pass a positive count")
        if not self.sft_demos or min(self.sft_demos) < 1 or not self.sft_epochs or min(self.sft_epochs) < 1:
            raise ConfigError(
                f"sft_demos={list(self.sft_demos)!r}, sft_epochs={list(self.sft_epochs)!r}; "
                "pass positive counts"
            )
        if not self.sft_noise or min(self.sft_noise) < 0:
            raise ConfigError(f"sft_noise={list(self.sft_noise)!r}; pass standard deviations >= 0")

    @property
    def out_dir(self) -> Path:
        """Where the results go: ``out``, else libero_object's table at the top, another suite's below."""
        if self.out is not None:
            return self.out
        return RESULTS if self.suite == SUITES[0] else RESULTS / self.suite


def _numbers(kind: type, text: str) -> tuple[Any, ...]:
    try:
        return tuple(kind(part) for part in text.split(",") if part.strip())
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r}: pass comma-separated {kind.__name__}s") from error


def parse_args(argv: Sequence[str] | None = None) -> Args:
    """The :class:`Args` of a command line; a bad value exits with a message quoting it."""
    defaults = Args()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default=defaults.suite)
    parser.add_argument("--tasks", type=lambda t: _numbers(int, t), default=defaults.tasks)
    parser.add_argument("--states", type=int, default=defaults.states)
    parser.add_argument("--first-state", type=int, default=defaults.first_state)
    parser.add_argument("--horizon", type=int, default=defaults.horizon)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--workers", type=int, default=defaults.workers)
    parser.add_argument("--sft-calibration", action="store_true")
    parser.add_argument("--sft-env", default=defaults.sft_env)
    parser.add_argument("--sft-demos", type=lambda t: _numbers(int, t), default=defaults.sft_demos)
    parser.add_argument("--sft-noise", type=lambda t: _numbers(float, t), default=defaults.sft_noise)
    parser.add_argument("--sft-epochs", type=lambda t: _numbers(int, t), default=defaults.sft_epochs)
    parser.add_argument("--sft-seeds", type=int, default=defaults.sft_seeds)
    parser.add_argument("--sft-eval", type=int, default=defaults.sft_eval)
    parser.add_argument("--sft-horizon", type=int, default=defaults.sft_horizon)
    parser.add_argument("--sft-runs", type=Path, default=None)
    namespace = parser.parse_args(argv)
    try:
        return Args(**vars(namespace))
    except ConfigError as error:
        parser.error(str(error))
        raise  # unreachable: parser.error exits


def _standard_error(rate: float, n: int) -> float:
    return math.sqrt(rate * (1 - rate) / n) if n else float("nan")


def _expert_episodes(suite: str, task: int, states: Sequence[int], horizon: int, bar: tqdm) -> dict[str, Any]:
    """The clean expert of ``suite`` from each of ``states`` of ``task``: success, steps, wall seconds."""
    from wmrl_envs.embodied import LiberoEnv
    from wmrl_envs.embodied.policies import SCRIPTED_EXPERTS

    expert = SCRIPTED_EXPERTS[f"libero:{suite}"]()
    env = LiberoEnv(suite, cameras=(), object_states=True)
    successes, steps, instruction = [], [], ""
    started = time.perf_counter()
    try:
        for state in states:
            obs, info = env.reset(seed=state, options={"task_id": task, "init_index": state})
            instruction = info["instruction"]
            step = 0
            while step < horizon:
                step += 1
                obs, _, terminated, truncated, info = env.step(expert.act([obs], [info])[0])
                if terminated or truncated:
                    break
            successes.append(bool(info.get("success")))
            steps.append(step)
            bar.update(1)
    finally:
        env.close()
    rate = float(np.mean(successes))
    return {
        "task": task,
        "instruction": instruction,
        "success": rate,
        "se": _standard_error(rate, len(successes)),
        "episodes": len(successes),
        "solved_states": [s for s, ok in zip(states, successes, strict=True) if ok],
        "mean_steps": float(np.mean(steps)),
        "wall_seconds": time.perf_counter() - started,
    }


def expert_table(args: Args) -> list[dict[str, Any]]:
    """Measure the expert on every task of ``args`` (tasks spread over ``args.workers`` simulators)."""
    states = list(range(args.first_state, args.first_state + args.states))
    with (
        tqdm(total=len(args.tasks) * len(states), desc="expert episodes") as bar,
        concurrent.futures.ThreadPoolExecutor(args.workers) as pool,
    ):
        rows = list(
            pool.map(lambda task: _expert_episodes(args.suite, task, states, args.horizon, bar), args.tasks)
        )
    return sorted(rows, key=lambda row: row["task"])


def _write_expert_table(rows: Sequence[dict[str, Any]], args: Args) -> None:
    import matplotlib.pyplot as plt

    from wmrl_envs.embodied.policies import SCRIPTED_EXPERTS

    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    solved = [row["task"] for row in rows if row["success"] >= SOLVED]
    expert = SCRIPTED_EXPERTS[f"libero:{args.suite}"].__name__
    (out / "table.json").write_text(
        json.dumps(
            {
                "suite": args.suite,
                "expert": expert,
                "states": args.states,
                "first_state": args.first_state,
                "horizon": args.horizon,
                "solved_at": SOLVED,
                "solved": solved,
                "rows": rows,
            },
            indent=2,
        )
        + "\n"
    )
    which = (
        f"the first {args.states}"
        if args.first_state == 0
        else f"{args.states} ({args.first_state}-{args.first_state + args.states - 1})"
    )
    lines = [
        f"# Scripted expert (`{expert}`) on {args.suite}",
        "",
        f"Clean expert (no noise), {which} fixed initial states of each task, step limit "
        f"{args.horizon}. Solved (success >= {SOLVED}): tasks {solved}.",
        "",
        "| task | instruction | success | ± s.e. | episodes | mean steps | wall s |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['task']} | {r['instruction']} | {r['success']:.2f} | {r['se']:.2f} | {r['episodes']} | "
        f"{r['mean_steps']:.0f} | {r['wall_seconds']:.0f} |"
        for r in rows
    ]
    (out / "table.md").write_text("\n".join(lines) + "\n")
    figure, axes = plt.subplots(figsize=(8, 3.5))
    axes.bar(
        [str(r["task"]) for r in rows],
        [r["success"] for r in rows],
        yerr=[r["se"] for r in rows],
        color=["tab:green" if r["success"] >= SOLVED else "tab:gray" for r in rows],
    )
    axes.axhline(SOLVED, color="black", linestyle="--", linewidth=1, label=f"solved ({SOLVED})")
    axes.set(
        xlabel=f"{args.suite} task",
        ylabel="expert success",
        ylim=(0, 1.05),
        title=f"Scripted expert on {args.suite}, {which} fixed initial states per task",
    )
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(out / "experts.png", dpi=120)
    plt.close(figure)


def _sft_run(
    env: str, demos: int, noise: float, epochs: int, seed: int, args: Args, root: Path
) -> dict[str, Any]:
    from wmrl_adapters.train.embodied import EmbodiedTrainer
    from wmrl_adapters.train.embodied.config import EmbodiedConfig

    config = EmbodiedConfig(
        env=env,
        algo="sft",
        demos=demos,
        demo_noise=noise,
        bc_epochs=epochs,
        seed=seed,
        horizon=args.sft_horizon,
        eval_samples=args.sft_eval,
        workers=args.workers,
        progress=False,
    )
    setting = {"demos": demos, "demo_noise": noise, "bc_epochs": epochs, "seed": seed}
    run_dir = root / f"d{demos}-n{noise}-e{epochs}-s{seed}"
    if not (run_dir / "summary.json").is_file():  # a finished run is read back, anything else is redone
        shutil.rmtree(run_dir, ignore_errors=True)
        try:
            EmbodiedTrainer(config, run_dir).run()
        except ConfigError as error:  # no demonstration succeeded: this seed gives no policy to evaluate
            return {**setting, "success": None, "episodes": 0, "error": str(error), "wall_seconds": 0.0}
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line]
    final = lines[-1]  # the sft step and its evaluation, committed together
    return {
        **setting,
        "success": float(final["eval/success_rate"]),
        "episodes": int(final["eval/episodes"]),
        "demo_successes": round(final["sft/demo_success_rate"] * final["sft/demo_episodes"]),
        # the run's own record (demonstrations, behaviour cloning, evaluations), so a run read back
        # reports the seconds it took, not the seconds it took to read
        "wall_seconds": sum(
            float(final.get(key, 0.0))
            for key in ("time/rollout_seconds", "time/policy_update_seconds", "time/eval_seconds")
        ),
    }


def sft_calibration(args: Args) -> list[dict[str, Any]]:
    """Every (demos, noise, epochs) setting of ``args`` over ``args.sft_seeds`` seeds: success ± s.e."""
    grid = [(d, n, e) for d in args.sft_demos for n in args.sft_noise for e in args.sft_epochs]
    settings = []
    with tempfile.TemporaryDirectory(prefix="wmrl-sft-calibration-") as scratch:
        root = args.sft_runs or Path(scratch)
        for demos, noise, epochs in tqdm(grid, desc="sft settings"):
            runs = [
                _sft_run(args.sft_env, demos, noise, epochs, seed, args, root)
                for seed in range(args.sft_seeds)
            ]
            rates = [run["success"] for run in runs if run["success"] is not None]
            success, se_over_seeds, _ = mean_se(rates)
            settings.append(
                {
                    "env": args.sft_env,
                    "demos": demos,
                    "demo_noise": noise,
                    "bc_epochs": epochs,
                    "horizon": args.sft_horizon,
                    "seeds": args.sft_seeds,
                    "eval_episodes": args.sft_eval,
                    "success": success,
                    "seeds_without_policy": sum(run["success"] is None for run in runs),
                    "se_over_seeds": se_over_seeds,
                    "per_seed": [float(r) for r in rates],
                    "demo_successes": [run.get("demo_successes", 0) for run in runs],
                    "wall_seconds": float(sum(run["wall_seconds"] for run in runs)),
                }
            )
    return settings


def _write_sft_calibration(settings: Sequence[dict[str, Any]], args: Args) -> None:
    args.out_dir.mkdir(parents=True, exist_ok=True)
    low, high = SFT_TARGET
    inside = [s for s in settings if s["success"] is not None and low <= s["success"] <= high]
    (args.out_dir / "sft_calibration.json").write_text(
        json.dumps({"target": SFT_TARGET, "settings": settings, "in_target": inside}, indent=2) + "\n"
    )
    states = (  # a LIBERO evaluation takes the first sft_eval fixed states of every task; robosuite has none
        f"the first {args.sft_eval} fixed initial states of each task"
        if args.sft_env.startswith("libero:")
        else f"{args.sft_eval} fixed initial states"
    )
    lines = [
        f"# SFT calibration on {args.sft_env}",
        "",
        f"`wmrl train --env {args.sft_env} --algo sft` per setting and seed; deterministic evaluation (mean "
        f"action, {states}, step limit {args.sft_horizon}); success is the mean "
        f"over {args.sft_seeds} seeds ± its standard error over seeds; wall s sums the runs' own "
        f"demonstration, cloning and evaluation seconds. Target: {low}-{high}.",
        "",
        "| demos | demo noise | bc epochs | success | ± s.e. | per seed | demo successes | wall s |",
        "|---:|---:|---:|---:|---:|---|---|---:|",
    ]
    for s in settings:
        se = "–" if s["se_over_seeds"] is None else f"{s['se_over_seeds']:.2f}"
        success = "–" if s["success"] is None else f"{s['success']:.2f}"
        lines.append(
            f"| {s['demos']} | {s['demo_noise']} | {s['bc_epochs']} | {success} | {se} | "
            f"{', '.join(f'{r:.2f}' for r in s['per_seed'])} | {', '.join(map(str, s['demo_successes']))} | "
            f"{s['wall_seconds']:.0f} |"
        )
    (args.out_dir / "sft_calibration.md").write_text("\n".join(lines) + "\n")


def main(argv: Sequence[str] | None = None) -> None:
    """Run the expert table, or with ``--sft-calibration`` the SFT grid, and write the results."""
    args = parse_args(argv)
    if args.sft_calibration:
        _write_sft_calibration(sft_calibration(args), args)
    else:
        _write_expert_table(expert_table(args), args)
    print(f"wrote {args.out_dir}")


if __name__ == "__main__":
    main()
