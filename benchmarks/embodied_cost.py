"""What the embodied track costs: simulator steps with and without cameras, resets, scorers per frame.

These are the ratios that decide when a progress world model pays: if scoring an episode costs more
than simulating it, scoring every rollout is the expensive part, not the simulator. Measured through
the env API wmrl users call (the simulator runs in the embodied stack's worker, so the pipe is included)
plus the pipe's own round trip. Writes a Markdown table, a JSON file and a bar plot.

    python benchmarks/embodied_cost.py                         # LIBERO-10 + Lift + scorers (~10 min)
    python benchmarks/embodied_cost.py --steps 3 --no-libero --no-robometer --out /tmp/x   # smoke size

Needs the embodied stack (``bash scripts/embodied.sh``). Timings on a shared machine are noisy: read
orders of magnitude and ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_envs.embodied.envs import LIBERO_SUITES, ROBOSUITE_TASKS, EmbodiedEnv, LiberoEnv, RobosuiteEnv
from wmrl_envs.embodied.learned import LearnedProgressConfig, LearnedProgressScorer
from wmrl_envs.embodied.progress import ProgressInput, SimStateProgressScorer, progress_input
from wmrl_envs.embodied.stack import SimulatorProcess

RESULTS = Path(__file__).resolve().parent / "results" / "embodied_cost"


@dataclass
class Args:
    """What the cost benchmark measures."""

    steps: int = field(default=20, metadata={"help": "steps timed per configuration (after one warm-up)"})
    resets: int = field(default=3, metadata={"help": "resets timed per configuration (after the first)"})
    image_size: int = field(default=256, metadata={"help": "camera resolution of the with-cameras runs"})
    frame_stride: int = field(
        default=20,
        metadata={
            "help": "LIBERO with one 64² agent view, every step and every N steps (the visual scorer's)"
        },
    )
    no_libero: bool = field(default=False, metadata={"help": "skip LIBERO (the slowest part)"})
    no_robometer: bool = field(default=False, metadata={"help": "skip the tiny random Robometer"})
    out: Path = field(default=RESULTS, metadata={"help": "output folder"})


@dataclass(frozen=True)
class Row:
    """One measurement: ``seconds`` per ``unit``."""

    subject: str
    measure: str
    seconds: float
    unit: str


def parse_args(argv: list[str] | None = None) -> Args:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, spec in Args.__dataclass_fields__.items():
        flag = "--" + name.replace("_", "-")
        if str(spec.type) == "bool":
            parser.add_argument(flag, action="store_true", help=spec.metadata["help"])
        else:
            kind = {"int": int, "Path": Path}[str(spec.type)]
            parser.add_argument(flag, type=kind, default=spec.default, help=spec.metadata["help"])
    return Args(**vars(parser.parse_args(argv)))


def _agent_view(frame_stride: int) -> Callable[[], EmbodiedEnv]:
    """LIBERO-10 with the visual scorer's camera: one 64² agent view, a new frame every ``frame_stride``."""
    return lambda: LiberoEnv("libero_10", cameras=("agentview",), image_size=64, frame_stride=frame_stride)


def _timed(function: Callable[[], Any], repeats: int) -> float:
    start = time.perf_counter()
    for _ in range(repeats):
        function()
    return (time.perf_counter() - start) / repeats


def measure_env(
    name: str, make: Callable[[], EmbodiedEnv], args: Args
) -> tuple[list[Row], list[dict[str, Any]]]:
    """Construction, first reset, later resets and steps of one env configuration."""
    start = time.perf_counter()
    env = make()
    rows = [Row(name, "construct", time.perf_counter() - start, "env")]
    try:
        start = time.perf_counter()
        obs, _ = env.reset(seed=0)
        rows.append(Row(name, "first reset", time.perf_counter() - start, "reset"))
        rows.append(Row(name, "reset", _timed(lambda: env.reset(seed=1), args.resets), "reset"))
        env.reset(seed=2)
        observations = [obs]
        action = np.zeros(7, np.float32)
        env.step(action)

        def step() -> None:
            observations.append(env.step(action)[0])

        rows.append(Row(name, "step", _timed(step, args.steps), "step"))
    finally:
        env.close()
    return rows, observations


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    rows: list[Row] = []
    load_before = os.getloadavg()[0]
    worker = SimulatorProcess()
    rows.append(Row("pipe", "round trip", _timed(lambda: worker.call("echo", value=None), 200), "call"))
    payload = np.zeros((2, args.image_size, args.image_size, 3), np.uint8)
    rows.append(
        Row(
            "pipe",
            f"echo 2 images {args.image_size}² (both ways)",
            _timed(lambda: worker.call("echo", value=payload), 50),
            "call",
        )
    )
    worker.close()
    size = args.image_size
    configurations: list[tuple[str, Callable[[], EmbodiedEnv]]] = [
        ("Lift, no camera", lambda: RobosuiteEnv("Lift", cameras=())),
        (f"Lift, 2 cameras {size}²", lambda: RobosuiteEnv("Lift", image_size=size)),
    ]
    if not args.no_libero:
        configurations += [
            ("LIBERO-10, no camera", lambda: LiberoEnv("libero_10", cameras=())),
            (f"LIBERO-10, 2 cameras {size}²", lambda: LiberoEnv("libero_10", image_size=size)),
            # The visual scorer's view: one 64² agent view, rendered every step or every N (held between).
            ("LIBERO-10, agentview 64²", _agent_view(1)),
            (f"LIBERO-10, agentview 64² every {args.frame_stride} steps", _agent_view(args.frame_stride)),
        ]
    trajectories: dict[str, list[dict[str, Any]]] = {}
    for name, make in configurations:
        measured, observations = measure_env(name, make, args)
        rows += measured
        trajectories[name] = observations
        print(f"{name}: " + ", ".join(f"{r.measure} {r.seconds:.4f}s" for r in measured), flush=True)
    rows += _scorer_rows(trajectories, args)
    rows += _episode_rows(rows)
    return _write(rows, args, load=(load_before, os.getloadavg()[0]))


