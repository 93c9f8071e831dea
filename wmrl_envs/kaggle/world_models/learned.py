"""A world model that learns online from the anchor executions, with an uncertainty estimate.

Why (beyond the paper): the paper's world model is frozen; only the isotonic calibration learns. The
articles leave open whether a world model that *itself* learns from the anchor pairs would shrink the
bias faster. This module is that world model. Every real execution that arrives (an anchor group, a
fidelity run) is passed to :meth:`LearnedWorldModel.observe`; the model keeps a bounded FIFO buffer of
(features, real reward) and refits a Bayesian ridge regression on it (scikit-learn's ``BayesianRidge``,
whose noise and prior precisions are set by evidence maximisation, so there is no penalty to tune) —
milliseconds, so it can refit after every anchor group.

Features of a solution: the structural features of :mod:`wmrl_envs.kaggle.world_models.features` (model
family, validation, tuning, gates, task type...), optionally a code embedding from any
:class:`Embedder` (the adapter :mod:`wmrl_adapters.embeddings` provides MiniLM; the core never imports
it), a hashed one-hot of the competition id (so repeated tasks get their own offset), and, when
stacked on a ``base`` world model, the base's predicted reward. Stacked, it learns the *residual*
``real − base`` (so before it knows anything useful it stays close to the base).

Why Bayesian: its posterior predictive std has an epistemic part, ``xᵀ Σ x`` (large where the buffer
holds no similar solutions: a model family, a validation scheme or a competition it has never seen)
and a noise part (the residual scatter of real rewards around the fit). The epistemic part is the
natural signal for choosing which groups to anchor (:func:`uncertainty_anchor_ranking`). Each
prediction's ``info["std"]`` is the total std, ``info["epistemic_std"]`` the epistemic part. (A
bootstrap ensemble of ridge regressions was tried first: a feature that is constant in the buffer gets
weight 0 in every member, so the ensemble is *certain* about solutions unlike anything it has seen —
the opposite of what anchor selection needs.)

Before ``min_observations`` real rewards have been observed it is not fitted: it returns the base
model's predictions unchanged, or ``None`` rewards when it has no base — never 0
(docs/design.md, the contracts).

Example:
    >>> from wmrl_envs.world_model import WorldModelQuery
    >>> model = LearnedWorldModel(config=LearnedWorldModelConfig(min_observations=4))
    >>> queries = [WorldModelQuery(None, f"```python\\nimport sklearn\\nx = {i}\\n```") for i in range(6)]
    >>> model.predict(queries[:1])[0].reward is None
    True
    >>> model.observe(queries, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    >>> model.is_fitted, 0.0 <= model.predict(queries[:1])[0].reward <= 1.0
    (True, True)
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from wmrl_algos.errors import CheckpointError, ConfigError
from wmrl_algos.types import Score, as_score_array
from wmrl_envs.kaggle.feedback import format_feedback
from wmrl_envs.kaggle.outcome import ExecutionStatus, KaggleContext, Outcome, RewardLadder
from wmrl_envs.kaggle.world_models.features import analyze_solution, extract_code, feature_vector
from wmrl_envs.kaggle.world_models.rubric import score_at_position
from wmrl_envs.world_model import Prediction, WorldModel, WorldModelQuery

__all__ = [
    "Embedder",
    "UncertainWorldModel",
    "LearnedWorldModelConfig",
    "LearnedWorldModel",
    "uncertainty_anchor_ranking",
]

_STATE_VERSION = 1


@runtime_checkable
class Embedder(Protocol):
    """Turns solution texts into fixed-size vectors (one row per text, same width every call)."""

    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed a batch of texts; returns a ``(len(texts), dim)`` float array."""
        ...


@runtime_checkable
class UncertainWorldModel(WorldModel, Protocol):
    """A world model that also reports how unsure it is about each query."""

    def uncertainty(self, queries: Sequence[WorldModelQuery]) -> np.ndarray:
        """Predictive std per query (``inf`` where the model knows nothing yet)."""
        ...


