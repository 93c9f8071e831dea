"""The paper's Table 2 at CPU scale: SFT, then GRPO on sparse success vs world model only vs WMRL vs anchors.

For each seed: scripted demonstrations with privileged state and behaviour cloning (``algo=sft``), then
four RL runs from that SFT policy with the same trainer (``wmrl train --env ENV``; ``robosuite:Lift``,
``libero:libero_object/0`` or the seven ``libero_spatial`` tasks the rim-grasp expert solves):
``grpo`` (sparse success on every episode), ``wm`` (progress only), ``wmrl`` (progress corrected by
the anchor groups' success: isotonic Online Debiasing + inverse-variance anchor weight) and ``anchors``
(success on the anchor groups alone: the equal-label baseline). The progress scorer is
``--world-model`` (the trainer's names: ``sim-state``, the upper bound; ``approach`` and
``approach-stale``, the hackable ones; ``learned``; ``visual:PATH``). Every policy is evaluated
deterministically (its mean action) on the same initial states, from its start (step 0: the SFT policy)
to its end. Writes ``table.md`` / ``table.json`` (success rate +- s.e. over seeds, real success labels
used, simulator episodes, compute in CPU-seconds, diagnostics, the issue's targets marked met / NOT met;
each run's change from its start, paired over the evaluation states; each pair of methods' per-seed
difference, its spread over seeds and the seeds that difference needs to stand at 2 s.e.; the scorer's
AUROC on the policy's own rollouts, OD's bias reduction and the anchor weight at every step),
``success_vs_step.png``, ``success_bar.png``, ``success_vs_cost.png`` (success against simulator
episodes and against real success labels) and ``diagnostics_vs_step.png``.

    nice -n 10 python benchmarks/embodied_table2.py                 # the committed Lift run
    python benchmarks/embodied_table2.py --env libero:libero_object/0   # the committed LIBERO run
    python benchmarks/embodied_table2.py --table-only               # the table from the runs complete so far
    python benchmarks/embodied_table2.py --seeds 1 --steps 1 --groups 2 --eval-samples 2 --out /tmp/t2
    nice -n 10 python benchmarks/embodied_table2.py --world-model approach --seeds 2 \
        --methods wm,wmrl,anchors --out benchmarks/results/embodied_table2_pilot   # the hack pilot
    python benchmarks/embodied_table2.py --env libero:libero_spatial/0,1,2,3,5,7,8 --world-model sim-state \
        --methods grpo,wmrl,wm --shared-runs OTHER --out OUT   # SFT and anchors-only linked from OTHER
    python benchmarks/embodied_table2.py --env libero:libero_spatial/0,1,2,3,5,7,8 --methods wmrl,anchors \
        --extend-from OTHER --steps 16 --out LONGER --versus OTHER   # OTHER's runs carried on to 16 steps

Each env has its own results directory and sizes (``ENV_DEFAULTS``: the committed runs; a flag overrides
one). Runs are directories under ``OUT/runs/`` (skipped when complete, resumed when interrupted). Needs
the embodied stack (``bash scripts/embodied.sh``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from wmrl_adapters.train.embodied.config import EmbodiedConfig
from wmrl_adapters.train.embodied.trainer import POLICY_FILE, EmbodiedTrainer
from wmrl_adapters.train.run.checks import load_config
from wmrl_adapters.train.run.measure import HeldOutScore, mean_se, paired_change, sign_flip_p
from wmrl_adapters.train.run.rundir import CHECKPOINT, CONFIG, SUMMARY, read_metrics
from wmrl_adapters.train.run.settings import settings_before

from wmrl_algos.algorithms import algorithm
from wmrl_algos.errors import ConfigError

RESULTS = Path(__file__).resolve().parent / "results" / "embodied_table2"
ENV_DEFAULTS: dict[str, dict[str, Any]] = {
    "robosuite:Lift": {
        "out": RESULTS,
        "steps": 6,
        "groups": 8,
        "group_size": 4,
        "horizon": 50,
        "eval_samples": 24,
        "eval_every": 3,
        "demos": 30,
        "bc_epochs": 100,
        "hidden": 64,
        "anchor_fraction": 0.125,
        "learning_rate": 5e-4,
    },
    "libero:libero_object/0": {
        "out": RESULTS.with_name("embodied_table2_libero"),
        "steps": 3,
        "groups": 4,
        "group_size": 4,
        "horizon": 280,  # the height-aware expert takes 134-172 steps (the committed run: 160, earlier one)
        "eval_samples": 16,
        "eval_every": 0,
        "demos": 30,
        "bc_epochs": 200,
        "hidden": 128,
        "anchor_fraction": 0.25,
        "learning_rate": 1e-4,
    },
    # The seven libero_spatial tasks the rim-grasp expert solves, so a rate is an average over tasks.
    "libero:libero_spatial/0,1,2,3,5,7,8": {
        "out": RESULTS.with_name("embodied_table2_libero_spatial"),
        "steps": 8,
        "groups": 8,
        "group_size": 4,
        "horizon": 220,  # LIBERO's own limit for the suite; the expert takes 103-142 steps
        "eval_samples": 5,  # the first 5 fixed states of each task: 35 episodes, as the SFT calibration
        "eval_every": 4,
        "demos": 42,  # 6 a task: SFT 0.32 +- 0.03 (35 give 0.17, 49 give 0.59, 70 give 0.79)
        "bc_epochs": 200,
        "hidden": 64,
        "anchor_fraction": 0.125,
        "learning_rate": 5e-4,
    },
}
"""Per env: the results directory and the sizes of its committed run."""
PAIRS: tuple[tuple[str, str], ...] = (
    ("wmrl", "wm"),
    ("wmrl", "anchors"),
    ("wmrl", "grpo"),
    ("wm", "grpo"),
    ("wm", "anchors"),
    ("anchors", "grpo"),
    ("ivd", "wmrl"),
    ("ivd", "wm"),
    ("ivd", "grpo"),
    ("od", "wmrl"),
    ("od", "wm"),
    ("od", "grpo"),
    ("mix", "wmrl"),
    ("mix", "wm"),
    ("mix", "anchors"),
    ("mix", "ivd"),
    ("mix", "grpo"),
)
"""The method differences the table sizes (first minus second, per seed: the same SFT init and states); a
pair is left out when a method has no runs (the ablations run only when asked for)."""
MARGIN = 0.10
"""The difference the table also sizes for (10 points: the issue's fallback where 3 cannot be resolved)."""
METHODS: tuple[tuple[str, str], ...] = (
    ("grpo", "+ GRPO (sparse success)"),
    ("wm", "+ world model only (progress)"),
    ("wmrl", "+ WMRL (progress + anchors, OD + IVD)"),
    ("anchors", "+ GRPO on anchors only (equal labels)"),
    ("ivd", "+ WMRL without OD (ablation: raw progress, IVD)"),
    ("od", "+ WMRL without IVD (ablation: OD, anchors weighted 1)"),
    ("mix", "+ anchors and progress, uncorrected (ablation)"),
)
ABLATIONS = ("ivd", "od", "mix")
"""Rows that run only when named in ``--methods``, each WMRL with a correction off (the algorithms of
:data:`wmrl_algos.algorithms.ALGORITHMS`): ``ivd`` (Online Debiasing off) asks whether OD's map costs a
good scorer its ranking; ``od`` (Inverse-Variance Denoising off) whether IVD's up-weighted anchor group
is what costs WMRL against the world model alone; ``mix`` (both off) what the anchors add uncorrected."""
DEFAULT_METHODS = tuple(method for method, _ in METHODS if method not in ABLATIONS)
"""What a run without ``--methods`` trains: Table 2's rows."""
SCORER_FREE = ("sft", "grpo", "anchors")
"""The runs whose training never reads the progress scorer (``--shared-runs`` links them)."""
#: One colour a method in every plot, whichever methods a run has.
COLORS = {
    "sft": "grey",
    "grpo": "tab:blue",
    "wm": "tab:orange",
    "wmrl": "tab:green",
    "anchors": "tab:red",
    "ivd": "tab:purple",
    "od": "tab:brown",
    "mix": "tab:olive",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's options (output directory and sizes default to the env's committed run)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="robosuite:Lift", choices=sorted(ENV_DEFAULTS))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--seeds", type=int, default=3, help="how many seeds to run")
    parser.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="the first seed (a pre-registered run takes seeds a pilot did not use)",
    )
    parser.add_argument("--steps", type=int)
    parser.add_argument("--groups", type=int)
    parser.add_argument("--group-size", type=int)
    parser.add_argument("--horizon", type=int)
    parser.add_argument("--eval-samples", type=int)
    parser.add_argument("--eval-every", type=int)
    parser.add_argument("--demos", type=int)
    parser.add_argument("--bc-epochs", type=int)
    parser.add_argument("--hidden", type=int)
    parser.add_argument("--anchor-fraction", type=float)
    parser.add_argument("--torch-threads", type=int, default=1, help="the policy's torch threads")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--learning-rate", type=float)
    parser.add_argument("--init-std", type=float, default=0.1)
    parser.add_argument("--methods", default=",".join(DEFAULT_METHODS))
    parser.add_argument(
        "--world-model",
        default="sim-state",
        help="the RL runs' progress scorer: sim-state | approach | approach-stale | learned | visual:PATH",
    )
    parser.add_argument(
        "--shared-runs",
        type=Path,
        help="another results directory of this benchmark (same env and sizes) whose complete runs that "
        f"never read the scorer in training ({', '.join(SCORER_FREE)}) are linked here instead of run again",
    )
    parser.add_argument(
        "--versus",
        type=Path,
        action="append",
        default=[],
        help="another results directory of this benchmark (the same env, another setting): the table adds "
        "each method minus the same method's run of the same seed there, and each gap between two methods "
        "minus the same gap there; repeat it to compare with several",
    )
    parser.add_argument(
        "--extend-from",
        type=Path,
        help="another results directory of this benchmark: copy each of its complete runs of --methods "
        "here and carry it on to --steps steps (its SFT start linked), leaving the shorter run as it was",
    )
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args(argv)
    if args.extend_from is not None and (args.steps is None or args.shared_runs is not None):
        parser.error("--extend-from needs --steps (how long the carried-on runs go) and no --shared-runs")
    for other in args.versus:
        if not (other / "runs").is_dir():  # a typo would compare with nothing
            parser.error(
                f"--versus {other}: no runs/ directory there (another results directory of this benchmark)"
            )
    for key, value in ENV_DEFAULTS[args.env].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def _run(config: EmbodiedConfig, run_dir: Path) -> None:
    if (run_dir / SUMMARY).is_file():
        return
    resume = (run_dir / CHECKPOINT).is_file()
    started = time.perf_counter()
    EmbodiedTrainer(config, run_dir, resume=resume).run()
    print(f"{run_dir.name}: {time.perf_counter() - started:.0f} s", flush=True)


