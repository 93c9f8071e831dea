"""Grouped rollouts: one GRPO training step's groups, world-model calls batched across all of them.

Why not a loop over ``env.step``: a world model is cheap only in batches (an LLM predicting 64
outcomes at once costs little more than predicting one), and real executions are slow but
independent. So :class:`GroupedRollout` advances every trajectory of the step in lock-step, turn by
turn, and per turn makes exactly ONE ``predict`` call for the whole step (non-anchor predictions and
the anchor trajectories' predictions needed for the (predicted, real) pairs alike), while the anchor
executions (all real steps in score mode) run concurrently on a pluggable
:class:`concurrent.futures.Executor` (a thread pool by default; a Ray-backed executor fits the same
slot). With ``scoring="step"`` the prediction call overlaps the real executions.

Heavy environments: a real env object can be expensive to hold even when it is never stepped (a
MuJoCo or LIBERO simulator; simulate mode still keeps one per trajectory for its bookkeeping). By
default every trajectory of the step is live at once (``groups * group_size`` envs), which gives the
largest world-model batches. :attr:`RolloutConfig.max_envs` bounds that: at most that many
trajectories run at once, each on an env from a pool of that size, and a finished trajectory's env is
reset for the next waiting one. With seeded resets the results are the same as without the bound
(a policy whose action depends only on the trajectory sees the same observations); the world-model
batches are smaller (one call per turn of the live trajectories).

Anchoring is per group and decided before anything is scored: from an explicit mask (e.g.
``CorrectionLoop.plan(n_groups)``) or an attached :class:`~wmrl_algos.anchors.AnchorScheduler`, which
is seeded and checkpointable, so the anchor choice of a resumed run is the one it would have made.

The members of a group answer the same question: they share the task and the start state (every
member of group ``g`` resets with ``seed + g``, or with the group's own :attr:`RolloutTask.seed`: one
seed per group, as TRL's ``num_generations`` completions share a prompt); only the policy's sampling
makes them differ, so the group's mean is a baseline for each of them. A multi-turn policy (an LLM
agent building its chat) gets each trajectory's whole history as a :class:`TurnContext` when its
``act`` takes a ``contexts`` keyword; a policy that samples gets from it the trajectory's ids, to seed
its own noise per trajectory.

The result is ``list[ScoredGroup]``, ready for :meth:`wmrl_algos.loop.CorrectionLoop.correct`; the
trajectory score is the episode return by default, or the best step score with :func:`best_return`
(the Kaggle objective: a submission is judged by its best entry), or any :data:`Reducer`; ``None``
when it cannot say: never 0. With :func:`best_return` the trajectory score is one of its step scores,
so anchor groups also hand the calibration every step's (predicted, real) pair
(:attr:`ScoredGroup.pairs`): a multi-turn trajectory contributes one pair per execution.

Gymnasium vector envs: a vector env steps its sub-envs one ``step`` call each, so a world model under
it would be called once per sub-env; :class:`GroupedRollout` is the batched equivalent and takes the
same kind of batched policy (a list of observations and a list of per-trajectory info dicts in, a list
of actions out). Where :class:`~wmrl_envs.wrapper.WorldModelWrapper` does run under a vector env, read
its info with :func:`~wmrl_envs.wrapper.read_vector_info`: an entry masked out by ``info["_key"]`` is
missing, not 0.
"""

from __future__ import annotations

import concurrent.futures
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import gymnasium as gym
import numpy as np
from tqdm import tqdm

from wmrl_algos.errors import ConfigError
from wmrl_algos.types import Score, ScoredGroup
from wmrl_envs.ledger import CostLedger
from wmrl_envs.world_model import WorldModel
from wmrl_envs.wrapper import (
    AnchorSelector,
    Mode,
    PendingStep,
    Scoring,
    WorldModelWrapper,
    predict_batch,
)