@dataclass(frozen=True)
class LearnedWorldModelConfig:
    """Settings of :class:`LearnedWorldModel`.

    Attributes:
        min_observations: real rewards needed before the first fit; until then the base model's
            predictions (or ``None``) are returned. Too low and the first fits are noise.
        buffer_size: most recent observations kept (older ones age out, so the model tracks the
            policy's drift); also bounds the refit cost.
        use_structural_features: include the static features of
            :mod:`~wmrl_envs.kaggle.world_models.features`.
        competition_buckets: width of the hashed one-hot of the competition id (0 disables it).
        residual: when stacked on a base model, learn ``real − base`` instead of ``real``.
        feature_cache_size: features of recently predicted queries are kept so :meth:`observe` does not
            re-embed them or re-query the base model.
        reward_range: predictions are clipped to this range (the reward ladder's span).
        ladder: the ladder used to read a status from a predicted reward when no base gives one.
    """

    min_observations: int = 12
    buffer_size: int = 512
    use_structural_features: bool = True
    competition_buckets: int = 16
    residual: bool = True
    feature_cache_size: int = 4096
    reward_range: tuple[float, float] = (0.0, 1.0)
    ladder: RewardLadder = RewardLadder()

    def __post_init__(self) -> None:
        if self.min_observations < 2:
            raise ConfigError(
                f"min_observations={self.min_observations}; a regression needs >= 2 observations"
            )
        if self.buffer_size < self.min_observations:
            raise ConfigError(
                f"buffer_size={self.buffer_size} < min_observations={self.min_observations}; the model "
                "could never be fitted, raise buffer_size"
            )
        if self.competition_buckets < 0:
            raise ConfigError(f"competition_buckets={self.competition_buckets}; pass >= 0 (0 disables)")
        if self.reward_range[0] >= self.reward_range[1]:
            raise ConfigError(f"reward_range={self.reward_range}; pass (low, high) with low < high")