def _scorer_rows(trajectories: dict[str, list[dict[str, Any]]], args: Args) -> list[Row]:
    states = progress_input(trajectories["Lift, no camera"])
    frames = next(progress_input(t) for name, t in trajectories.items() if "cameras" in name)
    rows = []
    sim_state = SimStateProgressScorer()
    rows.append(
        Row(
            "sim-state scorer",
            "score",
            _timed(lambda: sim_state.progress([states]), 20) / states.length,
            "frame",
        )
    )
    learned = LearnedProgressScorer(LearnedProgressConfig(members=5, epochs=5))
    learned.push(states, success=True)
    learned.push(states, success=False)
    learned.refit()
    rows.append(
        Row(
            "learned scorer (5 MLPs)",
            "score",
            _timed(lambda: learned.progress([states]), 20) / states.length,
            "frame",
        )
    )
    if not args.no_robometer:
        from wmrl_adapters.robometer import RobometerScorer

        robometer = RobometerScorer(tiny_random=True, stride=1)
        item = ProgressInput(frames.instruction, frames={"agentview_image": frames.frames["agentview_image"]})
        seconds = _timed(lambda: robometer.progress([item]), 1) / item.length
        rows.append(
            Row(f"Robometer, tiny random ({robometer.parameters / 1e6:.1f} M)", "score", seconds, "frame")
        )
        robometer.close()
    return rows


def _episode_rows(rows: list[Row]) -> list[Row]:
    """Seconds per episode at each env's registered step limit: reset + limit × step."""
    by_subject: dict[str, dict[str, float]] = {}
    for row in rows:
        by_subject.setdefault(row.subject, {})[row.measure] = row.seconds
    limits = {"Lift": ROBOSUITE_TASKS["Lift"][1], "LIBERO-10": LIBERO_SUITES["libero_10"][1]}
    episodes = []
    for subject, measures in by_subject.items():
        if "step" not in measures:
            continue
        limit = limits[subject.split(",")[0]]
        seconds = measures["reset"] + limit * measures["step"]
        episodes.append(Row(subject, f"episode ({limit} steps)", seconds, "episode"))
    return episodes


def _write(rows: list[Row], args: Args, *, load: tuple[float, float]) -> dict[str, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    args.out.mkdir(parents=True, exist_ok=True)
    lines = ["| subject | measure | seconds | per | per minute |", "|---|---|---|---|---|"]
    for row in rows:
        lines.append(
            f"| {row.subject} | {row.measure} | {row.seconds:.4g} | {row.unit} | {60 / row.seconds:,.1f} |"
        )
    table = "\n".join(lines) + "\n"
    note = f"{os.cpu_count()} CPUs, load average {load[0]:.1f} at the start, {load[1]:.1f} at the end.\n\n"
    (args.out / "cost.md").write_text(note + table)
    summary = {
        "args": {k: str(v) for k, v in asdict(args).items()},
        "load_average": {"start": load[0], "end": load[1]},
        "rows": [asdict(r) for r in rows],
    }
    (args.out / "cost.json").write_text(json.dumps(summary, indent=2))
    shown = [r for r in rows if r.unit in ("step", "frame", "reset")]
    figure, axis = plt.subplots(figsize=(9, 0.35 * len(shown) + 1.2))
    axis.barh([f"{r.subject}: {r.measure}" for r in shown], [r.seconds for r in shown], color="tab:blue")
    axis.set_xscale("log")
    axis.set_xlabel("seconds (log scale): per step, per reset, per scored frame")
    axis.invert_yaxis()
    figure.tight_layout()
    figure.savefig(args.out / "cost.png", dpi=110)
    plt.close(figure)
    print(table)
    return summary


if __name__ == "__main__":
    main()
