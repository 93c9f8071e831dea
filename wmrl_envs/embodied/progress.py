"""Progress scorers are world models: per-frame task progress, collapsed to one score per trajectory.

Why: in the embodied setting the simulator is cheap enough to run every trajectory, but its reward is
a sparse success that says nothing about most rollouts. A progress model (Robometer in the paper, a
learned head, or privileged simulator state) reads a trajectory's frames and says how far along the
task each frame is. That is a world model in WMRL's ``mode="score", scoring="episode"`` setting: the
wrapper hands it the whole trajectory's observations at the end, it returns one score, and anchor
episodes pair that score with the real success so Online Debiasing and inverse-variance denoising work
unchanged.

Collapsing a curve to a score is where a progress reward is won or gamed. The default is
potential-based, as in the paper: mean progress over the last ``k`` frames minus the mean over the
first ``k``. It rewards the change the policy caused, so a trajectory that starts in an easy state
gains nothing from it, and a policy cannot farm it by hovering near a high-progress state mid-episode
and then undoing the work. ``"max"`` (the highest progress reached) is offered for comparison and is
hackable: one lucky frame (a grasp that is then dropped, a scorer's spike on a blurry image) counts as
much as finishing the task.

The protocol is open: anything with a ``name`` and ``progress(batch) -> [ProgressCurve | None]`` plugs
in (VLAC, ProcVLM, TimeRewarder...). ``None`` means the scorer cannot say, never 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from wmrl_algos.errors import ConfigError
from wmrl_envs.world_model import Prediction, WorldModelQuery

__all__ = [
    "Collapse",
    "ProgressCurve",
    "ProgressInput",
    "ProgressScorer",
    "ProgressWorldModel",
    "SimStateProgressScorer",
    "collapse_progress",
    "max_progress",
    "potential_progress",
    "progress_input",
]

Collapse = Literal["potential", "max"]
"""How a progress curve becomes one trajectory score: ``"potential"`` (mean of the last k frames minus
mean of the first k; the default) or ``"max"`` (highest progress reached; hackable, see the module)."""

_IMAGE_SUFFIX = "_image"


@dataclass(frozen=True)
class ProgressInput:
    """One trajectory for a progress scorer, stacked frame by frame (reset observation first).

    Attributes:
        instruction: the task's language instruction.
        frames: camera images by observation key (``"agentview_image"``...), each ``(T, H, W, 3)``
            uint8; empty when the env renders no camera.
        states: the other array observations by key (``"proprio"``, ``"goal_features"``,
            ``"object_state"``), each ``(T, ...)``.
    """

    instruction: str
    frames: Mapping[str, np.ndarray] = field(default_factory=dict)
    states: Mapping[str, np.ndarray] = field(default_factory=dict)

    @property
    def length(self) -> int:
        """Number of frames ``T``."""
        for array in (*self.frames.values(), *self.states.values()):
            return int(array.shape[0])
        return 0


@dataclass(frozen=True)
class ProgressCurve:
    """A scorer's answer for one trajectory.

    Attributes:
        progress: per-frame progress in [0, 1], shape ``(T,)``.
        spread: per-frame uncertainty (e.g. an ensemble's standard deviation), shape ``(T,)``, or
            ``None`` when the scorer has no notion of it.
    """

    progress: np.ndarray
    spread: np.ndarray | None = None


@runtime_checkable
class ProgressScorer(Protocol):
    """Anything that turns trajectories into per-frame progress, in batches.

    ``progress`` returns one entry per input, in order: a :class:`ProgressCurve` with one value per
    frame in [0, 1], or ``None`` when it cannot say (missing inputs, an untrained model).
    """

    name: str

    def progress(self, batch: Sequence[ProgressInput]) -> Sequence[ProgressCurve | None]:
        """Score every trajectory of the batch (one call)."""
        ...


def progress_input(observations: Sequence[Mapping[str, Any]]) -> ProgressInput:
    """Stack a trajectory's dict observations (as an embodied env returns them) into a :class:`ProgressInput`.

    Raises:
        ConfigError: the observations are not dicts with an ``instruction``, or are empty.
    """
    if not observations or not all(isinstance(obs, Mapping) for obs in observations):
        raise ConfigError(
            "a progress scorer needs the trajectory's dict observations (reset observation first), as "
            "LiberoEnv/RobosuiteEnv return them; got "
            f"{type(observations[0]).__name__ if observations else 'nothing'}"
        )
    first = observations[0]
    if "instruction" not in first:
        raise ConfigError(
            f"observations have no 'instruction' key (keys: {sorted(first)}); use an embodied env"
        )
    frames: dict[str, np.ndarray] = {}
    states: dict[str, np.ndarray] = {}
    for key, value in first.items():
        if not isinstance(value, np.ndarray):
            continue
        stacked = np.stack([np.asarray(obs[key]) for obs in observations])
        (frames if key.endswith(_IMAGE_SUFFIX) else states)[key] = stacked
    return ProgressInput(str(first["instruction"]), frames, states)


def potential_progress(progress: np.ndarray, k: int = 4) -> float:
    """Mean progress of the last ``k`` frames minus that of the first ``k`` (the paper's collapse).

    ``k`` is capped at half the trajectory so the two windows never overlap. The result is in [-1, 1].

    Example:
        >>> potential_progress(np.array([0.1, 0.1, 0.5, 0.9, 0.9]), k=2)
        0.8
    """
    curve = np.asarray(progress, dtype=np.float64)
    window = max(1, min(int(k), curve.size // 2))
    return round(float(curve[-window:].mean() - curve[:window].mean()), 12)


def max_progress(progress: np.ndarray, k: int = 4) -> float:
    """The highest progress reached (``k`` unused). Hackable: one high frame counts as finishing.

    Example:
        >>> max_progress(np.array([0.1, 0.9, 0.2]))
        0.9
    """
    return float(np.max(np.asarray(progress, dtype=np.float64)))


_COLLAPSES: dict[str, Callable[[np.ndarray, int], float]] = {
    "potential": potential_progress,
    "max": max_progress,
}


def collapse_progress(progress: np.ndarray, collapse: Collapse = "potential", k: int = 4) -> float | None:
    """Collapse one per-frame curve to a trajectory score; ``None`` if it is empty or not finite."""
    curve = np.asarray(progress, dtype=np.float64)
    if curve.size == 0 or not np.isfinite(curve).all():
        return None
    return _COLLAPSES[collapse](curve, k)


class ProgressWorldModel:
    """A :class:`ProgressScorer` as a :class:`~wmrl_envs.world_model.WorldModel` for episode scoring.

    Use it with ``WorldModelWrapper(env, ProgressWorldModel(scorer), mode="score", scoring="episode")``
    or ``GroupedRollout(..., RolloutConfig(mode="score", scoring="episode"))``: each query's context is
    a finished trajectory's observations; the prediction's reward is the collapsed progress, and its
    ``info`` carries the curve (``"progress"``) and, when the scorer has one, the mean uncertainty over
    the frames the collapse used (``"spread"``).

    A trajectory the scorer cannot say anything about (it returned ``None``), or for which it returned
    a non-finite progress (NaN or inf) for any frame, gets the reward ``None``: unknown, left out of
    every baseline, never 0. Its ``info["unknown"]`` says why (``"scorer"`` or ``"non_finite"``, with
    the offending frames in ``info["non_finite_frames"]``), and :attr:`unknown_counts` counts both
    over the model's life (:meth:`metrics` gives them as ``wmrl/progress_unknown_*``).

    Args:
        scorer: the progress model.
        collapse: ``"potential"`` (default) or ``"max"`` (hackable; for comparison only).
        k: frames in each window of the potential collapse.

    Raises:
        ConfigError: an invalid argument.

    Example:
        >>> model = ProgressWorldModel(SimStateProgressScorer())
        >>> start = np.zeros((4, 4), np.float32); start[0, 0] = 1.0
        >>> end = start.copy(); end[0, 2:] = 1.0
        >>> trajectory = [{"instruction": "lift", "goal_features": f} for f in (start, start, end, end)]
        >>> [prediction] = model.predict([WorldModelQuery(trajectory, [None] * 3)])
        >>> round(prediction.reward, 3)
        0.9
        >>> model.unknown_counts
        {'scorer': 0, 'non_finite': 0}
    """

    def __init__(self, scorer: ProgressScorer, *, collapse: Collapse = "potential", k: int = 4) -> None:
        if not isinstance(scorer, ProgressScorer):
            raise ConfigError(
                f"scorer={scorer!r} is not a ProgressScorer (it needs `name` and `progress(batch)`)"
            )
        if collapse not in _COLLAPSES:
            raise ConfigError(f"collapse={collapse!r}; pass 'potential' (default) or 'max'")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"k={k!r}; pass a positive int (frames per window, e.g. 4)")
        self.scorer = scorer
        self.collapse: Collapse = collapse
        self.k = k
        self.name = f"progress:{scorer.name}:{collapse}"
        self.unknown_counts: dict[str, int] = {"scorer": 0, "non_finite": 0}

    def metrics(self) -> dict[str, float]:
        """The unknown counts as namespaced metrics (``wmrl/progress_unknown_scorer``, ``..._non_finite``)."""
        return {f"wmrl/progress_unknown_{reason}": float(n) for reason, n in self.unknown_counts.items()}

    def predict(self, queries: Sequence[WorldModelQuery]) -> list[Prediction]:
        """Score every finished trajectory of the batch with one scorer call."""
        batch = [progress_input(list(query.context)) for query in queries]
        curves = list(self.scorer.progress(batch))
        if len(curves) != len(batch):
            raise ConfigError(
                f"scorer {self.scorer.name!r} returned {len(curves)} curves for {len(batch)} trajectories"
            )
        predictions = []
        for item, curve in zip(batch, curves, strict=True):
            if curve is None:
                self.unknown_counts["scorer"] += 1
                predictions.append(Prediction(None, info={"progress": None, "unknown": "scorer"}))
                continue
            values = np.asarray(curve.progress, dtype=np.float64)
            if values.shape != (item.length,):
                raise ConfigError(
                    f"scorer {self.scorer.name!r} returned {values.shape[0] if values.ndim else 0} progress "
                    f"values for a trajectory of {item.length} frames; it must return one per frame"
                )
            info: dict[str, Any] = {"progress": values}
            non_finite = np.flatnonzero(~np.isfinite(values))
            if non_finite.size:
                self.unknown_counts["non_finite"] += 1
                info.update(unknown="non_finite", non_finite_frames=non_finite.tolist())
                predictions.append(Prediction(None, info=info))
                continue
            reward = collapse_progress(values, self.collapse, self.k)
            if curve.spread is not None:
                window = max(1, min(self.k, values.size // 2))
                spread = np.asarray(curve.spread, dtype=np.float64)
                used = np.concatenate([spread[:window], spread[-window:]])
                info["spread"] = float(used.mean()) if np.isfinite(used).all() else None
            predictions.append(Prediction(reward, info=info))
        return predictions


@dataclass(frozen=True)
class SimStateProgressScorer:
    """Privileged progress from the simulator's state: how far each goal condition has come.

    Reads the ``goal_features`` observation (rows ``[present, satisfied, reach, place]`` per goal
    condition of the task's BDDL goal, or of the robosuite task's success test): ``reach`` is the
    fraction of the initial gripper-to-object distance closed, ``place`` the fraction of the initial
    object-to-target distance closed. A condition's progress is 1 when satisfied, else
    ``cap * (reach_weight * reach + place_weight * place)``; a frame's progress is the mean over the
    task's conditions.

    Biased by design, and the embedded default: it is cheap and dense, but it knows nothing of grasp
    quality or of the order in which a long task must be done, so it over-credits pushing an object
    towards its target and under-credits the preparatory steps. That bias is what the anchors and
    Online Debiasing are there to correct.

    Attributes:
        reach_weight: weight of the gripper-to-object term.
        place_weight: weight of the object-to-target term.
        cap: the most an unsatisfied condition can earn (< 1, so that only success reads as 1).

    Example:
        >>> features = np.zeros((2, 4, 4), np.float32); features[:, 0, 0] = 1.0
        >>> features[1, 0, 2:] = (1.0, 0.5)  # reached the object, moved it half way
        >>> item = ProgressInput("lift", states={"goal_features": features})
        >>> [round(float(v), 3) for v in SimStateProgressScorer().progress([item])[0].progress]
        [0.0, 0.585]
    """

    reach_weight: float = field(default=0.3, metadata={"help": "weight of gripper-to-object progress"})
    place_weight: float = field(default=0.7, metadata={"help": "weight of object-to-target progress"})
    cap: float = field(
        default=0.9, metadata={"help": "most an unsatisfied condition earns (success alone is 1)"}
    )
    name: str = "sim-state"

    def __post_init__(self) -> None:
        for label in ("reach_weight", "place_weight"):
            value = getattr(self, label)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ConfigError(f"{label}={value!r}; pass a non-negative weight")
        if not math.isclose(self.reach_weight + self.place_weight, 1.0):
            raise ConfigError(
                f"reach_weight + place_weight = {self.reach_weight + self.place_weight}; they must sum to 1"
            )
        if not (isinstance(self.cap, (int, float)) and 0 < self.cap < 1):
            raise ConfigError(f"cap={self.cap!r}; pass a value in (0, 1) so that only success reads as 1")

    def progress(self, batch: Sequence[ProgressInput]) -> list[ProgressCurve | None]:
        """Per-frame progress of each trajectory; ``None`` where ``goal_features`` is missing."""
        curves: list[ProgressCurve | None] = []
        for item in batch:
            features = item.states.get("goal_features")
            if features is None:
                curves.append(None)
                continue
            present, satisfied, reach, place = np.moveaxis(np.asarray(features, dtype=np.float64), -1, 0)
            partial = self.cap * (self.reach_weight * reach + self.place_weight * place)
            per_condition = np.where(satisfied > 0.5, 1.0, partial)
            count = present.sum(axis=-1)
            frame = np.where(count > 0, (per_condition * present).sum(axis=-1) / np.maximum(count, 1), np.nan)
            curves.append(None if np.isnan(frame).any() else ProgressCurve(np.clip(frame, 0.0, 1.0)))
        return curves
