"""The paper's theory and ablation, checked on a synthetic contextual bandit with known true rewards.

Why: WMRL's claims are about mechanics (a world-model-only run stops at a bias floor that no training
length removes; Online Debiasing removes it; Inverse-Variance Denoising recovers part of what the noise
costs; together they match GRPO on real executions while executing ~10% of the groups). A bandit whose
true rewards are known exactly measures each claim without evaluation noise, in minutes on a CPU.

Setup (as in the paper): GRPO, 8 groups x 8 trajectories per step, one context per group, a tabular
softmax policy trained with the library's ``CorrectionLoop`` (anchor plan, OD, IVD, group advantages)
and ``grpo_loss``. The world model (``wmrl_algos.toy_bandit``) reads each trajectory's outcome through a
convex monotone distortion that drifts with the policy, plus outcome-scale noise; convexity makes it
prefer high-variance "ambitious" actions (Jensen), so it learns the wrong argmax.

Methods, all from the same initial policy and the same seeds:

* ``grpo_real``: every group executed (the expensive reference), same number of steps.
* ``grpo_real_equal_budget``: every group executed, stopped when it has used as many executions as WMRL.
* ``grpo_anchors_only``: only the anchor groups, executed, same steps and budget as WMRL.
* ``world_model_only``: every group predicted, nothing executed.
* ``direct_mix``: anchors train on real scores, the rest on raw predictions, weight 1 (no correction).
* ``ivd_only``, ``od_only``, ``od_ivd`` (WMRL): the corrections alone and together.

Run ``python benchmarks/bandit_ablation.py`` (about 75 CPU-seconds, 2 minutes on a busy 2-core machine)
or ``--smoke`` (seconds). It prints the table and writes ``results.md``, ``results.csv``, ``curves.csv``
and ``bandit_ablation.png`` into ``--output-dir``.
"""

from __future__ import annotations

import csv
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm
from wmrl_adapters.cli import parse_dataclass_args

from wmrl_algos.anchors import AnchorScheduler
from wmrl_algos.grpo import GRPOConfig, grpo_loss
from wmrl_algos.loop import CorrectionConfig, CorrectionLoop
from wmrl_algos.toy_bandit import (
    BanditConfig,
    ContextualBandit,
    SyntheticWorldModel,
    WorldModelErrorConfig,
    policy_shift,
    sample_actions,
)
from wmrl_algos.types import ScoredGroup

__all__ = ["Args", "Method", "METHODS", "RunCurves", "run_method", "main"]


