"""A small costly environment and deterministic world models, shipped for tests, docs and benchmarks.

Why in the package and not in ``tests/``: every part of WMRL (the wrapper, grouped rollouts, the
correction loop, the benchmarks) needs an environment whose step is expensive and whose outcome a
world model can predict with *known* bias and noise, so that a test can tell a correct correction from
a lucky one. :class:`CostlyToyEnv` is a tiny hyperparameter-tuning task: each turn the agent proposes a
point in ``[-1, 1]^dim`` and gets a score in ``(0, 1]`` for how close it is to a hidden per-task
target, and each step burns a configurable amount of real time (sleeping) or CPU (spinning).
:class:`ToyWorldModel` is an oracle with controlled distortion: it knows the true score and returns
``true + bias + noise * z`` where ``z`` is a standard normal drawn from a hash of (context, action),
so the same query always gets the same prediction (deterministic, cacheable, reproducible across
processes). :class:`CachedWorldModel` memoises any world model on (context, action).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import math
import statistics
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from wmrl_algos.errors import ConfigError, WorldModelError
from wmrl_envs.world_model import Prediction, WorldModel, WorldModelQuery

__all__ = [
    "BurnMode",
    "CachedWorldModel",
    "CostlyToyEnv",
    "ToyContext",
    "ToyWorldModel",
    "burn",
    "stable_key",
    "toy_oracle",
    "toy_score",
    "toy_target",
]

BurnMode = Literal["sleep", "cpu"]
"""How a costly step spends its time: ``"sleep"`` (wall clock only) or ``"cpu"`` (a busy loop)."""

_NORMAL = statistics.NormalDist()


def burn(seconds: float, how: BurnMode = "sleep") -> None:
    """Spend ``seconds`` of wall-clock time, sleeping or spinning the CPU.

    Raises:
        ConfigError: ``how`` is not ``"sleep"`` or ``"cpu"``.
    """
    if seconds <= 0:
        return
    if how == "sleep":
        time.sleep(seconds)
        return
    if how != "cpu":
        raise ConfigError(f"how={how!r} is not a burn mode; pass 'sleep' or 'cpu'")
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        pass


def _encode(obj: Any) -> bytes:
    if obj is None or isinstance(obj, (bool, int, float, str, bytes)):
        return f"{type(obj).__name__}:{obj!r};".encode()
    if isinstance(obj, np.ndarray):
        array = np.ascontiguousarray(obj)
        return f"ndarray:{array.dtype.str}:{array.shape}:".encode() + array.tobytes() + b";"
    if isinstance(obj, np.generic):
        return _encode(obj.item())
    if isinstance(obj, (tuple, list)):
        return f"{type(obj).__name__}[".encode() + b"".join(_encode(item) for item in obj) + b"];"
    if isinstance(obj, Mapping):
        items = sorted((_encode(key), _encode(value)) for key, value in obj.items())
        return b"map{" + b"".join(key + value for key, value in items) + b"};"
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        parts = [_encode(getattr(obj, f.name)) for f in dataclasses.fields(obj)]
        return f"{type(obj).__qualname__}(".encode() + b"".join(parts) + b");"
    return f"{type(obj).__qualname__}<{obj!r}>;".encode()


def stable_key(*parts: Any) -> bytes:
    """A 16-byte digest of ``parts`` that is the same in every process and every run.

    Arrays are keyed on dtype, shape and bytes; tuples, lists, mappings and dataclasses recursively;
    anything else on its type name and ``repr`` (so an object whose ``repr`` carries a memory address
    never hits a cache, which is safe but useless).

    Example:
        >>> stable_key((1, 2.5), np.zeros(2)) == stable_key((1, 2.5), np.zeros(2))
        True
    """
    return hashlib.blake2b(b"".join(_encode(part) for part in parts), digest_size=16).digest()


def toy_target(task_id: int, dim: int) -> np.ndarray:
    """The hidden optimum of toy task ``task_id``: a point in ``[-0.8, 0.8]^dim`` fixed by the id."""
    return np.array(_toy_target(task_id, dim))


@functools.lru_cache(maxsize=4096)
def _toy_target(task_id: int, dim: int) -> tuple[float, ...]:
    return tuple(np.random.default_rng([task_id, dim]).uniform(-0.8, 0.8, size=dim).tolist())


def toy_score(target: np.ndarray, action: np.ndarray) -> float:
    """The true score of proposing ``action`` for ``target``: ``exp(-4 * mean((action - target)^2))``."""
    difference = np.asarray(action, dtype=float) - target
    return float(math.exp(-4.0 * float(np.mean(difference * difference))))


@dataclass(frozen=True)
class ToyContext:
    """What :class:`CostlyToyEnv` tells a world model about the current episode.

    The toy is an oracle setting on purpose: the context names the task, so :func:`toy_oracle` can
    compute the true score and a test knows exactly how wrong a prediction is.

    Attributes:
        task_id: the task being tuned.
        dim: dimension of the action.
        turn: turns already taken in this episode.
        max_turns: turns after which the episode is truncated.
        success_threshold: a score at or above it ends the episode (terminated).
    """

    task_id: int
    dim: int
    turn: int
    max_turns: int
    success_threshold: float


class CostlyToyEnv(gym.Env[np.ndarray, np.ndarray]):
    """A small tuning task whose every step costs real time: propose a point, get a score.

    Observation (``float64``, length ``dim + 3``): the last action, the last score, whether that score
    is known (1.0) or not (0.0, only after a world model could not predict it), and the fraction of
    turns used. Action: a point in ``[-1, 1]^dim``. Reward: :func:`toy_score` of the action against the
    task's hidden target. The episode terminates when the score reaches ``success_threshold`` and is
    truncated after ``max_turns`` turns. Pass ``options={"task_id": k}`` to :meth:`reset` to pick the
    task; otherwise it is drawn from the seeded generator.

    It implements the :class:`~wmrl_envs.world_model.SimulatableEnv` hooks, so a world model can stand
    in for :meth:`step` under :class:`~wmrl_envs.wrapper.WorldModelWrapper`.

    Args:
        dim: dimension of the point to tune.
        max_turns: turns per episode before truncation.
        step_seconds: real time each :meth:`step` costs.
        burn_mode: ``"sleep"`` to spend wall-clock time only, ``"cpu"`` to spin a core.
        success_threshold: score at which the episode terminates, in ``(0, 1]``.
        render_mode: ``None`` or ``"ansi"``.

    Raises:
        ConfigError: an argument is out of range.

    Example:
        >>> env = CostlyToyEnv(dim=2, step_seconds=0.0)
        >>> obs, info = env.reset(seed=0, options={"task_id": 3})
        >>> obs, reward, terminated, truncated, info = env.step(np.zeros(2))
        >>> 0.0 < reward <= 1.0, info["turn"]
        (True, 1)
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        dim: int = 2,
        max_turns: int = 4,
        step_seconds: float = 0.0,
        burn_mode: BurnMode = "sleep",
        success_threshold: float = 0.95,
        render_mode: str | None = None,
    ) -> None:
        if not isinstance(dim, int) or dim < 1:
            raise ConfigError(f"dim={dim!r} must be a positive int, e.g. 2")
        if not isinstance(max_turns, int) or max_turns < 1:
            raise ConfigError(f"max_turns={max_turns!r} must be a positive int, e.g. 4")
        if not step_seconds >= 0:
            raise ConfigError(f"step_seconds={step_seconds!r} must be >= 0 (0 makes steps free)")
        if burn_mode not in ("sleep", "cpu"):
            raise ConfigError(f"burn_mode={burn_mode!r} is not a burn mode; pass 'sleep' or 'cpu'")
        if not 0.0 < success_threshold <= 1.0:
            raise ConfigError(f"success_threshold={success_threshold!r} must be in (0, 1], e.g. 0.95")
        if render_mode not in (None, "ansi"):
            raise ConfigError(f"render_mode={render_mode!r} is not supported; pass None or 'ansi'")
        self.dim = dim
        self.max_turns = max_turns
        self.step_seconds = float(step_seconds)
        self.burn_mode: BurnMode = burn_mode
        self.success_threshold = float(success_threshold)
        self.render_mode = render_mode
        self.action_space = spaces.Box(-1.0, 1.0, shape=(dim,), dtype=np.float64)
        low = np.concatenate([-np.ones(dim), np.zeros(3)])
        self.observation_space = spaces.Box(low, np.ones(dim + 3), dtype=np.float64)
        self._task_id = 0
        self._target = toy_target(0, dim)
        self._turn = 0
        self._last_action = [0.0] * dim
        self._last_score: float | None = 0.0

    @property
    def task_id(self) -> int:
        """The task of the current episode."""
        return self._task_id

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode of task ``options["task_id"]`` (drawn from the seeded generator if absent).

        Raises:
            ConfigError: ``options["task_id"]`` is not a non-negative int.
        """
        super().reset(seed=seed)
        options = options or {}
        if "task_id" in options:
            task_id = options["task_id"]
            if isinstance(task_id, bool) or not isinstance(task_id, (int, np.integer)) or task_id < 0:
                raise ConfigError(f"options['task_id']={task_id!r} must be a non-negative int")
            self._task_id = int(task_id)
        else:
            self._task_id = int(self.np_random.integers(0, 2**31 - 1))
        self._target = toy_target(self._task_id, self.dim)
        self._turn = 0
        self._last_action = [0.0] * self.dim
        self._last_score = 0.0
        return self._observation(), self._info()

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Score ``action`` against the hidden target, spending ``step_seconds`` of real time."""
        burn(self.step_seconds, self.burn_mode)
        score = toy_score(self._target, action)
        obs, _, terminated, truncated, info = self._advance(
            action, score, terminated=score >= self.success_threshold
        )
        return obs, score, terminated, truncated, info

    def world_model_context(self) -> ToyContext:
        """The :class:`ToyContext` of the current episode (task, turn, limits)."""
        return ToyContext(self._task_id, self.dim, self._turn, self.max_turns, self.success_threshold)

    def apply_prediction(
        self, action: np.ndarray, prediction: Prediction
    ) -> tuple[np.ndarray, float | None, bool, bool, dict[str, Any]]:
        """Advance the turn from a predicted score without computing the real one.

        The observation records the predicted score clipped to ``[0, 1]``, or marks it unknown;
        ``terminated`` is the prediction's own when given, else whether the predicted score reaches
        ``success_threshold``.
        """
        score = prediction.reward
        if prediction.terminated is not None:
            terminated = bool(prediction.terminated)
        else:
            terminated = score is not None and score >= self.success_threshold
        return self._advance(action, score, terminated=terminated)

    def render(self) -> str | None:
        """A one-line text summary of the episode (``render_mode="ansi"``)."""
        if self.render_mode != "ansi":
            return None
        return f"task {self._task_id} turn {self._turn}/{self.max_turns} last score {self._last_score}"

    def _advance(
        self, action: np.ndarray, score: float | None, *, terminated: bool
    ) -> tuple[np.ndarray, float | None, bool, bool, dict[str, Any]]:
        self._turn += 1
        self._last_action = [min(1.0, max(-1.0, float(value))) for value in action]
        self._last_score = score
        truncated = self._turn >= self.max_turns and not terminated
        return self._observation(), score, bool(terminated), truncated, self._info()

    def _observation(self) -> np.ndarray:
        score = self._last_score
        shown = min(1.0, max(0.0, score)) if score is not None else 0.0
        known = 1.0 if score is not None else 0.0
        return np.array([*self._last_action, shown, known, self._turn / self.max_turns], dtype=np.float64)

    def _info(self) -> dict[str, Any]:
        return {"task_id": self._task_id, "turn": self._turn}


