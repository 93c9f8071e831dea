"""Plots of a training run from its metrics lines (matplotlib, headless).

Why these panels: together they answer "did training help, and at what cost?". The evaluation panel
(held-out position score, or success rate) sits on its fixed [0, 1] scale with its reference lines, so
a flat or falling line cannot be mistaken for progress by an auto-scaled axis; the compute panel shows
what was charged (every trajectory executed, the paper's setting) against what this machine spent.
The diagnostics explain a WMRL result: whether the world model's scores track the real ones (real vs
predicted vs calibrated reward), how much Online Debiasing removed (bias reduction) and how much IVD
trusted the anchors (anchor weight).

Why the start and the fair baseline: a held-out score means something only against where the policy
started and against what the same real executions give without the world model. The Kaggle trainer
evaluates the initial policy (a ``step: 0`` line), drawn and labelled as the start; a run without one
(the embodied trainer, a run of an older wmrl) carries a "start unknown" marker at step 0 instead, so
its first point never passes for the start. A run of ``wmrl compare`` (``<out>/runs/<algo>-s<seed>``)
whose algorithm uses a world model also shows anchors-only GRPO of the same seed
(:func:`fair_baseline`): the same anchor executions, no world model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "EMBODIED_PANELS",
    "KAGGLE_PANELS",
    "START_UNKNOWN",
    "Baseline",
    "Panel",
    "fair_baseline",
    "plot_run",
    "run_title",
    "training_figure",
]

START_UNKNOWN = "step 0: not evaluated (start unknown)"
"""The label of the start marker of an evaluation panel whose run has no step-0 evaluation."""


@dataclass(frozen=True)
class Baseline:
    """Another run's evaluations, drawn on the evaluation panels as the run's fair baseline.

    Attributes:
        label: the legend's label (what the baseline is).
        lines: the baseline run's metrics lines (each panel draws its own evaluation key from them).

    Example:
        >>> Baseline("anchors-only GRPO", ({"step": 0.0, "eval/position": 0.6},)).label
        'anchors-only GRPO'
    """

    label: str
    lines: tuple[Mapping[str, float], ...]


def fair_baseline(run_dir: Path) -> Baseline | None:
    """The fair baseline a run directory knows: anchors-only GRPO of the same seed in ``wmrl compare``.

    A ``wmrl compare`` run lives in ``<out>/runs/<algo>-s<seed>``; for an algorithm that uses a world
    model, ``<out>/runs/anchors-s<seed>`` executed the same anchor groups (same plan, same seed) and
    trained on them alone: the baseline the world model has to beat.

    Returns:
        ``None`` when there is none: not a compare run, an algorithm without a world model, or no
        evaluated anchors-only run (yet).
    """
    from wmrl_adapters.train.run.rundir import METRICS, read_metrics

    from wmrl_algos.algorithms import ALGORITHMS

    config_path = run_dir / "config.json"
    if run_dir.parent.name != "runs" or not config_path.is_file():
        return None
    config = json.loads(config_path.read_text())
    algo = ALGORITHMS.get(config.get("algo"))
    if algo is None or not algo.uses_world_model:
        return None
    lines = read_metrics(run_dir.parent / f"anchors-s{config.get('seed')}" / METRICS)
    if not any(key.startswith("eval/") for line in lines for key in line):
        return None
    return Baseline("anchors-only GRPO, same seed (fair baseline)", tuple(lines))


@dataclass(frozen=True)
class Panel:
    """One panel of ``training.png``: metric keys against the step.

    Attributes:
        title: the panel's title.
        keys: the metric keys drawn (missing ones are skipped; the label is the key after its ``/``).
        limits: fixed y-axis limits (``None``: matplotlib's automatic scale).
        references: horizontal reference lines, ``(value, label)`` each.
        evaluation: the first key is an evaluation metric: the panel shows its start (step 0) or says
            that the run has none.
        error: the key of the first key's standard error, drawn as error bars where a line has it.

    Example:
        >>> Panel("success rate", ("eval/success_rate",), limits=(0.0, 1.0), evaluation=True).limits
        (0.0, 1.0)
    """

    title: str
    keys: tuple[str, ...]
    limits: tuple[float, float] | None = None
    references: tuple[tuple[float, str], ...] = ()
    evaluation: bool = False
    error: str | None = None


KAGGLE_PANELS: tuple[Panel, ...] = (
    Panel(
        "held-out position score",
        ("eval/position",),
        limits=(0.0, 1.0),
        references=((0.5, "leaderboard median (~0.5)"), (1.0, "best reference solution (1.0)")),
        evaluation=True,
        error="eval/position_se",
    ),
    Panel("compute, CPU-s", ("compute/charged_total", "compute/spent_total")),
    Panel("reward (ladder value)", ("reward/real_mean", "reward/predicted_mean", "reward/calibrated_mean")),
    Panel("anchor weight (IVD)", ("wmrl/anchor_weight",), references=((1.0, "plain GRPO weight (1)"),)),
    Panel("bias reduction (OD)", ("wmrl/bias_reduction",), references=((0.0, "no reduction"),)),
    Panel("policy", ("losses/entropy", "losses/approx_kl")),
)
"""The Kaggle trainer's panels. The position score ranks a submission on its competition's leaderboard;
the built-in suite's leaderboards are the reference solutions' scores, so 1.0 ties the best reference
and about 0.5 is the median one."""

EMBODIED_PANELS: tuple[Panel, ...] = (
    Panel(
        "success rate",
        ("eval/success_rate", "diag/sim_success_rate"),
        limits=(0.0, 1.0),
        evaluation=True,
        error="eval/success_se",
    ),
    Panel(
        "compute, CPU-s (evaluation is not charged)",
        ("compute/charged_total", "compute/sim_cpu_s", "time/eval_sim_cpu_s"),
    ),
    Panel(
        "reward (success / progress)", ("reward/real_mean", "reward/predicted_mean", "reward/calibrated_mean")
    ),
    Panel("anchor weight (IVD)", ("wmrl/anchor_weight",), references=((1.0, "plain GRPO weight (1)"),)),
    Panel("bias reduction (OD)", ("wmrl/bias_reduction",), references=((0.0, "no reduction"),)),
    Panel(
        "scorer AUROC on own rollouts",
        ("diag/scorer_auroc", "diag/calibrated_auroc"),
        limits=(0.0, 1.0),
        references=((0.5, "chance (0.5)"),),
    ),
    Panel("policy", ("losses/action_std", "losses/approx_kl")),
)
"""The embodied trainer's panels (``diag/`` keys use every episode's simulator outcome: diagnostics only)."""


def run_title(config: Mapping[str, Any]) -> str:
    """The figure title of a run: its env, algorithm, world model and seed, from its ``config.json``.

    Example:
        >>> run_title({"env": "robosuite:Lift", "algo": "wmrl", "seed": 2, "world_model": "sim-state"})
        'robosuite:Lift, algo wmrl, world model sim-state, seed 2'
        >>> run_title({"algo": "wmrl", "seed": 0, "world_model": "rubric", "competitions": "train"})
        'Kaggle suite (train), algo wmrl, world model rubric, seed 0'
    """
    env = config.get("env") or f"Kaggle suite ({config.get('competitions', 'train')})"
    parts = [str(env), f"algo {config.get('algo', '?')}"]
    if config.get("algo") not in ("grpo", "anchors", "sft"):  # these never use a world model's scores
        parts.append(f"world model {config.get('world_model', '?')}")
    parts.append(f"seed {config.get('seed', '?')}")
    return ", ".join(parts)


_STYLES = ("-", "--", ":")
"""Line styles in key order: series that differ stay distinguishable where they overlap."""


def _series(lines: Sequence[Mapping[str, float]], key: str) -> list[tuple[float, float]]:
    return [(float(line["step"]), float(line[key])) for line in lines if key in line]


def _same(first: Sequence[tuple[float, float]], second: Sequence[tuple[float, float]]) -> bool:
    """Whether two series are the same points (then one line is drawn for both)."""
    return len(first) == len(second) and all(
        a_step == b_step and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
        for (a_step, a), (b_step, b) in zip(first, second, strict=True)
    )


def _draw(
    axis: Any, panel: Panel, lines: Sequence[Mapping[str, float]], baseline: Baseline | None = None
) -> None:
    drawn: list[tuple[list[tuple[float, float]], list[str]]] = []
    for key in panel.keys:
        points = _series(lines, key)
        if not points:
            continue
        label = key.split("/", 1)[1]
        twin = next((entry for entry in drawn if _same(entry[0], points)), None)
        if twin is not None:
            twin[1].append(label)
        else:
            drawn.append((points, [label]))
    for index, (points, labels) in enumerate(drawn):
        steps, values = zip(*points, strict=True)
        emphasis = panel.evaluation and labels[0] == panel.keys[0].split("/", 1)[1]
        axis.plot(
            steps,
            values,
            _STYLES[index % len(_STYLES)],
            marker="o",
            markersize=7 if emphasis else 4,
            linewidth=2.2 if emphasis else 1.5,
            label=" = ".join(labels),
        )
    evaluated = _series(lines, panel.keys[0]) if panel.evaluation else []
    bars = [
        (float(line["step"]), float(line[panel.keys[0]]), float(line[panel.error]))
        for line in lines
        if panel.error and panel.keys[0] in line and math.isfinite(line.get(panel.error, math.nan))
    ]
    if bars:  # ± one standard error of each evaluation
        steps, values, errors = zip(*bars, strict=True)
        axis.errorbar(steps, values, yerr=errors, fmt="none", ecolor="tab:blue", capsize=4, alpha=0.8)
    reference = _series(baseline.lines, panel.keys[0]) if evaluated and baseline is not None else []
    if reference:
        steps, values = zip(*reference, strict=True)
        axis.plot(steps, values, "-.", color="dimgrey", marker="s", markersize=4, label=baseline.label)
    if evaluated:
        (first_step, first_value), (last_step, last_value) = evaluated[0], evaluated[-1]
        if first_step == 0:
            axis.annotate(
                f"start {first_value:.2f}", (0, first_value), textcoords="offset points", xytext=(4, 6)
            )
        else:
            axis.axvline(0, color="grey", linestyle=":", linewidth=1.5, label=START_UNKNOWN)
        axis.annotate(
            f"{last_value:.2f}", (last_step, last_value), textcoords="offset points", xytext=(-10, 8)
        )
    for value, label in panel.references if drawn else ():  # labelled on the line: the legend keeps to data
        axis.axhline(value, color="grey", linestyle="--", linewidth=1, alpha=0.7)
        axis.annotate(
            label,
            (1.0, value),
            xycoords=("axes fraction", "data"),
            textcoords="offset points",
            xytext=(-3, -2),
            ha="right",
            va="top",
            fontsize=7,
            color="dimgrey",
        )
    if panel.limits is not None:
        low, high = panel.limits
        margin = 0.03 * (high - low)
        axis.set_ylim(low - margin, high + margin)
    if not drawn:
        axis.text(0.5, 0.3, "not measured in this run", ha="center", va="center", transform=axis.transAxes)


def training_figure(
    lines: Sequence[Mapping[str, float]],
    panels: Sequence[Panel] = KAGGLE_PANELS,
    *,
    title: str | None = None,
    baseline: Baseline | None = None,
) -> Any:
    """The matplotlib ``Figure`` of ``panels`` against the step, in two rows (the caller closes it).

    Every panel shares the step axis, from 0 to the last step.

    Args:
        lines: the run's metrics lines (``metrics.jsonl``), each with a ``step``.
        panels: the panels, in reading order.
        title: the figure's title (:func:`run_title`); ``None``: none.
        baseline: the run's fair baseline, drawn on the evaluation panels (:func:`fair_baseline`).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    columns = math.ceil(len(panels) / 2)
    figure, axes = plt.subplots(2, columns, figsize=(5 * columns, 8), squeeze=False)
    for unused in axes.flat[len(panels) :]:
        unused.set_visible(False)
    last = max((float(line["step"]) for line in lines), default=1.0)
    for axis, panel in zip(axes.flat, panels, strict=False):
        _draw(axis, panel, lines, baseline)
        axis.set_title(panel.title)
        axis.set_xlim(-0.3, last + 0.3)
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.set_xlabel("step")
        if axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize=7)
    if title is not None:
        figure.suptitle(title)
    figure.tight_layout()
    return figure


def plot_run(
    lines: Sequence[Mapping[str, float]], out_dir: Path, panels: Sequence[Panel] = KAGGLE_PANELS
) -> list[Path]:
    """Write ``training.png`` (:func:`training_figure`) into ``out_dir``; returns the files.

    The figure's title names the run: :func:`run_title` of ``out_dir/../config.json``, the config of
    the run directory whose ``plots`` folder ``out_dir`` is (no title without one); the evaluation
    panels show that run's :func:`fair_baseline` when it has one.

    Args:
        lines: the run's metrics lines (``metrics.jsonl``), each with a ``step``.
        out_dir: the run's ``plots`` directory (created if needed).
        panels: the panels, in reading order.

    Returns:
        ``[out_dir / "training.png"]``.
    """
    config_path = out_dir.parent / "config.json"
    title = run_title(json.loads(config_path.read_text())) if config_path.is_file() else None
    baseline = fair_baseline(out_dir.parent)
    figure = training_figure(lines, panels, title=title, baseline=baseline)  # selects the headless backend
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "training.png"
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return [path]