@dataclass
class Args:
    """Command-line settings (``--name value``; booleans as ``--flag``)."""

    steps: int = field(default=300, metadata={"help": "Training steps of every equal-step method."})
    seeds: int = field(default=10, metadata={"help": "Independent seeds per method (bandit, policy, noise)."})
    groups_per_step: int = field(default=8, metadata={"help": "GRPO groups per step (paper: 8)."})
    group_size: int = field(default=8, metadata={"help": "Trajectories per group (paper: 8)."})
    anchor_fraction: float = field(
        default=0.1, metadata={"help": "Share of groups executed for real (paper: 0.1)."}
    )
    n_contexts: int = field(default=16, metadata={"help": "Contexts (tasks) of the bandit."})
    n_actions: int = field(default=8, metadata={"help": "Actions (strategies) per context."})
    n_ambitious: int = field(
        default=3, metadata={"help": "High-variance actions per context; 0 removes the bias floor."}
    )
    curvature: float = field(
        default=3.0, metadata={"help": "Convexity of the world model's distortion (0: no bias)."}
    )
    curvature_drift: float = field(
        default=2.0, metadata={"help": "Growth of the convexity as the policy moves (0: no drift)."}
    )
    noise_std: float = field(
        default=0.15, metadata={"help": "Outcome-scale noise of the world model (0: none)."}
    )
    noise_drift: float = field(
        default=1.0, metadata={"help": "Relative growth of the noise as the policy moves."}
    )
    learning_rate: float = field(default=0.1, metadata={"help": "Adam learning rate on the policy logits."})
    capacity: int = field(
        default=256,
        metadata={"help": "Anchor pairs the isotonic map is fitted on (FIFO, 32 steps of one anchor group)."},
    )
    w_max: float = field(
        default=10.0, metadata={"help": "Upper bound of the IVD anchor weight (library default)."}
    )
    methods: str = field(default="all", metadata={"help": "Comma-separated method names, or 'all'."})
    log_every: int = field(default=5, metadata={"help": "Steps between the (exact) bias diagnostics."})
    output_dir: str = field(
        default="benchmarks/results/bandit_ablation", metadata={"help": "Where tables and the plot go."}
    )
    smoke: bool = field(default=False, metadata={"help": "Tiny budget (a few seconds) for tests."})

    def __post_init__(self) -> None:
        if self.smoke:
            self.steps, self.seeds, self.log_every = min(self.steps, 24), min(self.seeds, 2), 4
        positive = ("steps", "seeds", "groups_per_step", "log_every", "capacity")
        for name in positive:
            if getattr(self, name) < 1:
                raise SystemExit(f"--{name.replace('_', '-')}={getattr(self, name)!r}; pass 1 or more")
        if self.group_size < 2:
            raise SystemExit(
                f"--group-size={self.group_size!r}; GRPO needs at least 2 trajectories per group"
            )
        if not 0.0 < self.anchor_fraction <= 1.0:
            raise SystemExit(f"--anchor-fraction={self.anchor_fraction!r}; pass a share in (0, 1], e.g. 0.1")
        unknown = set(self.method_names) - {method.name for method in METHODS}
        if unknown:
            raise SystemExit(
                f"--methods has unknown names {sorted(unknown)}; choose from "
                f"{', '.join(method.name for method in METHODS)} or 'all'"
            )

    @property
    def method_names(self) -> list[str]:
        """The methods to run, in table order."""
        if self.methods == "all":
            return [method.name for method in METHODS]
        return [name.strip() for name in self.methods.split(",") if name.strip()]


@dataclass(frozen=True)
class Method:
    """One row of the ablation.

    Attributes:
        name: identifier (``--methods``, CSV).
        label: what the table and plot call it.
        mode: ``"real"`` (every group executed), ``"world_model"`` (none executed), ``"mix"`` (anchor
            groups executed, the correction loop decides the rest).
        debias: Online Debiasing on (mix only).
        denoise: Inverse-Variance Denoising on (mix only).
        equal_budget: stop an all-real run when it reaches the executions of the mixed methods.
        anchors_only: train on the anchor groups alone (one group per step, executed).
        disagreement: how IVD measures eta2 (``CorrectionConfig.disagreement``: variance-normalised or raw).
    """

    name: str
    label: str
    mode: str
    debias: bool = False
    denoise: bool = False
    equal_budget: bool = False
    anchors_only: bool = False
    disagreement: str = "raw"


METHODS: tuple[Method, ...] = (
    Method("grpo_real", "GRPO, all real (equal steps)", "real"),
    Method("grpo_real_equal_budget", "GRPO, all real (equal executions)", "real", equal_budget=True),
    Method("grpo_anchors_only", "GRPO on anchor groups only", "real", anchors_only=True),
    Method("world_model_only", "world model only", "world_model"),
    Method("direct_mix", "direct mix (no correction)", "mix"),
    Method("ivd_only", "IVD only", "mix", denoise=True),
    Method("od_only", "OD only", "mix", debias=True),
    Method("od_ivd", "WMRL (OD + IVD)", "mix", debias=True, denoise=True),
    Method(
        "od_ivd_variance",
        "WMRL (OD + IVD, variance-normalised eta2)",
        "mix",
        debias=True,
        denoise=True,
        disagreement="variance",
    ),
)


