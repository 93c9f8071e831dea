"""Plots of a training run from its metrics lines (matplotlib, headless).

Why these panels: together they answer "did training help, and at what cost?". The evaluation panel
(held-out position score, or success rate) sits on its fixed [0, 1] scale with its reference lines, so
a flat or falling line cannot be mistaken for progress by an auto-scaled axis; the compute panel shows
what was charged (every trajectory executed, the paper's setting) against what this machine spent.
The diagnostics explain a WMRL result: whether the world model's scores track the real ones (real vs
predicted vs calibrated reward), how much Online Debiasing removed (bias reduction) and how much IVD
trusted the anchors (anchor weight).

Why the start marker: the trainers evaluate after a step, never before the first, so a run's curve has
no start value. The panel says so at step 0 instead of letting the first point pass for the start.
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
    "Panel",
    "plot_run",
    "run_title",
    "training_figure",
]

START_UNKNOWN = "step 0: not evaluated (start unknown)"
"""The label of the start marker of an evaluation panel whose run has no step-0 evaluation."""


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

    Example:
        >>> Panel("success rate", ("eval/success_rate",), limits=(0.0, 1.0), evaluation=True).limits
        (0.0, 1.0)
    """

    title: str
    keys: tuple[str, ...]
    limits: tuple[float, float] | None = None
    references: tuple[tuple[float, str], ...] = ()
    evaluation: bool = False


KAGGLE_PANELS: tuple[Panel, ...] = (
    Panel(
        "held-out position score",
        ("eval/position",),
        limits=(0.0, 1.0),
        references=((0.5, "leaderboard median (~0.5)"), (1.0, "best reference solution (1.0)")),
        evaluation=True,
    ),
    Panel("compute, s", ("compute/charged_total", "compute/spent_total")),
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
    ),
    Panel(
        "compute, s (evaluation is not charged)",
        ("compute/charged_total", "compute/sim_seconds", "time/eval_seconds"),
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


def _draw(axis: Any, panel: Panel, lines: Sequence[Mapping[str, float]]) -> None:
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
    lines: Sequence[Mapping[str, float]], panels: Sequence[Panel] = KAGGLE_PANELS, *, title: str | None = None
) -> Any:
    """The matplotlib ``Figure`` of ``panels`` against the step, in two rows (the caller closes it).

    Every panel shares the step axis, from 0 to the last step.

    Args:
        lines: the run's metrics lines (``metrics.jsonl``), each with a ``step``.
        panels: the panels, in reading order.
        title: the figure's title (:func:`run_title`); ``None``: none.
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
        _draw(axis, panel, lines)
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
    the run directory whose ``plots`` folder ``out_dir`` is (no title without one).

    Args:
        lines: the run's metrics lines (``metrics.jsonl``), each with a ``step``.
        out_dir: the run's ``plots`` directory (created if needed).
        panels: the panels, in reading order.

    Returns:
        ``[out_dir / "training.png"]``.
    """
    config_path = out_dir.parent / "config.json"
    title = run_title(json.loads(config_path.read_text())) if config_path.is_file() else None
    figure = training_figure(lines, panels, title=title)  # selects the headless backend first
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "training.png"
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return [path]