__all__ = [
    "GroupedRollout",
    "Policy",
    "Reducer",
    "RolloutConfig",
    "RolloutTask",
    "Trajectory",
    "TurnContext",
    "best_return",
    "episode_return",
]

ObsT_contra = TypeVar("ObsT_contra", contravariant=True)
ActT_co = TypeVar("ActT_co", covariant=True)

Reducer = Callable[[Sequence[Score]], Score]
"""Turns a trajectory's per-step scores into its score; must return ``None`` if it cannot say."""


@dataclass(frozen=True)
class TurnContext:
    """Everything one live trajectory has seen so far, for a policy that keeps a history.

    A multi-turn agent needs more than the latest observation (after the first turn of the Kaggle env,
    that is an execution log without the task): it needs the whole exchange and a stable id to key its
    own state by. :class:`GroupedRollout` passes one per live trajectory when the policy's ``act``
    accepts a ``contexts`` keyword.

    Attributes:
        trajectory_id: unique within the step: ``group_id * group_size + index``.
        task_id: the task of its group.
        group_id: its group's index in the step.
        index: its index within the group.
        observations: the reset observation first, the latest last (the one being acted on).
        actions: the actions taken so far (one fewer than ``observations``).
        infos: the infos so far, the reset info first.

    Example:
        >>> context = TurnContext(5, "titanic", 1, 1, ("task", "log 1"), ("code 1",), ({}, {}))
        >>> context.observations[-1], len(context.actions)
        ('log 1', 1)
    """

    trajectory_id: int
    task_id: str
    group_id: int
    index: int
    observations: tuple[Any, ...]
    actions: tuple[Any, ...]
    infos: tuple[Mapping[str, Any], ...]


class Policy(Protocol[ObsT_contra, ActT_co]):
    """A batched policy: one action per observation, for all live trajectories of a step at once.

    ``act(observations, infos)`` is the whole contract. A policy whose ``act`` also accepts a
    ``contexts`` keyword is called as ``act(observations, infos, contexts=contexts)``, with one
    :class:`TurnContext` per observation (the trajectory's id and full history).
    """

    def act(
        self, observations: Sequence[ObsT_contra], infos: Sequence[Mapping[str, Any]]
    ) -> Sequence[ActT_co]:
        """Return one action per observation, in order (``infos[i]`` is trajectory i's last info)."""
        ...


class _Releasable(Protocol):
    def release(self, n: int = 1) -> None: ...


def _accepts_contexts(policy: Any) -> bool:
    try:
        parameters = inspect.signature(policy.act).parameters
    except (TypeError, ValueError):  # a builtin or C-implemented act: call it the plain way
        return False
    return "contexts" in parameters or any(
        parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values()
    )


def episode_return(scores: Sequence[Score]) -> Score:
    """The sum of the per-step scores, or ``None`` if any of them is unknown (or there are none).

    Example:
        >>> episode_return([0.25, 0.5]), episode_return([0.25, None])
        (0.75, None)
    """
    if not scores or any(score is None for score in scores):
        return None
    return float(sum(score for score in scores if score is not None))


def best_return(scores: Sequence[Score]) -> Score:
    """The best known per-step score, or ``None`` if none is known (or there are none).

    The multi-turn objective of the Kaggle env: a trajectory is judged by its best execution, as a
    Kaggle entry is by its best submission. An unknown execution (a lost sandbox) is left out rather
    than counted as a failure; only when nothing is known is the trajectory unknown.

    Example:
        >>> best_return([0.1, None, 0.75, 0.5]), best_return([None, None]), best_return([])
        (0.75, None, None)
    """
    known = [float(score) for score in scores if score is not None and math.isfinite(score)]
    return max(known) if known else None


