"""What ``WorldModelWrapper`` adds per step, next to the bare env and the bare world model.

Why: the wrapper sits on every step of every trajectory, so its own bookkeeping (checking the action,
building the query, checking the prediction, the info block, the cost ledger) must be small next to
the cheapest world model worth using. Target: under 5% of the world model's own cost for a trivial
world model that costs about 1 ms per query.

Method: one ``CostlyToyEnv`` (free steps) and a trivial world model that does a calibrated amount of
arithmetic (about ``--world-model-seconds`` of CPU per query) and answers a constant reward, so
nothing but the wrapper differs between the timed calls. Each wrapper step is compared with the same
work done by hand without the wrapper: for simulate mode, building the query from
``world_model_context()``, ``predict`` and ``apply_prediction``; for score mode and anchor episodes,
building the query, ``env.step`` and ``predict``. The bare ``env.step`` and bare ``predict`` are timed
too, for reference. Every call is timed with ``time.perf_counter`` (wall clock, the figure that
matters) and ``time.thread_time`` (CPU, which the shared machine's load does not inflate), under two
schedules: blocked (rounds of consecutive calls of one configuration: warm caches, the usual
microbenchmark; rounds keep a drifting load shared) and interleaved (one call of each configuration per
repetition, in rotation: each call runs after other work, as a step between two model calls does).
Overhead = wrapper - by hand, paired by round (blocked) or repetition (interleaved), median and IQR;
percent = overhead / median bare ``predict`` of the 1 ms model.

A second table times whole :class:`~wmrl_envs.rollouts.GroupedRollout` steps (the paper's 8 groups x 8
trajectories x 4 turns) and reports what a trajectory-step costs outside the world model.

Run ``python benchmarks/wrapper_overhead.py`` (a few minutes on a busy 2-core machine) or ``--smoke``.
It prints the tables and writes ``results.md``, ``results.csv`` and ``wrapper_overhead.png`` into
``--output-dir``.
"""

from __future__ import annotations

import csv
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm
from wmrl_adapters.cli import parse_dataclass_args

from wmrl_envs.rollouts import GroupedRollout, RolloutConfig, RolloutTask
from wmrl_envs.toy import CostlyToyEnv
from wmrl_envs.world_model import Prediction, WorldModelQuery
from wmrl_envs.wrapper import WorldModelWrapper

__all__ = ["Args", "BusyWorldModel", "calibrate", "main", "measure", "measure_rollouts", "parse_args"]


@dataclass
class Args:
    """Command-line settings (``--name value``; booleans as ``--flag``)."""

    repetitions: int = field(default=3000, metadata={"help": "Timed calls per configuration."})
    warmup: int = field(default=200, metadata={"help": "Untimed calls per configuration before timing."})
    world_model_seconds: float = field(
        default=0.001, metadata={"help": "CPU time the trivial world model spends per query (target: 1 ms)."}
    )
    dim: int = field(default=2, metadata={"help": "Action dimension of the toy env."})
    rollout_steps: int = field(
        default=30, metadata={"help": "Grouped-rollout training steps timed (second table; 0 skips it)."}
    )
    groups: int = field(default=8, metadata={"help": "Groups per grouped-rollout step (paper: 8)."})
    group_size: int = field(default=8, metadata={"help": "Trajectories per group (paper: 8)."})
    turns: int = field(default=4, metadata={"help": "Turns per episode in the grouped rollout (paper: 4)."})
    target_percent: float = field(default=5.0, metadata={"help": "Overhead target, % of the world model."})
    block: int = field(default=25, metadata={"help": "Calls per configuration in a row (blocked schedule)."})
    seed: int = field(default=0, metadata={"help": "Seed of the actions and the env."})
    output_dir: str = field(
        default="benchmarks/results/wrapper_overhead", metadata={"help": "Where the table and plot go."}
    )
    smoke: bool = field(default=False, metadata={"help": "Tiny budget (a few seconds) for tests."})

    def __post_init__(self) -> None:
        if self.smoke:
            self.repetitions, self.warmup, self.block = min(self.repetitions, 60), min(self.warmup, 10), 5
            self.rollout_steps = min(self.rollout_steps, 2)
        if self.block < 1 or self.repetitions < 4 * self.block:
            raise SystemExit(
                f"--repetitions={self.repetitions!r} with --block={self.block!r}; pass a block >= 1 and at "
                "least 4 blocks of repetitions (quartiles need them)"
            )
        if self.warmup < 0 or self.rollout_steps < 0:
            raise SystemExit(
                f"--warmup={self.warmup!r}, --rollout-steps={self.rollout_steps!r}; pass 0 or more"
            )
        if not self.world_model_seconds > 0:
            raise SystemExit(
                f"--world-model-seconds={self.world_model_seconds!r}; pass a cost > 0, e.g. 0.001"
            )
        if self.dim < 1 or self.groups < 1 or self.turns < 1:
            raise SystemExit(
                f"--dim={self.dim}, --groups={self.groups}, --turns={self.turns}; pass 1 or more"
            )
        if self.group_size < 2:
            raise SystemExit(
                f"--group-size={self.group_size!r}; GRPO needs at least 2 trajectories per group"
            )