@dataclass(frozen=True)
class RunCurves:
    """Per-step records of one run (one method, one seed).

    Attributes:
        true_reward: exact expected real score of the policy before each step, plus after the last.
        executions: cumulative real executions before each step, plus after the last.
        anchor_weight: anchor weight used at each step (1.0 where IVD is off).
        diagnostic_steps: steps at which ``signal_bias`` and ``wrong_argmax`` were measured.
        signal_bias: policy-weighted, within-context-centred RMS of the expected error of the scores the
            world-model groups train on (raw or calibrated), in reward units (NaN for all-real runs).
        wrong_argmax: share of contexts where that expected training score ranks a wrong action first.
    """

    true_reward: np.ndarray
    executions: np.ndarray
    anchor_weight: np.ndarray
    diagnostic_steps: np.ndarray
    signal_bias: np.ndarray
    wrong_argmax: np.ndarray


_HERMITE_NODES, _HERMITE_WEIGHTS = np.polynomial.hermite_e.hermegauss(24)
_HERMITE_WEIGHTS = _HERMITE_WEIGHTS / _HERMITE_WEIGHTS.sum()


def expected_training_score(
    bandit: ContextualBandit, world_model: SyntheticWorldModel, loop: CorrectionLoop, shift: float
) -> np.ndarray:
    """Exact ``E[f(r_hat) | context, action]`` under the loop's current map ``f`` (Gauss-Hermite)."""
    sigma = world_model.noise_std(shift)
    outcomes = np.stack([bandit.mean_reward - bandit.spread, bandit.mean_reward + bandit.spread], axis=-1)
    noisy = outcomes[..., None] + sigma * _HERMITE_NODES
    calibrated = loop.debiaser.apply(world_model.distort(noisy, shift))
    return (calibrated * _HERMITE_WEIGHTS).sum(axis=-1).mean(axis=-1)


def signal_diagnostics(
    bandit: ContextualBandit, expected_score: np.ndarray, probabilities: np.ndarray
) -> tuple[float, float]:
    """Within-context-centred bias RMS under the policy, and the share of contexts with a wrong argmax."""
    error = expected_score - bandit.mean_reward
    centred = error - (probabilities * error).sum(axis=1, keepdims=True)
    bias = float(np.sqrt((probabilities * centred**2).sum(axis=1).mean()))
    wrong = float(np.mean(expected_score.argmax(axis=1) != bandit.mean_reward.argmax(axis=1)))
    return bias, wrong


def anchor_groups_per_run(args: Args) -> int:
    """Anchor groups a mixed run executes in ``args.steps`` steps (the count does not depend on the seed)."""
    scheduler = AnchorScheduler(args.anchor_fraction, min_per_step=1, seed=0)
    return int(sum(int(scheduler.select(args.groups_per_step).sum()) for _ in range(args.steps)))


def correction_config(method: Method, args: Args, seed: int) -> CorrectionConfig:
    """The library configuration that implements ``method``."""
    if method.mode == "real":
        anchor_fraction, min_anchor_groups = 1.0, 1
    elif method.mode == "world_model":
        anchor_fraction, min_anchor_groups = 0.0, 0
    else:
        anchor_fraction, min_anchor_groups = args.anchor_fraction, 1
    return CorrectionConfig(
        anchor_fraction=anchor_fraction,
        min_anchor_groups=min_anchor_groups,
        seed=seed,
        debias=method.debias,
        denoise=method.denoise,
        capacity=args.capacity,
        min_pairs=min(16, args.capacity),
        w_max=args.w_max,
        disagreement=method.disagreement,  # type: ignore[arg-type]
    )