def toy_oracle(query: WorldModelQuery) -> Prediction:
    """The true outcome of a :class:`CostlyToyEnv` query.

    Two query shapes are understood: a step query (a :class:`ToyContext` and an action), whose true
    reward is :func:`toy_score`; and an end-of-episode query (the list of the episode's observations
    and the list of its actions, as ``WorldModelWrapper(..., scoring="episode")`` sends), whose true
    reward is the episode return, read from the score slot of every observation after the first (the
    way a progress model reads progress from frames).

    Raises:
        ConfigError: the context is neither shape.
    """
    context, action = query.context, query.action
    if isinstance(context, ToyContext):
        score = toy_score(toy_target(context.task_id, context.dim), action)
        return Prediction(reward=score, terminated=score >= context.success_threshold)
    if isinstance(context, (list, tuple)) and context and all(isinstance(o, np.ndarray) for o in context):
        return Prediction(reward=float(sum(observation[-3] for observation in context[1:])))
    raise ConfigError(
        f"toy_oracle cannot read a context of type {type(context).__name__}; it predicts CostlyToyEnv "
        "queries (a ToyContext, or a list of observations). Pass ToyWorldModel(oracle=...) for another "
        "environment"
    )


@dataclass
class ToyWorldModel:
    """A deterministic, cheap, biased and noisy world model: the oracle's answer, distorted by hash.

    ``predicted = true + bias + noise * z`` with ``z`` a standard normal drawn from a hash of
    (``seed``, context, action); a query is unknown (reward ``None``) with probability
    ``unknown_rate``, again decided by the hash. Same query, same answer, in every process.

    Args:
        bias: constant added to every true reward (the systematic error ``b``).
        noise: standard deviation of the hash noise (the ``sigma`` of the error model).
        unknown_rate: share of queries answered with ``None`` ("cannot say"), in ``[0, 1]``.
        seconds_per_query: real time each query costs (to stand in for a slow model).
        burn_mode: ``"sleep"`` or ``"cpu"`` for ``seconds_per_query``.
        seed: changes which noise each query gets.
        oracle: the true outcome of a query; :func:`toy_oracle` (for :class:`CostlyToyEnv`) by default.
            Its observation and ``terminated`` pass through unchanged.
        name: the name errors and logs use.

    Raises:
        ConfigError: a negative noise or cost, or an ``unknown_rate`` outside ``[0, 1]``.

    Example:
        >>> model = ToyWorldModel(bias=0.1, noise=0.0)
        >>> query = WorldModelQuery(ToyContext(3, 2, 0, 4, 0.95), np.zeros(2))
        >>> predicted = model.predict([query])[0].reward
        >>> round(predicted - toy_oracle(query).reward, 6)
        0.1
    """

    bias: float = 0.1
    noise: float = 0.05
    unknown_rate: float = 0.0
    seconds_per_query: float = 0.0
    burn_mode: BurnMode = "sleep"
    seed: int = 0
    oracle: Callable[[WorldModelQuery], Prediction] = field(default=toy_oracle, repr=False)
    name: str = "toy"

    def __post_init__(self) -> None:
        if not self.noise >= 0:
            raise ConfigError(f"noise={self.noise!r} must be >= 0 (0 makes the world model noiseless)")
        if not 0.0 <= self.unknown_rate <= 1.0:
            raise ConfigError(f"unknown_rate={self.unknown_rate!r} must be in [0, 1], e.g. 0.0")
        if not self.seconds_per_query >= 0:
            raise ConfigError(f"seconds_per_query={self.seconds_per_query!r} must be >= 0")
        if self.burn_mode not in ("sleep", "cpu"):
            raise ConfigError(f"burn_mode={self.burn_mode!r} is not a burn mode; pass 'sleep' or 'cpu'")

    def predict(self, queries: Sequence[WorldModelQuery]) -> list[Prediction]:
        """One distorted oracle prediction per query, in order."""
        burn(self.seconds_per_query * len(queries), self.burn_mode)
        return [self._predict_one(query) for query in queries]

    def _predict_one(self, query: WorldModelQuery) -> Prediction:
        digest = stable_key(self.seed, query.context, query.action)
        unknown_draw = int.from_bytes(digest[:8], "big") / 2.0**64
        truth = self.oracle(query)
        if unknown_draw < self.unknown_rate:
            return Prediction(reward=None, observation=truth.observation, info={"unknown": True})
        uniform = (int.from_bytes(digest[8:], "big") + 0.5) / 2.0**64
        if truth.reward is None:
            reward = None
        else:
            reward = truth.reward + self.bias + self.noise * _NORMAL.inv_cdf(uniform)
        return Prediction(reward=reward, observation=truth.observation, terminated=truth.terminated)


