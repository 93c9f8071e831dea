"""``WorldModelWrapper``: let a world model stand in for an expensive environment, episode by episode.

Why a Gymnasium wrapper: every RL library already knows how to drive a ``gymnasium.Env``, so the
cheapest way to put WMRL under any of them is to keep the env's API and change only where the reward
(and, in simulate mode, the observation) comes from. Two modes cover the paper's two settings:

* ``mode="simulate"`` (the AutoResearch setting): on a non-anchor episode the real env is never
  stepped; the world model predicts the outcome of each action and the env's cheap bookkeeping is
  advanced from the prediction (``apply_prediction`` hook) or the prediction's own observation is used.
* ``mode="score"`` (the embodied setting): the real env runs the dynamics (a simulator is cheap, its
  success signal is sparse) but its reward is withheld; the world model scores every step
  (``scoring="step"``) or the whole trajectory once it ends (``scoring="episode"``).

An *anchor* episode always runs the real env AND asks the world model, so it yields a
(predicted, real) pair for the corrections, and it returns the REAL reward. Anchoring is decided at
reset, before anything is scored (``options={"anchor": True}``, or per group by an attached scheduler
with ``options={"group_id": g}`` after :meth:`WorldModelWrapper.plan_groups`). Libraries such as
Stable-Baselines3 never pass reset options, so an episode reset without either option is still
anchored: by the attached scheduler, else with probability ``anchor_fraction`` (0.1 by default) from a
seeded generator. Without that default such a loop would silently never correct anything.

The world model is held by reference, never copied: it may hold a model, a lock or a server
connection, and every wrapper of a :class:`~wmrl_envs.rollouts.GroupedRollout` must share one. What
Gymnasium records for ``env.spec`` is a JSON-able handle naming the live object (valid in this
process), so ``env.spec.to_json()`` works and ``gymnasium.make(env.spec)`` re-wraps with the same
world model.

An unknown prediction (a ``None`` reward, or one lost to a tolerated error) is never a silent 0, and
never a NaN handed to an RL library either: Stable-Baselines3's PPO raises on the first NaN reward. What
the wrapper does instead is its ``on_unknown`` policy (:data:`OnUnknown`): by default it takes the real
step (``"real_step"``), so the learner gets a real reward and the ledger counts a real step; ``"raise"``
stops with :class:`~wmrl_algos.errors.WorldModelError`; ``"nan"`` returns ``float("nan")`` for a caller
that reads the info itself (as :class:`~wmrl_envs.rollouts.GroupedRollout` does). In every case
``info[info_key]["predicted"]`` is ``None``. The per-step information the wrapper adds lives under one
key (``info_key``) and is described by :class:`StepInfo`.

For batching across many trajectories the step is split into three public phases
(:meth:`~WorldModelWrapper.prepare_step`, :meth:`~WorldModelWrapper.execute`,
:meth:`~WorldModelWrapper.finish_step`) around one shared :func:`predict_batch` call; :meth:`step` is
exactly those phases with a batch of one. :mod:`wmrl_envs.rollouts` drives many wrappers that way.

Vector envs: under ``gymnasium.vector`` the wrapper's info becomes a dict of arrays with a ``_field``
mask per field. A sub-env that did not report a field reads 0 (or NaN) in the array; only the mask
says it is missing. Read fields with :func:`read_vector_info`, which returns NaN for every masked-out
or unknown entry. A vector env passes the same reset options to every sub-env and autoresets without
options, so per-group anchoring belongs in :class:`~wmrl_envs.rollouts.GroupedRollout`, which also
batches the world-model calls that a vector env would make one sub-env at a time.
"""

from __future__ import annotations

import itertools
import math
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, SupportsFloat, TypedDict, TypeVar

import gymnasium as gym
import numpy as np
from gymnasium.error import InvalidAction, ResetNeeded

from wmrl_algos.errors import ConfigError, WorldModelError
from wmrl_envs.ledger import CostLedger, RewardSource
from wmrl_envs.world_model import Prediction, WorldModel, WorldModelQuery

__all__ = [
    "AnchorSelector",
    "BatchPrediction",
    "Mode",
    "OnUnknown",
    "PendingStep",
    "Scoring",
    "StepInfo",
    "WorldModelWrapper",
    "predict_batch",
    "read_vector_info",
]

ObsType = TypeVar("ObsType")
ActType = TypeVar("ActType")

Mode = Literal["simulate", "score"]
"""``"simulate"``: the world model replaces the real step on non-anchor episodes;
``"score"``: the real env always steps, the world model replaces its reward."""

Scoring = Literal["step", "episode"]
"""``"step"``: one prediction per step; ``"episode"``: one prediction per trajectory, at its end."""

