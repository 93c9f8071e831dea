"""The cost ledger: where the time of a run went, real execution versus world model.

Why a ledger: WMRL's whole claim is a cost claim (the paper's 3.1x fewer GPU-hours at equal or better
score), so every run must be able to say how many seconds it spent executing for real and how many
predicting, how many rewards each source produced, and how many predictions were unknown or failed.
Those counts are summed from many places at once (anchor executions finish in worker threads, several
rollout workers or Ray actors report separately), so the ledger is thread-safe, mergeable and
serialisable, and it reports plain namespaced metrics (``cost/real_seconds``, ...) any logger takes.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from wmrl_algos.errors import CheckpointError, ConfigError

__all__ = ["CostLedger"]

RewardSource = Literal["real", "world_model"]


@dataclass
class CostLedger:
    """Running totals of what real execution and the world model cost in one run.

    All ``record_*`` methods are safe to call from several threads at once.

    Attributes:
        real_seconds: wall-clock seconds spent inside the real environment's ``step``.
        world_model_seconds: wall-clock seconds spent inside ``WorldModel.predict``.
        real_steps: number of real environment steps executed (whether or not their reward was used).
        world_model_calls: number of ``predict`` calls (one batched call counts once).
        world_model_queries: number of queries sent to the world model.
        unknown_predictions: queries whose predicted reward was ``None`` (the world model could not say).
        world_model_errors: queries lost to a world model that raised or broke its contract, tolerated
            because ``tolerate_errors=True`` (also counted in ``unknown_predictions``).
        rewards_real: step rewards handed to the learner that came from the real environment.
        rewards_world_model: step rewards handed to the learner that came from the world model.
        episodes: episodes started.
        anchor_episodes: episodes started as anchors (real execution plus prediction).

    Example:
        >>> ledger = CostLedger()
        >>> ledger.record_real(0.5)
        >>> ledger.record_world_model(0.01, queries=8, unknown=1)
        >>> total = ledger.merge(ledger)
        >>> total.as_metrics()["cost/real_seconds"], total.world_model_queries
        (1.0, 16)
    """

    real_seconds: float = 0.0
    world_model_seconds: float = 0.0
    real_steps: int = 0
    world_model_calls: int = 0
    world_model_queries: int = 0
    unknown_predictions: int = 0
    world_model_errors: int = 0
    rewards_real: int = 0
    rewards_world_model: int = 0
    episodes: int = 0
    anchor_episodes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record_real(self, seconds: float, steps: int = 1) -> None:
        """Add ``steps`` real environment steps that took ``seconds`` in total."""
        with self._lock:
            self.real_seconds += seconds
            self.real_steps += steps

    def record_world_model(self, seconds: float, queries: int, unknown: int = 0, errors: int = 0) -> None:
        """Add one ``predict`` call of ``queries`` queries that took ``seconds``.

        Args:
            seconds: wall-clock duration of the call.
            queries: number of queries in the call.
            unknown: how many of them came back with an unknown (``None``) reward, errors included.
            errors: how many of them were lost to a tolerated world-model failure.
        """
        with self._lock:
            self.world_model_seconds += seconds
            self.world_model_calls += 1
            self.world_model_queries += queries
            self.unknown_predictions += unknown
            self.world_model_errors += errors

    def record_reward(self, source: RewardSource) -> None:
        """Count one step reward handed to the learner, by where it came from."""
        with self._lock:
            if source == "real":
                self.rewards_real += 1
            else:
                self.rewards_world_model += 1

    def record_episode(self, anchor: bool) -> None:
        """Count one episode started (and whether it is an anchor episode)."""
        with self._lock:
            self.episodes += 1
            self.anchor_episodes += int(anchor)

    def merge(self, other: CostLedger) -> CostLedger:
        """A new ledger holding the sums of this one and ``other`` (neither is modified)."""
        mine, theirs = self.state_dict(), other.state_dict()
        return CostLedger.from_state_dict({name: mine[name] + theirs[name] for name in mine})

    def __add__(self, other: CostLedger) -> CostLedger:
        return self.merge(other)

    def state_dict(self) -> dict[str, float | int]:
        """The totals as plain Python numbers, for checkpoints."""
        with self._lock:
            return {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> CostLedger:
        """Rebuild a ledger from :meth:`state_dict` output.

        Raises:
            CheckpointError: a total is missing, unknown, not a number or negative.
        """
        ledger = cls()
        ledger.load_state_dict(state)
        return ledger

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Replace the totals with those of a :meth:`state_dict` (resuming a run).

        Raises:
            CheckpointError: a total is missing, unknown, not a number or negative; the ledger is
                left unchanged.
        """
        names = [f.name for f in fields(self) if not f.name.startswith("_")]
        unknown = sorted(set(state) - set(names))
        missing = sorted(set(names) - set(state))
        if unknown or missing:
            raise CheckpointError(
                f"cost ledger state has unknown keys {unknown} and lacks keys {missing}; "
                "pass a state produced by CostLedger.state_dict()"
            )
        values: dict[str, float | int] = {}
        for f in fields(self):
            if f.name.startswith("_"):
                continue
            value = state[f.name]
            kind = float if f.type in ("float", float) else int
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise CheckpointError(
                    f"cost ledger state[{f.name!r}] is {value!r}; expected a non-negative {kind.__name__}"
                )
            values[f.name] = kind(value)
        with self._lock:
            for name, value in values.items():
                setattr(self, name, value)

    def as_metrics(self, prefix: str = "cost") -> dict[str, float]:
        """The totals as namespaced scalar metrics, plus two derived ratios.

        Args:
            prefix: namespace of the keys (``cost/real_seconds``, ``cost/world_model_seconds``, ...).

        Returns:
            Every total under ``<prefix>/<name>``, plus ``<prefix>/total_seconds`` and
            ``<prefix>/real_seconds_share`` (real / total seconds; 0.0 while nothing was spent).

        Raises:
            ConfigError: ``prefix`` is empty or contains ``/`` at either end.
        """
        if not prefix or prefix.startswith("/") or prefix.endswith("/"):
            raise ConfigError(f"prefix={prefix!r} is not a metric namespace; pass a name such as 'cost'")
        state = self.state_dict()
        metrics = {f"{prefix}/{name}": float(value) for name, value in state.items()}
        total = float(state["real_seconds"]) + float(state["world_model_seconds"])
        metrics[f"{prefix}/total_seconds"] = total
        metrics[f"{prefix}/real_seconds_share"] = float(state["real_seconds"]) / total if total > 0 else 0.0
        return metrics