@dataclass(frozen=True)
class _Fit:
    mean: np.ndarray
    scale: np.ndarray
    regressor: Any  # a fitted sklearn.linear_model.BayesianRidge

    def predict(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Posterior mean, total std and epistemic std for raw feature rows."""
        mean, std = self.regressor.predict((features - self.mean) / self.scale, return_std=True)
        noise_var = 1.0 / float(self.regressor.alpha_)
        epistemic = np.sqrt(np.maximum(std**2 - noise_var, 0.0))
        return np.asarray(mean, dtype=float), np.asarray(std, dtype=float), epistemic


class LearnedWorldModel:
    """Online-learned world model: Bayesian ridge on solution features, optionally stacked on a base model.

    It is a :class:`~wmrl_envs.world_model.LearningWorldModel` (structurally: :meth:`observe`,
    :meth:`state_dict` and :meth:`load_state_dict`), so a trainer feeds it every anchor group's real
    rewards and checkpoints its buffer.

    Args:
        base: a world model to stack on (its predicted reward becomes a feature and, with
            ``config.residual``, the offset the regression corrects). ``None``: learn from scratch.
        embedder: optional code embedder; the default (``None``) uses structural features only.
        config: see :class:`LearnedWorldModelConfig`.
        name: name in logs; defaults to ``"learned"`` or ``"learned+<base name>"``.

    Raises:
        ConfigError: neither structural features nor an embedder are enabled (nothing to learn from).

    Example:
        >>> from wmrl_envs.world_model import WorldModelQuery
        >>> model = LearnedWorldModel(config=LearnedWorldModelConfig(min_observations=3))
        >>> queries = [WorldModelQuery(None, f"import pandas\\nrows = {i}") for i in range(4)]
        >>> model.observe(queries, [0.2, None, 0.4, 0.6])
        >>> model.n_observations, model.is_fitted
        (3, True)
        >>> bool(np.isfinite(model.uncertainty(queries)).all())
        True
    """

    def __init__(
        self,
        base: WorldModel | None = None,
        *,
        embedder: Embedder | None = None,
        config: LearnedWorldModelConfig | None = None,
        name: str | None = None,
    ) -> None:
        self.config = config if config is not None else LearnedWorldModelConfig()
        if not self.config.use_structural_features and embedder is None:
            raise ConfigError(
                "use_structural_features=False and no embedder: the model would have no features; enable "
                "structural features or pass an Embedder (e.g. wmrl_adapters.embeddings.MiniLMEmbedder)"
            )
        self.base = base
        self.embedder = embedder
        self.name = name if name is not None else ("learned" if base is None else f"learned+{base.name}")
        self._features: deque[np.ndarray] = deque(maxlen=self.config.buffer_size)
        self._targets: deque[float] = deque(maxlen=self.config.buffer_size)
        self._offsets: deque[float] = deque(maxlen=self.config.buffer_size)
        self._cache: OrderedDict[str, tuple[np.ndarray, Prediction | None]] = OrderedDict()
        self._fit: _Fit | None = None
        self._n_observed_total = 0

    @property
    def is_fitted(self) -> bool:
        """False until ``min_observations`` real rewards have been observed."""
        return self._fit is not None

    @property
    def n_observations(self) -> int:
        """Observations currently in the buffer."""
        return len(self._targets)

    @property
    def n_observed_total(self) -> int:
        """Real rewards observed since construction (including those aged out of the buffer)."""
        return self._n_observed_total

    def predict(self, queries: Sequence[WorldModelQuery]) -> list[Prediction]:
        """Predict every query (base predictions or ``None`` rewards until fitted)."""
        features, base_predictions = self._featurise(queries)
        if self._fit is None:
            return [
                base
                if base is not None
                else Prediction(reward=None, info={"std": float("inf"), "fitted": False})
                for base in base_predictions
            ]
        mean, total, epistemic = self._fit.predict(features)
        low, high = self.config.reward_range
        means = np.clip(mean + self._offsets_of(base_predictions), low, high)
        return [
            self._prediction(query, float(mean), float(std), float(spread), base)
            for query, mean, std, spread, base in zip(
                queries, means, total, epistemic, base_predictions, strict=True
            )
        ]

    def uncertainty(self, queries: Sequence[WorldModelQuery]) -> np.ndarray:
        """Predictive std per query; ``inf`` for every query while the model is not fitted."""
        if self._fit is None:
            return np.full(len(queries), np.inf)
        features, _ = self._featurise(queries)
        return self._fit.predict(features)[1]

    def observe(self, queries: Sequence[WorldModelQuery], real_rewards: Sequence[Score]) -> None:
        """Add real outcomes to the buffer and refit (pairs with an unknown reward are skipped).

        Args:
            queries: the executed queries.
            real_rewards: their real rewards, ``None`` where the execution's outcome is unknown.

        Raises:
            ConfigError: the two sequences differ in length, or a reward is NaN or infinite.
        """
        if len(queries) != len(real_rewards):
            raise ConfigError(
                f"{len(queries)} queries but {len(real_rewards)} rewards; pass one reward (or None) per query"
            )
        rewards = as_score_array(real_rewards, name="real_rewards")
        known = [index for index, reward in enumerate(rewards) if not np.isnan(reward)]
        if not known:
            return
        features, base_predictions = self._featurise([queries[index] for index in known])
        offsets = self._offsets_of(base_predictions)
        for row, offset, index in zip(features, offsets, known, strict=True):
            self._features.append(row)
            self._offsets.append(float(offset))
            self._targets.append(float(rewards[index]))
        self._n_observed_total += len(known)
        self.refit()

    def refit(self) -> bool:
        """Refit the regression on the buffer now; returns False while it holds too few observations."""
        if len(self._targets) < self.config.min_observations:
            self._fit = None
            return False
        from sklearn.linear_model import BayesianRidge  # a core dependency, imported lazily (~1 s)

        features = np.stack(self._features)
        targets = np.asarray(self._targets) - np.asarray(self._offsets)
        mean = features.mean(axis=0)
        scale = features.std(axis=0)
        scale[scale < 1e-8] = 1.0
        regressor = BayesianRidge(max_iter=300, compute_score=False)
        regressor.fit((features - mean) / scale, targets)
        self._fit = _Fit(mean=mean, scale=scale, regressor=regressor)
        return True

    def state_dict(self) -> dict[str, Any]:
        """The buffer and counters (the regression is refit from them on load, deterministically)."""
        return {
            "version": _STATE_VERSION,
            "name": self.name,
            "config": {key: value for key, value in asdict(self.config).items() if key != "ladder"},
            "features": [row.tolist() for row in self._features],
            "targets": list(self._targets),
            "offsets": list(self._offsets),
            "n_observed_total": self._n_observed_total,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict` and refit.

        Raises:
            CheckpointError: wrong version, inconsistent lengths, or a feature width that does not match
                this model's features (another embedder or feature set).
        """
        if state.get("version") != _STATE_VERSION:
            raise CheckpointError(
                f"LearnedWorldModel state version {state.get('version')!r}, expected {_STATE_VERSION}; "
                "it was saved by an incompatible wmrl version"
            )
        try:
            features = [np.asarray(row, dtype=float) for row in state["features"]]
            targets = [float(value) for value in state["targets"]]
            offsets = [float(value) for value in state["offsets"]]
            total = int(state["n_observed_total"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"LearnedWorldModel state is incomplete or corrupt: {exc!r}") from exc
        if not len(features) == len(targets) == len(offsets):
            raise CheckpointError(
                f"LearnedWorldModel state has {len(features)} feature rows, {len(targets)} targets and "
                f"{len(offsets)} offsets; they must match"
            )
        if features and self._features and features[0].shape != self._features[0].shape:
            raise CheckpointError(
                f"feature width {features[0].shape[0]} in the state but {self._features[0].shape[0]} here; "
                "load it into a model with the same embedder and feature settings"
            )
        maxlen = self.config.buffer_size
        self._features = deque(features, maxlen=maxlen)
        self._targets = deque(targets, maxlen=maxlen)
        self._offsets = deque(offsets, maxlen=maxlen)
        self._n_observed_total = total
        self.refit()

    def _featurise(self, queries: Sequence[WorldModelQuery]) -> tuple[np.ndarray, list[Prediction | None]]:
        keys = [_query_key(query) for query in queries]
        missing = [index for index, key in enumerate(keys) if key not in self._cache]
        if missing:
            fresh = [queries[index] for index in missing]
            base_predictions: Sequence[Prediction | None] = (
                list(self.base.predict(fresh)) if self.base is not None else [None] * len(fresh)
            )
            blocks: list[np.ndarray] = []
            if self.config.use_structural_features:
                blocks.append(np.stack([_structural(query) for query in fresh]))
            if self.embedder is not None:
                texts = [extract_code(str(query.action)) or str(query.action) for query in fresh]
                blocks.append(np.asarray(self.embedder.embed(texts), dtype=float).reshape(len(fresh), -1))
            if self.config.competition_buckets:
                blocks.append(
                    np.stack(
                        [_competition_one_hot(query, self.config.competition_buckets) for query in fresh]
                    )
                )
            if self.base is not None:
                base_rewards = np.array(
                    [
                        np.nan if prediction is None or prediction.reward is None else prediction.reward
                        for prediction in base_predictions
                    ]
                )
                blocks.append(np.stack([np.nan_to_num(base_rewards), np.isnan(base_rewards)], axis=1))
            rows = np.hstack(blocks)
            for index, row, base in zip(missing, rows, base_predictions, strict=True):
                self._cache[keys[index]] = (row, base)
                self._cache.move_to_end(keys[index])
        entries = [self._cache[key] for key in keys]
        for key in keys:
            self._cache.move_to_end(key)
        while len(self._cache) > self.config.feature_cache_size:
            self._cache.popitem(last=False)
        return np.stack([row for row, _ in entries]), [base for _, base in entries]

    def _offsets_of(self, base_predictions: Sequence[Prediction | None]) -> np.ndarray:
        if self.base is None or not self.config.residual:
            return np.zeros(len(base_predictions))
        return np.array(
            [
                0.0 if prediction is None or prediction.reward is None else float(prediction.reward)
                for prediction in base_predictions
            ]
        )

    def _prediction(
        self, query: WorldModelQuery, reward: float, std: float, spread: float, base: Prediction | None
    ) -> Prediction:
        info: dict[str, Any] = {
            "std": std,
            "epistemic_std": spread,
            "fitted": True,
            "n_observations": self.n_observations,
        }
        status: ExecutionStatus
        if base is not None and "status" in base.info:
            status = base.info["status"]
            info["status_source"] = "base"
            info["base_reward"] = base.reward
        else:
            status = self._status_from_reward(reward)
            info["status_source"] = "ladder"
        info["status"] = status
        observation = None
        if isinstance(query.context, KaggleContext):
            ladder = self.config.ladder
            position = (
                float(np.clip((reward - ladder.valid_base) / ladder.valid_scale, 0.0, 1.0))
                if status == "valid"
                else None
            )
            public = (
                score_at_position(position, query.context.leaderboard, query.context.higher_is_better)
                if position is not None
                else None
            )
            info["position"] = position
            observation = format_feedback(
                Outcome(status=status, score=public, public_score=public, position=position)
            )
        return Prediction(reward=reward, observation=observation, terminated=None, info=info)

    def _status_from_reward(self, reward: float) -> ExecutionStatus:
        ladder = self.config.ladder
        if reward >= ladder.valid_base:
            return "valid"
        rungs: tuple[tuple[ExecutionStatus, float], ...] = (
            ("no_submission", ladder.no_submission),
            ("runtime_error", ladder.runtime_error),
            ("syntax_error", ladder.syntax_error),
        )
        return min(rungs, key=lambda rung: abs(rung[1] - reward))[0]


def uncertainty_anchor_ranking(
    groups: Sequence[Sequence[WorldModelQuery]], model: UncertainWorldModel
) -> list[int]:
    """Group indices ordered by mean predicted std, most uncertain first (ties keep index order).

    Anchoring the groups the world model is least sure about spends real executions where they teach
    the most (to the calibration and, for a learning world model, to the model itself).

    Args:
        groups: one sequence of queries per group.
        model: any world model with an ``uncertainty`` method.

    Returns:
        A permutation of ``range(len(groups))``.

    >>> class Fixed:
    ...     name = "fixed"
    ...     def predict(self, queries): return []
    ...     def uncertainty(self, queries): return np.array([float(q.action) for q in queries])
    >>> from wmrl_envs.world_model import WorldModelQuery
    >>> low, high, middle = (WorldModelQuery(None, value) for value in ("0.1", "0.9", "0.5"))
    >>> groups = [[low], [high, middle]]
    >>> uncertainty_anchor_ranking(groups, Fixed())
    [1, 0]
    """
    flat = [query for group in groups for query in group]
    stds = np.asarray(model.uncertainty(flat), dtype=float) if flat else np.zeros(0)
    if stds.shape != (len(flat),):
        raise ConfigError(
            f"{type(model).__name__}.uncertainty returned shape {stds.shape}, expected ({len(flat)},)"
        )
    means: list[float] = []
    start = 0
    for group in groups:
        chunk = stds[start : start + len(group)]
        start += len(group)
        means.append(float(np.mean(chunk)) if chunk.size else -np.inf)
    return sorted(range(len(groups)), key=lambda index: -means[index])


def _structural(query: WorldModelQuery) -> np.ndarray:
    context = query.context if isinstance(query.context, KaggleContext) else None
    return feature_vector(analyze_solution(extract_code(str(query.action)), context), context)


def _competition_one_hot(query: WorldModelQuery, buckets: int) -> np.ndarray:
    row = np.zeros(buckets)
    if isinstance(query.context, KaggleContext):
        digest = hashlib.sha256(query.context.competition_id.encode()).digest()
        row[int.from_bytes(digest[:4], "little") % buckets] = 1.0
    return row


def _query_key(query: WorldModelQuery) -> str:
    competition = (
        query.context.competition_id if isinstance(query.context, KaggleContext) else repr(query.context)
    )
    payload = f"{competition}\0{query.action}"
    if isinstance(query.context, KaggleContext):
        payload += f"\0{query.context.turn}\0{len(query.context.history)}"
    return hashlib.sha256(payload.encode()).hexdigest()