OnUnknown = Literal["real_step", "raise", "nan"]
"""What a step does when the world model cannot say (reward ``None``, or a tolerated error):

* ``"real_step"`` (default): return the real env's reward instead. In score mode the real step has run
  already; in simulate mode the wrapper steps the real env now, which needs the env's
  ``apply_prediction`` hook (it keeps the real env at the simulated episode's state; without the hook
  the real env is still where the episode started, so its step would answer another state: that is a
  :class:`~wmrl_algos.errors.WorldModelError`). ``info[info_key]`` marks such a step with
  ``source="real"`` and ``predicted=None`` in a non-anchor episode, ``real`` holding the reward
  returned; the ledger counts it in ``real_steps`` (simulate mode) and ``rewards_real``.
* ``"raise"``: raise :class:`~wmrl_algos.errors.WorldModelError`; the episode must be reset.
* ``"nan"``: return ``float("nan")``, for callers that read ``info`` and treat it as unknown (never pass
  it to an RL library: a NaN reward breaks its losses)."""

_StepTuple = tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]
_MISSING = object()
_HANDLE_PREFIX = "wmrl-live-object:"
_live_objects: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
_pinned_objects: dict[str, Any] = {}
_handle_numbers = itertools.count()
_EPISODE_ANCHOR_STREAM = 0x574D524C
"""Mixed into the anchor generator's seed, so that the decision is independent of the env's own
``np_random`` (seeded from the same reset seed): anchors must not pick out particular start states."""


class AnchorSelector(Protocol):
    """Decides which groups of a step are anchors (e.g. :class:`wmrl_algos.anchors.AnchorScheduler`)."""

    def select(self, n_groups: int) -> np.ndarray:
        """A boolean mask of length ``n_groups``, True for anchor groups."""
        ...


class StepInfo(TypedDict):
    """What :class:`WorldModelWrapper` writes under ``info[info_key]`` at every reset and step.

    Keys:
        source: where the returned reward came from, ``"real"`` (anchor episodes, and the steps of other
            episodes whose prediction was unknown under ``on_unknown="real_step"``) or ``"world_model"``.
        anchor: whether the episode is an anchor episode.
        group_id: the group given at reset, or ``None``.
        predicted: the world model's reward for this step (for ``scoring="episode"``: the trajectory's
            score, on the last step only); ``None`` when unknown or not predicted at this step. On a
            simulated step through the env's ``apply_prediction`` hook it is the reward the hook
            returns, so a hook should return the prediction's own reward whenever it has one: anchor
            pairs carry ``Prediction.reward`` and the calibration must see the same quantity.
        real: the real env's reward for this step on anchor episodes, the real reward returned instead of
            an unknown prediction (``on_unknown="real_step"``), ``None`` otherwise.
        real_seconds: seconds spent in the real env's ``step`` for this step.
        world_model_seconds: this step's share of the seconds spent in ``predict``.
        world_model_error: why the prediction failed when ``tolerate_errors=True``, else ``None``.
    """

    source: str
    anchor: bool
    group_id: int | None
    predicted: float | None
    real: float | None
    real_seconds: float
    world_model_seconds: float
    world_model_error: str | None


@dataclass
class PendingStep:
    """One step in flight between :meth:`WorldModelWrapper.prepare_step` and ``finish_step``.

    Attributes:
        action: the action being taken.
        query: what to ask the world model for this step, or ``None`` when this step needs no
            prediction (mid-episode with ``scoring="episode"``). Known after ``prepare_step`` for
            ``scoring="step"``, after ``execute`` for ``scoring="episode"``.
        runs_real: whether :meth:`WorldModelWrapper.execute` steps the real env (anchor episodes and
            score mode).
        real_result: the real env's step tuple, once executed.
        real_seconds: how long the real step took.
        unscored: why a finished trajectory is not scored (``scoring="episode"``: its real dynamics
            failed, see :meth:`WorldModelWrapper.execute`), else ``None``.
    """

    action: Any
    query: WorldModelQuery | None
    runs_real: bool
    real_result: _StepTuple | None = None
    real_seconds: float = 0.0
    unscored: str | None = None


@dataclass(frozen=True)
class BatchPrediction:
    """The outcome of one :func:`predict_batch` call, aligned with its queries.

    Attributes:
        predictions: one :class:`Prediction` per query, or ``None`` where a tolerated error lost it.
        errors: why each lost prediction was lost (``None`` where it was not).
        seconds_per_query: the call's wall-clock time divided by its number of queries.
    """

    predictions: tuple[Prediction | None, ...]
    errors: tuple[str | None, ...]
    seconds_per_query: float


def _checked_reward(reward: Any) -> tuple[float | None, str | None]:
    if reward is None:
        return None, None
    if type(reward) is float and math.isfinite(reward):
        return reward, None
    if isinstance(reward, bool) or not isinstance(reward, (int, float, np.integer, np.floating)):
        return None, f"reward {reward!r} is not a number or None"
    value = float(reward)
    if not math.isfinite(value):
        return None, f"reward {value!r} is not finite (say 'unknown' with None)"
    return value, None


def _handle_for(obj: Any) -> str:
    """A JSON-able name for ``obj`` that :func:`_resolve_handle` turns back into it in this process."""
    handle = f"{_HANDLE_PREFIX}{type(obj).__name__}#{next(_handle_numbers)}"
    try:
        _live_objects[handle] = obj
    except TypeError:  # not weak-referenceable (e.g. __slots__ without __weakref__): keep it alive
        _pinned_objects[handle] = obj
    return handle