class BusyWorldModel:
    """The trivial world model: a fixed amount of arithmetic per query, then a constant reward.

    The work is a plain Python loop of ``iterations`` turns per query (see :func:`calibrate`). It polls
    no clock: on this machine a clock read costs about 0.6 us and disturbs the caches, so a
    clock-polling spin would make whatever runs right after it look slower than it is.

    Attributes:
        cpu_seconds: CPU time spent inside :meth:`predict` so far.
    """

    def __init__(self, iterations: int) -> None:
        self.iterations = iterations
        self.name = f"busy({iterations} iterations)"
        self.cpu_seconds = 0.0

    def predict(self, queries: Sequence[WorldModelQuery]) -> list[Prediction]:
        """One constant prediction per query, after ``iterations`` loop turns each."""
        cpu_start = time.thread_time()
        _work(self.iterations * len(queries))
        predictions = [Prediction(reward=0.5) for _ in queries]
        self.cpu_seconds += time.thread_time() - cpu_start
        return predictions


def _work(iterations: int) -> int:
    total = 0
    for i in range(iterations):
        total += i * i
    return total


def calibrate(seconds: float) -> int:
    """Loop turns that cost ``seconds`` of CPU, measured once in CPU time (load does not skew it)."""
    probe = 50_000
    _work(probe)
    samples = []
    for _ in range(9):
        start = time.thread_time()
        _work(probe)
        samples.append(time.thread_time() - start)
    return max(1, round(seconds * probe / float(np.median(samples))))


def _endless_env(dim: int) -> CostlyToyEnv:
    return CostlyToyEnv(dim=dim, max_turns=10**9, success_threshold=1.0)


Call = Callable[[np.ndarray], None]


def _stepper(env: WorldModelWrapper | CostlyToyEnv, options: dict[str, object]) -> Call:
    def step(action: np.ndarray) -> None:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset(options=options)

    env.reset(seed=0, options=options)
    return step


def _configurations(args: Args, iterations: int) -> dict[str, Call]:
    task = {"task_id": args.seed}
    out: dict[str, Call] = {"env.step (bare)": _stepper(_endless_env(args.dim), task)}
    for label, turns in (("1 ms", iterations), ("zero-cost", 0)):
        model = BusyWorldModel(turns)
        alone = _endless_env(args.dim)
        alone.reset(seed=0, options=task)

        def predict(action: np.ndarray, model: BusyWorldModel = model, env: CostlyToyEnv = alone) -> None:
            model.predict([WorldModelQuery(env.world_model_context(), action, key="group-/episode0/step0")])

        out[f"world_model.predict ({label})"] = predict
        by_hand = _endless_env(args.dim)
        by_hand.reset(seed=0, options=task)

        def simulate_by_hand(
            action: np.ndarray, model: BusyWorldModel = model, env: CostlyToyEnv = by_hand
        ) -> None:
            query = WorldModelQuery(env.world_model_context(), action, key="group-/episode0/step0")
            env.apply_prediction(action, model.predict([query])[0])

        out[f"by hand: simulate ({label})"] = simulate_by_hand
        scored_by_hand = _endless_env(args.dim)
        scored_by_hand.reset(seed=0, options=task)

        def score_by_hand(
            action: np.ndarray, model: BusyWorldModel = model, env: CostlyToyEnv = scored_by_hand
        ) -> None:
            query = WorldModelQuery(env.world_model_context(), action, key="group-/episode0/step0")
            env.step(action)
            model.predict([query])

        out[f"by hand: step + predict ({label})"] = score_by_hand
        simulate = WorldModelWrapper(_endless_env(args.dim), model)
        out[f"wrapper simulate ({label})"] = _stepper(simulate, task)
        anchor = WorldModelWrapper(_endless_env(args.dim), model)
        out[f"wrapper simulate, anchor ({label})"] = _stepper(anchor, {**task, "anchor": True})
        score = WorldModelWrapper(_endless_env(args.dim), model, mode="score")
        out[f"wrapper score ({label})"] = _stepper(score, task)
    return out