def run_all(args: argparse.Namespace) -> None:
    """Every SFT and RL run that is not complete yet."""
    runs = args.out / "runs"
    common = dict(
        env=args.env,
        horizon=args.horizon,
        hidden=args.hidden,
        eval_samples=args.eval_samples,
        workers=args.workers,
        init_std=args.init_std,
        progress=False,
    )
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        sft_dir = runs / f"sft-s{seed}"
        sft = EmbodiedConfig(
            algo="sft", seed=seed, demos=args.demos, demo_noise=0.1, bc_epochs=args.bc_epochs, **common
        )
        _run(sft, sft_dir)
        require_policy(sft_dir)
        for method in args.methods.split(","):
            config = EmbodiedConfig(
                algo=method,
                seed=seed,
                init=str(sft_dir / POLICY_FILE),
                steps=args.steps,
                groups=args.groups,
                group_size=args.group_size,
                eval_every=args.eval_every,
                learning_rate=args.learning_rate,
                anchor_fraction=args.anchor_fraction,
                world_model=args.world_model,
                **common,
            )
            _run(config, runs / f"{method}-s{seed}")


def require_policy(sft_dir: Path) -> None:
    """Raise :class:`ConfigError` when ``sft_dir`` is a complete SFT run without its ``policy.pt``.

    Why: committed results keep each run's summary and metrics but not its weights, so on a fresh clone
    (or a run linked from another machine) the SFT run counts as done and is not re-made, and every RL
    run after it would stop on a missing ``--init``. This names the run and the fix before any of them.
    """
    if (sft_dir / SUMMARY).is_file() and not (sft_dir / POLICY_FILE).is_file():
        raise ConfigError(
            f"{sft_dir} is a complete SFT run without its {POLICY_FILE} (run weights are not committed): "
            f"remove {sft_dir} (a link or a directory) and run again to re-make it (the same seed and "
            "settings; on another machine the re-made policy can differ in rounding, so check its step-0 "
            "success against the committed run's before pairing with that run's methods)"
        )