def _resolve_handle(value: Any, argument: str) -> Any:
    if not (isinstance(value, str) and value.startswith(_HANDLE_PREFIX)):
        return value
    found = _live_objects.get(value, _pinned_objects.get(value))
    if found is None:
        raise ConfigError(
            f"{argument}={value!r} names an object of another process (or one that no longer exists): an "
            "env spec records the world model by reference, not by value. Re-make the env without the "
            f"wrapper and wrap it again: WorldModelWrapper(env, {argument}=...)"
        )
    return found


def predict_batch(
    world_model: WorldModel,
    queries: Sequence[WorldModelQuery],
    *,
    tolerate_errors: bool = False,
    ledger: CostLedger | None = None,
) -> BatchPrediction:
    """Ask ``world_model`` about every query in one call, and check what comes back.

    Args:
        world_model: the model to call.
        queries: the batch (an empty batch makes no call).
        tolerate_errors: turn a failed call or a broken prediction into ``None`` for the affected items
            (counted in the ledger) instead of raising.
        ledger: where to record the call's time, size, unknown predictions and errors.

    Returns:
        The checked predictions, aligned with ``queries``.

    Raises:
        WorldModelError: (``tolerate_errors=False``) the model raised, returned another number of
            predictions than queries, returned something that is not a :class:`Prediction`, or a reward
            that is not a finite number or ``None``. The message names the world model.
    """
    if not queries:
        return BatchPrediction((), (), 0.0)
    name = getattr(world_model, "name", type(world_model).__name__)
    start = time.perf_counter()
    batch_error: str | None = None
    try:
        raw = list(world_model.predict(queries))
    except Exception as exc:
        if not tolerate_errors:
            raise WorldModelError(
                f"world model {name!r} raised {exc!r} on a batch of {len(queries)} queries; no reward "
                "can be given for them (pass tolerate_errors=True to score them None instead)"
            ) from exc
        raw, batch_error = [], f"world model {name!r} raised {exc!r}"
    seconds = time.perf_counter() - start
    if batch_error is None and len(raw) != len(queries):
        message = (
            f"world model {name!r} returned {len(raw)} predictions for {len(queries)} queries; it must "
            "return exactly one per query, in order"
        )
        if not tolerate_errors:
            raise WorldModelError(message + " (pass tolerate_errors=True to score them None instead)")
        batch_error = message
    if batch_error is not None:
        predictions: list[Prediction | None] = [None] * len(queries)
        errors: list[str | None] = [batch_error] * len(queries)
    else:
        predictions, errors = [], []
        for query, prediction in zip(queries, raw, strict=True):
            if isinstance(prediction, Prediction):
                reward, problem = _checked_reward(prediction.reward)
            else:
                reward, problem = None, f"returned {prediction!r}, not a Prediction"
            if problem is not None:
                message = f"world model {name!r}: {problem} for query {query.key!r}"
                if not tolerate_errors:
                    raise WorldModelError(message + " (pass tolerate_errors=True to score it None instead)")
                predictions.append(None)
                errors.append(message)
                continue
            if reward is not prediction.reward:
                prediction = Prediction(
                    reward, prediction.observation, prediction.terminated, prediction.info
                )
            predictions.append(prediction)
            errors.append(None)
    if ledger is not None:
        failed = len(errors) - errors.count(None)
        unknown = failed + sum(p is not None and p.reward is None for p in predictions)
        ledger.record_world_model(seconds, len(queries), unknown=unknown, errors=failed)
    return BatchPrediction(tuple(predictions), tuple(errors), seconds / len(queries))


def read_vector_info(info: Mapping[str, Any], field: str, *, info_key: str = "wmrl") -> np.ndarray:
    """Read one :class:`StepInfo` field from a vector env's info, with NaN for every missing entry.

    Gymnasium's vector envs stack sub-env infos into arrays and mark which sub-envs reported a key with
    a boolean ``_key`` array. An unreported entry holds 0 (or ``None``) in the value array, which would
    read as a confident score of 0: always go through the mask, as this function does.

    Args:
        info: the ``info`` returned by a vector env's ``reset`` or ``step``.
        field: a numeric :class:`StepInfo` field (``"predicted"``, ``"real"``, ``"real_seconds"``, ...).
        info_key: the wrapper's ``info_key``.

    Returns:
        A float array, one entry per sub-env, NaN where the sub-env did not report the field or
        reported ``None`` (unknown). If no sub-env reported the wrapper's key, an empty array.

    Raises:
        ConfigError: the field is not numeric (e.g. ``"source"``; read it with its ``_source`` mask).
    """
    if field in ("source", "world_model_error"):
        raise ConfigError(f"field={field!r} is not numeric; read info[{info_key!r}][{field!r}] with its mask")
    block = info.get(info_key)
    if not isinstance(block, Mapping) or field not in block:
        return np.zeros(0)
    values = np.asarray(block[field], dtype=object)
    mask = np.asarray(block.get(f"_{field}", np.ones(len(values), dtype=bool)), dtype=bool)
    return np.array(
        [float(v) if m and v is not None else math.nan for v, m in zip(values, mask, strict=True)],
        dtype=float,
    )


