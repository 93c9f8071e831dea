"""Plots of a training run from its metrics lines (matplotlib, headless).

Why these panels: they are the diagnostics that explain a WMRL result — whether the world model's
scores track the real ones (real vs predicted vs calibrated reward), how much Online Debiasing removed
(bias reduction), how much IVD trusted the anchors (anchor weight), what it cost (charged and spent
compute) and what it bought (held-out position score).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["EMBODIED_PANELS", "KAGGLE_PANELS", "plot_run"]

Panels = tuple[tuple[str, tuple[str, ...]], ...]

KAGGLE_PANELS: Panels = (
    ("reward (ladder value)", ("reward/real_mean", "reward/predicted_mean", "reward/calibrated_mean")),
    ("anchor weight (IVD)", ("wmrl/anchor_weight",)),
    ("bias reduction (OD)", ("wmrl/bias_reduction",)),
    ("compute, s", ("compute/charged_total", "compute/spent_total")),
    ("held-out position score", ("eval/position",)),
    ("policy", ("losses/entropy", "losses/approx_kl")),
)
"""The Kaggle trainer's panels: (title, metric keys) each."""

EMBODIED_PANELS: Panels = (
    ("success rate", ("eval/success_rate", "diag/sim_success_rate")),
    ("reward (success / progress)", ("reward/real_mean", "reward/predicted_mean", "reward/calibrated_mean")),
    ("anchor weight (IVD)", ("wmrl/anchor_weight",)),
    ("bias reduction (OD)", ("wmrl/bias_reduction",)),
    ("scorer AUROC on own rollouts", ("diag/scorer_auroc", "diag/calibrated_auroc")),
    ("policy", ("losses/action_std", "losses/approx_kl")),
)
"""The embodied trainer's panels (``diag/`` keys use every episode's simulator outcome: diagnostics only)."""


def plot_run(
    lines: Sequence[Mapping[str, float]], out_dir: Path, panels: Panels = KAGGLE_PANELS
) -> list[Path]:
    """Write ``training.png`` (six ``panels`` against the step) into ``out_dir``; returns the files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    figure, axes = plt.subplots(2, 3, figsize=(14, 7))
    for axis, (title, keys) in zip(axes.flat, panels, strict=True):
        for key in keys:
            points = [(line["step"], line[key]) for line in lines if key in line]
            if points:
                steps, values = zip(*points, strict=True)
                axis.plot(steps, values, marker="o", markersize=3, label=key.split("/", 1)[1])
        axis.set_title(title)
        axis.set_xlabel("step")
        if axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize=7)
        else:
            axis.text(
                0.5, 0.5, "not measured in this run", ha="center", va="center", transform=axis.transAxes
            )
    figure.tight_layout()
    path = out_dir / "training.png"
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return [path]