def extend_run(source: Path, run_dir: Path, steps: int) -> EmbodiedConfig | None:
    """Copy ``source``'s complete run to ``run_dir`` (once) and return its saved config with ``steps``
    steps, for :func:`_run` to resume there; None when ``source`` is not a complete run with a checkpoint.

    Why: "do the methods separate if they train longer" is asked of the same runs carried on, not of
    new ones: the first steps (the same rollouts from the same start) are not paid for again, and the
    curve of each run goes on from where the shorter table read it. A copy leaves the shorter run, which
    a committed table reads, as it was. The copy is made under a temporary name and renamed once its
    summary is gone, so an interrupted copy is never read as a complete run.
    """
    if not (run_dir / CONFIG).is_file():
        if not ((source / SUMMARY).is_file() and (source / CHECKPOINT).is_file()):
            return None
        partial = run_dir.with_name(run_dir.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(source.resolve(), partial)
        (partial / SUMMARY).unlink()
        partial.rename(run_dir)
    saved = json.loads((run_dir / CONFIG).read_text())
    return load_config(None, {**settings_before(saved), "steps": steps}, EmbodiedConfig)


def extend_all(args: argparse.Namespace) -> None:
    """Every run of ``--methods`` in ``--extend-from`` carried on to ``--steps`` here, with its SFT start
    linked (:func:`extend_run`); a run that is not there, or has no checkpoint, is named and skipped."""
    source, runs = args.extend_from / "runs", args.out / "runs"
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        link_shared_runs(source, runs, seed, methods=("sft",))
        for method in args.methods.split(","):
            name = f"{method}-s{seed}"
            config = extend_run(source / name, runs / name, args.steps)
            if config is None:
                print(f"{name}: no complete run with a checkpoint in {source}; not extended", flush=True)
            else:
                _run(config, runs / name)


def link_shared_runs(
    source: Path, runs: Path, seed: int, methods: tuple[str, ...] = SCORER_FREE
) -> list[str]:
    """Link ``source``'s complete runs of ``methods`` (by default :data:`SCORER_FREE`) of ``seed`` into
    ``runs`` (relative links; a run already in ``runs`` is left alone). Returns the names linked.

    Why: SFT, GRPO on sparse success and GRPO on the anchors alone never read the progress scorer in
    training, so two scorers' tables share them (the same SFT start, the same states): paired, and paid
    for once. Their logged scorer diagnostics (AUROC) are the scorer of the run that made them.
    """
    linked = []
    runs.mkdir(parents=True, exist_ok=True)
    for method in methods:
        name = f"{method}-s{seed}"
        if (source / name / SUMMARY).is_file() and not (runs / name).exists():
            (runs / name).symlink_to(os.path.relpath(source / name, runs), target_is_directory=True)
            linked.append(name)
    return linked


def _seed_dirs(runs: Path, method: str) -> list[Path]:
    """``method``'s run directories in seed order (``s4`` before ``s10``, which a name sort reverses)."""

    def seed(path: Path) -> tuple[int, int, str]:
        tail = path.name[len(method) + 2 :]
        return (0, int(tail), "") if tail.isdigit() else (1, 0, tail)

    return sorted(runs.glob(f"{method}-s*"), key=seed)


def _summary(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / SUMMARY
    return json.loads(path.read_text()) if path.is_file() else None


def _stat(values: list[float | None]) -> tuple[float | None, float | None]:
    """Mean and s.e. over seeds of the finite values (:func:`mean_se`; a NaN is unknown, like None)."""
    mean, se, _ = mean_se([v for v in values if v is not None and math.isfinite(v)])
    return mean, se


def _diagnostic(lines: list[dict[str, float]], key: str, last: bool = False) -> float | None:
    values = [line[key] for line in lines if key in line]
    if not values:
        return None
    return float(values[-1]) if last else float(np.mean(values))


def build_table(out: Path, versus: Sequence[Path] = ()) -> dict[str, Any]:
    """Collect every complete run into the table rows, curves and targets (and, for each directory in
    ``versus``, each method and each gap against the same in that results directory:
    :func:`versus_differences`)."""
    runs = out / "runs"
    rows: list[dict[str, Any]] = []
    curves: dict[str, dict[int, list[float]]] = {}
    sft = [s for s in (_summary(d) for d in _seed_dirs(runs, "sft")) if s]
    sft_rates = [s["eval"]["eval/success_rate"] for s in sft]
    mean, se = _stat(sft_rates)
    rows.append(
        {
            "method": "sft",
            "label": "SFT (behaviour cloning on scripted demos)",
            "seeds": len(sft),
            "success": mean,
            "success_se": se,
            "per_seed": sft_rates,
            "real_labels": 0.0,
            "sim_episodes": float(np.mean([s["final"]["compute/demo_episodes"] for s in sft]))
            if sft
            else None,
            "charged_s": float(np.mean([s["final"]["compute/charged_total"] for s in sft])) if sft else None,
        }
    )
    sft_by_seed = {int(s["config"]["seed"]): s["eval"]["eval/success_rate"] for s in sft}
    for method, label in METHODS:
        summaries = [(d, _summary(d)) for d in _seed_dirs(runs, method)]
        done = [(d, s) for d, s in summaries if s]
        if not done:
            continue
        rates = [s["eval"]["eval/success_rate"] for _, s in done]
        mean, se = _stat(rates)
        all_lines = [read_metrics(d / "metrics.jsonl") for d, _ in done]
        curve: dict[int, list[float]] = {}
        for (_, summary), lines in zip(done, all_lines, strict=True):
            start = sft_by_seed.get(int(summary["config"]["seed"]))
            if start is not None and not any(line["step"] == 0 for line in lines):  # no step-0 line
                curve.setdefault(0, []).append(start)
            for line in lines:
                if "eval/success_rate" in line:
                    curve.setdefault(int(line["step"]), []).append(line["eval/success_rate"])
        curves[method] = curve
        rows.append(
            {
                "method": method,
                "label": label,
                "seeds": len(done),
                "success": mean,
                "success_se": se,
                "per_seed": rates,
                "real_labels": float(np.mean([s["final"]["compute/real_labels"] for _, s in done])),
                "sim_episodes": float(np.mean([s["final"]["compute/sim_episodes"] for _, s in done])),
                "charged_s": float(np.mean([s["final"]["compute/charged_total"] for _, s in done])),
                "train_sim_success": _stat([_diagnostic(x, "diag/sim_success_rate") for x in all_lines])[0],
                "scorer_auroc": _stat([_diagnostic(x, "diag/scorer_auroc") for x in all_lines])[0],
                "calibrated_auroc": _stat([_diagnostic(x, "diag/calibrated_auroc") for x in all_lines])[0],
                "bias_reduction": None
                if not _corrects(method, "wmrl/bias_reduction")
                else pooled_reduction(
                    *(
                        [v for v in (_diagnostic(x, key, True) for x in all_lines) if v is not None]
                        for key in RESIDUALS
                    )
                ),
                "anchor_weight": _stat([_diagnostic(x, "wmrl/anchor_weight", True) for x in all_lines])[0]
                if _corrects(method, "wmrl/anchor_weight")
                else 1.0,
                "policy_errors": float(
                    sum(sum(line.get("train/policy_errors", 0) for line in x) for x in all_lines)
                ),
                "unknown": float(
                    sum(
                        sum(
                            line.get("train/worker_crashes", 0) + line.get("train/sim_errors", 0)
                            for line in x
                        )
                        for x in all_lines
                    )
                ),
            }
        )
    by = {row["method"]: row for row in rows}
    targets = {}
    if {"wmrl", "grpo"} <= by.keys() and by["wmrl"]["success"] is not None:
        targets["WMRL >= GRPO sparse + 3 points"] = by["wmrl"]["success"] >= by["grpo"]["success"] + 0.03
    if {"wmrl", "grpo", "wm"} <= by.keys():  # the paper's order: GRPO sparse <= world model only <= WMRL
        targets["world model only between GRPO sparse and WMRL"] = (
            by["grpo"]["success"] <= by["wm"]["success"] <= by["wmrl"]["success"]
        )
    if {"wmrl", "anchors"} <= by.keys():
        targets["WMRL > anchors only (same real labels)"] = by["wmrl"]["success"] > by["anchors"]["success"]
    return {
        "rows": rows,
        "curves": curves,
        "targets": targets,
        "changes": run_changes(runs),
        "differences": method_differences(runs)
        + [row for other in versus for row in versus_differences(runs, other)],
        "training": training_curves(runs),
    }


def run_changes(runs: Path) -> list[dict[str, Any]]:
    """Each complete RL run's change from its start (step 0) to its end, paired over the evaluation
    states (``None`` where the run has no step-0 evaluation)."""
    changes = []
    for method, _ in METHODS:
        for run_dir in _seed_dirs(runs, method):
            summary = _summary(run_dir)
            held_out = (summary or {}).get("held_out", {})
            if not {"start", "end"} <= held_out.keys():
                continue
            start, end = (HeldOutScore.from_dict(held_out[key]) for key in ("start", "end"))
            change = paired_change(start, end)
            changes.append(
                {
                    "method": method,
                    "seed": int(summary["config"]["seed"]),  # type: ignore[index]
                    "start": start.mean,
                    "end": end.mean,
                    "change": None if change is None else change.mean,
                    "change_se": None if change is None else change.se,
                    "pairs": 0 if change is None else change.pairs,
                }
            )
    return changes


#: The per-step diagnostics plotted over training: the real success of the step's training rollouts
#: (sampled actions, every episode the simulator ran; beside the evaluation at the mean action it tells a
#: mean that drifts from a sampled policy that does not), the scorer's AUROC on the policy's own rollouts
#: (raw and after Online Debiasing), OD's bias reduction on the anchors and the anchor weight. The bias
#: reduction is pooled over seeds (:func:`pooled_reduction`), not a mean of each run's logged ratio: a run
#: whose raw squared error on its anchors is near 0 logs a ratio of -40 that would swamp the mean.
TRAINING_DIAGNOSTICS = (
    "diag/sim_success_rate",
    "diag/scorer_auroc",
    "diag/calibrated_auroc",
    "wmrl/bias_reduction",
    "wmrl/anchor_weight",
)
#: The mean squared error of the scorer on the anchor episodes' real success, before and after OD.
RESIDUALS = ("wmrl/residual_raw", "wmrl/residual_calibrated")
#: What :func:`training_curves` reads from each metrics line (the bias reduction is derived, not read).
_LOGGED = (*(key for key in TRAINING_DIAGNOSTICS if key != "wmrl/bias_reduction"), *RESIDUALS)


def training_curves(runs: Path) -> dict[str, dict[str, dict[int, list[float]]]]:
    """Per method, per metric, per step: the values of every complete run (one a seed).

    Besides :data:`TRAINING_DIAGNOSTICS`: ``success`` (each evaluation, by its step) and, at the same
    steps, ``sim_episodes`` and ``real_labels`` (what the run had used when it was evaluated; 0 at step
    0), so methods that pay differently can be read on one axis."""
    curves: dict[str, dict[str, dict[int, list[float]]]] = {}
    for method, _ in METHODS:
        for run_dir in _seed_dirs(runs, method):
            if _summary(run_dir) is None:
                continue
            per = curves.setdefault(method, {})
            used = {"sim_episodes": 0.0, "real_labels": 0.0}
            for line in read_metrics(run_dir / "metrics.jsonl"):
                step = int(line["step"])
                for key in used:
                    used[key] = float(line.get(f"compute/{key}", used[key]))
                for key in _LOGGED:
                    value = line.get(key)
                    if value is not None and math.isfinite(value):
                        per.setdefault(key, {}).setdefault(step, []).append(float(value))
                if "eval/success_rate" in line:
                    per.setdefault("success", {}).setdefault(step, []).append(line["eval/success_rate"])
                    for key, value in used.items():
                        per.setdefault(key, {}).setdefault(step, []).append(value)
    for per in curves.values():
        raw, calibrated = (per.get(key, {}) for key in RESIDUALS)
        pooled = {step: pooled_reduction(raw[step], calibrated.get(step, [])) for step in raw}
        per["wmrl/bias_reduction"] = {step: [value] for step, value in pooled.items() if value is not None}
    return curves


def pooled_reduction(raw: list[float], calibrated: list[float]) -> float | None:
    """OD's bias reduction over seeds: ``1 - mean(calibrated error) / mean(raw error)`` (``None`` when
    the two lists differ in length or the raw error is 0).

    Example:
        >>> round(pooled_reduction([0.2, 0.0005], [0.1, 0.02]), 3)  # the logged ratios: 0.5 and -39
        0.401
    """
    if not raw or len(raw) != len(calibrated) or not sum(raw) > 0:
        return None
    return 1.0 - sum(calibrated) / sum(raw)


Finals = dict[str, dict[int, tuple[float, Path]]]  # method -> seed -> (final success, the run's directory)


def _finals(runs: Path) -> Finals:
    """Each method's final success by seed, with the run it came from (resolved, so a linked run is
    recognised as the same run wherever it is linked)."""
    finals: Finals = {}
    for method, _ in METHODS:
        for run_dir in _seed_dirs(runs, method):
            summary = _summary(run_dir)
            if summary is not None:
                rate = summary["eval"]["eval/success_rate"]
                finals.setdefault(method, {})[int(summary["config"]["seed"])] = (rate, run_dir.resolve())
    return finals


def _difference_row(comparison: str, per_seed: list[float]) -> dict[str, Any]:
    """A paired difference's mean, spread and s.e. over seeds, the seeds a difference of that size and
    spread needs to stand at 2 s.e. (``ceil((2 sd / |mean|)^2)``; ``None`` where the mean is 0, to
    rounding, or the spread unknown), and the seeds a difference of :data:`MARGIN` with that spread needs
    (``ceil((2 sd / MARGIN)^2)``), and the exact sign-flip p of the per-seed differences
    (:func:`sign_flip_p`), which a few seeds' 2-s.e. call needs beside it."""
    mean, se = _stat(per_seed)
    sd = None if se is None else se * math.sqrt(len(per_seed))
    resolvable = sd is not None and mean is not None and abs(mean) > 1e-9  # 0: no size resolves it
    # at least 2: a spread over seeds is measured from two or more
    needed = max(2, math.ceil((2 * sd / abs(mean)) ** 2)) if resolvable else None  # type: ignore[operator]
    for_margin = None if sd is None else max(2, math.ceil((2 * sd / MARGIN) ** 2))
    return {
        "comparison": comparison,
        "seeds": len(per_seed),
        "per_seed": per_seed,
        "mean": mean,
        "se": se,
        "sd": sd,
        "seeds_for_2se": needed,
        "seeds_for_margin": for_margin,
        "sign_flip_p": sign_flip_p(per_seed),
    }


def method_differences(runs: Path) -> list[dict[str, Any]]:
    """Each of :data:`PAIRS` as a :func:`_difference_row` of the per-seed difference of the final success."""
    finals = _finals(runs)
    rows = []
    for first, second in PAIRS:
        seeds = sorted(finals.get(first, {}).keys() & finals.get(second, {}).keys())
        if seeds:
            per_seed = [_gap(finals, first, second, seed) for seed in seeds]
            rows.append(_difference_row(f"{first} - {second}", per_seed))
    return rows


def _gap(finals: Finals, first: str, second: str, seed: int) -> float:
    """``first``'s final success minus ``second``'s, same seed."""
    return finals[first][seed][0] - finals[second][seed][0]


def versus_differences(runs: Path, other: Path) -> list[dict[str, Any]]:
    """Each method here minus the same method's run of the same seed in ``other`` (another results
    directory of this benchmark), then each gap of :data:`PAIRS` here minus the same gap there, as
    :func:`_difference_row` rows.

    Why: a setting the table does not vary (an anchor fraction, a learning rate, more steps) is run into a
    directory of its own, and the question is then the same method under two settings, from the same SFT
    start on the same states, or whether the setting widens the gap between two methods ("do they
    separate if they train longer"), which is a per-seed difference of differences, not two rows read side
    by side. A seed whose two runs are one run (linked into both directories) is left out: it is not a
    difference of settings.
    """
    here, there = _finals(runs), _finals(other / "runs")
    differing = {  # seeds with two runs of the method, not one run linked into both directories
        method: {
            seed
            for seed in here.get(method, {}).keys() & there.get(method, {}).keys()
            if here[method][seed][1] != there[method][seed][1]
        }
        for method, _ in METHODS
    }
    rows = []
    for method, _ in METHODS:
        seeds = sorted(differing[method])
        if seeds:
            per_seed = [here[method][seed][0] - there[method][seed][0] for seed in seeds]
            rows.append(_difference_row(f"{method} - {method} ({other.name})", per_seed))
    for first, second in PAIRS:  # does the setting change the gap? Both must differ, else it is a row above
        seeds = sorted(differing[first] & differing[second])
        if seeds:
            per_seed = [_gap(here, first, second, seed) - _gap(there, first, second, seed) for seed in seeds]
            rows.append(_difference_row(f"({first} - {second}) - same ({other.name})", per_seed))
    return rows


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def write_outputs(table: dict[str, Any], out: Path, settings: dict[str, Any]) -> None:
    """``table.md``, ``table.json``, ``success_vs_step.png``, ``success_bar.png``, ``success_vs_cost.png``
    and ``diagnostics_vs_step.png``."""
    out.mkdir(parents=True, exist_ok=True)
    env = settings.get("env", "robosuite:Lift")
    lines = [
        "| method | success rate (+- s.e. over seeds) | seeds | real success labels | sim episodes "
        "(training) | compute charged (CPU-s) | scorer AUROC (own rollouts) | calibrated AUROC | "
        "bias reduction | anchor weight |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in table["rows"]:
        success = _fmt(row["success"]) + (
            f" +- {_fmt(row['success_se'])}" if row["success_se"] is not None else ""
        )
        lines.append(
            f"| {row['label']} | {success} | {row['seeds']} | {_fmt(row['real_labels'], 0)} | "
            f"{_fmt(row['sim_episodes'], 0)} | {_fmt(row['charged_s'], 0)} | "
            f"{_fmt(row.get('scorer_auroc'))} | "
            f"{_fmt(row.get('calibrated_auroc'))} | {_fmt(row.get('bias_reduction'))} | "
            f"{_fmt(row.get('anchor_weight'))} |"
        )
    lines += ["", "Targets (to report against, not tuned to):", ""]
    lines += [f"- {name}: {'met' if met else 'NOT met'}" for name, met in table["targets"].items()]
    if table.get("changes"):
        lines += [
            "",
            "Each run from its start (step 0, the SFT policy) to its end, paired over the states:",
            "",
        ]
        lines += ["| method | seed | start | end | change +- paired s.e. |", "|---|---|---|---|---|"]
        for row in table["changes"]:
            lines.append(
                f"| {row['method']} | {row['seed']} | {_fmt(row['start'])} | {_fmt(row['end'])} | "
                f"{'-' if row['change'] is None else format(row['change'], '+.3f')} +- "
                f"{_fmt(row['change_se'])} |"
            )
        lines += ["", "Over seeds (each seed's change, start to end; mean +- s.e. over seeds):", ""]
        for method, _ in METHODS:
            per_seed = [row["change"] for row in table["changes"] if row["method"] == method]
            mean, se = _stat(per_seed)
            if mean is not None:
                lines.append(f"- {method}: {mean:+.3f} +- {_fmt(se)} ({len(per_seed)} seeds)")
    if table.get("differences"):
        lines += [
            "",
            "Differences between methods (final success, per seed: same SFT init, same states):",
            "",
        ]
        lines += [
            "| difference | seeds | per seed | mean +- s.e. | s.d. over seeds | seeds for 2 s.e. at this "
            f"mean | seeds for 2 s.e. at {MARGIN:.2f} | exact sign-flip p |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in table["differences"]:
            per_seed = ", ".join(f"{value:+.3f}" for value in row["per_seed"])
            lines.append(
                f"| {row['comparison']} | {row['seeds']} | {per_seed} | {_fmt(row['mean'])} +- "
                f"{_fmt(row['se'])} | {_fmt(row['sd'])} | {row['seeds_for_2se'] or '-'} | "
                f"{row['seeds_for_margin'] or '-'} | {_fmt(row['sign_flip_p'])} |"
            )
    lines += _training_lines(table.get("training", {}))
    (out / "table.md").write_text("\n".join(lines) + "\n")
    (out / "table.json").write_text(json.dumps({**table, "settings": settings}, indent=2, default=str) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4.5))
    for method, label in METHODS:
        curve = table["curves"].get(method)
        if not curve:
            continue
        steps = sorted(curve)
        _curve(axis, steps, [curve[step] for step in steps], method, label)
    axis.set_xlabel("training step")
    axis.set_ylabel("evaluation success rate")
    axis.set_title(f"{env}: success vs training step (step 0 = SFT; mean +- s.e. over seeds)")
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out / "success_vs_step.png", dpi=90)
    plt.close(figure)
    figure, axis = plt.subplots(figsize=(8, 4.5))
    rows = [row for row in table["rows"] if row["success"] is not None]
    axis.bar(
        range(len(rows)),
        [row["success"] for row in rows],
        yerr=[row["success_se"] or 0.0 for row in rows],
        capsize=4,
        color=[COLORS[row["method"]] for row in rows],
    )
    axis.set_xticks(range(len(rows)), [row["method"] for row in rows])
    axis.set_ylabel("evaluation success rate")
    axis.set_title(f"Table 2 shape at CPU scale ({env})")
    figure.tight_layout()
    figure.savefig(out / "success_bar.png", dpi=90)
    plt.close(figure)
    _plot_training(table.get("training", {}), out, env, plt)


def _corrects(method: str, key: str) -> bool:
    """Whether ``key`` means something for ``method``: OD's bias reduction only where Online Debiasing
    runs, the anchor weight only where Inverse-Variance Denoising does (the other methods log the
    correction's neutral values, which would read as measurements)."""
    if key == "wmrl/bias_reduction":
        return algorithm(method).debias
    if key == "wmrl/anchor_weight":
        return algorithm(method).denoise
    return True


def _training_lines(training: dict[str, dict[str, dict[int, list[float]]]]) -> list[str]:
    """The per-step diagnostics as a markdown table (mean over seeds; ``-`` where a method has none)."""
    rows = []
    for method, _ in METHODS:
        per = training.get(method, {})
        for step in sorted({step for key in TRAINING_DIAGNOSTICS for step in per.get(key, {})}):
            cells = [
                _fmt(
                    float(np.mean(per[key][step]))
                    if _corrects(method, key) and step in per.get(key, {})
                    else None
                )
                for key in TRAINING_DIAGNOSTICS
            ]
            rows.append(f"| {method} | {step} | " + " | ".join(cells) + " |")
    if not rows:
        return []
    header = "| method | step | " + " | ".join(TRAINING_DIAGNOSTICS) + " |"
    return [
        "",
        "Over training (mean over seeds): the training rollouts' real success (sampled actions) and the"
        " scorer on the policy's own rollouts:",
        "",
        header,
        "|---|---|" + "---|" * len(TRAINING_DIAGNOSTICS),
        *rows,
    ]


def _curve(axis: Any, xs: list[float], samples: list[list[float]], method: str, label: str) -> None:
    """One method's line: the mean of each point's samples (one a seed) with its s.e. over them."""
    stats = [_stat(values) for values in samples]
    axis.errorbar(
        xs, [m for m, _ in stats], yerr=[e or 0.0 for _, e in stats], marker="o", capsize=3, label=label,
        color=COLORS[method],
    )  # fmt: skip


def _plot_training(
    training: dict[str, dict[str, dict[int, list[float]]]], out: Path, env: str, plt: Any
) -> None:
    """``success_vs_cost.png`` (success against simulator episodes and against real success labels)
    and ``diagnostics_vs_step.png`` (:data:`TRAINING_DIAGNOSTICS` against the step)."""
    panels = (
        ("sim_episodes", "simulator episodes used (training)"),
        ("real_labels", "real success labels used"),
    )
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for axis, (cost, xlabel) in zip(axes, panels, strict=True):
        for method, label in METHODS:
            per = training.get(method, {})
            steps = sorted(per.get("success", {}))
            if steps:  # one point a step: mean success over seeds at the mean cost paid by then
                xs = [float(np.mean(per[cost][step])) for step in steps]
                _curve(axis, xs, [per["success"][step] for step in steps], method, label)
        axis.set_xlabel(xlabel)
        axis.set_ylabel("evaluation success rate")
    axes[0].legend(fontsize=7)
    figure.suptitle(f"{env}: what each method paid for its success (mean +- s.e. over seeds)")
    figure.tight_layout()
    figure.savefig(out / "success_vs_cost.png", dpi=90)
    plt.close(figure)
    figure, axes = plt.subplots(2, 3, figsize=(15, 7))
    axes.flat[-1].set_visible(False)  # five diagnostics on a 2 x 3 grid
    for axis, key in zip(axes.flat, TRAINING_DIAGNOSTICS, strict=False):
        for method, label in METHODS:
            curve = training.get(method, {}).get(key)
            if curve and _corrects(method, key):
                steps = sorted(curve)
                _curve(axis, steps, [curve[step] for step in steps], method, label)
        axis.set_xlabel("training step")
        axis.set_ylabel(key)
    axes.flat[0].legend(fontsize=7)
    figure.suptitle(
        f"{env}: training rollouts' success and the scorer on them, over training (mean +- s.e. over seeds)"
    )
    figure.tight_layout()
    figure.savefig(out / "diagnostics_vs_step.png", dpi=90)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    """Run (unless ``--table-only``) and write the table and plots."""
    args = parse_args(argv)
    # The simulator workers are processes of their own: more torch threads only fight them for the cores.
    torch.set_num_threads(args.torch_threads)
    started = time.perf_counter()
    if args.shared_runs is not None:  # before any run: a linked run is complete, so it is not run again
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            link_shared_runs(args.shared_runs / "runs", args.out / "runs", seed)
    if not args.table_only:
        if args.extend_from is not None:
            extend_all(args)
        else:
            run_all(args)
    table = build_table(args.out, args.versus)
    settings = {  # a repeated flag (--versus) as its values, not a list's repr
        key: ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        for key, value in vars(args).items()
    }
    settings["wall_seconds"] = f"{time.perf_counter() - started:.0f}"
    write_outputs(table, args.out, settings)
    print((args.out / "table.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
