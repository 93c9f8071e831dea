"""The ``WorldModel`` protocol: predict what an expensive environment would return, in batches.

Why a protocol and why batched: WMRL only pays off when predicting an outcome is much cheaper than
producing it, and predictors (LLMs above all) are cheap *in batches*. So the one method takes a list
of queries and returns one :class:`Prediction` per query, in order. A prediction whose reward is
``None`` means "cannot say" (unparseable, truncated, out of context); it is never turned into 0.

Environments can opt in to richer simulation through two duck-typed hooks on ``env.unwrapped``
(see :mod:`wmrl_envs.wrapper`): ``world_model_context()`` gives the world model what it needs to know
about the current task (public information only), and ``apply_prediction(action, prediction)``
advances the env's cheap bookkeeping (turn counter, history) from a predicted outcome without
executing anything.

Some world models keep learning while the policy trains: they refit on every real execution the loop
pays for (the anchors) and carry that state across a checkpoint. They declare so through
:class:`LearningWorldModel`, so a trainer asks ``isinstance(model, LearningWorldModel)`` instead of
probing for methods one by one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["WorldModelQuery", "Prediction", "WorldModel", "LearningWorldModel", "SimulatableEnv"]


@dataclass(frozen=True)
class WorldModelQuery:
    """One item to predict.

    Attributes:
        context: what the world model may know about the task and the episode so far (for a Gymnasium
            env without hooks: the last observation; for the Kaggle env: a ``KaggleContext``; for
            end-of-episode scoring: the whole trajectory's observations).
        action: the action to predict the outcome of (for end-of-episode scoring: all actions).
        key: optional stable identifier (e.g. ``"group3/traj5/turn1"``) for logging and caching.
    """

    context: Any
    action: Any
    key: str | None = None


@dataclass(frozen=True)
class Prediction:
    """A world model's prediction for one query.

    Attributes:
        reward: the predicted reward, or ``None`` when the world model cannot say.
        observation: the simulated next observation in the env's own format (simulate mode), if any.
        terminated: whether the simulated step ends the episode (``None``: let the env or wrapper decide).
        info: free-form details (predicted status, raw text, parse errors, ...).
    """

    reward: float | None
    observation: Any = None
    terminated: bool | None = None
    info: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class WorldModel(Protocol):
    """Anything that predicts outcomes for a batch of queries.

    Implementations must return exactly one :class:`Prediction` per query, in order; raising or
    returning another count is a contract violation that :class:`~wmrl_envs.wrapper.WorldModelWrapper`
    reports as :class:`~wmrl_algos.errors.WorldModelError` (or tolerates as ``None`` rewards when
    configured to).
    """

    name: str

    def predict(self, queries: Sequence[WorldModelQuery]) -> Sequence[Prediction]:
        """Predict the outcome of every query (one batched call)."""
        ...


@runtime_checkable
class LearningWorldModel(WorldModel, Protocol):
    """A world model that keeps learning from the real outcomes of anchor executions.

    Why a protocol of its own: the anchors are the only ground truth a run produces, and a world model
    that refits on them shrinks its own bias as training goes (the frozen ones leave that to the
    correction). Its learnt state is part of the run: a checkpoint that dropped it would resume with a
    model that has forgotten every anchor, so the trainer saves :meth:`state_dict` and restores it with
    :meth:`load_state_dict`. Frozen world models (a rubric, a prompted LLM) simply do not implement it.

    Example:
        >>> class Mean:
        ...     name = "mean"
        ...     def __init__(self): self.seen = []
        ...     def predict(self, queries):
        ...         mean = sum(self.seen) / len(self.seen) if self.seen else None
        ...         return [Prediction(reward=mean) for _ in queries]
        ...     def observe(self, queries, real_rewards):
        ...         self.seen += [reward for reward in real_rewards if reward is not None]
        ...     def state_dict(self): return {"seen": list(self.seen)}
        ...     def load_state_dict(self, state): self.seen = list(state["seen"])
        >>> model = Mean()
        >>> isinstance(model, LearningWorldModel)
        True
        >>> model.observe([WorldModelQuery(None, "a"), WorldModelQuery(None, "b")], [0.2, None])
        >>> model.predict([WorldModelQuery(None, "c")])[0].reward
        0.2
    """

    def observe(self, queries: Sequence[WorldModelQuery], real_rewards: Sequence[float | None]) -> None:
        """Learn from real executions: one real reward per query, ``None`` where the outcome is unknown.

        Unknown rewards are skipped, never read as 0 (an infrastructure failure says nothing about the
        solution).
        """
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything learnt so far, as plain data a checkpoint can hold."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict`.

        Raises:
            CheckpointError: the state does not fit this model (another version, config or features).
        """
        ...


@runtime_checkable
class SimulatableEnv(Protocol):
    """Optional hooks an expensive env implements so a world model can stand in for its ``step``."""

    def world_model_context(self) -> Any:
        """Public information about the current task and episode, for the world model."""
        ...

    def apply_prediction(
        self, action: Any, prediction: Prediction
    ) -> tuple[Any, float | None, bool, bool, dict[str, Any]]:
        """Advance bookkeeping from a predicted outcome without executing; returns a step tuple."""
        ...