class CachedWorldModel:
    """Memoises a world model on (context, action): a repeated query is answered without a call.

    Only the cache misses of a batch are sent to the wrapped model, in one call, so batching is kept.
    Observations are copied on the way out, so a caller that modifies one cannot corrupt the cache.

    Args:
        world_model: the model to memoise.
        max_entries: least-recently-used entries beyond this are dropped; ``None`` keeps everything.

    Raises:
        ConfigError: ``world_model`` is not a world model or ``max_entries`` is not positive.

    Example:
        >>> cached = CachedWorldModel(ToyWorldModel())
        >>> query = WorldModelQuery(ToyContext(1, 2, 0, 4, 0.95), np.zeros(2))
        >>> cached.predict([query]) == cached.predict([query]), cached.hits, cached.misses
        (True, 1, 1)
    """

    def __init__(self, world_model: WorldModel, max_entries: int | None = None) -> None:
        if not isinstance(world_model, WorldModel):
            raise ConfigError(
                f"world_model={world_model!r} is not a WorldModel; it needs a `name` and a batched "
                "`predict(queries)`"
            )
        if max_entries is not None and max_entries < 1:
            raise ConfigError(f"max_entries={max_entries!r} must be positive or None (unbounded)")
        self.world_model = world_model
        self.max_entries = max_entries
        self.name = f"cached({world_model.name})"
        self.hits = 0
        self.misses = 0
        self._cache: OrderedDict[bytes, Prediction] = OrderedDict()

    def predict(self, queries: Sequence[WorldModelQuery]) -> list[Prediction]:
        """Predictions for ``queries``, calling the wrapped model once for the misses (if any).

        Raises:
            WorldModelError: the wrapped model returned another number of predictions than it was asked.
        """
        keys = [stable_key(query.context, query.action) for query in queries]
        found: dict[bytes, Prediction] = {}
        for key in keys:
            if key in self._cache:
                self._cache.move_to_end(key)
                found[key] = self._cache[key]
        first_miss = {key: i for i, key in reversed(list(enumerate(keys))) if key not in found}
        if first_miss:
            fresh = list(self.world_model.predict([queries[i] for i in first_miss.values()]))
            if len(fresh) != len(first_miss):
                raise WorldModelError(
                    f"world model {self.world_model.name!r} returned {len(fresh)} predictions for "
                    f"{len(first_miss)} queries; it must return exactly one per query"
                )
            for key, prediction in zip(first_miss, fresh, strict=True):
                found[key] = prediction
                self._store(key, prediction)
        self.misses += len(first_miss)
        self.hits += len(queries) - len(first_miss)
        return [
            dataclasses.replace(found[key], observation=copy.deepcopy(found[key].observation))
            for key in keys
        ]

    def _store(self, key: bytes, prediction: Prediction) -> None:
        self._cache[key] = prediction
        if self.max_entries is not None:
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)
