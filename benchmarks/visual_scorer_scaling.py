"""Is the visual scorer wrong on the policy's rollouts for lack of capacity, or because they are not its data?

The learned visual progress scorer seemed to rank held-out demonstrations well (AUROC 0.80 and 0.875 in
two small runs of ``embodied_fidelity``, with 1-2 successes each) and ranks the policy's own rollouts
barely above chance (0.56-0.67 over training, ``embodied_lift_visual``). The two explanations predict
different things:

- Too small or under-trained: more capacity, epochs and demonstrations raise both AUROCs.
- Distribution shift (the expert's frames are not the policy's): they raise the held-out demonstrations'
  AUROC and leave the policy's where it is.

The run has two stages, so that the grid can be fitted on a GPU (``scripts/gpu_visual_scaling.sh``).
Rendering needs the simulator (the CPU machine, the embodied stack); fitting needs only torch and the
frames. The committed results were fitted on the CPU, on a reduced grid (no GPU was lent that day):

    python benchmarks/visual_scorer_scaling.py render --out DIR               # DIR/frames.npz (CPU)
    python benchmarks/visual_scorer_scaling.py fit --frames DIR/frames.npz --device cuda --out DIR
    python benchmarks/visual_scorer_scaling.py fit --frames DIR/frames.npz --demos 4,16 --widths 16,64 \\
        --epochs 30,100 --out DIR                            # the committed CPU grid (≈ 30 min on 2 cores)

``render`` writes, from one seed: demonstrations to fit on (the scripted expert, the expert with action
noise and random actions, ``--demos-per-policy`` of each), held-out demonstrations (other placements),
and the rollouts of ``--sft-seeds`` SFT policies (the trainer's first stage, ``embodied_table2``'s SFT
settings) in GRPO groups. It also scores those rollouts with the simulator-state scorers (sim-state,
``approach``, ``approach-stale``) as reference rows. ``fit`` trains one ``VisualProgressScorer`` per grid
point (demonstrations × width × epochs × training seed; the hidden layer is 4 × the width) and measures
each on both held-out sets. Frames are never taken from the policy's rollouts for training.

Error bars: ± s.e. over training seeds (the scorer's own variance on fixed data), and beside it the
Hanley-McNeil s.e. of one AUROC on this many rollouts (the evaluation set's sampling error). A
difference between grid points is read against both. Writes ``table.md``, ``table.json`` and
``auroc_vs_capacity.png``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np
from embodied_fidelity import Args as FidelityArgs
from embodied_fidelity import policy_rollouts, sft_policy
from tqdm import tqdm
from wmrl_adapters.train.run.measure import mean_se

from wmrl_algos.errors import ConfigError
from wmrl_envs.embodied.fidelity import Episode, auroc, within_group_rank_correlation
from wmrl_envs.embodied.progress import ProgressInput, collapse_progress, progress_input

RESULTS = Path(__file__).resolve().parent / "results" / "visual_scorer_scaling"
CAMERA = "agentview_image"
SPLITS = ("fit", "held_out", "policy")
DEMO_POLICIES = ("expert", "noisy-expert", "random")
COMMITTED = {"demos": 4, "width": 16, "epochs": 30}
"""The scorer every embodied run used (``python -m wmrl_envs.embodied.visual`` defaults)."""
POTENTIAL_K = 4
MEASURES = ("held_out_auroc", "policy_auroc", "policy_spearman", "final_loss", "fit_seconds")


# Render -------------------------------------------------------------------------------------------------
def _render(args: argparse.Namespace) -> Path:
    """Render the three sets and score the rollouts with the reference scorers; write ``frames.npz``."""
    from gymnasium.wrappers import TimeLimit

    from wmrl_envs.embodied.envs import RobosuiteEnv
    from wmrl_envs.embodied.fidelity import collect_episodes
    from wmrl_envs.embodied.hackable import ApproachProgressScorer, StaleApproachProgressScorer
    from wmrl_envs.embodied.policies import NoisyPolicy, RandomPolicy, ScriptedLiftPolicy
    from wmrl_envs.embodied.progress import SimStateProgressScorer

    started = time.process_time(), time.perf_counter()
    sft = []
    for seed in tqdm(range(args.sft_seeds), desc="SFT policies"):
        settings = FidelityArgs(
            demos=30, noise=0.1, bc_epochs=100, init_std=0.1, max_steps=args.horizon, seed=args.seed + seed
        )
        sft.append(sft_policy(settings))
    env = RobosuiteEnv("Lift", cameras=("agentview",), image_size=args.image_size, object_states=True)
    sets: dict[str, list[tuple[Episode, int]]] = {split: [] for split in SPLITS}
    try:
        limited = TimeLimit(env, args.demo_steps)
        for split, count, offset in (("fit", args.demos_per_policy, 0), ("held_out", args.held_out, 1_000)):
            policies = {
                "expert": ScriptedLiftPolicy(),
                "noisy-expert": NoisyPolicy(ScriptedLiftPolicy(), noise=args.noise, seed=args.seed + offset),
                "random": RandomPolicy(seed=args.seed + offset),
            }
            for label, policy in tqdm(policies.items(), desc=f"{split} demonstrations"):
                episodes = collect_episodes(limited, policy, count, label=label, seed=args.seed + offset)
                sets[split] += [(episode, -1) for episode in episodes if episode.sim_error is None]
        for index, (policy, _) in enumerate(tqdm(sft, desc="SFT rollouts")):
            rollout_args = FidelityArgs(
                groups=args.groups, group_size=args.group_size, max_steps=args.horizon, seed=args.seed + index
            )
            episodes, groups = policy_rollouts(env, policy, rollout_args)
            sets["policy"] += [(e, index * 1_000 + g) for e, g in zip(episodes, groups, strict=True)]
    finally:
        env.close()
    references = [SimStateProgressScorer(), ApproachProgressScorer(), StaleApproachProgressScorer()]
    records = []
    for split in SPLITS:
        for episode, group in sets[split]:
            item = progress_input(list(episode.observations))
            scores = {scorer.name: _scores(scorer.progress([item]))[0] for scorer in references}
            frames = np.stack([obs[CAMERA] for obs in episode.observations]).astype(np.uint8)
            records.append(EpisodeRecord(split, frames, episode.success, episode.policy, group, scores))
    meta = {
        "args": {key: str(value) for key, value in vars(args).items() if key != "handler"},
        "sft": [info for _, info in sft],
        "cpu_seconds": time.process_time() - started[0],
        "wall_seconds": time.perf_counter() - started[1],
    }
    path = write_frames(args.out / "frames.npz", records, meta)
    counts = {split: sum(1 for r in records if r.split == split) for split in SPLITS}
    print(f"{path}: {counts} episodes, {path.stat().st_size / 2**20:.1f} MiB, {meta['wall_seconds']:.0f} s")
    return path


@dataclass(frozen=True)
class EpisodeRecord:
    """One rendered episode as the frames file keeps it."""

    split: str
    frames: np.ndarray
    success: bool
    label: str
    group: int
    references: dict[str, float | None]


def write_frames(path: Path, records: Sequence[EpisodeRecord], meta: dict[str, Any]) -> Path:
    """Write episodes to one compressed ``.npz`` of plain arrays (read back with ``allow_pickle=False``)."""
    if not records:
        raise ConfigError("no episodes to write; render at least one")
    names = sorted({name for record in records for name in record.references})
    lengths = [len(record.frames) for record in records]
    columns: dict[str, np.ndarray] = {
        "frames": np.concatenate([record.frames for record in records]).astype(np.uint8),
        "start": np.cumsum([0, *lengths[:-1]]),
        "length": np.asarray(lengths),
        "success": np.asarray([record.success for record in records]),
        "split": np.asarray([SPLITS.index(record.split) for record in records]),
        "label": np.asarray([record.label for record in records]),
        "group": np.asarray([record.group for record in records]),
        "meta": np.asarray(json.dumps(meta)),
    }
    for name in names:
        values = [record.references.get(name) for record in records]
        columns[f"ref:{name}"] = np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **columns)
    return path


# The frames file --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FrameSet:
    """The episodes of one split: their progress inputs, outcomes, demo policy and GRPO group."""

    items: tuple[ProgressInput, ...]
    successes: tuple[bool, ...]
    labels: tuple[str, ...]
    groups: tuple[int, ...]
    references: dict[str, tuple[float | None, ...]]


def load_frames(path: Path) -> tuple[dict[str, FrameSet], dict[str, Any]]:
    """Read ``frames.npz`` (written by ``render``), split by split; refuse a file of another shape."""
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise ConfigError(f"cannot read {path} as a frames file ({error}); write it with `render`") from None
    needed = {"frames", "start", "length", "success", "split", "label", "group", "meta"}
    if not needed <= set(data.files):
        raise ConfigError(f"{path} lacks {sorted(needed - set(data.files))}; write it with `render`")
    columns = {key: data[key] for key in data.files}  # an NpzFile decompresses on every access: once each
    frames = columns["frames"]
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.shape[1] != frames.shape[2]:
        raise ConfigError(f"{path}: frames of shape {frames.shape}, expected (N, S, S, 3)")
    meta = json.loads(str(columns["meta"]))
    references = [key for key in columns if key.startswith("ref:")]
    sets: dict[str, dict[str, list[Any]]] = {split: {} for split in SPLITS}
    for index in range(len(columns["start"])):
        start, length = int(columns["start"][index]), int(columns["length"][index])
        split = SPLITS[int(columns["split"][index])]
        observations = [{"instruction": "lift", CAMERA: frame} for frame in frames[start : start + length]]
        entry = sets[split]
        entry.setdefault("items", []).append(progress_input(observations))
        entry.setdefault("successes", []).append(bool(columns["success"][index]))
        entry.setdefault("labels", []).append(str(columns["label"][index]))
        entry.setdefault("groups", []).append(int(columns["group"][index]))
        for key in references:
            value = float(columns[key][index])
            entry.setdefault(key, []).append(None if math.isnan(value) else value)
    result = {}
    for split, entry in sets.items():
        refs = {key[4:]: tuple(entry.get(key, ())) for key in references}
        result[split] = FrameSet(
            tuple(entry.get("items", ())),
            tuple(entry.get("successes", ())),
            tuple(entry.get("labels", ())),
            tuple(entry.get("groups", ())),
            refs,
        )
    return result, meta | {"image_size": int(frames.shape[1]), "frames": int(len(frames))}


def first_per_policy(fit: FrameSet, count: int) -> tuple[list[ProgressInput], list[bool]]:
    """The first ``count`` fitting episodes of each demonstration policy (the smaller data sets nest)."""
    kept: dict[str, int] = {}
    items, successes = [], []
    for item, success, label in zip(fit.items, fit.successes, fit.labels, strict=True):
        if kept.get(label, 0) < count:
            kept[label] = kept.get(label, 0) + 1
            items.append(item)
            successes.append(success)
    return items, successes


# Fit ----------------------------------------------------------------------------------------------------
def hanley_mcneil_se(value: float | None, positives: int, negatives: int) -> float | None:
    """Sampling s.e. of an AUROC on this many successes and failures (Hanley & McNeil, 1982).

    Example:
        >>> round(hanley_mcneil_se(0.5, 20, 20), 3)
        0.092
    """
    if value is None or positives < 1 or negatives < 1:
        return None
    q1, q2 = value / (2 - value), 2 * value**2 / (1 + value)
    variance = (
        value * (1 - value) + (positives - 1) * (q1 - value**2) + (negatives - 1) * (q2 - value**2)
    ) / (positives * negatives)
    return math.sqrt(max(variance, 0.0))


def _scores(curves: Iterable[Any]) -> list[float | None]:
    return [None if c is None else collapse_progress(c.progress, "potential", POTENTIAL_K) for c in curves]


def measure(scores: Sequence[float | None], data: FrameSet) -> dict[str, float | None]:
    """AUROC and (where there are groups) within-group Spearman of scores on one held-out set."""
    row: dict[str, float | None] = {"auroc": auroc(scores, data.successes)}
    if any(group >= 0 for group in data.groups):
        row["spearman"], _ = within_group_rank_correlation(scores, data.successes, data.groups)
    return row


def fit_one(
    sets: dict[str, FrameSet], image_size: int, demos: int, width: int, epochs: int, seed: int, device: str
) -> dict[str, Any]:
    """Train one scorer on the first ``demos`` demonstrations of each policy and measure it."""
    from wmrl_envs.embodied.visual import VisualProgressConfig, VisualProgressScorer

    config = VisualProgressConfig(
        image_size=image_size, width=width, hidden=4 * width, epochs=epochs, seed=seed, device=device
    )
    scorer = VisualProgressScorer(config)
    items, successes = first_per_policy(sets["fit"], demos)
    report = scorer.fit(items, successes)
    started = time.perf_counter()
    held = measure(_scores(scorer.progress(list(sets["held_out"].items))), sets["held_out"])
    policy = measure(_scores(scorer.progress(list(sets["policy"].items))), sets["policy"])
    return {
        "demos": demos,
        "width": width,
        "epochs": epochs,
        "seed": seed,
        "fit_episodes": len(items),
        "fit_frames": int(report["visual/frames"]),
        "final_loss": report["visual/final_loss"],
        "fit_seconds": report["visual/fit_seconds"],
        "score_seconds": time.perf_counter() - started,
        "held_out_auroc": held["auroc"],
        "policy_auroc": policy["auroc"],
        "policy_spearman": policy.get("spearman"),
    }


def summarise(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per grid point: mean ± s.e. over training seeds of each measure."""
    rows = []
    for key in sorted({(r["demos"], r["width"], r["epochs"]) for r in runs}):
        same = [r for r in runs if (r["demos"], r["width"], r["epochs"]) == key]
        row: dict[str, Any] = dict(zip(("demos", "width", "epochs"), key, strict=True))
        row |= {"seeds": len(same), "fit_frames": same[0]["fit_frames"]}
        for name in MEASURES:
            row[name], row[f"{name}_se"], _ = mean_se([r[name] for r in same])
        row["committed"] = key == (COMMITTED["demos"], COMMITTED["width"], COMMITTED["epochs"])
        rows.append(row)
    return rows