def run_method(method: Method, args: Args, seed: int, budget_groups: int) -> RunCurves:
    """Train one policy with one method and one seed; return its curves.

    Args:
        method: the ablation row.
        args: the benchmark settings.
        seed: seeds the bandit's reward table, the policy's sampling and the world model's noise.
        budget_groups: executed groups allowed for an equal-budget run (ignored otherwise).
    """
    bandit = ContextualBandit(BanditConfig(args.n_contexts, args.n_actions, args.n_ambitious, seed=seed))
    world_model = SyntheticWorldModel(
        WorldModelErrorConfig(args.curvature, args.curvature_drift, args.noise_std, args.noise_drift)
    )
    loop = CorrectionLoop(correction_config(method, args, seed))
    rng = np.random.default_rng([seed, 1])
    torch.manual_seed(seed)
    logits = torch.zeros(args.n_contexts, args.n_actions, requires_grad=True)
    optimizer = torch.optim.Adam([logits], lr=args.learning_rate)
    loss_config = GRPOConfig()
    initial = np.full((args.n_contexts, args.n_actions), 1.0 / args.n_actions)
    groups_per_step = 1 if method.anchors_only else args.groups_per_step
    steps = args.steps
    if method.equal_budget:
        steps = max(1, math.ceil(budget_groups / groups_per_step))

    true_reward, executions, anchor_weight = [], [0], []
    diagnostic_steps, signal_bias, wrong_argmax = [], [], []
    for step in range(steps):
        probabilities = torch.softmax(logits.detach(), dim=1).numpy().astype(float)
        probabilities /= probabilities.sum(axis=1, keepdims=True)
        shift = min(1.0, policy_shift(probabilities, initial))
        true_reward.append(bandit.expected_reward(probabilities))
        if step % args.log_every == 0:
            diagnostic_steps.append(step)
            if method.mode == "real":
                signal_bias.append(math.nan)
                wrong_argmax.append(0.0)
            else:
                expected = expected_training_score(bandit, world_model, loop, shift)
                bias, wrong = signal_diagnostics(bandit, expected, probabilities)
                signal_bias.append(bias)
                wrong_argmax.append(wrong)

        anchor_mask = loop.plan(groups_per_step)
        contexts = bandit.sample_contexts(groups_per_step, rng)
        actions = sample_actions(probabilities, contexts, args.group_size, rng)
        real = bandit.sample_outcomes(contexts, actions, rng)
        predicted = world_model.predict(real, shift, rng)
        groups = [
            ScoredGroup(
                group_id=index,
                anchor=bool(is_anchor),
                predicted=tuple(predicted[index].tolist()),
                real=tuple(real[index].tolist()) if is_anchor else None,
            )
            for index, is_anchor in enumerate(anchor_mask)
        ]
        result = loop.correct(groups)
        advantages, mask = result.flat()
        executions.append(executions[-1] + int(anchor_mask.sum()) * args.group_size)
        anchor_weight.append(result.metrics["wmrl/anchor_weight"])

        log_probabilities = torch.log_softmax(logits, dim=1)
        taken = log_probabilities[np.repeat(contexts, args.group_size), actions.ravel()].unsqueeze(1)
        loss, _ = grpo_loss(
            taken,
            taken.detach(),
            torch.as_tensor(advantages, dtype=torch.float32),
            torch.as_tensor(mask, dtype=torch.float32).unsqueeze(1),
            config=loss_config,
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    final = torch.softmax(logits.detach(), dim=1).numpy().astype(float)
    true_reward.append(bandit.expected_reward(final / final.sum(axis=1, keepdims=True)))
    return RunCurves(
        true_reward=np.asarray(true_reward),
        executions=np.asarray(executions),
        anchor_weight=np.asarray(anchor_weight),
        diagnostic_steps=np.asarray(diagnostic_steps),
        signal_bias=np.asarray(signal_bias),
        wrong_argmax=np.asarray(wrong_argmax),
    )


def reference_levels(args: Args) -> dict[str, float]:
    """Seed-averaged uniform-policy, optimal and world-model-floor true rewards."""
    levels: dict[str, list[float]] = {"uniform": [], "optimal": [], "world_model_floor": []}
    world_model = SyntheticWorldModel(
        WorldModelErrorConfig(args.curvature, args.curvature_drift, args.noise_std, args.noise_drift)
    )
    deterministic_shift = 1.0 - 1.0 / args.n_actions
    for seed in range(args.seeds):
        bandit = ContextualBandit(BanditConfig(args.n_contexts, args.n_actions, args.n_ambitious, seed=seed))
        levels["uniform"].append(float(bandit.mean_reward.mean()))
        levels["optimal"].append(bandit.optimal_reward())
        levels["world_model_floor"].append(
            bandit.greedy_reward(world_model.expected_prediction(bandit, deterministic_shift))
        )
    return {key: float(np.mean(values)) for key, values in levels.items()}


def mean_and_stderr(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error over seeds (std-err 0 for one seed)."""
    array = np.asarray(values, dtype=float)
    stderr = float(array.std(ddof=1) / np.sqrt(array.size)) if array.size > 1 else 0.0
    return float(array.mean()), stderr


def summarise(runs: dict[str, list[RunCurves]], args: Args, levels: dict[str, float]) -> list[dict[str, str]]:
    """One table row per method."""
    full_executions = args.steps * args.groups_per_step * args.group_size
    reference = runs.get("od_ivd")
    rows = []
    for method in METHODS:
        if method.name not in runs:
            continue
        curves = runs[method.name]
        final = [curve.true_reward[-1] for curve in curves]
        executions = [curve.executions[-1] for curve in curves]
        closed = [(value - levels["uniform"]) / (levels["optimal"] - levels["uniform"]) for value in final]
        mean, stderr = mean_and_stderr(final)
        average, average_stderr = mean_and_stderr([float(curve.true_reward.mean()) for curve in curves])
        closed_mean, closed_stderr = mean_and_stderr(closed)
        wrong = [curve.wrong_argmax[-1] for curve in curves]
        weights = [float(curve.anchor_weight[-20:].mean()) for curve in curves]
        paired = "—"
        if reference is not None and method.name != "od_ivd":
            difference, difference_stderr = mean_and_stderr(
                [
                    curve.true_reward[-1] - wmrl.true_reward[-1]
                    for curve, wmrl in zip(curves, reference, strict=True)
                ]
            )
            paired = f"{difference:+.4f} ± {difference_stderr:.4f}"
        rows.append(
            {
                "method": method.label,
                "steps": str(len(curves[0].true_reward) - 1),
                "real executions": f"{np.mean(executions):.0f}",
                "executions vs all-real": f"{100.0 * np.mean(executions) / full_executions:.1f}%",
                "final true reward": f"{mean:.4f} ± {stderr:.4f}",
                "gap closed": f"{100 * closed_mean:.1f}% ± {100 * closed_stderr:.1f}",
                "final minus WMRL (paired)": paired,
                "mean true reward over training": f"{average:.4f} ± {average_stderr:.4f}",
                "wrong argmax (WM signal)": "—" if method.mode == "real" else f"{100 * np.mean(wrong):.0f}%",
                "anchor weight (last 20)": f"{np.mean(weights):.2f}",
            }
        )
    return rows


def markdown_table(rows: list[dict[str, str]]) -> str:
    """Render rows as a GitHub markdown table."""
    header = list(rows[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row[key] for key in header) + " |" for row in rows]
    return "\n".join(lines)


def plot(runs: dict[str, list[RunCurves]], levels: dict[str, float], path: Path) -> None:
    """Four panels: true reward vs step, vs real executions, training-signal bias, anchor weight."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, 2, figsize=(14, 10))
    colours = {method.name: plt.get_cmap("tab10")(index) for index, method in enumerate(METHODS)}
    for method in METHODS:
        if method.name not in runs:
            continue
        curves = runs[method.name]
        colour = colours[method.name]
        rewards = np.stack([curve.true_reward for curve in curves])
        mean = rewards.mean(axis=0)
        stderr = rewards.std(axis=0, ddof=1) / np.sqrt(len(curves)) if len(curves) > 1 else 0 * mean
        steps = np.arange(rewards.shape[1])
        axes[0, 0].plot(steps, mean, color=colour, label=method.label)
        axes[0, 0].fill_between(steps, mean - stderr, mean + stderr, color=colour, alpha=0.2)
        executions = np.stack([curve.executions for curve in curves]).mean(axis=0)
        if executions[-1] > 0:
            axes[0, 1].plot(executions[1:], mean[1:], color=colour, label=method.label)
        if method.mode != "real":
            bias = np.stack([curve.signal_bias for curve in curves]).mean(axis=0)
            axes[1, 0].plot(curves[0].diagnostic_steps, bias, color=colour, label=method.label)
        if method.denoise:
            weight = np.stack([curve.anchor_weight for curve in curves])
            axes[1, 1].plot(np.arange(weight.shape[1]), weight.mean(axis=0), color=colour, label=method.label)
    for axis in (axes[0, 0], axes[0, 1]):
        axis.axhline(levels["optimal"], color="black", linestyle="--", linewidth=1, label="optimal policy")
        axis.axhline(levels["world_model_floor"], color="grey", linestyle=":", label="world-model argmax")
        axis.set_ylabel("true expected reward")
    axes[0, 0].set(title="True reward vs step (mean ± s.e. over seeds)", xlabel="step")
    axes[0, 1].set(title="True reward vs real executions", xlabel="real executions (log)", xscale="log")
    axes[1, 0].set(
        title="Residual bias of the world-model training signal",
        xlabel="step",
        ylabel="within-context centred RMS of E[score] - E[real]",
    )
    axes[1, 1].set(title="IVD anchor weight", xlabel="step", ylabel="anchor weight 1 + η²/η²_cal")
    for axis in axes.ravel():
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_curves(runs: dict[str, list[RunCurves]], path: Path) -> None:
    """Long-format CSV of every run's per-step true reward, executions and anchor weight."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["method", "seed", "step", "true_reward", "executions", "anchor_weight"])
        for name, curves in runs.items():
            for seed, curve in enumerate(curves):
                for step, (reward, used) in enumerate(zip(curve.true_reward, curve.executions, strict=True)):
                    weight = curve.anchor_weight[step] if step < curve.anchor_weight.size else ""
                    writer.writerow([name, seed, step, f"{reward:.6f}", int(used), weight])


def parse_args(argv: Sequence[str] | None = None) -> Args:
    """Build :class:`Args` from the command line, one ``--option`` per field with its help."""
    return parse_dataclass_args(Args, argv, __doc__.split("\n\n")[0])


def main(argv: Sequence[str] | None = None) -> list[dict[str, str]]:
    """Run every selected method for every seed, write the table, curves and plot, print the table."""
    args = parse_args(argv)
    torch.set_num_threads(1)
    output = Path(args.output_dir)
    output.mkdir(parents=True, exist_ok=True)
    budget_groups = anchor_groups_per_run(args)
    selected = [method for method in METHODS if method.name in args.method_names]
    runs: dict[str, list[RunCurves]] = {method.name: [] for method in selected}
    started = time.perf_counter()
    total = len(selected) * args.seeds
    with tqdm(total=total, desc="bandit ablation", unit="run", file=sys.stderr) as progress:
        for method in selected:
            for seed in range(args.seeds):
                progress.set_postfix_str(f"{method.name} seed {seed}")
                runs[method.name].append(run_method(method, args, seed, budget_groups))
                progress.update()
    levels = reference_levels(args)
    rows = summarise(runs, args, levels)
    table = markdown_table(rows)
    notes = (
        f"{args.seeds} seeds, {args.steps} steps of {args.groups_per_step} groups x {args.group_size} "
        f"trajectories, anchor fraction {args.anchor_fraction}; mean ± standard error over seeds.\n"
        f"Reference true rewards: uniform policy {levels['uniform']:.4f}, optimal policy "
        f"{levels['optimal']:.4f}, world-model argmax {levels['world_model_floor']:.4f} (where exact "
        "gradient ascent on the expected prediction would end; sampled GRPO on predictions stalls above it). "
        "'gap closed' = (final - uniform) / (optimal - uniform).\n"
        f"Wall time {time.perf_counter() - started:.0f} s."
    )
    (output / "results.md").write_text(f"# Bandit ablation\n\n{table}\n\n{notes}\n")
    with (output / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    write_curves(runs, output / "curves.csv")
    plot(runs, levels, output / "bandit_ablation.png")
    print(table)
    print()
    print(notes)
    print(f"Wrote {output / 'results.md'}, results.csv, curves.csv and bandit_ablation.png")
    return rows


if __name__ == "__main__":
    main()