Timings = dict[str, np.ndarray]


def measure(args: Args, iterations: int, *, interleaved: bool) -> tuple[Timings, Timings]:
    """Time every configuration ``args.repetitions`` times.

    Args:
        args: the budget.
        iterations: loop turns per query of the ~1 ms world model (:func:`calibrate`).
        interleaved: True: one call of each configuration per repetition, in rotation (each call runs
            after the others' work, as a step between two model calls does); one duration per call.
            False: rounds of ``args.block`` consecutive calls per configuration (warm caches, the usual
            microbenchmark; rounds keep a drifting machine load shared by all configurations); one
            median per round.

    Returns:
        Wall-clock and CPU seconds by configuration, paired by index across configurations.
    """
    configurations = _configurations(args, iterations)
    rng = np.random.default_rng(args.seed)
    actions = rng.uniform(-1.0, 1.0, size=(args.warmup + args.repetitions, args.dim))
    block = 1 if interleaved else args.block
    rounds = args.repetitions // block
    wall = {name: np.empty((rounds, block)) for name in configurations}
    cpu = {name: np.empty((rounds, block)) for name in configurations}
    clock, cpu_clock = time.perf_counter, time.thread_time
    for action in actions[: args.warmup]:
        for call in configurations.values():
            call(action)
    label = "interleaved" if interleaved else f"blocks of {block}"
    for round_index in tqdm(range(rounds), desc=f"wrapper overhead ({label})", unit="round", file=sys.stderr):
        for name, call in configurations.items():
            for k in range(block):
                action = actions[args.warmup + round_index * block + k]
                start, cpu_start = clock(), cpu_clock()
                call(action)
                wall[name][round_index, k] = clock() - start
                cpu[name][round_index, k] = cpu_clock() - cpu_start
    return (
        {name: np.median(values, axis=1) for name, values in wall.items()},
        {name: np.median(values, axis=1) for name, values in cpu.items()},
    )


class _ZeroPolicy:
    def act(self, observations: Sequence[np.ndarray], infos: Sequence[object]) -> list[np.ndarray]:
        return [np.zeros_like(observation[:-3]) for observation in observations]


def measure_rollouts(args: Args, iterations: int) -> list[dict[str, str]]:
    """Per trajectory-step cost of :class:`GroupedRollout` outside the world model, by mode.

    Everything a step costs except the time inside ``predict`` and inside the real ``env.step`` (free
    here) is overhead: resets, the policy call, the wrapper's phases, the executor round trips for the
    anchor executions (every execution in score mode), bookkeeping and assembling the groups. CPU time
    is the process's (worker threads included) minus the world model's own.
    """
    rows = []
    tasks = [RolloutTask(f"task{k}", {"task_id": k}) for k in range(args.groups)]
    anchors = [k == 0 for k in range(args.groups)]
    steps = args.groups * args.group_size * args.turns
    for mode in ("simulate", "score"):
        model = BusyWorldModel(iterations)
        config = RolloutConfig(group_size=args.group_size, mode=mode, max_turns=args.turns)
        env_fn = lambda: CostlyToyEnv(dim=args.dim, max_turns=args.turns, success_threshold=1.0)  # noqa: E731
        wall_per_step, cpu_per_step, wall_per_query, cpu_per_query = [], [], [], []
        with GroupedRollout(env_fn, model, config) as rollout:
            rollout.run(tasks, _ZeroPolicy(), anchors=anchors)
            for _ in tqdm(range(args.rollout_steps), desc=f"grouped rollout ({mode})", file=sys.stderr):
                before, model_cpu = rollout.ledger.state_dict(), model.cpu_seconds
                start, cpu_start = time.perf_counter(), time.process_time()
                rollout.run(tasks, _ZeroPolicy(), anchors=anchors)
                wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
                after = rollout.ledger.state_dict()
                inside = sum(after[key] - before[key] for key in ("world_model_seconds", "real_seconds"))
                calls = after["world_model_calls"] - before["world_model_calls"]
                queries = after["world_model_queries"] - before["world_model_queries"]
                wall_per_step.append((wall - inside) / steps)
                cpu_per_step.append((cpu - (model.cpu_seconds - model_cpu)) / steps)
                predict_seconds = after["world_model_seconds"] - before["world_model_seconds"]
                wall_per_query.append(predict_seconds / queries)
                cpu_per_query.append((model.cpu_seconds - model_cpu) / queries)
        median, q1, q3 = _stats(np.asarray(wall_per_step))
        cpu_median = _stats(np.asarray(cpu_per_step))[0]
        query_wall, query_cpu = float(np.median(wall_per_query)), float(np.median(cpu_per_query))
        rows.append(
            {"mode": mode, "trajectories": str(args.groups * args.group_size),
             "predict_calls_per_step": str(int(calls)),
             "overhead_us_per_trajectory_step": f"{median * 1e6:.1f}",
             "iqr_us": f"{(q3 - q1) * 1e6:.1f}",
             "wm_query_us": f"{query_wall * 1e6:.1f}",
             "percent_of_wm_query": f"{100.0 * median / query_wall:.2f}",
             "cpu_overhead_us": f"{cpu_median * 1e6:.1f}",
             "cpu_percent_of_wm_query": f"{100.0 * cpu_median / query_cpu:.2f}"}
        )
    return rows


