"""A learned progress scorer, trained online from anchor episodes' real outcomes, with uncertainty.

Why: the sim-state scorer is biased by design and Robometer is a 4B-parameter model that needs a GPU.
Between the two sits a small network fitted on the only ground truth the loop produces, the anchor
episodes' success. Each anchor trajectory labels its frames with a progress target: a success ramps
linearly from 0 at the first frame to 1 at the last (the usual progress label of demonstration data),
a failure is 0 throughout. An ensemble of small MLPs, each fitted on a bootstrap resample of the
trajectories, gives the progress (the ensemble mean) and an uncertainty (its standard deviation), so
inverse-variance denoising has something to weigh. Until it has seen both a success and a failure it
says ``None`` (unknown): a model fitted on one outcome only predicts that outcome everywhere.

Inputs are the per-frame state observations (``proprio``, ``goal_features`` and ``object_state`` when
present), flattened; images are left to image models (Robometer).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from wmrl_algos.errors import CheckpointError, ConfigError
from wmrl_envs.embodied.progress import ProgressCurve, ProgressInput, progress_input

__all__ = ["LearnedProgressConfig", "LearnedProgressScorer"]

_STATE_KEYS = ("proprio", "goal_features", "object_state")


@dataclass(frozen=True)
class LearnedProgressConfig:
    """How :class:`LearnedProgressScorer` is built and fitted.

    Raises:
        ConfigError: a value is out of range (the message names it).

    Example:
        >>> LearnedProgressConfig(members=3).members
        3
    """

    members: int = field(default=5, metadata={"help": "ensemble size; its spread is the uncertainty (>= 2)"})
    hidden: int = field(default=64, metadata={"help": "width of each member's two hidden layers"})
    epochs: int = field(default=60, metadata={"help": "passes over the anchor frames per refit"})
    learning_rate: float = field(default=3e-3, metadata={"help": "Adam learning rate"})
    batch_size: int = field(default=256, metadata={"help": "frames per gradient step"})
    max_trajectories: int = field(
        default=512, metadata={"help": "anchor trajectories kept (oldest dropped): the policy drifts"}
    )
    seed: int = field(default=0, metadata={"help": "seeds initialisation, bootstrap and batching"})

    def __post_init__(self) -> None:
        for name, low in (
            ("members", 2),
            ("hidden", 1),
            ("epochs", 1),
            ("batch_size", 1),
            ("max_trajectories", 2),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{name}={value!r}; pass an int >= {low}")
        if not (isinstance(self.learning_rate, (int, float)) and math.isfinite(self.learning_rate)) or (
            self.learning_rate <= 0
        ):
            raise ConfigError(f"learning_rate={self.learning_rate!r}; pass a positive float (e.g. 3e-3)")


def _state_matrix(item: ProgressInput) -> np.ndarray | None:
    parts = [
        np.asarray(item.states[key], dtype=np.float32).reshape(item.length, -1)
        for key in _STATE_KEYS
        if key in item.states
    ]
    return np.concatenate(parts, axis=1) if parts else None


class LearnedProgressScorer:
    """An ensemble of small MLPs from per-frame states to progress, fitted on anchor outcomes.

    Use :meth:`push` for every finished anchor trajectory (or :meth:`push_groups` with a step's
    :class:`~wmrl_algos.types.ScoredGroup` list), then :meth:`refit` once per step.

    It is a :class:`~wmrl_envs.embodied.progress.ProgressScorer`, not a world model: it learns from
    whole anchor trajectories labelled success or failure (:meth:`push_groups`), not from
    ``(query, reward)`` pairs, so it is not a :class:`~wmrl_envs.world_model.LearningWorldModel`
    (``observe`` would have to invent per-trajectory labels from a collapsed reward). Its
    :meth:`state_dict` / :meth:`load_state_dict` are checkpointed by the embodied trainer.

    Args:
        config: ensemble size, width, optimisation.

    Example:
        >>> scorer = LearnedProgressScorer(LearnedProgressConfig(members=2, epochs=5))
        >>> ramp = [{"instruction": "lift", "proprio": np.full(9, t / 9, np.float32)} for t in range(10)]
        >>> flat = [{"instruction": "lift", "proprio": np.zeros(9, np.float32)} for _ in range(10)]
        >>> scorer.progress([progress_input(ramp)])
        [None]
        >>> scorer.push(ramp, success=True); scorer.push(flat, success=False); scorer.refit()
        >>> curve = scorer.progress([progress_input(ramp)])[0]
        >>> curve.progress.shape, curve.spread.shape
        ((10,), (10,))
    """

    name = "learned"

    def __init__(self, config: LearnedProgressConfig | None = None) -> None:
        self.config = config if config is not None else LearnedProgressConfig()
        self._trajectories: list[tuple[np.ndarray, bool]] = []
        self._members: list[nn.Module] = []
        self._mean: np.ndarray | None = None
        self._scale: np.ndarray | None = None
        self._generator = np.random.default_rng(self.config.seed)

    @property
    def fitted(self) -> bool:
        """Whether :meth:`refit` has produced a model (it needs a success and a failure)."""
        return bool(self._members)

    @property
    def n_trajectories(self) -> int:
        """Anchor trajectories held for fitting."""
        return len(self._trajectories)

    def push(self, observations: Sequence[dict[str, Any]] | ProgressInput, *, success: bool) -> None:
        """Remember one finished anchor trajectory and whether it succeeded.

        Raises:
            ConfigError: the trajectory has no state observations to learn from.
        """
        item = observations if isinstance(observations, ProgressInput) else progress_input(list(observations))
        states = _state_matrix(item)
        if states is None:
            raise ConfigError(f"the trajectory has none of {_STATE_KEYS}; the learned scorer reads states")
        if self._trajectories and states.shape[1] != self._trajectories[0][0].shape[1]:
            raise ConfigError(
                f"state width {states.shape[1]} differs from the {self._trajectories[0][0].shape[1]} seen "
                "so far; "
                "use one scorer per observation layout"
            )
        self._trajectories.append((states, bool(success)))
        del self._trajectories[: -self.config.max_trajectories]

    def push_groups(self, groups: Sequence[Any], *, threshold: float = 0.5) -> int:
        """Push every trajectory of the anchor groups (real score above ``threshold`` is a success).

        Trajectories whose real outcome is unknown are skipped. Returns how many were pushed.
        """
        pushed = 0
        for group in groups:
            if not group.anchor or group.real is None:
                continue
            for trajectory, real in zip(group.trajectories, group.real, strict=True):
                if real is None or not math.isfinite(real):
                    continue
                self.push(list(trajectory.observations), success=real > threshold)
                pushed += 1
        return pushed

    def refit(self) -> None:
        """Fit the ensemble afresh on the held trajectories (a no-op until a success and a failure exist)."""
        outcomes = {success for _, success in self._trajectories}
        if outcomes != {True, False}:
            return
        config = self.config
        torch.manual_seed(config.seed + len(self._trajectories))
        inputs = np.concatenate([states for states, _ in self._trajectories])
        self._mean = inputs.mean(axis=0)
        self._scale = inputs.std(axis=0) + 1e-6
        members = []
        for _ in range(config.members):
            chosen = self._generator.integers(len(self._trajectories), size=len(self._trajectories))
            x, y = self._frames([self._trajectories[i] for i in chosen])
            members.append(self._fit_member(x, y))
        self._members = members

    def progress(self, batch: Sequence[ProgressInput]) -> list[ProgressCurve | None]:
        """Ensemble mean progress and spread per frame; ``None`` before the first successful refit."""
        curves: list[ProgressCurve | None] = []
        for item in batch:
            states = _state_matrix(item)
            if not self._members or states is None or states.shape[1] != self._mean.shape[0]:
                curves.append(None)
                continue
            x = torch.from_numpy((states - self._mean) / self._scale)
            with torch.no_grad():
                outputs = torch.stack(
                    [torch.sigmoid(member(x)).squeeze(-1) for member in self._members]
                ).numpy()
            curves.append(
                ProgressCurve(outputs.mean(axis=0).astype(np.float64), outputs.std(axis=0).astype(np.float64))
            )
        return curves

    def _frames(self, trajectories: Sequence[tuple[np.ndarray, bool]]) -> tuple[torch.Tensor, torch.Tensor]:
        inputs, targets = [], []
        for states, success in trajectories:
            length = states.shape[0]
            ramp = np.linspace(0.0, 1.0, length) if length > 1 else np.ones(1)
            inputs.append((states - self._mean) / self._scale)
            targets.append(ramp * float(success))
        x = torch.from_numpy(np.concatenate(inputs).astype(np.float32))
        y = torch.from_numpy(np.concatenate(targets).astype(np.float32))
        return x, y

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume exactly, as plain data: config, trajectories, members, generator."""
        return {
            "config": asdict(self.config),
            "trajectories": [
                {"states": states, "success": success} for states, success in self._trajectories
            ],
            "members": [member.state_dict() for member in self._members],
            "mean": self._mean,
            "scale": self._scale,
            "generator": self._generator.bit_generator.state,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict` into a scorer built with the same config.

        Raises:
            CheckpointError: the state was saved with another config, or is incomplete or corrupt.
        """
        if dict(state.get("config", {})) != asdict(self.config):
            raise CheckpointError(
                f"the learned scorer's state was saved with {state.get('config')!r}, this scorer has "
                f"{asdict(self.config)!r}; build it with the saved config"
            )
        try:
            trajectories = [
                (np.asarray(t["states"], np.float32), bool(t["success"])) for t in state["trajectories"]
            ]
            mean, scale = state["mean"], state["scale"]
            members = []
            for weights in state["members"]:
                member = self._member(int(mean.shape[0]))
                member.load_state_dict(weights)
                member.eval()
                members.append(member)
            generator = np.random.default_rng()
            generator.bit_generator.state = state["generator"]
        except (KeyError, TypeError, ValueError, AttributeError, RuntimeError) as error:
            raise CheckpointError(
                f"the learned scorer's state is incomplete or corrupt ({error!r}); pass a state produced by "
                "LearnedProgressScorer.state_dict()"
            ) from error
        self._trajectories, self._members, self._generator = trajectories, members, generator
        self._mean, self._scale = mean, scale

    def _member(self, width: int) -> nn.Module:
        hidden = self.config.hidden
        return nn.Sequential(
            nn.Linear(width, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1)
        )

    def _fit_member(self, x: torch.Tensor, y: torch.Tensor) -> nn.Module:
        config = self.config
        member = self._member(x.shape[1])
        optimizer = torch.optim.Adam(member.parameters(), lr=config.learning_rate)
        loss_fn = nn.BCEWithLogitsLoss()
        order = np.arange(x.shape[0])
        for _ in range(config.epochs):
            self._generator.shuffle(order)
            for start in range(0, order.size, config.batch_size):
                index = torch.from_numpy(order[start : start + config.batch_size])
                optimizer.zero_grad()
                loss = loss_fn(member(x[index]).squeeze(-1), y[index])
                loss.backward()
                optimizer.step()
        member.eval()
        return member