@dataclass(frozen=True)
class RolloutTask:
    """One task of a step: each becomes a group of ``group_size`` trajectories.

    Attributes:
        task_id: identifier carried into :attr:`ScoredGroup.task_id`.
        options: reset options that select the task in the env (e.g. ``{"task_id": 3}`` for
            :class:`~wmrl_envs.toy.CostlyToyEnv`); must not use the wrapper's ``anchor``/``group_id``.
        seed: the reset seed of every member of this group, for a caller that draws its groups' start
            states itself (e.g. a robot placement per group); ``None``: the run's ``seed + group_id``.
    """

    task_id: str
    options: Mapping[str, Any] = field(default_factory=dict)
    seed: int | None = None

    def __post_init__(self) -> None:
        seed = self.seed
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise ConfigError(
                f"RolloutTask {self.task_id!r}: seed={seed!r} is not an int; pass the group's reset "
                "seed, or None for the run's seed + group_id"
            )


@dataclass(frozen=True)
class RolloutConfig:
    """How :class:`GroupedRollout` runs a step.

    Attributes:
        group_size: trajectories per task (GRPO's group; the paper uses 8). At least 2, or GRPO has no
            within-group baseline.
        mode: ``"simulate"`` (non-anchor trajectories never touch the real env) or ``"score"`` (all
            run for real, the world model replaces the reward); see
            :class:`~wmrl_envs.wrapper.WorldModelWrapper`.
        scoring: ``"step"`` (predict every step) or ``"episode"`` (score mode only: predict each
            finished trajectory once).
        max_turns: truncate every episode after this many steps; ``None`` uses the env's own limit
            (``spec.max_episode_steps`` or its truncation). Set it for envs that may never end.
        tolerate_errors: a failing world model scores the affected items ``None`` instead of raising.
        info_key: the wrappers' info key.
        max_workers: threads of the default executor (ignored when an executor is passed); ``None``
            uses one per trajectory, capped at 32.
        max_envs: at most this many environments (and trajectories running at once); a finished
            trajectory's env is reset for the next one. Set it for heavy envs (a simulator per
            trajectory is costly to hold); the price is smaller world-model batches. ``None``: one env
            per trajectory of the step, all live at once (the largest batches).
        check_actions: the wrappers refuse an action outside the action space
            (``gymnasium.error.InvalidAction``). Pass False for an env that takes any action and
            clips it itself, as a robot controller does: a Gaussian policy's samples leave the box.

    Raises:
        ConfigError: a value is out of range or the combination is invalid.

    Example:
        >>> RolloutConfig(group_size=4, mode="score", scoring="episode").group_size
        4
    """

    group_size: int = 8
    mode: Mode = "simulate"
    scoring: Scoring = "step"
    max_turns: int | None = None
    tolerate_errors: bool = False
    info_key: str = "wmrl"
    max_workers: int | None = None
    max_envs: int | None = None
    check_actions: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.group_size, bool) or not isinstance(self.group_size, int) or self.group_size < 2:
            raise ConfigError(
                f"group_size={self.group_size!r}; GRPO needs at least 2 trajectories per group for a "
                "baseline, pass e.g. 8"
            )
        if self.mode not in ("simulate", "score"):
            raise ConfigError(f"mode={self.mode!r} is not a mode; pass 'simulate' or 'score'")
        if self.scoring not in ("step", "episode"):
            raise ConfigError(f"scoring={self.scoring!r} is not a scoring; pass 'step' or 'episode'")
        if self.mode == "simulate" and self.scoring == "episode":
            raise ConfigError(
                "scoring='episode' needs mode='score' (a simulated episode needs a prediction every step); "
                "pass scoring='step' or mode='score'"
            )
        if self.max_turns is not None and (not isinstance(self.max_turns, int) or self.max_turns < 1):
            raise ConfigError(f"max_turns={self.max_turns!r} must be a positive int or None")
        for name in ("max_workers", "max_envs"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(
                    f"{name}={value!r} must be a positive int or None (None: one per trajectory of the step)"
                )


@dataclass(frozen=True)
class Trajectory:
    """One finished trajectory, as the policy saw it.

    Attributes:
        task_id: the task of its group.
        group_id: its group's index in the step.
        index: its index within the group.
        anchor: whether its group was executed for real.
        observations: the reset observation then one per step.
        actions: one per step.
        rewards: the step rewards the wrapper returned (real on anchors, predicted otherwise; NaN
            where unknown).
        predicted: the world model's per-step rewards (``scoring="episode"``: ``None`` except the last,
            which is the whole trajectory's score).
        real: the real per-step rewards (anchors only, else all ``None``).
        terminated: whether the episode terminated (rather than being truncated).
        infos: the infos, the reset info first, then one per step (how the episode ended is in the
            last one: e.g. a simulator's ``success`` or error).
    """

    task_id: str
    group_id: int
    index: int
    anchor: bool
    observations: tuple[Any, ...]
    actions: tuple[Any, ...]
    rewards: tuple[float, ...]
    predicted: tuple[Score, ...]
    real: tuple[Score, ...]
    terminated: bool
    infos: tuple[Mapping[str, Any], ...] = ()


@dataclass
class _Running:
    observations: list[Any]
    infos: list[Mapping[str, Any]]
    actions: list[Any] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    predicted: list[Score] = field(default_factory=list)
    real: list[Score] = field(default_factory=list)
    terminated: bool = False
    done: bool = False


class GroupedRollout:
    """Runs one training step's groups in lock-step, one batched world-model call per turn.

    Wrapped environments are created on first use (``len(tasks) * group_size`` of them, or at most
    :attr:`RolloutConfig.max_envs`, reset from one trajectory to the next) and reused across steps; they
    all record into one :class:`~wmrl_envs.ledger.CostLedger`. Their wrappers use
    ``on_unknown="nan"``: an unknown prediction becomes a ``None`` score here, never a real step outside
    the group's anchor decision.

    Args:
        env_fn: makes one real environment (or a registered Gymnasium id, e.g.
            ``"wmrl/CostlyToy-v0"``, made with ``gymnasium.make``).
        world_model: the batched predictor shared by every trajectory.
        config: group size, mode, scoring and limits.
        executor: runs the real executions; a thread pool (owned and shut down by :meth:`close`) if
            ``None``. Any :class:`concurrent.futures.Executor` fits (e.g. one backed by Ray).
        reducer: per-step scores to trajectory score; :func:`episode_return` by default,
            :func:`best_return` for a multi-turn task judged by its best attempt. Not used for the
            predicted score under ``scoring="episode"``, which is the world model's own.
        step_pairs: give the calibration one (predicted, real) pair per anchor STEP where both are
            known (:attr:`ScoredGroup.pairs`) instead of one per trajectory. Right only when the
            trajectory score is on the scale of a step score, as with :func:`best_return`; a summed
            return is not, so ``None`` (the default) means "when the reducer is :func:`best_return`".
            Needs ``scoring="step"``.
        ledger: the cost ledger to record into; a new one if ``None``.

    Raises:
        ConfigError: ``world_model`` is not a world model, or ``step_pairs=True`` with
            ``scoring="episode"`` (there is one prediction per trajectory, no step pairs).

    Example:
        >>> from wmrl_envs.toy import CostlyToyEnv, ToyWorldModel
        >>> class Zeros:
        ...     def act(self, observations, infos):
        ...         return [np.zeros(2) for _ in observations]
        >>> tasks = [RolloutTask(f"task{k}", {"task_id": k}) for k in range(3)]
        >>> with GroupedRollout(CostlyToyEnv, ToyWorldModel(), RolloutConfig(group_size=2)) as rollout:
        ...     groups = rollout.run(tasks, Zeros(), anchors=[True, False, False])
        >>> [g.anchor for g in groups], groups[0].real is not None, groups[1].real
        ([True, False, False], True, None)
    """

    def __init__(
        self,
        env_fn: Callable[[], gym.Env[Any, Any]] | str,
        world_model: WorldModel,
        config: RolloutConfig | None = None,
        *,
        executor: concurrent.futures.Executor | None = None,
        reducer: Reducer = episode_return,
        step_pairs: bool | None = None,
        ledger: CostLedger | None = None,
    ) -> None:
        if not isinstance(world_model, WorldModel):
            raise ConfigError(
                f"world_model={world_model!r} is not a WorldModel; it needs a `name` and a batched "
                "`predict(queries)`"
            )
        if isinstance(env_fn, str):
            env_id = env_fn
            self._env_fn: Callable[[], gym.Env[Any, Any]] = lambda: gym.make(env_id)
        else:
            self._env_fn = env_fn
        self.world_model = world_model
        self.config = config if config is not None else RolloutConfig()
        if step_pairs and self.config.scoring == "episode":
            raise ConfigError(
                "step_pairs=True with scoring='episode': the world model predicts whole trajectories, so "
                "there are no per-step pairs; pass scoring='step' or leave step_pairs unset"
            )
        self.reducer = reducer
        self.step_pairs = (
            reducer is best_return if step_pairs is None else bool(step_pairs)
        ) and self.config.scoring == "step"
        self.ledger = ledger if ledger is not None else CostLedger()
        self._executor = executor
        self._owns_executor = executor is None
        self._envs: list[WorldModelWrapper[Any, Any]] = []

    @property
    def envs(self) -> tuple[WorldModelWrapper[Any, Any], ...]:
        """The wrapped environments created so far (without ``max_envs``: trajectory ``i`` on ``envs[i]``)."""
        return tuple(self._envs)

    def run(
        self,
        tasks: Sequence[RolloutTask],
        policy: Policy[Any, Any],
        *,
        anchors: Sequence[bool] | np.ndarray | None = None,
        scheduler: AnchorSelector | None = None,
        seed: int | None = None,
        progress: bool = False,
    ) -> list[ScoredGroup]:
        """Run one step: ``group_size`` trajectories per task, to the end of every episode.

        Args:
            tasks: one group per task, in order (group ``g`` is ``tasks[g]``).
            policy: the batched policy (given :class:`TurnContext` histories if its ``act`` takes
                ``contexts``).
            anchors: which groups are anchors (e.g. ``CorrectionLoop.plan(len(tasks))``).
            scheduler: decides the anchors instead (``select(len(tasks))``); its in-flight anchor
                groups are released when their executions have finished. Give at most one of
                ``anchors`` and ``scheduler``; with neither, no group is an anchor.
            seed: every member of group ``g`` resets with ``seed + g`` (or with its task's own
                :attr:`RolloutTask.seed`), so a group shares its start state (``None``: unseeded resets,
                and then an env with random initial states gives the members different ones).
            progress: show a progress bar of finished episodes.

        Returns:
            One :class:`ScoredGroup` per task, in order, with :class:`Trajectory` payloads.

        Raises:
            ConfigError: bad anchors, tasks or policy output.
            WorldModelError: the world model failed and ``tolerate_errors`` is False.
        """
        if not tasks:
            raise ConfigError("tasks is empty; pass at least one RolloutTask")
        mask = self._anchor_mask(len(tasks), anchors, scheduler)
        try:
            return self._run(tasks, policy, mask, seed, progress)
        finally:
            if scheduler is not None and hasattr(scheduler, "release") and mask.any():
                releasable: _Releasable = scheduler  # type: ignore[assignment]
                releasable.release(int(mask.sum()))

    def close(self) -> None:
        """Close the environments and shut down the executor if this object created it.

        Executions still queued are cancelled, not run: a close after Ctrl-C/SIGTERM must not wait for
        the rest of an interrupted step's real executions (the running ones are awaited).
        """
        if self._owns_executor and self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
        for env in self._envs:
            env.close()
        self._envs.clear()

    def __enter__(self) -> GroupedRollout:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _anchor_mask(
        self, n_groups: int, anchors: Sequence[bool] | np.ndarray | None, scheduler: AnchorSelector | None
    ) -> np.ndarray:
        if anchors is not None and scheduler is not None:
            raise ConfigError(
                "pass anchors= or scheduler=, not both: the anchor decision must have one source"
            )
        if scheduler is not None:
            anchors = scheduler.select(n_groups)
        if anchors is None:
            return np.zeros(n_groups, dtype=bool)
        values = list(anchors)
        if len(values) != n_groups or not all(isinstance(a, (bool, np.bool_)) for a in values):
            raise ConfigError(
                f"anchors={anchors!r} must be {n_groups} bools, one per task (e.g. CorrectionLoop.plan(n))"
            )
        return np.asarray(values, dtype=bool)

    def _ensure_envs(self, n: int) -> list[WorldModelWrapper[Any, Any]]:
        config = self.config
        while len(self._envs) < n:
            self._envs.append(
                WorldModelWrapper(
                    self._env_fn(),
                    self.world_model,
                    mode=config.mode,
                    scoring=config.scoring,
                    info_key=config.info_key,
                    tolerate_errors=config.tolerate_errors,
                    on_unknown="nan",
                    max_episode_steps=config.max_turns,
                    check_actions=config.check_actions,
                    ledger=self.ledger,
                )
            )
        return self._envs[:n]

    def _executor_for(self, n: int) -> concurrent.futures.Executor:
        if self._executor is None:
            workers = self.config.max_workers or min(32, max(1, n))
            self._executor = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="wmrl-real")
        return self._executor

    def _run(
        self,
        tasks: Sequence[RolloutTask],
        policy: Policy[Any, Any],
        mask: np.ndarray,
        seed: int | None,
        progress: bool,
    ) -> list[ScoredGroup]:
        size = self.config.group_size
        n = len(tasks) * size
        for task in tasks:
            clash = {"anchor", "group_id"} & set(task.options)
            if clash:
                raise ConfigError(
                    f"task {task.task_id!r} sets reset options {sorted(clash)}, which the rollout decides; "
                    "remove them (anchors come from anchors= or scheduler=)"
                )
        free = self._ensure_envs(min(n, self.config.max_envs or n))
        running: dict[int, _Running] = {}
        assigned: dict[int, WorldModelWrapper[Any, Any]] = {}
        next_trajectory = 0
        with_contexts = _accepts_contexts(policy)
        with tqdm(total=n, desc="rollout episodes", disable=not progress, leave=False) as bar:
            while True:
                while free and next_trajectory < n:
                    trajectory, env = next_trajectory, free.pop(0)
                    next_trajectory += 1
                    group_id = trajectory // size
                    task = tasks[group_id]
                    options = {**task.options, "anchor": bool(mask[group_id]), "group_id": group_id}
                    reset_seed = task.seed
                    if reset_seed is None and seed is not None:
                        reset_seed = seed + group_id
                    obs, info = env.reset(seed=reset_seed, options=options)
                    running[trajectory] = _Running(observations=[obs], infos=[info])
                    assigned[trajectory] = env
                live = sorted(assigned)
                if not live:
                    break
                self._turn(assigned, running, live, policy, tasks, with_contexts)
                finished = [i for i in live if running[i].done]
                free.extend(assigned.pop(i) for i in finished)
                bar.update(len(finished))
        return [
            self._group(g, task, bool(mask[g]), [running[i] for i in range(g * size, (g + 1) * size)])
            for g, task in enumerate(tasks)
        ]

    def _turn(
        self,
        envs: Mapping[int, WorldModelWrapper[Any, Any]],
        running: Mapping[int, _Running],
        live: Sequence[int],
        policy: Policy[Any, Any],
        tasks: Sequence[RolloutTask],
        with_contexts: bool,
    ) -> None:
        observations = [running[i].observations[-1] for i in live]
        infos = [running[i].infos[-1] for i in live]
        if with_contexts:
            contexts = [self._context(i, running[i], tasks) for i in live]
            actions = list(policy.act(observations, infos, contexts=contexts))  # type: ignore[call-arg]
        else:
            actions = list(policy.act(observations, infos))
        if len(actions) != len(live):
            raise ConfigError(
                f"policy returned {len(actions)} actions for {len(live)} observations; act() must return "
                "one action per observation"
            )
        pending = {i: envs[i].prepare_step(action) for i, action in zip(live, actions, strict=True)}
        executor = self._executor_for(len(live))
        futures = [executor.submit(envs[i].execute, p) for i, p in pending.items() if p.runs_real]
        predictions: dict[int, tuple[Any, float, str | None]] = {}
        try:
            if self.config.scoring == "step":
                predictions = self._predict(pending)
        finally:
            done, _ = concurrent.futures.wait(futures)
        for future in done:
            future.result()
        if self.config.scoring == "episode":
            predictions = self._predict(pending)
        key = self.config.info_key
        for i, step in pending.items():
            prediction, seconds, error = predictions.get(i, (None, 0.0, None))
            obs, reward, terminated, truncated, info = envs[i].finish_step(
                step, prediction, world_model_seconds=seconds, error=error
            )
            record = running[i]
            record.observations.append(obs)
            record.infos.append(info)
            record.actions.append(step.action)
            record.rewards.append(float(reward))
            record.predicted.append(info[key]["predicted"])
            record.real.append(info[key]["real"])
            record.terminated = bool(terminated)
            record.done = bool(terminated or truncated)

    def _context(self, trajectory_id: int, record: _Running, tasks: Sequence[RolloutTask]) -> TurnContext:
        group_id, index = divmod(trajectory_id, self.config.group_size)
        return TurnContext(
            trajectory_id=trajectory_id,
            task_id=tasks[group_id].task_id,
            group_id=group_id,
            index=index,
            observations=tuple(record.observations),
            actions=tuple(record.actions),
            infos=tuple(record.infos),
        )

    def _predict(self, pending: Mapping[int, PendingStep]) -> dict[int, tuple[Any, float, str | None]]:
        asked = [i for i, step in pending.items() if step.query is not None]
        batch = predict_batch(
            self.world_model,
            [pending[i].query for i in asked],  # type: ignore[misc]
            tolerate_errors=self.config.tolerate_errors,
            ledger=self.ledger,
        )
        return {
            i: (prediction, batch.seconds_per_query, error)
            for i, prediction, error in zip(asked, batch.predictions, batch.errors, strict=True)
        }

    def _group(
        self, group_id: int, task: RolloutTask, anchor: bool, records: Sequence[_Running]
    ) -> ScoredGroup:
        trajectories = tuple(
            Trajectory(
                task_id=task.task_id,
                group_id=group_id,
                index=index,
                anchor=bool(anchor),
                observations=tuple(record.observations),
                actions=tuple(record.actions),
                rewards=tuple(record.rewards),
                predicted=tuple(record.predicted),
                real=tuple(record.real),
                terminated=record.terminated,
                infos=tuple(record.infos),
            )
            for index, record in enumerate(records)
        )
        if self.config.scoring == "episode":
            predicted = tuple(t.predicted[-1] if t.predicted else None for t in trajectories)
        else:
            predicted = tuple(self.reducer(t.predicted) for t in trajectories)
        real = tuple(self.reducer(t.real) for t in trajectories) if anchor else None
        pairs = None
        if anchor and self.step_pairs:
            pairs = tuple(
                (float(p), float(r))
                for t in trajectories
                for p, r in zip(t.predicted, t.real, strict=True)
                if p is not None and r is not None and math.isfinite(p) and math.isfinite(r)
            )
        return ScoredGroup(
            group_id=group_id,
            anchor=bool(anchor),
            predicted=predicted,
            real=real,
            trajectories=trajectories,
            task_id=task.task_id,
            pairs=pairs,
        )