def _stats(values: np.ndarray) -> tuple[float, float, float]:
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return float(median), float(q1), float(q3)


def _overheads(times: dict[str, np.ndarray], label: str) -> dict[str, np.ndarray]:
    simulate = times[f"by hand: simulate ({label})"]
    step_and_predict = times[f"by hand: step + predict ({label})"]
    return {
        "simulate": times[f"wrapper simulate ({label})"] - simulate,
        "simulate, anchor": times[f"wrapper simulate, anchor ({label})"] - step_and_predict,
        "score": times[f"wrapper score ({label})"] - step_and_predict,
    }


def summarise(
    interleaved: tuple[Timings, Timings], blocked: tuple[Timings, Timings], args: Args
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Rows of the timing table and of the overhead table (blocked and interleaved schedules)."""
    (wall, cpu), (warm_wall, _) = interleaved, blocked
    timing_rows = []
    for name, values in wall.items():
        median, q1, q3 = _stats(values)
        warm, warm_q1, warm_q3 = _stats(warm_wall[name])
        timing_rows.append(
            {"configuration": name,
             "blocked_median_us": f"{warm * 1e6:.1f}", "blocked_iqr_us": f"{(warm_q3 - warm_q1) * 1e6:.1f}",
             "interleaved_median_us": f"{median * 1e6:.1f}", "interleaved_iqr_us": f"{(q3 - q1) * 1e6:.1f}",
             "interleaved_cpu_median_us": f"{_stats(cpu[name])[0] * 1e6:.1f}"}
        )
    model_wall = _stats(wall["world_model.predict (1 ms)"])[0]
    model_warm = _stats(warm_wall["world_model.predict (1 ms)"])[0]
    paired, paired_cpu = _overheads(wall, "1 ms"), _overheads(cpu, "1 ms")
    warm_overhead, warm_zero = _overheads(warm_wall, "1 ms"), _overheads(warm_wall, "zero-cost")
    overhead_rows = []
    for mode in ("simulate", "simulate, anchor", "score"):
        warm, warm_q1, warm_q3 = _stats(warm_overhead[mode])
        median, q1, q3 = _stats(paired[mode])
        blocked_percent = 100.0 * warm / model_warm
        interleaved_percent = 100.0 * median / model_wall
        overhead_rows.append(
            {"mode": mode,
             "blocked_overhead_us": f"{warm * 1e6:.1f}",
             "blocked_iqr_us": f"{(warm_q3 - warm_q1) * 1e6:.1f}",
             "blocked_percent_of_wm": f"{blocked_percent:.2f}",
             "blocked_zero_cost_wm_overhead_us": f"{_stats(warm_zero[mode])[0] * 1e6:.1f}",
             "interleaved_overhead_us": f"{median * 1e6:.1f}",
             "interleaved_iqr_us": f"{(q3 - q1) * 1e6:.1f}",
             "interleaved_percent_of_wm": f"{interleaved_percent:.2f}",
             "interleaved_cpu_overhead_us": f"{_stats(paired_cpu[mode])[0] * 1e6:.1f}",
             "meets_target_blocked": "yes" if blocked_percent < args.target_percent else "no",
             "meets_target_interleaved": "yes" if interleaved_percent < args.target_percent else "no"}
        )
    return timing_rows, overhead_rows


def _markdown(rows: Sequence[dict[str, str]]) -> str:
    header = list(rows[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row[key] for key in header) + " |" for row in rows]
    return "\n".join(lines)


def _plot(times: dict[str, np.ndarray], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(times)
    figure, axis = plt.subplots(figsize=(10, 0.5 * len(names) + 1.5))
    axis.boxplot([times[name] * 1e6 for name in names], orientation="horizontal", showfliers=False)
    axis.set_yticks(range(1, len(names) + 1), names)
    axis.set_xscale("log")
    axis.set_xlabel("wall-clock microseconds per call (log scale; box = IQR, whiskers 1.5 IQR, no outliers)")
    axis.set_title("WorldModelWrapper step vs the same work by hand, bare env step and bare world model")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def parse_args(argv: Sequence[str] | None = None) -> Args:
    """Build :class:`Args` from the command line, one ``--option`` per field with its help."""
    return parse_dataclass_args(Args, argv, __doc__.split("\n\n")[0])


def main(argv: Sequence[str] | None = None) -> list[dict[str, str]]:
    """Measure, write ``results.md``, ``results.csv`` and the plot, print the tables; the overhead rows."""
    args = parse_args(argv)
    output = Path(args.output_dir)
    output.mkdir(parents=True, exist_ok=True)
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    iterations = calibrate(args.world_model_seconds)
    interleaved = measure(args, iterations, interleaved=True)
    blocked = measure(args, iterations, interleaved=False)
    timing_rows, overhead_rows = summarise(interleaved, blocked, args)
    rollout_rows = measure_rollouts(args, iterations) if args.rollout_steps else []
    notes = (
        f"{args.repetitions} timed calls per configuration and schedule after {args.warmup} warm-up calls; "
        f"world model: {iterations} arithmetic loop turns per query, calibrated to "
        f"{args.world_model_seconds * 1e3:g} ms of CPU; Python "
        f"{platform.python_version()} on {platform.machine()}, {time.perf_counter() - started:.0f} s, "
        f"load average {load_before:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores. "
        "Overhead = wrapper step - the same work by hand (simulate: query + predict + apply_prediction; "
        "anchor and score: query + env.step + predict): "
        f"blocked = per-round differences of the medians of {args.block} consecutive calls of each "
        "configuration (warm caches), median and IQR over rounds; interleaved = per-repetition "
        "differences of calls timed in rotation (each call after other work, as between two model calls "
        "in a real loop), median and IQR; percent = overhead / median world-model call. Target: under "
        f"{args.target_percent:g}% of the 1 ms world model."
    )
    text = (
        "# WorldModelWrapper overhead\n\n" + notes + "\n\n## Per-call time\n\n" + _markdown(timing_rows)
        + "\n\n## Wrapper overhead per step\n\n" + _markdown(overhead_rows) + "\n"
    )
    if rollout_rows:
        text += (
            "\n## Grouped rollout: overhead per trajectory-step outside the world model\n\n"
            f"{args.rollout_steps} timed steps of {args.groups} groups x {args.group_size} trajectories x "
            f"{args.turns} turns (one anchor group); overhead = (step time - time inside predict - time "
            "inside the real env.step) / trajectory-steps, median and IQR over steps; percent = overhead / "
            "the world model's measured time per query (wm_query_us; CPU: its CPU time per query).\n\n"
            + _markdown(rollout_rows)
            + "\n"
        )
    (output / "results.md").write_text(text, encoding="utf-8")
    with open(output / "results.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["table", "name", "median_us", "overhead_us", "percent_of_wm_1ms"])
        for row in timing_rows:
            writer.writerow(
                ["timing", row["configuration"], row["interleaved_median_us"], "", ""]
            )
        for row in overhead_rows:
            writer.writerow(
                ["overhead_blocked", row["mode"], "", row["blocked_overhead_us"],
                 row["blocked_percent_of_wm"]]
            )
            writer.writerow(
                ["overhead_interleaved", row["mode"], "", row["interleaved_overhead_us"],
                 row["interleaved_percent_of_wm"]]
            )
        for row in rollout_rows:
            writer.writerow(
                ["rollout", row["mode"], "", row["overhead_us_per_trajectory_step"],
                 row["percent_of_wm_query"]]
            )
    _plot(interleaved[0], output / "wrapper_overhead.png")
    print(text)
    return overhead_rows


if __name__ == "__main__":
    main()