def _cell(mean: float | None, se: float | None) -> str:
    if mean is None:
        return "–"
    return f"{mean:.3f}" + (f" ± {se:.3f}" if se is not None else "")


def markdown(rows: Sequence[dict[str, Any]], sets: dict[str, FrameSet], meta: dict[str, Any]) -> str:
    """The table, the reference rows and the reading the numbers allow."""
    policy, held = sets["policy"], sets["held_out"]
    wins, losses = sum(policy.successes), len(policy.successes) - sum(policy.successes)
    lines = [
        f"Lift, agent-view frames {meta['image_size']}², {meta['frames']} frames. Fitted on the first D "
        f"demonstrations of each of {', '.join(DEMO_POLICIES)}; measured on {len(held.items)} held-out "
        f"demonstrations ({sum(held.successes)} successes) and {len(policy.items)} rollouts of the SFT "
        f"policies ({wins} successes, {losses} failures). Potential collapse, k={POTENTIAL_K}. Each cell: "
        "mean ± s.e. over training seeds.",
        "",
        "| D | width | epochs | seeds | fit frames | held-out demo AUROC | policy AUROC "
        "| policy within-group Spearman | final loss | fit s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        mark = " (the committed scorer)" if row["committed"] else ""
        lines.append(
            f"| {row['demos']}{mark} | {row['width']} | {row['epochs']} | {row['seeds']} "
            f"| {row['fit_frames']} | "
            + " | ".join(
                _cell(row[name], row[f"{name}_se"])
                for name in ("held_out_auroc", "policy_auroc", "policy_spearman", "final_loss")
            )
            + f" | {row['fit_seconds']:.1f} |"
        )
    lines += ["", "Reference scorers on the same sets (simulator state, no training):", ""]
    lines += [
        "| scorer | held-out demo AUROC | policy AUROC | policy within-group Spearman |",
        "|---|---|---|---|",
    ]
    for name in policy.references:
        on_policy = measure(list(policy.references[name]), policy)
        on_held = measure(list(held.references.get(name, ())), held) if held.references else {"auroc": None}
        lines.append(
            f"| {name} | {_cell(on_held['auroc'], None)} | {_cell(on_policy['auroc'], None)} | "
            f"{_cell(on_policy.get('spearman'), None)} |"
        )
    sampling = hanley_mcneil_se(0.6, wins, losses)
    lines += [""]
    if sampling is not None:
        lines.append(
            f"Sampling s.e. of one policy AUROC near 0.6 on these {wins} + {losses} rollouts "
            "(Hanley-McNeil): "
            f"{sampling:.3f}: how far these rollouts' AUROC may sit from the policy's. Every grid point is "
            "measured on the same rollouts, so that error is common to them; a difference between two "
            "points is read against the s.e. over training seeds beside each cell."
        )
    lines += ["", reading(rows)]
    return "\n".join(lines) + "\n"


def reading(rows: Sequence[dict[str, Any]]) -> str:
    """What the grid says: the committed scorer against the grid's largest point, on both sets."""
    base = next((r for r in rows if r["committed"]), None)
    biggest = max(rows, key=lambda r: (r["demos"], r["width"], r["epochs"]))
    if base is None or biggest is base:
        return "The grid holds no point to compare with the committed scorer."

    def change(name: str) -> str:
        a, b = base[name], biggest[name]
        if a is None or b is None:
            return "unknown"
        se = math.sqrt((base[f"{name}_se"] or 0.0) ** 2 + (biggest[f"{name}_se"] or 0.0) ** 2)
        return f"{b - a:+.3f} ± {se:.3f}"

    return (
        f"From the committed scorer (D={base['demos']}, width {base['width']}, {base['epochs']} epochs) to "
        f"the largest point (D={biggest['demos']}, width {biggest['width']}, {biggest['epochs']} epochs): "
        f"held-out demonstration AUROC {change('held_out_auroc')}, policy AUROC {change('policy_auroc')} "
        f"(± s.e. over training seeds)."
    )


def plot(rows: Sequence[dict[str, Any]], out: Path) -> Path:
    """AUROC on the held-out demonstrations and on the policy's rollouts, against the data, per width."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for axis, name, title in zip(
        axes,
        ("held_out_auroc", "policy_auroc"),
        ("held-out demonstrations", "the SFT policy's rollouts"),
        strict=True,
    ):
        for width, epochs in sorted({(r["width"], r["epochs"]) for r in rows}):
            same = [r for r in rows if (r["width"], r["epochs"]) == (width, epochs)]
            line = sorted(same, key=lambda r: r["demos"])
            known = [r for r in line if r[name] is not None]
            axis.errorbar(
                [r["demos"] for r in known],
                [r[name] for r in known],
                yerr=[r[f"{name}_se"] or 0.0 for r in known],
                marker="o",
                capsize=3,
                label=f"width {width}, {epochs} epochs",
            )
        axis.axhline(0.5, color="grey", linestyle=":", linewidth=1)
        axis.set_xticks(sorted({r["demos"] for r in rows}))
        axis.set_xlabel("demonstrations per demo policy (D)")
        axis.set_title(f"AUROC on {title}")
    axes[0].set_ylabel("AUROC (± s.e. over training seeds)")
    axes[1].legend(fontsize=8)
    figure.tight_layout()
    path = out / "auroc_vs_capacity.png"
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path


def _ints(text: str, low: int = 1) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: pass comma-separated integers, e.g. 4,8,16") from None
    if not values or min(values) < low:
        raise argparse.ArgumentTypeError(f"{text!r}: pass integers >= {low}")
    return values


def _seeds(text: str) -> list[int]:
    return _ints(text, low=0)


def _fit(args: argparse.Namespace) -> dict[str, Any]:
    """Every grid point not in ``OUT/runs.jsonl`` yet (one line a fit: an interrupted grid resumes)."""
    from wmrl_envs.embodied.visual import VisualProgressConfig

    if not args.table_only:  # a device this machine lacks is refused before any fit
        VisualProgressConfig(device=args.device)
    sets, meta = load_frames(args.frames)
    if len(set(sets["fit"].successes)) < 2:
        raise ConfigError(f"{args.frames}: the fitting demonstrations hold one outcome only; render more")
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "runs.jsonl"
    done = _read_runs(log)
    done = [run for run in done if run.get("device") == args.device]
    finished = {_point(r) for r in done}
    points = _grid(args)
    wanted = set(points)
    grid = [] if args.table_only else [point for point in points if point not in finished]
    runs = [r for r in done if args.table_only or _point(r) in wanted]
    if not runs and not grid:
        raise ConfigError(f"{log} holds no fits on {args.device}; run the grid first (without --table-only)")
    with log.open("a") as handle:
        for demos, width, epochs, seed in tqdm(grid, desc=f"fits on {args.device}"):
            run = fit_one(sets, meta["image_size"], demos, width, epochs, seed, args.device)
            runs.append(run | {"device": args.device})
            handle.write(json.dumps(runs[-1]) + "\n")
            handle.flush()
    rows = summarise(runs)
    text = markdown(rows, sets, meta)
    (args.out / "table.md").write_text(text)
    settings = {key: str(value) for key, value in vars(args).items() if key != "handler"}
    import torch

    on_gpu = args.device.startswith("cuda") and torch.cuda.is_available()
    device_name = torch.cuda.get_device_name() if on_gpu else args.device
    result = {"settings": settings, "device_name": device_name, "render": meta, "rows": rows, "runs": runs}
    (args.out / "table.json").write_text(json.dumps(result, indent=2, default=str))
    plot(rows, args.out)
    print(text)
    return result


def _read_runs(log: Path) -> list[dict[str, Any]]:
    """The fits already logged; a line torn by an interrupted write is dropped (that fit runs again)."""
    runs = []
    for line in log.read_text().splitlines() if log.is_file() else []:
        try:
            runs.append(json.loads(line))
        except json.JSONDecodeError:
            print(f"warning: {log}: dropped a torn line ({line[:60]!r}); its fit runs again", file=sys.stderr)
    return runs


def _point(run: dict[str, Any]) -> tuple[int, int, int, int]:
    return run["demos"], run["width"], run["epochs"], run["seed"]


def _grid(args: argparse.Namespace) -> list[tuple[int, int, int, int]]:
    """(demos, width, epochs, seed), one whole grid a seed before the next: a grid cut off still compares."""
    points = product(args.seeds, args.demos, args.widths, args.epochs)
    return [(demos, width, epochs, seed) for seed, demos, width, epochs in points]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    stages = parser.add_subparsers(dest="stage", required=True)
    render = stages.add_parser("render", help="render the frames (needs the embodied stack)")
    render.add_argument("--demos-per-policy", type=int, default=16, help="fitting episodes per demo policy")
    render.add_argument("--held-out", type=int, default=12, help="held-out episodes per demo policy")
    render.add_argument("--demo-steps", type=int, default=60, help="step limit of a demonstration")
    render.add_argument("--noise", type=float, default=0.3, help="action noise of the noisy expert")
    render.add_argument("--image-size", type=int, default=64, help="side of the agent-view frames")
    render.add_argument("--sft-seeds", type=int, default=3, help="SFT policies whose rollouts are scored")
    render.add_argument("--groups", type=int, default=8, help="GRPO groups per SFT policy")
    render.add_argument("--group-size", type=int, default=4, help="rollouts per group")
    render.add_argument("--horizon", type=int, default=50, help="step limit of a policy rollout")
    render.add_argument("--seed", type=int, default=0, help="seeds placements, noise and the SFT policies")
    render.add_argument("--out", type=Path, default=RESULTS)
    render.set_defaults(handler=_render)
    fit = stages.add_parser("fit", help="train the grid of scorers on the rendered frames and measure them")
    fit.add_argument("--frames", type=Path, default=RESULTS / "frames.npz")
    fit.add_argument("--demos", type=_ints, default=[4, 8, 16], help="demonstrations per demo policy")
    fit.add_argument("--widths", type=_ints, default=[16, 32, 64], help="first conv layer's channels")
    fit.add_argument("--epochs", type=_ints, default=[30, 100], help="training epochs")
    fit.add_argument("--seeds", type=_seeds, default=[0, 1, 2], help="training seeds")
    fit.add_argument("--device", default="cpu", help="torch device to train on (cuda on a GPU)")
    fit.add_argument(
        "--table-only",
        action="store_true",
        help="no fitting: the table of every fit OUT/runs.jsonl holds for --device (e.g. a GPU run cut off)",
    )
    fit.add_argument("--out", type=Path, default=RESULTS)
    fit.set_defaults(handler=_fit)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        args.handler(args)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
