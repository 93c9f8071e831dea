"""Design sweep: is the design space rich enough, and do the leaderboards leave headroom above it?

Runs a fixed set of diverse designs (:mod:`wmrl_envs.kaggle.design`) on every competition of the suite,
for real through the sandbox, and writes per competition the private position score of each design,
the best design (the oracle of this sweep) and its position. Two questions, one table:

* rich enough: the best design must differ between tasks (a policy then has something to learn
  from task features);
* headroom: if the oracle already ties the leaderboard's top entry (position 1.0) on most tasks,
  every method ties at the top and a comparison measures nothing.

Run: ``nice -n 10 python benchmarks/design_sweep.py`` (about 160 executions; ``--smoke`` for 2 x 2).
Writes ``table.md``, ``results.json`` and ``sweep.png`` (positions, design x competition).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from wmrl_adapters.cli import parse_dataclass_args
from wmrl_adapters.train.kaggle.design_policy import design_action
from wmrl_adapters.train.kaggle.execution import CachedKaggleEnv, ComputeMeter
from wmrl_adapters.train.kaggle.record import SUITE_DESIGNS

from wmrl_envs.kaggle.design import Design
from wmrl_envs.kaggle.suite import load_suite
from wmrl_envs.sandbox import make_sandbox

SWEEP: tuple[Design, ...] = SUITE_DESIGNS[:10]
"""The swept designs: one or two per model family, reasonable settings (the first ten of the replay
preset, ``wmrl record --designs suite``)."""


@dataclass(frozen=True)
class Args:
    """Settings of the sweep."""

    out: str = field(default="benchmarks/results/design_sweep", metadata={"help": "Output directory."})
    competitions: str = field(default="", metadata={"help": "Comma-separated ids (default: all 16)."})
    designs: int = field(default=len(SWEEP), metadata={"help": "Use the first N designs of the sweep."})
    timeout_s: float = field(default=120.0, metadata={"help": "Per-execution limit."})
    workers: int = field(default=2, metadata={"help": "Executions in parallel."})
    smoke: bool = field(default=False, metadata={"help": "2 competitions x 2 designs (for the test)."})
    plot_only: bool = field(default=False, metadata={"help": "Run nothing: plot <out>/results.json again."})


def plot_sweep(results: list[dict[str, object]], path: Path) -> Path:
    """A heatmap of the private position score of every design (columns) on every competition (rows)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = sorted({str(r["competition"]) for r in results})
    columns = list(dict.fromkeys(str(r["label"]) for r in results))
    grid = np.full((len(rows), len(columns)), np.nan)
    for r in results:
        if r["position"] is not None:
            grid[rows.index(str(r["competition"])), columns.index(str(r["label"]))] = float(r["position"])  # type: ignore[arg-type]
    figure, axis = plt.subplots(figsize=(11, 7))
    image = axis.imshow(grid, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
    axis.set_xticks(range(len(columns)), columns, rotation=60, ha="right", fontsize=7)
    axis.set_yticks(range(len(rows)), rows, fontsize=8)
    for i, j in zip(*np.nonzero(grid == np.nanmax(grid, axis=1, keepdims=True)), strict=True):
        axis.text(j, i, "*", ha="center", va="center", color="red", fontsize=12)
    figure.colorbar(image, label="private position score (1.0 = ties the best reference)")
    axis.set_title("design sweep: position of each design (* = the task's best design, the oracle)")
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path


def main(argv: list[str] | None = None) -> int:
    """Run the sweep and write ``table.md`` and ``results.json``."""
    args = parse_dataclass_args(Args, argv, __doc__ or "")
    if args.plot_only:
        out = Path(args.out)
        print(plot_sweep(json.loads((out / "results.json").read_text()), out / "sweep.png"))
        return 0
    suite = load_suite()
    ids = [c for c in args.competitions.split(",") if c] or suite.ids()
    designs = SWEEP[: args.designs]
    if args.smoke:
        ids, designs = ids[:2], designs[:2]
    sandbox = make_sandbox("local", warm=2)
    meter = ComputeMeter()
    jobs = [(cid, design) for cid in ids for design in designs]

    def run(job: tuple[str, Design]) -> dict[str, object]:
        cid, design = job
        env = CachedKaggleEnv(meter, None, suite=suite, split="all", sandbox=sandbox, max_turns=1,
                              timeout_s=args.timeout_s)
        env.reset(options={"competition": cid})
        _, _, _, _, info = env.step(design_action(design, suite.get(cid)))
        return {"competition": cid, "design": dataclasses.asdict(design), "label": design.short(),
                "status": info["status"], "score": info.get("score"), "position": info["position"],
                "cpu_s": info["cpu_s"]}

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(args.workers) as pool:
        results = list(pool.map(run, jobs))
    sandbox.close()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = ["| competition | split | best design | oracle position | 2nd best | designs valid |",
             "|---|---|---|---|---|---|"]
    at_top = 0
    winners: set[str] = set()
    for cid in ids:
        rows = sorted((r for r in results if r["competition"] == cid and r["position"] is not None),
                      key=lambda r: -float(r["position"]))  # type: ignore[arg-type]
        split = "held-out" if suite.get(cid).heldout else "train"
        if not rows:
            lines.append(f"| {cid} | {split} | none valid | - | - | 0/{len(designs)} |")
            continue
        best = rows[0]
        winners.add(str(best["label"]))
        at_top += float(best["position"]) >= 1.0  # type: ignore[arg-type]
        second = f"{rows[1]['label']} ({float(rows[1]['position']):.2f})" if len(rows) > 1 else "-"  # type: ignore[arg-type]
        lines.append(f"| {cid} | {split} | {best['label']} | {float(best['position']):.2f} | {second} "  # type: ignore[arg-type]
                     f"| {len(rows)}/{len(designs)} |")
    lines += ["", f"{len(results)} executions, {time.perf_counter() - started:.0f} s wall, "
              f"{meter.spent_cpu_s:.0f} sandbox CPU-s; distinct best designs: {len(winners)} over "
              f"{len(ids)} tasks; "
              f"oracle at the leaderboard top (position 1.0) on {at_top}/{len(ids)} tasks."]
    (out / "table.md").write_text("\n".join(lines) + "\n")
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    plot_sweep(results, out / "sweep.png")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
