"""The embodied trainer of ``wmrl train --env robosuite:TASK | libero:SUITE[/IDS]``: SFT, then GRPO / WMRL.

Why a second trainer on the same base: the Kaggle trainer's rollouts are code executions scored by a
sandbox; here they are simulator episodes of a Gaussian policy scored by the simulator's sparse success
(the real label) or by a progress scorer (the world model). What makes the comparison trustworthy is
shared through :class:`~wmrl_adapters.train.rundir.RunTrainer`: resolved config, metrics per step,
atomic checkpoints (policy, optimiser, :class:`~wmrl_algos.loop.CorrectionLoop` state, learned scorer,
CPU clocks, the start's evaluation, RNG states), ``--resume``, plots and summary. The correction (OD +
IVD) and the clipped GRPO loss are ``wmrl_algos``' own, configured by
:func:`~wmrl_adapters.train.settings.correction_config`.

A training step (:meth:`RunTrainer.train_step`; this trainer supplies its hooks):

1. draw ``groups`` initial states (seeded by ``(seed, step)``): every member of a group resets to the
   same state (:attr:`RolloutTask.seed`) and differs only by its action noise (its own sampling seed,
   :class:`RolloutPolicy`), so the group mean is a baseline;
2. plan the anchor groups (:meth:`CorrectionLoop.plan`); ``anchors`` rolls out only those;
3. run every episode in the simulator through :class:`~wmrl_envs.rollouts.GroupedRollout` with
   ``mode="score", scoring="episode"`` (``workers`` simulator envs, episodes in parallel), up to
   ``horizon`` steps or success; the progress world model scores each finished episode (``potential``
   collapse), as it would any user's env; the cost ledger, the ``info`` keys and unknown scores are
   the library's;
4. the trusted score of an anchor episode is its success (1/0); :meth:`CorrectionLoop.correct` forms
   one advantage per episode (``grpo``: every group anchored; ``wm``: none, progress only; ``wmrl``:
   progress calibrated by isotonic Online Debiasing, anchor groups weighted by IVD);
5. the clipped GRPO update on per-step log-probs, the episode's advantage broadcast over its steps.

Bad input (:class:`~wmrl_envs.embodied.outcomes.EpisodeOutcomes`): an action the env rejects (NaN or
infinite: ``InvalidAction``) ends the episode as a *real failure* (the policy caused it; counted in
``train/policy_errors``); a simulator worker that dies or a simulator error after a valid action
(actions are clipped to the controller's range) gives an *unknown* outcome, ``None``, neither labelled
nor scored, left out of every baseline and counted (``train/worker_crashes``, ``train/sim_errors``),
never 0.

Evaluation (:meth:`EmbodiedTrainer.evaluate_metrics`) is deterministic and paired: the policy's mean
action, from fixed initial states that every run and method shares (LIBERO: each task's fixed states),
success with its standard error and the number of episodes. A fresh run evaluates its initial policy
first (the ``step: 0`` line); the summary's ``held_out`` keeps the start and the end episode by
episode, so the change between them has a paired standard error
(:func:`~wmrl_adapters.train.run.rundir.paired_change`).

Compute (``compute/*``), all in CPU-seconds as on the Kaggle track: the simulator workers' own CPU for
every reset and step (:class:`SimulatorCpu`; demonstrations included), the progress scorer's
predictions and learning, the policy's sampling and update
(:class:`~wmrl_adapters.train.run.rundir.CpuClock`); ``compute/charged_total`` is their sum. Wall
seconds are kept apart (``time/*``): on a loaded machine they measure the load. Evaluations are counted
apart and never charged (``time/eval_*``).

The progress scorer is ``world_model`` (:func:`build_progress_scorer`): ``sim-state``, ``learned``,
``approach`` (hackable) or ``visual:PATH``, whose camera the env renders at the scorer's image size.

``algo="sft"`` is the first stage: scripted demonstrations with privileged state
(:mod:`wmrl_envs.embodied.demos`), behaviour cloning, an evaluation, ``policy.pt`` for ``--init``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from wmrl_adapters.train.embodied.config import EmbodiedConfig
from wmrl_adapters.train.embodied.policy import behaviour_cloning, build_embodied_policy
from wmrl_adapters.train.run.measure import CpuClock, CpuTimedPolicy, CpuTimedWorldModel, HeldOutScore
from wmrl_adapters.train.run.rundir import RunTrainer, mean_known
from wmrl_adapters.train.run.settings import correction_config, run_algorithm
from wmrl_adapters.train.run.state_io import load_state, save_state

from wmrl_algos.errors import ConfigError
from wmrl_algos.loop import CorrectionLoop
from wmrl_algos.types import ScoredGroup
from wmrl_envs.embodied.fidelity import auroc, within_group_rank_correlation
from wmrl_envs.embodied.outcomes import EpisodeOutcomes, Outcome, episode_outcome, outcome_success
from wmrl_envs.embodied.progress import ProgressInput, ProgressWorldModel, SimStateProgressScorer
from wmrl_envs.rollouts import GroupedRollout, RolloutConfig, RolloutTask, Trajectory, TurnContext

__all__ = [
    "EmbodiedTrainer",
    "LIBERO_INIT_STATES",
    "POLICY_FILE",
    "RolloutPolicy",
    "SimulatorCpu",
    "build_progress_scorer",
    "embodied_policy",
    "make_embodied_env",
    "play_episode",
    "scorer_view",
]

POLICY_FILE = "policy.pt"
CLOCKS = ("policy_sample", "policy_update", "world_model_predict", "world_model_learn")
"""The in-process compute the trainer measures in CPU-seconds (a :class:`CpuClock` each)."""
EVAL_SEED = 1_000_000
"""Evaluation episodes reset with ``EVAL_SEED + i`` (robosuite: the placement): every run and method is
evaluated on the same initial states (paired)."""
LIBERO_INIT_STATES = 50
"""Fixed initial states of every LIBERO task (``reset(options={"init_index": i})``, ``i < 50``)."""


def build_progress_scorer(config: EmbodiedConfig) -> Any:
    """The progress scorer ``config.world_model`` names, built without starting a simulator.

    ``sim-state``: :class:`~wmrl_envs.embodied.progress.SimStateProgressScorer`; ``learned``:
    :class:`~wmrl_envs.embodied.learned.LearnedProgressScorer` (seeded by the run); ``approach``:
    :class:`~wmrl_envs.embodied.hackable.ApproachProgressScorer`; ``approach-stale``:
    :class:`~wmrl_envs.embodied.hackable.StaleApproachProgressScorer`; ``visual:PATH``: the
    :class:`~wmrl_envs.embodied.visual.VisualProgressScorer` saved at ``PATH``.

    Raises:
        CheckpointError: ``PATH`` is not a visual scorer's checkpoint (the scorer's error, naming it).
        ConfigError: ``PATH`` holds an untrained scorer, which would leave every episode unscored.

    Example:
        >>> build_progress_scorer(EmbodiedConfig(world_model="approach")).name
        'approach'
    """
    path = config.visual_checkpoint()
    if path is not None:
        from wmrl_envs.embodied.visual import VisualProgressScorer

        scorer = VisualProgressScorer.load(path)
        if not scorer.fitted:
            raise ConfigError(
                f"--world-model {config.world_model!r}: the checkpoint holds an untrained scorer (every "
                "episode would be unscored); train one with python -m wmrl_envs.embodied.visual --out PATH"
            )
        return scorer
    if config.world_model == "learned":
        from wmrl_envs.embodied.learned import LearnedProgressConfig, LearnedProgressScorer

        return LearnedProgressScorer(LearnedProgressConfig(seed=config.seed))
    if config.world_model == "approach":
        from wmrl_envs.embodied.hackable import ApproachProgressScorer

        return ApproachProgressScorer()
    if config.world_model == "approach-stale":
        from wmrl_envs.embodied.hackable import StaleApproachProgressScorer

        return StaleApproachProgressScorer()
    return SimStateProgressScorer()


def scorer_view(scorer: Any) -> tuple[str, int, int] | None:
    """The camera, image size and frame stride a scorer reads (``None``: it reads no camera frames).

    Example:
        >>> from wmrl_envs.embodied.visual import VisualProgressConfig, VisualProgressScorer
        >>> scorer_view(VisualProgressScorer(VisualProgressConfig(image_size=32)))
        ('agentview', 32, 1)
    """
    config = getattr(scorer, "config", None)
    camera = getattr(config, "camera", None)
    if camera is None:
        return None
    from wmrl_envs.embodied._worker import CAMERAS, IMAGE_KEYS

    stride = int(getattr(config, "frame_stride", 1))
    return CAMERAS[IMAGE_KEYS.index(camera)], int(config.image_size), stride


def make_embodied_env(config: EmbodiedConfig, view: tuple[str, int, int] | None = None) -> Any:
    """The env of ``config.env`` (state observations with ``object_state``; cameras as configured).

    Args:
        config: the run's settings.
        view: the camera, image size and frame stride the progress scorer reads (:func:`scorer_view`):
            rendered beside ``config.cameras``, every camera at that size and stride (the frames it
            was trained on: a scorer trained on held frames reads held frames).
    """
    from wmrl_envs.embodied.envs import LiberoEnv, RobosuiteEnv

    cameras = config.camera_list()
    sizes: dict[str, int] = {}
    if view is not None:
        camera, image_size, stride = view
        cameras = cameras if camera in cameras else (*cameras, camera)
        sizes.update(image_size=image_size, frame_stride=stride)
    kind = RobosuiteEnv if config.kind == "robosuite" else LiberoEnv
    return kind(config.name, cameras=cameras, object_states=True, **sizes)  # type: ignore[arg-type]


def _action(policy: Any, obs: Mapping[str, Any], generator: torch.Generator | None) -> np.ndarray:
    """One action of ``policy`` for ``obs``: the distribution's mean (``generator=None``), or a sample
    whose noise comes from ``generator``."""
    with torch.no_grad():
        distribution = policy.distribution([obs])
        base = getattr(distribution, "base_dist", distribution)
        mean = base.mean
        if generator is None:
            return mean[0].numpy().astype(np.float32)
        noise = torch.randn(mean.shape, generator=generator)
        return (mean + base.stddev * noise)[0].numpy().astype(np.float32)


def embodied_policy(config: EmbodiedConfig, space: gym.spaces.Dict) -> torch.nn.Module:
    """``config``'s policy, sized for the env's observation space (its proprio and object-state keys)."""
    keys = [key for key in ("proprio", "object_state") if key in space.spaces]
    inputs = {key: int(np.prod(space[key].shape)) for key in keys}
    return build_embodied_policy(
        config.policy, inputs, seed=config.seed, init_std=config.init_std, hidden=config.hidden
    )


def play_episode(
    env: Any,
    policy: Any,
    start: tuple[int, Mapping[str, Any]],
    horizon: int,
    generator: torch.Generator | None = None,
) -> tuple[Outcome, int]:
    """One episode of ``policy`` from ``start`` (reset seed, options), at most ``horizon`` steps: its
    outcome and step count. The mean action unless ``generator`` is given (then a sample, see
    :func:`_action`)."""
    reset_seed, options = start
    obs, info = env.reset(seed=reset_seed, options=dict(options))
    steps = 0
    while steps < horizon:
        obs, _, terminated, truncated, info = env.step(_action(policy, obs, generator))
        steps += 1
        if terminated or truncated:
            break
    return episode_outcome(info), steps


class RolloutPolicy:
    """An embodied policy as :class:`~wmrl_envs.rollouts.GroupedRollout`'s batched policy.

    Trajectory ``(group_id, index)`` samples its action noise from its own generator, seeded by
    ``sample_seed(group_id, index)``: an episode is the same whichever others run beside it, so a run
    does not depend on ``workers``. For the same reason the policy is asked one observation at a time:
    a batched forward pass differs from a single one in the last bits (measured: 7e-8 on the
    gaussian-mlp), which a simulator amplifies.

    Args:
        policy: an :class:`~wmrl_adapters.train.embodied_policy.ActionDistributionPolicy`.
        sample_seed: the noise seed of a trajectory.

    Example:
        >>> from wmrl_adapters.train.embodied.policy import GaussianMLPPolicy
        >>> from wmrl_envs.rollouts import TurnContext
        >>> sampler = RolloutPolicy(GaussianMLPPolicy({"proprio": 9}), lambda group, index: 7)
        >>> obs = {"proprio": np.zeros(9)}
        >>> twins = [TurnContext(i, "lift", i, 0, (obs,), (), ({},)) for i in (0, 1)]
        >>> first, second = sampler.act([obs, obs], [{}, {}], contexts=twins)
        >>> bool((first == second).all()), first.shape
        (True, (7,))
    """

    def __init__(self, policy: Any, sample_seed: Callable[[int, int], int]) -> None:
        self.policy = policy
        self._sample_seed = sample_seed
        self._generators: dict[int, torch.Generator] = {}

    def act(
        self,
        observations: Sequence[Mapping[str, Any]],
        infos: Sequence[Mapping[str, Any]],
        *,
        contexts: Sequence[TurnContext],
    ) -> list[np.ndarray]:
        """One sampled action per live trajectory."""
        actions = []
        for obs, context in zip(observations, contexts, strict=True):
            generator = self._generators.get(context.trajectory_id)
            if generator is None:
                seed = self._sample_seed(context.group_id, context.index)
                generator = self._generators[context.trajectory_id] = torch.Generator().manual_seed(seed)
            actions.append(_action(self.policy, obs, generator))
        return actions


class SimulatorCpu(gym.Wrapper[dict[str, Any], np.ndarray, dict[str, Any], np.ndarray]):
    """An env whose resets and steps are charged in simulator CPU-seconds (:attr:`cpu_s`).

    A worker env (:class:`~wmrl_envs.embodied.envs.EmbodiedEnv`) is charged what its simulator worker
    reports for each call (the worker's own process CPU time, :attr:`EmbodiedEnv.simulator_cpu_s`);
    an env that simulates in this process is charged the calling thread's CPU time
    (``time.thread_time()``). Neither is wall time, which on a loaded machine measures the load.

    Example:
        >>> class Spin(gym.Env):
        ...     observation_space = action_space = gym.spaces.Discrete(2)
        ...     def reset(self, *, seed=None, options=None):
        ...         return 0, {}
        ...     def step(self, action):
        ...         _ = sum(i * i for i in range(100_000))
        ...         return 0, 0.0, True, False, {}
        >>> env = SimulatorCpu(Spin())
        >>> _ = env.reset(seed=0); _ = env.step(0)
        >>> env.cpu_s > 0
        True
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.cpu_s = 0.0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The env's reset, charged."""
        with self._charged():
            return self.env.reset(seed=seed, options=options)

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """The env's step, charged."""
        with self._charged():
            return self.env.step(action)

    @contextlib.contextmanager
    def _charged(self) -> Any:
        worker_before = getattr(self.env.unwrapped, "simulator_cpu_s", None)
        thread_before = time.thread_time()
        try:
            yield
        finally:
            if worker_before is None:
                self.cpu_s += time.thread_time() - thread_before
            else:
                self.cpu_s += self.env.unwrapped.simulator_cpu_s - worker_before


class EmbodiedTrainer(RunTrainer):
    """One embodied run (``sft`` or an RL algorithm) in a run directory (new or resumed).

    Args:
        config: the run's settings.
        run_dir: the run directory.
        resume: continue the run in ``run_dir`` from its checkpoint (``config`` must equal the saved one).
        make_env: builds one env (default: :func:`make_embodied_env`); tests pass their own.

    Raises:
        ConfigError: see :meth:`RunTrainer.open_run_dir`; ``sft`` on an env without a scripted expert;
            an ``init`` checkpoint that does not fit the policy; a visual scorer that cannot read the
            env's frames (its error names the camera and size it expects and what the env renders).
        CheckpointError: ``resume`` without a checkpoint; a ``visual:PATH`` file that is not a visual
            scorer's checkpoint.

    Example:
        >>> trainer = EmbodiedTrainer(EmbodiedConfig(algo="sft"), Path("runs/sft"))  # doctest: +SKIP
        >>> summary = trainer.run()  # doctest: +SKIP
    """

    evaluates_start = True

    def __init__(
        self,
        config: EmbodiedConfig,
        run_dir: Path,
        *,
        resume: bool = False,
        make_env: Callable[[], Any] | None = None,
    ) -> None:
        self.open_run_dir(config, run_dir, resume)
        if config.algo == "sft":
            from wmrl_envs.embodied.policies import scripted_expert

            try:
                self.expert: Any = scripted_expert(config.env)
            except ConfigError as error:
                raise ConfigError(f"algo=sft: {error}; or train on this env with --init POLICY.pt") from error
        torch.manual_seed(config.seed)
        self.scorer: Any = build_progress_scorer(config)
        view = scorer_view(self.scorer)
        self._make_env = make_env or (lambda: make_embodied_env(config, view))
        self._envs: list[EpisodeOutcomes] = []
        self._simulators: list[SimulatorCpu] = []
        self.clocks = {name: CpuClock() for name in CLOCKS}
        probe = self._env(0)
        try:
            self._check_scorer_reads(probe.observation_space)
        except ConfigError:
            self._close_envs()
            raise
        self._n_tasks = int(getattr(probe.unwrapped, "n_tasks", 1))
        self._has_init_states = config.kind == "libero"
        self.policy = embodied_policy(config, probe.observation_space)
        if config.init:
            self._load_init(Path(config.init))
        self.optimizer = torch.optim.Adam(list(self.policy.parameters()), lr=config.learning_rate)
        self.algorithm = run_algorithm(config.algo)
        self.loop = CorrectionLoop(correction_config(config))
        self.world_model = ProgressWorldModel(self.scorer, collapse=config.collapse)  # type: ignore[arg-type]
        self.rollout = self._make_rollout()
        self.counts = {
            "sim_episodes": 0.0,
            "sim_steps": 0.0,
            "real_labels": 0.0,
            "demo_episodes": 0.0,
            "sim_cpu_s": 0.0,
            "rollout_seconds": 0.0,
            "eval_episodes": 0.0,
            "eval_seconds": 0.0,
            "eval_sim_cpu_s": 0.0,
        }
        self.held_out: dict[str, HeldOutScore] = {}
        self.start_run_dir()

    def _check_scorer_reads(self, space: Any) -> None:
        """Refuse a scorer that cannot read the env's camera frames (another camera or image size).

        A frame of each camera the env renders, of the shape its observation space declares, goes
        through the scorer once: a mismatch raises the scorer's own :class:`ConfigError`, naming what it
        was trained on and what the env gives, before any episode runs.
        """
        if scorer_view(self.scorer) is None:
            return
        frames = {
            key: np.zeros((1, *space[key].shape), np.uint8) for key in space.spaces if key.endswith("_image")
        }
        self.scorer.progress([ProgressInput(self.config.name, frames=frames)])

    @property
    def total_steps(self) -> int:
        """Steps of this run (``sft`` is one step: demonstrations + behaviour cloning)."""
        return 1 if self.config.algo == "sft" else self.config.steps

    def _load_init(self, path: Path) -> None:
        fix = f"pass the {POLICY_FILE} of an sft run with the same env"
        if not path.is_file():
            raise ConfigError(f"init={str(path)!r} does not exist; {fix}")
        state = load_state(path, if_older=f"run the sft stage again with this wmrl and {fix}")
        try:
            self.policy.load_state_dict(state)
        except (RuntimeError, KeyError) as error:
            raise ConfigError(
                f"init={str(path)!r} is not a policy checkpoint for {self.config.policy} ({error}); {fix}"
            ) from error

    def _make_rollout(self) -> GroupedRollout:
        """The rollout of every training step: score mode (the simulator runs every episode), the
        progress world model scoring each finished episode, on the trainer's envs 0 .. workers - 1."""
        config = self.config
        made = itertools.count()
        return GroupedRollout(
            lambda: self._env(next(made)),
            CpuTimedWorldModel(self.world_model, self.clocks["world_model_predict"]),
            RolloutConfig(
                group_size=config.group_size,
                mode="score",
                scoring="episode",
                max_turns=config.horizon,
                max_workers=config.workers,
                max_envs=config.workers,
                check_actions=False,  # the controller clips; a Gaussian sample leaves the box
            ),
        )

    def _env(self, index: int) -> EpisodeOutcomes:
        """The trainer's ``index``-th simulator env, made on first use (rollouts, demonstrations and
        evaluations share them: each holds a simulator worker)."""
        while len(self._envs) <= index:
            self._simulators.append(SimulatorCpu(self._make_env()))
            self._envs.append(EpisodeOutcomes(self._simulators[-1]))
        return self._envs[index]

    def _simulator_cpu(self) -> float:
        """The simulator CPU-seconds of every env so far (training, demonstrations and evaluations)."""
        return sum(simulator.cpu_s for simulator in self._simulators)

    # ----------------------------------------------------------------------------------- rollouts
    def draw_groups(self, step: int) -> list[tuple[int, dict[str, Any]]]:
        """The initial state (reset seed, options) of each of step ``step``'s groups (seeded by ``(seed,
        step)``)."""
        rng = np.random.default_rng([self.config.seed, step])
        tasks = self.config.tasks() or list(range(self._n_tasks))
        starts = []
        for _ in range(self.config.groups):
            reset_seed = int(rng.integers(EVAL_SEED))
            options: dict[str, Any] = {}
            if self._has_init_states:
                options = {
                    "task_id": int(rng.choice(tasks)),
                    "init_index": int(rng.integers(LIBERO_INIT_STATES)),
                }
            starts.append((reset_seed, options))
        return starts

    def train_step(self) -> dict[str, float]:
        """One training step (``sft``: demonstrations + behaviour cloning); returns the metrics line."""
        if self.config.algo == "sft":
            return self._sft_step()
        return super().train_step()

    def collect(
        self, starts: Sequence[tuple[int, dict[str, Any]]], anchors: Sequence[bool]
    ) -> list[ScoredGroup]:
        """``group_size`` simulator episodes per initial state through the rollout, each scored by the
        progress world model when it ends; an anchor group's real score is its episodes' success."""
        config, step = self.config, self.step
        tasks = [
            RolloutTask(str(options.get("task_id", config.name)), options, seed=reset_seed)
            for reset_seed, options in starts
        ]
        policy = RolloutPolicy(
            self.policy,
            lambda group, index: int(
                np.random.default_rng([config.seed, step, group, index]).integers(2**62)
            ),
        )
        simulated, started = self._simulator_cpu(), time.perf_counter()
        groups = self.rollout.run(
            tasks, CpuTimedPolicy(policy, self.clocks["policy_sample"]), anchors=list(anchors)
        )
        self.counts["sim_cpu_s"] += self._simulator_cpu() - simulated
        self.counts["rollout_seconds"] += time.perf_counter() - started
        return groups

    def trainable(self, trajectory: Trajectory) -> bool:
        """Only an episode with actions, all finite, can be re-scored by the policy."""
        return bool(trajectory.actions) and all(np.isfinite(action).all() for action in trajectory.actions)

    def step_metrics(
        self, groups: Sequence[ScoredGroup], batch: Sequence[Trajectory], seconds: float
    ) -> dict[str, float]:
        """Episode outcomes, rewards, scorer diagnostics, timing and the training compute so far."""
        trajectories: list[Trajectory] = [t for group in groups for t in group.trajectories]
        self.counts["sim_episodes"] += len(trajectories)
        self.counts["sim_steps"] += sum(len(t.actions) for t in trajectories)
        self.counts["real_labels"] += sum(r is not None for g in groups if g.real is not None for r in g.real)
        metrics = self._episode_metrics(groups, [episode_outcome(t.infos[-1]) for t in trajectories])
        metrics["train/episodes_with_signal"] = float(len(batch))
        metrics["time/step_seconds"] = seconds
        metrics.update(self.rollout.ledger.as_metrics())
        metrics.update(self._compute_metrics())
        return metrics

    def learn_world_model(self, groups: Sequence[ScoredGroup]) -> None:
        """A learned progress scorer learns from the anchor groups' labelled episodes and refits."""
        if self.config.world_model != "learned" or not self.algorithm.uses_world_model:
            return
        with self.clocks["world_model_learn"].measure():
            if self.scorer.push_groups(groups):  # anchor groups only; unknown outcomes skipped
                self.scorer.refit()

    def _episode_metrics(
        self, groups: Sequence[ScoredGroup], outcomes: Sequence[Outcome]
    ) -> dict[str, float]:
        real = [score for group in groups if group.real is not None for score in group.real]
        predicted = [score for group in groups for score in group.predicted]
        calibrated = self.loop.debiaser.apply(list(predicted))
        successes = [outcome_success(outcome) for outcome in outcomes]
        members = [index for index, group in enumerate(groups) for _ in group.predicted]
        values: dict[str, float | None] = {
            "reward/real_mean": mean_known(real),
            "reward/predicted_mean": mean_known(predicted),
            "reward/calibrated_mean": mean_known(calibrated),
            "reward/predicted_unknown": float(sum(p is None for p in predicted)),
            # Diagnostics the learner never sees: every episode's simulator outcome.
            "diag/sim_success_rate": mean_known(successes),
            "diag/scorer_auroc": auroc(predicted, successes),
            "diag/calibrated_auroc": auroc(calibrated, successes),
            # What GRPO reads: the scorer's order of each group's own episodes (AUROC pools the groups).
            "diag/scorer_group_spearman": within_group_rank_correlation(predicted, successes, members)[0],
            "train/policy_errors": float(outcomes.count("policy_error")),
            "train/worker_crashes": float(outcomes.count("worker_crash")),
            "train/sim_errors": float(outcomes.count("sim_error")),
            "train/episodes": float(len(outcomes)),
        }
        return {key: value for key, value in values.items() if value is not None}

    def update_policy(self, batch: Sequence[Trajectory], advantages: torch.Tensor) -> dict[str, float]:
        """The GRPO update on the episodes' per-step log-probs, plus the policy's action spread."""
        with self.clocks["policy_update"].measure():
            metrics = self.policy_update(lambda: self._logprobs(batch), advantages)
        log_std = getattr(self.policy, "log_std", None)
        if log_std is not None:
            metrics["losses/action_std"] = float(log_std.detach().clamp(-5.0, 1.0).exp().mean())
        return metrics

    def _logprobs(self, batch: Sequence[Trajectory]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B, T)`` per-step log-probs of the episodes' actions under the current policy, and the mask."""
        observations = [obs for t in batch for obs in t.observations[: len(t.actions)]]
        actions = torch.as_tensor(np.stack([a for t in batch for a in t.actions]), dtype=torch.float32)
        flat = self.policy.distribution(observations).log_prob(actions)
        longest = max(len(t.actions) for t in batch)
        logprobs = torch.zeros(len(batch), longest)
        mask = torch.zeros(len(batch), longest)
        offset = 0
        for row, trajectory in enumerate(batch):
            n = len(trajectory.actions)
            logprobs[row, :n] = flat[offset : offset + n]
            mask[row, :n] = 1.0
            offset += n
        return logprobs, mask

    # ------------------------------------------------------------------------------------------ SFT
    def _sft_step(self) -> dict[str, float]:
        from wmrl_envs.embodied.demos import collect_demonstrations

        config = self.config
        demo_horizon = config.demo_horizon or config.horizon
        simulated, started = self._simulator_cpu(), time.perf_counter()
        demos = collect_demonstrations(
            self._env(0),
            self.expert,
            episodes=config.demos,
            horizon=demo_horizon,
            noise=config.demo_noise,
            seed=config.seed * 10_000,
            tasks=(config.tasks() or list(range(self._n_tasks))) if self._has_init_states else None,
        )
        self.counts["demo_episodes"] += demos.episodes
        self.counts["sim_episodes"] += demos.episodes  # a demonstration is a simulator episode too
        self.counts["sim_steps"] += demos.steps
        self.counts["sim_cpu_s"] += self._simulator_cpu() - simulated
        self.counts["rollout_seconds"] += time.perf_counter() - started
        if not len(demos):
            raise ConfigError(
                f"none of the {demos.episodes} scripted demonstrations succeeded (demo_noise="
                f"{config.demo_noise}, demo_horizon={demo_horizon}); lower "
                "demo_noise or raise demo_horizon"
            )
        with self.clocks["policy_update"].measure():
            losses = behaviour_cloning(
                self.policy, demos.observations, demos.actions, epochs=config.bc_epochs, seed=config.seed
            )
        save_state(self.run_dir / POLICY_FILE, self.policy.state_dict())
        self.step += 1
        metrics = {
            "step": float(self.step),
            "sft/demo_episodes": float(demos.episodes),
            "sft/demo_success_rate": demos.success_rate,
            "sft/pairs": float(len(demos)),
            "sft/bc_loss_first": losses[0],
            "sft/bc_loss_last": losses[-1],
        }
        metrics.update(self._compute_metrics())
        return metrics

    # ----------------------------------------------------------------------------------- evaluation
    def eval_starts(self) -> list[tuple[int, dict[str, Any]]]:
        """The evaluation's initial states (reset seed, options), the same for every run and method.

        LIBERO: the first ``eval_samples`` fixed initial states of every task (all 50 with
        ``eval_samples >= 50``); robosuite, which has no fixed states: ``eval_samples`` seeded placements.
        """
        config = self.config
        if not self._has_init_states:
            return [(EVAL_SEED + i, {}) for i in range(config.eval_samples)]
        tasks = config.tasks() or list(range(self._n_tasks))
        return [
            (EVAL_SEED + i, {"task_id": task, "init_index": i})
            for i in range(min(config.eval_samples, LIBERO_INIT_STATES))
            for task in tasks
        ]

    def evaluate_metrics(self) -> dict[str, float]:
        """Success rate of the current policy's mean action on every evaluation state (:meth:`eval_starts`).

        Deterministic: no action noise, fixed states, so two methods' rates differ only by what they
        learned (paired by state). ``eval/success_se`` is the binomial standard error over the
        ``eval/episodes`` known outcomes; a simulator failure is ``eval/unknown``, never a failure. The
        evaluation is kept as the run's start (step 0) or end (:attr:`held_out`), episode by episode, so
        the summary's change from start to end is paired by state. Its compute is counted apart
        (``time/eval_*``), never charged to training.
        """
        starts = self.eval_starts()
        workers = min(self.config.workers, len(starts))
        shares = [starts[w::workers] for w in range(workers)]
        simulated, started = self._simulator_cpu(), time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="wmrl-eval") as pool:
            results = list(pool.map(lambda w: self._evaluate_on(self._env(w), shares[w]), range(workers)))
        episodes = [
            (start, episode)
            for share, result in zip(shares, results, strict=True)
            for start, episode in zip(share, result, strict=True)
        ]
        successes = [outcome_success(outcome) for _, (outcome, _) in episodes]
        known = [s for s in successes if s is not None]
        self.counts["eval_episodes"] += len(episodes)
        self.counts["eval_seconds"] += time.perf_counter() - started
        self.counts["eval_sim_cpu_s"] += self._simulator_cpu() - simulated
        rate = float(np.mean(known)) if known else None
        se = float(np.sqrt(rate * (1 - rate) / len(known))) if rate is not None else None
        self.held_out["start" if self.step == 0 else "end"] = HeldOutScore(
            step=self.step,
            mean=rate,
            se=se if len(known) > 1 else None,
            episodes=len(episodes),
            unknown=len(successes) - len(known),
            positions=tuple(successes),
            episode_keys=tuple(self._episode_key(start) for start, _ in episodes),
        )
        return {
            "eval/success_rate": math.nan if rate is None else rate,
            "eval/success_se": math.nan if se is None else se,
            "eval/episodes": float(len(known)),
            "eval/unknown": float(len(successes) - len(known)),
            "eval/mean_steps": float(np.mean([steps for _, (_, steps) in episodes])),
            # Totals so far, reported here: the step's compute metrics were taken before this evaluation.
            "time/eval_episodes": self.counts["eval_episodes"],
            "time/eval_seconds": self.counts["eval_seconds"],
            "time/eval_sim_cpu_s": self.counts["eval_sim_cpu_s"],
        }

    def _episode_key(self, start: tuple[int, dict[str, Any]]) -> str:
        """``"<task>#<reset seed>"``: what pairs an evaluation episode with the same one at another step."""
        reset_seed, options = start
        return f"{options.get('task_id', self.config.name)}#{reset_seed}"

    def _evaluate_on(
        self, env: EpisodeOutcomes, starts: Sequence[tuple[int, dict[str, Any]]]
    ) -> list[tuple[Outcome, int]]:
        """Run the mean policy from each start on ``env``: each episode's outcome and step count."""
        return [play_episode(env, self.policy, start, self.config.horizon) for start in starts]

    # ------------------------------------------------------------------------- run-directory hooks
    def _compute_metrics(self) -> dict[str, float]:
        """The training compute so far: counts, and every charged figure in CPU-seconds (wall: ``time/``).

        The evaluation's totals come with its metrics (:meth:`evaluate_metrics`). ``grpo``'s scorer
        runs for the diagnostics only (its AUROC): its CPU is not charged.
        """
        counts, clocks = self.counts, self.clocks
        world_model = [clocks["world_model_predict"], clocks["world_model_learn"]]
        charged = {
            "compute/sim_cpu_s": counts["sim_cpu_s"],
            "compute/world_model_cpu_s": sum(clock.cpu_s for clock in world_model)
            if self.algorithm.uses_world_model
            else 0.0,
            "compute/policy_sample_cpu_s": clocks["policy_sample"].cpu_s,
            "compute/policy_update_cpu_s": clocks["policy_update"].cpu_s,
        }
        return {
            "compute/sim_episodes": counts["sim_episodes"],
            "compute/sim_steps": counts["sim_steps"],
            "compute/real_labels": counts["real_labels"],
            "compute/demo_episodes": counts["demo_episodes"],
            **charged,
            "compute/charged_total": sum(charged.values()),
            "time/rollout_seconds": counts["rollout_seconds"],
            **{f"time/{name}_seconds": clock.wall_s for name, clock in clocks.items()},
        }

    def summary_extra(self) -> dict[str, Any]:
        """``held_out``: the start and end evaluations, episode by episode (plain data;
        :func:`~wmrl_adapters.train.run.rundir.describe_held_out` prints them with their paired change)."""
        return {"held_out": {name: score.to_dict() for name, score in self.held_out.items()}}

    def start_message(self) -> str | None:
        """The initial policy's success rate, printed before training starts."""
        start = self.held_out.get("start")
        return None if start is None else start.text("success")

    def postfix(self, metrics: Mapping[str, float]) -> dict[str, Any]:
        """The tqdm bar's real reward, evaluation success and simulator episodes."""
        return {
            "real": metrics.get("reward/real_mean"),
            "eval": metrics.get("eval/success_rate"),
            "episodes": metrics.get("compute/sim_episodes"),
        }

    def plot(self, lines: list[dict[str, float]]) -> list[Path]:
        """The embodied panels (success, rewards, anchor weight, bias reduction, scorer AUROC, compute)."""
        from wmrl_adapters.train.run.plots import EMBODIED_PANELS, plot_run

        return plot_run(lines, self.run_dir / "plots", panels=EMBODIED_PANELS)

    def close(self) -> None:
        """Stop the simulator workers and close TensorBoard."""
        self.rollout.close()
        self._close_envs()
        super().close()

    def _close_envs(self) -> None:
        """Stop the simulator workers."""
        for env in self._envs:
            env.close()

    def extra_state(self) -> dict[str, Any]:
        """Policy, optimiser, correction state, the learned scorer (if any), counters, the cost ledger."""
        return {
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "loop": self.loop.state_dict(),
            "scorer": self.scorer.state_dict() if self.config.world_model == "learned" else None,
            "counts": dict(self.counts),
            "ledger": self.rollout.ledger.state_dict(),
            "clocks": {name: clock.state_dict() for name, clock in self.clocks.items()},
            "held_out": {name: score.to_dict() for name, score in self.held_out.items()},
        }

    def restore_extra(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`extra_state` returned."""
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.loop.load_state_dict(state["loop"])
        if state["scorer"] is not None:
            self.scorer.load_state_dict(state["scorer"])
        if "ledger" in state:  # a checkpoint from before the rollout's ledger has none: it starts at 0
            self.rollout.ledger.load_state_dict(state["ledger"])
        counts = state["counts"]
        if "clocks" in state:
            self.counts.update(counts)
            for name, clock in self.clocks.items():
                clock.load_state_dict(state["clocks"][name])
        else:  # an older wmrl charged wall seconds: the CPU-seconds so far are unknown (NaN), never 0
            self.counts.update({key: float(counts[key]) for key in self.counts if key in counts})
            self.counts.update(sim_cpu_s=math.nan, eval_sim_cpu_s=math.nan)
            self.counts["rollout_seconds"] = float(counts.get("sim_seconds", math.nan))
            for clock in self.clocks.values():
                clock.load_state_dict({"cpu_s": math.nan, "wall_s": math.nan})
        self.held_out = {
            name: HeldOutScore.from_dict(score) for name, score in state.get("held_out", {}).items()
        }