class WorldModelWrapper(gym.Wrapper[ObsType, ActType, ObsType, ActType], gym.utils.RecordConstructorArgs):
    """Replace an expensive env's reward (and, in simulate mode, its step) with a world model's.

    Args:
        env: the real environment. Its ``unwrapped`` may implement the
            :class:`~wmrl_envs.world_model.SimulatableEnv` hooks ``world_model_context()`` (the query
            context; else the last observation) and ``apply_prediction(action, prediction)`` (advance
            from a prediction; else the prediction must carry the observation).
        world_model: the batched predictor; its ``name`` appears in every error about it. Held by
            reference (never copied), so one instance serves every wrapper it is given to.
        mode: ``"simulate"`` (non-anchor episodes never step the real env; choose it when a real step
            is the expensive part) or ``"score"`` (the real env always steps, only its reward is
            replaced; choose it when dynamics are cheap and rewards are not).
        scoring: ``"step"`` (one prediction per step) or ``"episode"`` (score mode only: rewards 0.0
            until the last step, which gets the world model's score of the whole trajectory; the query
            context is the list of observations, the action the list of actions). A trajectory in
            which the real env returned a non-finite reward (its outcome unknown) is not scored.
        scheduler: decides anchor groups for :meth:`plan_groups` (an
            :class:`~wmrl_algos.anchors.AnchorScheduler`); with one attached, ``reset(options=
            {"group_id": g})`` anchors the episode when group ``g`` was chosen, and a reset with neither
            ``"anchor"`` nor ``"group_id"`` asks it about that one episode (``select(1)``).
        anchor_fraction: without a scheduler, the probability that an episode reset with neither
            option is an anchor. This is the Stable-Baselines3 path (SB3 never passes reset options):
            without it no episode would ever be executed for real and nothing would be corrected. The
            draw comes from a generator seeded with 0 and re-seeded by ``reset(seed=s)``, independent
            of the env's own randomness, so a seed fixes the decision. ``0.0``: never anchor.
        info_key: the one info key the wrapper writes. An env that already uses it is an error.
        tolerate_errors: a world model that raises or breaks its contract gives unknown (``None``)
            predictions for the affected items instead of raising :class:`WorldModelError`; counted in
            the info and the ledger, and handled by ``on_unknown`` like any unknown prediction. With
            ``on_unknown="nan"`` in simulate mode without ``apply_prediction`` a lost prediction has no
            observation, so the episode is truncated there.
        on_unknown: what a step returns when the world model cannot say (:data:`OnUnknown`):
            ``"real_step"`` (default: the real reward, from a real step), ``"raise"``, or ``"nan"``
            (only for callers that read the info, never for an RL library).
        max_episode_steps: truncate after this many steps; defaults to ``env.spec.max_episode_steps``
            (needed in simulate mode, where the real env's ``TimeLimit`` is never stepped).
        check_actions: raise ``gymnasium.error.InvalidAction`` for an action outside the action space
            (the real env may not see the action at all in simulate mode).
        info_timings: include the per-step seconds in the info (else they read 0.0). Off by default
            because infos must be reproducible (Gymnasium's ``check_env`` compares two steps' infos);
            the ledger records the seconds either way.
        ledger: the :class:`CostLedger` to record into (share one across wrappers); a new one if None.
            Not part of the recorded constructor arguments: an env re-made from ``env.spec`` (as
            ``check_env`` does) gets its own ledger.

    Raises:
        ConfigError: an argument is invalid (the message names the value and the fix).

    Example:
        >>> from wmrl_envs.toy import CostlyToyEnv, ToyWorldModel
        >>> env = WorldModelWrapper(CostlyToyEnv(), ToyWorldModel(bias=0.1, noise=0.0))
        >>> obs, info = env.reset(seed=0, options={"task_id": 3})
        >>> obs, reward, terminated, truncated, info = env.step(np.zeros(2))
        >>> info["wmrl"]["source"], info["wmrl"]["real"], env.ledger.real_steps
        ('world_model', None, 0)
        >>> obs, info = env.reset(seed=0, options={"task_id": 3, "anchor": True})
        >>> obs, reward, terminated, truncated, info = env.step(np.zeros(2))
        >>> round(info["wmrl"]["predicted"] - info["wmrl"]["real"], 6), reward == info["wmrl"]["real"]
        (0.1, True)
    """

    def __init__(
        self,
        env: gym.Env[ObsType, ActType],
        world_model: WorldModel,
        *,
        mode: Mode = "simulate",
        scoring: Scoring = "step",
        scheduler: AnchorSelector | None = None,
        anchor_fraction: float = 0.1,
        info_key: str = "wmrl",
        tolerate_errors: bool = False,
        on_unknown: OnUnknown = "real_step",
        max_episode_steps: int | None = None,
        check_actions: bool = True,
        info_timings: bool = False,
        ledger: CostLedger | None = None,
    ) -> None:
        world_model = _resolve_handle(world_model, "world_model")
        scheduler = _resolve_handle(scheduler, "scheduler")
        # Recorded by reference (Gymnasium would deep-copy): a handle, so the spec stays JSON-able.
        gym.utils.RecordConstructorArgs.__init__(
            self,
            _disable_deepcopy=True,
            world_model=_handle_for(world_model),
            mode=mode,
            scoring=scoring,
            scheduler=None if scheduler is None else _handle_for(scheduler),
            anchor_fraction=anchor_fraction,
            info_key=info_key,
            tolerate_errors=tolerate_errors,
            on_unknown=on_unknown,
            max_episode_steps=max_episode_steps,
            check_actions=check_actions,
            info_timings=info_timings,
        )
        gym.Wrapper.__init__(self, env)
        if not isinstance(world_model, WorldModel):
            raise ConfigError(
                f"world_model={world_model!r} is not a WorldModel; it needs a `name` attribute and a "
                "batched `predict(queries) -> list[Prediction]`"
            )
        if mode not in ("simulate", "score"):
            raise ConfigError(f"mode={mode!r} is not a mode; pass 'simulate' or 'score'")
        if scoring not in ("step", "episode"):
            raise ConfigError(f"scoring={scoring!r} is not a scoring; pass 'step' or 'episode'")
        if mode == "simulate" and scoring == "episode":
            raise ConfigError(
                "scoring='episode' with mode='simulate': a simulated episode needs a prediction at every "
                "step to produce observations; pass scoring='step', or mode='score' to run the real "
                "dynamics and score whole trajectories"
            )
        if scheduler is not None and not callable(getattr(scheduler, "select", None)):
            raise ConfigError(f"scheduler={scheduler!r} has no select(n_groups); pass an AnchorScheduler")
        if isinstance(anchor_fraction, bool) or not (
            isinstance(anchor_fraction, (int, float)) and 0.0 <= anchor_fraction <= 1.0
        ):
            raise ConfigError(
                f"anchor_fraction={anchor_fraction!r} is not a probability; pass a share in [0, 1] "
                "(0.1 anchors one episode in ten, 0.0 never anchors)"
            )
        if on_unknown not in ("real_step", "raise", "nan"):
            raise ConfigError(
                f"on_unknown={on_unknown!r} is not a policy; pass 'real_step' (take the real step's reward), "
                "'raise', or 'nan' (only for a caller that reads info itself)"
            )
        if not isinstance(info_key, str) or not info_key:
            raise ConfigError(f"info_key={info_key!r} must be a non-empty string, e.g. 'wmrl'")
        if max_episode_steps is None and env.spec is not None:
            max_episode_steps = env.spec.max_episode_steps
        if max_episode_steps is not None and not (_is_int(max_episode_steps) and max_episode_steps >= 1):
            raise ConfigError(f"max_episode_steps={max_episode_steps!r} must be a positive int or None")
        self._world_model = world_model
        self._mode: Mode = mode
        self._scoring: Scoring = scoring
        self._scheduler = scheduler
        self._anchor_fraction = float(anchor_fraction)
        self._anchor_rng = _episode_anchor_generator(0)
        self._scheduled_episode = False
        self._info_key = info_key
        self._tolerate_errors = bool(tolerate_errors)
        self._on_unknown: OnUnknown = on_unknown
        self._max_episode_steps = max_episode_steps
        self._check_actions = bool(check_actions)
        self._info_timings = bool(info_timings)
        self._ledger = ledger if ledger is not None else CostLedger()
        unwrapped = env.unwrapped
        self._context_hook = getattr(unwrapped, "world_model_context", None)
        self._apply_hook = getattr(unwrapped, "apply_prediction", None)
        self._group_plan: dict[int, bool] = {}
        self._needs_reset = True
        self._anchor = False
        self._group_id: int | None = None
        self._episode = -1
        self._elapsed_steps = 0
        self._last_obs: Any = None
        self._observations: list[Any] = []
        self._actions: list[Any] = []
        self._real_return = 0.0

    @property
    def world_model(self) -> WorldModel:
        """The world model this wrapper asks."""
        return self._world_model

    @property
    def mode(self) -> Mode:
        """``"simulate"`` or ``"score"``."""
        return self._mode

    @property
    def scoring(self) -> Scoring:
        """``"step"`` or ``"episode"``."""
        return self._scoring

    @property
    def info_key(self) -> str:
        """The info key the wrapper writes."""
        return self._info_key

    @property
    def ledger(self) -> CostLedger:
        """The cost ledger this wrapper records into."""
        return self._ledger

    @property
    def is_anchor(self) -> bool:
        """Whether the current episode is an anchor episode."""
        return self._anchor

    @property
    def group_id(self) -> int | None:
        """The group of the current episode, if one was given at reset."""
        return self._group_id

    @property
    def tolerate_errors(self) -> bool:
        """Whether world-model failures become ``None`` rewards instead of errors."""
        return self._tolerate_errors

    @property
    def on_unknown(self) -> OnUnknown:
        """What a step returns when the world model cannot say (:data:`OnUnknown`)."""
        return self._on_unknown

    def plan_groups(self, n_groups: int) -> np.ndarray:
        """Ask the scheduler which of the next ``n_groups`` groups are anchors, and remember it.

        Call once per training step, before resetting the step's episodes with
        ``options={"group_id": g}``. Releasing finished anchor groups (``scheduler.release``) is the
        caller's job: the wrapper cannot know when a group's last episode has ended.

        Returns:
            The boolean anchor mask, one entry per group.

        Raises:
            ConfigError: no scheduler is attached, or the scheduler returned a mask of another length.
        """
        if self._scheduler is None:
            raise ConfigError(
                "plan_groups() needs a scheduler; pass WorldModelWrapper(..., scheduler=AnchorScheduler())"
                " or decide anchors yourself with reset(options={'anchor': True})"
            )
        mask = np.asarray(self._scheduler.select(n_groups), dtype=bool)
        if mask.shape != (n_groups,):
            raise ConfigError(
                f"the scheduler returned a mask of shape {mask.shape} for {n_groups} groups; "
                "select(n) must return one bool per group"
            )
        self._group_plan = {g: bool(anchor) for g, anchor in enumerate(mask)}
        return mask

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsType, dict[str, Any]]:
        """Reset the real env and decide whether the new episode is an anchor.

        The wrapper reads and removes two options before passing the rest to the env: ``"anchor"``
        (a bool) and ``"group_id"`` (an int; with a scheduler, the anchor decision of that group from
        :meth:`plan_groups`; without one, only a label). When neither decides, the attached scheduler
        decides this one episode, or without a scheduler a seeded draw with probability
        ``anchor_fraction`` does (``seed`` re-seeds that draw, as it re-seeds the env).

        Raises:
            ConfigError: ``options["anchor"]`` is not a bool, ``options["group_id"]`` is not an int or
                has no planned decision, or the env's info already has ``info_key``.
        """
        inner_options: dict[str, Any] | None = None
        anchor_option: Any = _MISSING
        group_id: Any = None
        if options is not None:
            inner_options = dict(options)
            anchor_option = inner_options.pop("anchor", _MISSING)
            group_id = inner_options.pop("group_id", None)
        if group_id is not None and not _is_int(group_id):
            raise ConfigError(f"options['group_id']={group_id!r} is not an int; pass the group's index")
        group_id = None if group_id is None else int(group_id)
        if seed is not None:
            self._anchor_rng = _episode_anchor_generator(seed)
        anchor = self._decide_anchor(anchor_option, group_id)
        obs, inner_info = self.env.reset(seed=seed, options=inner_options)
        info = self._own_info(inner_info)
        self._anchor, self._group_id = anchor, group_id
        self._episode += 1
        self._elapsed_steps = 0
        self._last_obs = obs
        self._observations = [obs] if self._scoring == "episode" else []
        self._actions = []
        self._real_return = 0.0
        self._needs_reset = False
        self._ledger.record_episode(anchor)
        info[self._info_key] = self._step_info(
            "real" if anchor else "world_model", None, None, 0.0, 0.0, None
        )
        return obs, info

    def step(self, action: ActType) -> tuple[ObsType, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the episode: real env, world model, or both (anchor), depending on mode and episode.

        Returns:
            The usual step tuple. The reward is the real one on anchor episodes, the world model's
            otherwise; where the world model cannot say (``info[info_key]["predicted"] is None``), what
            ``on_unknown`` gives: the real reward by default.

        Raises:
            gymnasium.error.ResetNeeded: stepping before :meth:`reset` or after the episode ended.
            gymnasium.error.InvalidAction: the action is outside the action space.
            WorldModelError: the world model failed and ``tolerate_errors`` is False; (simulate mode, no
                ``apply_prediction`` hook) it returned no observation, or no reward under
                ``on_unknown="real_step"``; or it returned no reward under ``on_unknown="raise"``. The
                episode cannot continue after any error raised here: the next call must be :meth:`reset`.
        """
        pending = self.prepare_step(action)
        try:
            self.execute(pending)
            if pending.query is None:
                return self.finish_step(pending, None)
            batch = predict_batch(
                self._world_model, [pending.query], tolerate_errors=self._tolerate_errors, ledger=self._ledger
            )
            prediction, error, seconds = batch.predictions[0], batch.errors[0], batch.seconds_per_query
            return self.finish_step(pending, prediction, world_model_seconds=seconds, error=error)
        except BaseException:
            self._needs_reset = True
            raise

    def prepare_step(self, action: ActType) -> PendingStep:
        """Phase 1 of a step: check the action and build the step's world-model query (if known yet).

        Raises:
            gymnasium.error.ResetNeeded: the episode has not started or has ended.
            gymnasium.error.InvalidAction: the action is outside the action space.
        """
        if self._needs_reset:
            raise ResetNeeded(
                "cannot call WorldModelWrapper.step() before reset() or after the episode terminated or "
                "truncated; call env.reset() first"
            )
        if self._check_actions and not self._in_action_space(action):
            raise InvalidAction(f"action {action!r} is outside the action space {self.action_space}")
        query = None
        if self._scoring == "step":
            context = self._context_hook() if self._context_hook is not None else self._last_obs
            query = WorldModelQuery(context, action, key=self._query_key())
        return PendingStep(action, query, runs_real=self._anchor or self._mode == "score")

    def execute(self, pending: PendingStep) -> None:
        """Phase 2 of a step: run the real env if this step needs it (safe to run in a worker thread).

        With ``scoring="episode"`` this also builds the trajectory query when the episode ends, unless
        a real reward of the episode was not finite: the env could not say what happened (a simulator
        instability, a lost worker), so the trajectory is unknown to the world model too: not scored,
        its last step's prediction ``None`` (handled by ``on_unknown``), never a score for dynamics
        that broke.
        """
        if not pending.runs_real:
            return
        start = time.perf_counter()
        obs, reward, terminated, truncated, info = self.env.step(pending.action)
        pending.real_seconds = time.perf_counter() - start
        self._ledger.record_real(pending.real_seconds)
        truncated = bool(truncated) or self._at_step_limit()
        pending.real_result = (obs, reward, bool(terminated), truncated, info)
        if self._scoring == "episode":
            self._observations.append(obs)
            self._actions.append(pending.action)
            if (terminated or truncated) and not math.isfinite(self._real_return + float(reward)):
                pending.unscored = (
                    "not scored: the env returned a non-finite reward in this episode (an unknown outcome)"
                )
            elif terminated or truncated:
                pending.query = WorldModelQuery(
                    list(self._observations), list(self._actions), key=self._query_key()
                )

    def finish_step(
        self,
        pending: PendingStep,
        prediction: Prediction | None,
        *,
        world_model_seconds: float = 0.0,
        error: str | None = None,
    ) -> tuple[ObsType, SupportsFloat, bool, bool, dict[str, Any]]:
        """Phase 3 of a step: combine the real result and the prediction into the step tuple.

        Args:
            pending: the step from :meth:`prepare_step` (and :meth:`execute`).
            prediction: the world model's answer to ``pending.query`` (``None`` if it had none, or if
                a tolerated error lost it).
            world_model_seconds: this step's share of the batched ``predict`` call.
            error: why the prediction was lost, if it was.

        Raises:
            WorldModelError: simulate mode without ``apply_prediction``, and the prediction carries no
                observation or (``on_unknown="real_step"``) no reward; or no reward under
                ``on_unknown="raise"``.
        """
        predicted = prediction.reward if prediction is not None else None
        error = error if pending.unscored is None else pending.unscored
        real: float | None = None
        source: RewardSource = "real" if self._anchor else "world_model"
        if pending.runs_real:
            if pending.real_result is None:
                raise ConfigError("finish_step() before execute(): call execute(pending) first")
            obs, real_reward, terminated, truncated, inner_info = pending.real_result
            real_value = float(real_reward)
            self._real_return += real_value
            if self._anchor:
                real = real_value if math.isfinite(real_value) else None
                reward: float = real_value
            elif self._scoring == "episode" and pending.query is None and pending.unscored is None:
                reward = 0.0
            elif predicted is not None:
                reward = predicted
            elif self._unknown_is_nan(pending, error):
                reward = math.nan
            else:
                # The real step has run: its reward (for a whole trajectory, the real return; the
                # earlier steps returned 0.0) stands in for the unknown one.
                reward = self._real_return if self._scoring == "episode" else real_value
                real, source = (reward if math.isfinite(reward) else None), "real"
        elif predicted is None and not self._unknown_is_nan(pending, error):
            obs, reward, terminated, truncated, inner_info = self._real_step_for_unknown(pending, error)
            real, source = reward, "real"
        else:
            obs, reward, terminated, truncated, inner_info = self._simulate(pending.action, prediction, error)
            if math.isnan(reward) and self._on_unknown != "nan":
                raise WorldModelError(
                    f"{type(self.env.unwrapped).__name__}.apply_prediction returned no reward for a "
                    f"prediction of reward {predicted!r} (query {pending.query and pending.query.key!r}); "
                    "the hook must return the prediction's reward"
                )
            predicted = None if math.isnan(reward) else reward
            truncated = truncated or self._at_step_limit()
        info = self._own_info(inner_info)
        self._ledger.record_reward(source)
        info[self._info_key] = self._step_info(
            source, predicted, real, pending.real_seconds, world_model_seconds, error
        )
        self._elapsed_steps += 1
        self._last_obs = obs
        if terminated or truncated:
            self._needs_reset = True
        return obs, reward, bool(terminated), bool(truncated), info

    def _unknown_is_nan(self, pending: PendingStep, error: str | None) -> bool:
        """Apply ``on_unknown`` to an unknown prediction: True for ``"nan"``, False for ``"real_step"``.

        Raises:
            WorldModelError: ``on_unknown="raise"``.
        """
        if self._on_unknown == "raise":
            why = f" ({error})" if error is not None else ""
            raise WorldModelError(
                f"world model {self._world_model.name!r} could not predict the reward of query "
                f"{pending.query and pending.query.key!r}{why} and on_unknown='raise'; pass "
                "on_unknown='real_step' to take the real step's reward instead"
            )
        return self._on_unknown == "nan"

    def _real_step_for_unknown(
        self, pending: PendingStep, error: str | None
    ) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Simulate mode, unknown prediction, ``on_unknown="real_step"``: step the real env instead."""
        if self._apply_hook is None:
            why = f" ({error})" if error is not None else ""
            raise WorldModelError(
                f"world model {self._world_model.name!r} could not predict the reward of query "
                f"{pending.query and pending.query.key!r}{why}, and on_unknown='real_step' cannot step "
                f"{type(self.env.unwrapped).__name__} instead: it has no apply_prediction hook, so the real "
                "env is not at the simulated state. Implement the hook, use mode='score', or pass "
                "on_unknown='raise'"
            )
        start = time.perf_counter()
        obs, reward, terminated, truncated, info = self.env.step(pending.action)
        pending.real_seconds = time.perf_counter() - start
        self._ledger.record_real(pending.real_seconds)
        return obs, float(reward), bool(terminated), bool(truncated) or self._at_step_limit(), info

    def _simulate(
        self, action: Any, prediction: Prediction | None, error: str | None
    ) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if self._apply_hook is not None:
            stand_in = prediction if prediction is not None else Prediction(None, info={"error": error})
            obs, reward, terminated, truncated, info = self._apply_hook(action, stand_in)
            value = math.nan if reward is None else float(reward)
            return obs, value, bool(terminated), bool(truncated), info
        if prediction is None:
            return _copied(self._last_obs), math.nan, False, True, {}
        if prediction.observation is None:
            raise WorldModelError(
                f"world model {self._world_model.name!r} returned no observation in simulate mode, and "
                f"{type(self.env.unwrapped).__name__} has no apply_prediction hook to advance without one; "
                "return Prediction(observation=...), implement the hook, or use mode='score'"
            )
        reward = math.nan if prediction.reward is None else prediction.reward
        return prediction.observation, reward, bool(prediction.terminated), False, {}

    def _in_action_space(self, action: Any) -> bool:
        space = self.action_space
        if type(space) is gym.spaces.Box and type(action) is np.ndarray:
            # Box.contains for an array, without its generic wrappers (this runs on every step). Like
            # Gymnasium, a value of another precision is judged after casting it to the space's dtype
            # (a float64 policy output for a float32 Box is fine); a cast that changes kind is not.
            if not np.can_cast(action.dtype, space.dtype, casting="same_kind"):
                return False
            value = action.astype(space.dtype, copy=False)
            return bool(
                value.shape == space.shape and (value >= space.low).all() and (value <= space.high).all()
            )
        return space.contains(action)

    def _decide_anchor(self, anchor_option: Any, group_id: int | None) -> bool:
        if anchor_option is not _MISSING:
            if not isinstance(anchor_option, (bool, np.bool_)):
                raise ConfigError(
                    f"options['anchor']={anchor_option!r} is not a bool; pass True to execute this episode "
                    "for real as well as predict it, or False"
                )
            return bool(anchor_option)
        if group_id is not None and self._scheduler is not None:
            if group_id not in self._group_plan:
                raise ConfigError(
                    f"options['group_id']={group_id} has no anchor decision (planned groups: "
                    f"{len(self._group_plan)}); call plan_groups(n_groups) at the start of the step"
                )
            return self._group_plan[group_id]
        if self._scheduler is None:
            return bool(self._anchor_rng.random() < self._anchor_fraction)
        self._release_scheduled_episode()
        anchor = bool(np.asarray(self._scheduler.select(1), dtype=bool)[0])
        self._scheduled_episode = anchor
        return anchor

    def _release_scheduled_episode(self) -> None:
        """Free the scheduler slot of the last one-episode anchor (it has ended, or is abandoned)."""
        release = getattr(self._scheduler, "release", None)
        if self._scheduled_episode and callable(release):
            release(1)
        self._scheduled_episode = False

    def close(self) -> None:
        """Release a one-episode anchor still held from the scheduler, then close the env."""
        self._release_scheduled_episode()
        super().close()

    def _own_info(self, inner_info: dict[str, Any]) -> dict[str, Any]:
        if self._info_key in inner_info:
            raise ConfigError(
                f"{type(self.env.unwrapped).__name__} already writes info[{self._info_key!r}]; "
                "WorldModelWrapper would overwrite it. Pass WorldModelWrapper(..., info_key=...) with a key "
                "the environment does not use"
            )
        return dict(inner_info)

    def _step_info(
        self,
        source: RewardSource,
        predicted: float | None,
        real: float | None,
        real_seconds: float,
        world_model_seconds: float,
        error: str | None,
    ) -> StepInfo:
        return StepInfo(
            source=source,
            anchor=self._anchor,
            group_id=self._group_id,
            predicted=predicted,
            real=real,
            real_seconds=real_seconds if self._info_timings else 0.0,
            world_model_seconds=world_model_seconds if self._info_timings else 0.0,
            world_model_error=error,
        )

    def _query_key(self) -> str:
        group = "-" if self._group_id is None else str(self._group_id)
        return f"group{group}/episode{self._episode}/step{self._elapsed_steps}"

    def _at_step_limit(self) -> bool:
        return self._max_episode_steps is not None and self._elapsed_steps + 1 >= self._max_episode_steps


def _episode_anchor_generator(seed: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), _EPISODE_ANCHOR_STREAM])


def _copied(obs: Any) -> Any:
    return obs.copy() if isinstance(obs, np.ndarray) else obs


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)
