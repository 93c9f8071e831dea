"""How well a progress scorer separates successful from failed rollouts: the scorer fidelity report.

Why: a progress scorer is worth using as a world model only if its collapsed score ranks a success
above a failure. The report measures that on rollouts of known outcome from several policies (scripted,
noisy-scripted, random: successes, near misses and clear failures), with three numbers per scorer:
AUROC of the collapsed score for success vs failure (0.5 = blind, 1 = perfect ranking), the Pearson
correlation of the collapsed score with success, and the scorer's cost per frame. A plot of the
per-frame progress curves of successful vs failed episodes shows *where* a scorer is fooled (a failed
grasp that reads as progress, a flat curve on a success).

A scorer that learns from outcomes (:class:`~wmrl_envs.embodied.learned.LearnedProgressScorer`) is fitted
on one half of the episodes and every scorer is measured on the other half, so all numbers are held out.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_algos.errors import ConfigError
from wmrl_envs.embodied.progress import (
    Collapse,
    ProgressCurve,
    ProgressScorer,
    collapse_progress,
    progress_input,
)

__all__ = [
    "auroc",
    "within_group_rank_correlation",
    "Episode",
    "ScorerFidelity",
    "collect_episodes",
    "fidelity_table",
    "plot_progress_curves",
    "scorer_fidelity",
]


@dataclass(frozen=True)
class Episode:
    """One finished rollout of known outcome.

    Attributes:
        policy: the name of the policy that produced it.
        observations: the reset observation, then one per step.
        success: whether the simulator judged the task solved.
        sim_error: the simulator's error if the episode ended on one, else ``None``.
    """

    policy: str
    observations: tuple[dict[str, Any], ...]
    success: bool
    sim_error: str | None = None


@dataclass(frozen=True)
class ScorerFidelity:
    """One scorer's fidelity on held-out episodes.

    Attributes:
        scorer: the scorer's name.
        collapse: how curves became scores.
        auroc: AUROC of the collapsed score for success vs failure; ``None`` when one outcome is absent
            or the scorer said nothing.
        correlation: Pearson correlation of the collapsed score with success (0/1); ``None`` likewise
            or when the scores are constant.
        mean_success: mean collapsed score of the successes (``None`` if none was scored).
        mean_failure: mean collapsed score of the failures (``None`` if none was scored).
        scored: episodes that got a score.
        unknown: episodes the scorer could not score.
        seconds_per_frame: wall-clock scoring time per frame.
    """

    scorer: str
    collapse: str
    auroc: float | None
    correlation: float | None
    mean_success: float | None
    mean_failure: float | None
    scored: int
    unknown: int
    seconds_per_frame: float


def collect_episodes(
    env: Any, policy: Any, episodes: int, *, label: str, seed: int = 0, task_id: int = 0
) -> list[Episode]:
    """Roll ``policy`` out for ``episodes`` episodes of ``env`` (reset seeds ``seed``, ``seed + 1``...).

    The env must end its episodes (a step limit, e.g. the registered ``TimeLimit``).
    """
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise ConfigError(f"episodes={episodes!r}; pass a positive int")
    collected = []
    for index in range(episodes):
        obs, info = env.reset(seed=seed + index, options={"task_id": task_id})
        observations = [obs]
        while True:
            action = policy.act([obs], [info])[0]
            obs, _, terminated, truncated, info = env.step(action)
            observations.append(obs)
            if terminated or truncated:
                break
        collected.append(Episode(label, tuple(observations), bool(info["success"]), info.get("sim_error")))
    return collected


def within_group_rank_correlation(
    scores: Sequence[float | None], successes: Sequence[bool | float | None], groups: Sequence[int]
) -> tuple[float | None, int]:
    """Mean Spearman correlation of score with success inside each group that has both outcomes.

    Why inside groups: GRPO compares a group's members with each other, so a scorer is useful to it
    when it orders the episodes of one group, whatever its level across groups (AUROC pools them).
    Episodes without a score or an outcome (``None``) are left out; a group whose scores are all tied
    says nothing and is left out too. Returns the mean (``None`` if no group qualifies) and how many
    groups it averages.

    Example:
        >>> mean, groups = within_group_rank_correlation([0.9, 0.1, 0.5, 0.5], [1, 0, 1, 1], [0, 0, 1, 1])
        >>> round(mean, 6), groups  # group 1 has one outcome only, so it says nothing
        (1.0, 1)
    """
    from scipy.stats import spearmanr  # scikit-learn's own dependency; imported where it is needed

    correlations = []
    for group in sorted(set(groups)):
        members = [
            (s, float(y))
            for s, y, g in zip(scores, successes, groups, strict=True)
            if g == group and s is not None and y is not None
        ]
        values = np.array([s for s, _ in members], dtype=np.float64)
        labels = np.array([y for _, y in members], dtype=np.float64)
        if labels.size < 2 or labels.std() == 0 or values.std() == 0:
            continue
        correlations.append(float(spearmanr(values, labels).statistic))
    return (float(np.mean(correlations)) if correlations else None), len(correlations)


def auroc(scores: Sequence[float | None], labels: Sequence[bool | float | None]) -> float | None:
    """Probability that a success scores above a failure (ties count half); ``None`` without both.

    Pairs where the score or the label is unknown (``None``) are left out.

    Example:
        >>> auroc([0.9, 0.2, None, 0.5], [1.0, 0.0, 1.0, 0.0])
        1.0
    """
    known = [(s, bool(y)) for s, y in zip(scores, labels, strict=True) if s is not None and y is not None]
    values = np.array([s for s, _ in known], dtype=np.float64)
    outcome = np.array([y for _, y in known], dtype=bool)
    positives, negatives = values[outcome], values[~outcome]
    if positives.size == 0 or negatives.size == 0:
        return None
    greater = (positives[:, None] > negatives[None, :]).sum()
    ties = (positives[:, None] == negatives[None, :]).sum()
    return float((greater + 0.5 * ties) / (positives.size * negatives.size))


def _correlation(scores: np.ndarray, labels: np.ndarray) -> float | None:
    if scores.size < 2 or np.std(scores) == 0 or np.std(labels) == 0:
        return None
    return float(np.corrcoef(scores, labels.astype(np.float64))[0, 1])


def _mean_or_none(values: np.ndarray) -> float | None:
    return float(values.mean()) if values.size else None


def scorer_fidelity(
    episodes: Sequence[Episode],
    scorers: Sequence[ProgressScorer],
    *,
    collapse: Collapse = "potential",
    k: int = 4,
) -> tuple[list[ScorerFidelity], dict[str, list[ProgressCurve | None]]]:
    """Score every episode with every scorer and measure how well the scores separate the outcomes.

    Args:
        episodes: the held-out episodes.
        scorers: the scorers (already fitted, for learned ones).
        collapse: how per-frame curves become episode scores.
        k: the window of the potential collapse.

    Returns:
        One :class:`ScorerFidelity` per scorer, and each scorer's curves (aligned with ``episodes``).
    """
    if not episodes:
        raise ConfigError("episodes is empty; collect some with collect_episodes()")
    batch = [progress_input(list(episode.observations)) for episode in episodes]
    frames = sum(item.length for item in batch)
    labels = np.array([episode.success for episode in episodes], dtype=bool)
    results, curves_by_scorer = [], {}
    for scorer in scorers:
        start = time.perf_counter()
        curves = list(scorer.progress(batch))
        seconds = time.perf_counter() - start
        scores = [None if c is None else collapse_progress(c.progress, collapse, k) for c in curves]
        known = np.array([s is not None for s in scores], dtype=bool)
        values = np.array([s for s in scores if s is not None], dtype=np.float64)
        known_labels = labels[known]
        results.append(
            ScorerFidelity(
                scorer=scorer.name,
                collapse=collapse,
                auroc=auroc(values.tolist(), known_labels.tolist()),
                correlation=_correlation(values, known_labels),
                mean_success=_mean_or_none(values[known_labels]),
                mean_failure=_mean_or_none(values[~known_labels]),
                scored=int(known.sum()),
                unknown=int((~known).sum()),
                seconds_per_frame=seconds / max(frames, 1),
            )
        )
        curves_by_scorer[scorer.name] = curves
    return results, curves_by_scorer


def fidelity_table(results: Sequence[ScorerFidelity]) -> str:
    """A Markdown table of the results (``–`` for unknown values)."""

    def cell(value: Any) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "–"
        if isinstance(value, float):
            return f"{value:.3g}" if abs(value) < 1e-2 else f"{value:.3f}"
        return str(value)

    names = list(asdict(results[0])) if results else []
    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    lines += ["| " + " | ".join(cell(v) for v in asdict(r).values()) + " |" for r in results]
    return "\n".join(lines) + "\n"


def plot_progress_curves(
    episodes: Sequence[Episode],
    curves_by_scorer: Mapping[str, Sequence[ProgressCurve | None]],
    path: str | Path,
) -> Path:
    """Plot each scorer's per-frame progress, successes in green and failures in red, one panel each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(curves_by_scorer)
    figure, axes = plt.subplots(1, max(1, len(names)), figsize=(4.5 * max(1, len(names)), 3.6), squeeze=False)
    for axis, name in zip(axes[0], names, strict=False):
        for episode, curve in zip(episodes, curves_by_scorer[name], strict=True):
            if curve is None:
                continue
            color = "tab:green" if episode.success else "tab:red"
            axis.plot(np.asarray(curve.progress), color=color, alpha=0.45, linewidth=1)
        axis.set_title(name)
        axis.set_xlabel("frame")
        axis.set_ylim(-0.02, 1.02)
    axes[0][0].set_ylabel("progress (green: success, red: failure)")
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
