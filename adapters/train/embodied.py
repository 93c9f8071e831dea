"""The embodied trainer of ``wmrl train --env robosuite:TASK | libero:SUITE[/IDS]``: SFT, then GRPO / WMRL.

Why a second trainer on the same base: the Kaggle trainer's rollouts are code executions scored by a
sandbox; here they are simulator episodes of a Gaussian policy scored by the simulator's sparse success
(the real label) or by a progress scorer (the world model). What makes the comparison trustworthy is
shared through :class:`~wmrl_adapters.train.rundir.RunTrainer`: resolved config, metrics per step,
atomic checkpoints (policy, optimiser, :class:`~wmrl_algos.loop.CorrectionLoop` state, learned scorer,
RNG states), ``--resume``, plots and summary. The correction (OD + IVD) and the clipped GRPO loss are
``wmrl_algos``' own, configured by :func:`~wmrl_adapters.train.settings.correction_config`.

A training step:

1. draw ``groups`` initial states (seeded by ``(seed, step)``): every member of a group resets to the
   same state and differs only by its action noise (its own sampling seed), so the group mean is a
   baseline;
2. plan the anchor groups (:meth:`CorrectionLoop.plan`); ``anchors`` rolls out only those;
3. run every episode in the simulator (``workers`` simulator processes in parallel threads), up to
   ``horizon`` steps or success; score each with the progress world model (``potential`` collapse);
4. the trusted score of an anchor episode is its success (1/0); :meth:`CorrectionLoop.correct` forms
   one advantage per episode (``grpo``: every group anchored; ``wm``: none, progress only; ``wmrl``:
   progress calibrated by isotonic Online Debiasing, anchor groups weighted by IVD);
5. the clipped GRPO update on per-step log-probs, the episode's advantage broadcast over its steps.

Bad input: an action the env rejects (NaN or infinite: ``InvalidAction``) ends the episode as a *real
failure* (the policy caused it; counted in ``train/policy_errors``); a simulator worker that dies or a
simulator error after a valid action (actions are clipped to the controller's range) gives an
*unknown* outcome, ``None``, left out of every baseline and counted (``train/worker_crashes``,
``train/sim_errors``), never 0.

``algo="sft"`` is the first stage: scripted demonstrations with privileged state
(:mod:`wmrl_envs.embodied.demos`), behaviour cloning, an evaluation, ``policy.pt`` for ``--init``.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium.error import InvalidAction
from wmrl_adapters.train.config import EmbodiedConfig
from wmrl_adapters.train.embodied_policy import behaviour_cloning, build_embodied_policy
from wmrl_adapters.train.rundir import RunTrainer, mean_known
from wmrl_adapters.train.settings import correction_config, run_algorithm
from wmrl_adapters.train.state_io import load_state, save_state

from wmrl_algos.errors import ConfigError
from wmrl_algos.loop import CorrectionLoop
from wmrl_algos.types import ScoredGroup
from wmrl_envs.embodied.fidelity import auroc
from wmrl_envs.embodied.progress import ProgressWorldModel, SimStateProgressScorer
from wmrl_envs.embodied.stack import SimulatorError
from wmrl_envs.world_model import WorldModelQuery

__all__ = ["EmbodiedTrainer", "Episode", "EpisodeJob", "EpisodeRunner", "POLICY_FILE", "make_embodied_env"]

POLICY_FILE = "policy.pt"
EVAL_SEED = 1_000_000
"""Evaluation episodes reset with ``EVAL_SEED + i`` and sample with the same seed: every run and method
is evaluated on the same initial states with the same noise (common random numbers)."""
_WORKER_FAILED = "the simulator worker failed"


def make_embodied_env(config: EmbodiedConfig) -> Any:
    """The env of ``config.env`` (state observations with ``object_state``; cameras as configured)."""
    from wmrl_envs.embodied.envs import LiberoEnv, RobosuiteEnv

    cameras = config.camera_list()
    if config.kind == "robosuite":
        return RobosuiteEnv(config.name, cameras=cameras, object_states=True)  # type: ignore[arg-type]
    return LiberoEnv(config.name, cameras=cameras, object_states=True)  # type: ignore[arg-type]


@dataclass(frozen=True)
class EpisodeJob:
    """One episode to run: where it starts and how its actions are sampled.

    Attributes:
        reset_seed: the reset seed (robosuite: the placement; LIBERO: with ``options``' init state).
        options: reset options (``task_id``, ``init_index``).
        sample_seed: seeds the action noise (``None``: the distribution's mean, no noise).
        group_id: the GRPO group, ``index`` the member within it; ``anchor`` whether its success is used.
    """

    reset_seed: int
    options: Mapping[str, Any]
    sample_seed: int | None
    group_id: int = 0
    index: int = 0
    anchor: bool = False


@dataclass
class Episode:
    """A finished episode.

    Attributes:
        job: what was run.
        observations: the reset observation, then one per step.
        actions: the (unclipped) sampled actions, one per step.
        outcome: ``success``, ``failure``, ``policy_error`` (the env rejected the action: a failure),
            ``sim_error`` or ``worker_crash`` (unknown outcome).
        seconds: wall seconds in the simulator.
        predicted: the world model's score (``None``: not scored or unknown).
    """

    job: EpisodeJob
    observations: list[Mapping[str, Any]] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    outcome: str = "failure"
    seconds: float = 0.0
    predicted: float | None = None

    @property
    def success(self) -> float | None:
        """The real outcome: 1.0 success, 0.0 failure (a policy error included), ``None`` when unknown."""
        if self.outcome in ("sim_error", "worker_crash"):
            return None
        return 1.0 if self.outcome == "success" else 0.0

    @property
    def finite(self) -> bool:
        """Whether every action is finite (only those episodes can be re-scored for the update)."""
        return all(np.isfinite(action).all() for action in self.actions)


def _sample(policy: Any, obs: Mapping[str, Any], generator: torch.Generator | None) -> np.ndarray:
    with torch.no_grad():
        distribution = policy.distribution([obs])
        base = getattr(distribution, "base_dist", distribution)
        mean = base.mean
        if generator is None:
            return mean[0].numpy().astype(np.float32)
        noise = torch.randn(mean.shape, generator=generator)
        return (mean + base.stddev * noise)[0].numpy().astype(np.float32)


class EpisodeRunner:
    """Runs episodes on ``workers`` simulator envs in parallel threads (one env per thread, reused).

    A simulator worker that dies mid-episode gives that episode the outcome ``worker_crash`` (unknown);
    the env restarts its worker at the next reset.

    Args:
        make_env: builds one env.
        workers: parallel envs.
        horizon: step limit of an episode.

    Example:
        >>> runner = EpisodeRunner(lambda: make_embodied_env(EmbodiedConfig()), 2, 60)  # doctest: +SKIP
        >>> episodes = runner.run([EpisodeJob(0, {}, 1)], policy)  # doctest: +SKIP
    """

    def __init__(self, make_env: Callable[[], Any], workers: int, horizon: int) -> None:
        self._make_env = make_env
        self.workers = workers
        self.horizon = horizon
        self._envs: list[Any] = []
        self._lock = threading.Lock()
        self._free: list[Any] = []

    @property
    def envs(self) -> tuple[Any, ...]:
        """The envs made so far."""
        return tuple(self._envs)

    def acquire(self) -> Any:
        """An idle env (made if none is idle); give it back with :meth:`release`."""
        with self._lock:
            if self._free:
                return self._free.pop()
        env = self._make_env()
        with self._lock:
            self._envs.append(env)
        return env

    def release(self, env: Any) -> None:
        """Return an env taken with :meth:`acquire`."""
        with self._lock:
            self._free.append(env)

    def run(self, jobs: Sequence[EpisodeJob], policy: Any) -> list[Episode]:
        """Run every job; the episodes come back in job order."""
        with concurrent.futures.ThreadPoolExecutor(self.workers, thread_name_prefix="wmrl-sim") as pool:
            return list(pool.map(lambda job: self._run_one(job, policy), jobs))

    def _run_one(self, job: EpisodeJob, policy: Any) -> Episode:
        env = self.acquire()
        try:
            return self.episode(env, job, policy)
        finally:
            self.release(env)

    def episode(self, env: Any, job: EpisodeJob, policy: Any) -> Episode:
        """Run one episode on ``env``."""
        episode = Episode(job)
        started = time.perf_counter()
        generator = None if job.sample_seed is None else torch.Generator().manual_seed(job.sample_seed)
        try:
            obs, _ = env.reset(seed=job.reset_seed, options=dict(job.options))
        except SimulatorError:
            episode.outcome = "worker_crash"
            episode.seconds = time.perf_counter() - started
            return episode
        episode.observations.append(obs)
        for _ in range(self.horizon):
            action = _sample(policy, obs, generator)
            episode.actions.append(action)
            try:
                obs, _, terminated, truncated, info = env.step(action)
            except InvalidAction:
                episode.outcome = "policy_error"
                break
            error = info.get("sim_error")
            if error is not None:
                episode.outcome = "worker_crash" if str(error).startswith(_WORKER_FAILED) else "sim_error"
                break
            episode.observations.append(obs)
            if terminated or info.get("success"):
                episode.outcome = "success"
                break
        episode.seconds = time.perf_counter() - started
        return episode

    def close(self) -> None:
        """Close every env."""
        for env in self._envs:
            env.close()
        self._envs.clear()
        self._free.clear()


class EmbodiedTrainer(RunTrainer):
    """One embodied run (``sft`` or an RL algorithm) in a run directory (new or resumed).

    Args:
        config: the run's settings.
        run_dir: the run directory.
        resume: continue the run in ``run_dir`` from its checkpoint (``config`` must equal the saved one).
        make_env: builds one env (default: :func:`make_embodied_env`); tests pass their own.

    Raises:
        ConfigError: see :meth:`RunTrainer.open_run_dir`; ``sft`` on an env without a scripted expert;
            an ``init`` checkpoint that does not fit the policy.
        CheckpointError: ``resume`` without a checkpoint.

    Example:
        >>> trainer = EmbodiedTrainer(EmbodiedConfig(algo="sft"), Path("runs/sft"))  # doctest: +SKIP
        >>> summary = trainer.run()  # doctest: +SKIP
    """

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
        self.runner = EpisodeRunner(
            make_env or (lambda: make_embodied_env(config)), config.workers, config.horizon
        )
        probe = self.runner.acquire()
        self._n_tasks = int(getattr(probe, "n_tasks", 1))
        self._has_init_states = config.kind == "libero"
        space = probe.observation_space
        self.runner.release(probe)
        inputs = {
            key: int(np.prod(space[key].shape)) for key in ("proprio", "object_state") if key in space.spaces
        }
        self.policy = build_embodied_policy(
            config.policy, inputs, seed=config.seed, init_std=config.init_std, hidden=config.hidden
        )
        if config.init:
            self._load_init(Path(config.init))
        self.optimizer = torch.optim.Adam(list(self.policy.parameters()), lr=config.learning_rate)
        self.algorithm = run_algorithm(config.algo)
        self.loop = CorrectionLoop(correction_config(config))
        self.scorer: Any = SimStateProgressScorer()
        if config.world_model == "learned":
            from wmrl_envs.embodied.learned import LearnedProgressConfig, LearnedProgressScorer

            self.scorer = LearnedProgressScorer(LearnedProgressConfig(seed=config.seed))
        self.world_model = ProgressWorldModel(self.scorer, collapse=config.collapse)  # type: ignore[arg-type]
        self.counts = {
            "sim_episodes": 0.0,
            "sim_steps": 0.0,
            "real_labels": 0.0,
            "sim_seconds": 0.0,
            "world_model_seconds": 0.0,
            "policy_seconds": 0.0,
            "eval_episodes": 0.0,
            "eval_seconds": 0.0,
            "demo_episodes": 0.0,
        }
        self.start_run_dir()

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
                options = {"task_id": int(rng.choice(tasks)), "init_index": int(rng.integers(50))}
            starts.append((reset_seed, options))
        return starts

    def _score(self, episodes: Sequence[Episode]) -> None:
        started = time.perf_counter()
        scored = [e for e in episodes if e.success is not None and len(e.observations) >= 2]
        if scored:
            queries = [WorldModelQuery(list(e.observations), list(e.actions)) for e in scored]
            for episode, prediction in zip(scored, self.world_model.predict(queries), strict=True):
                episode.predicted = prediction.reward
        if self.algorithm.uses_world_model:
            self.counts["world_model_seconds"] += time.perf_counter() - started

    def train_step(self) -> dict[str, float]:
        """One training step (``sft``: demonstrations + behaviour cloning); returns the metrics line."""
        if self.config.algo == "sft":
            return self._sft_step()
        return super().train_step()

    def collect(
        self, starts: Sequence[tuple[int, dict[str, Any]]], anchors: Sequence[bool]
    ) -> list[ScoredGroup]:
        """``group_size`` episodes per initial state in the simulator, each scored by the progress world
        model; an anchor group's real score is its episodes' success."""
        config = self.config
        jobs = [
            EpisodeJob(
                reset_seed=reset_seed,
                options=options,
                sample_seed=int(np.random.default_rng([config.seed, self.step, g, m]).integers(2**62)),
                group_id=g,
                index=m,
                anchor=anchors[g],
            )
            for g, (reset_seed, options) in enumerate(starts)
            for m in range(config.group_size)
        ]
        episodes = self.runner.run(jobs, self.policy)
        self._score(episodes)
        groups = []
        for g, anchor in enumerate(anchors):
            members = [e for e in episodes if e.job.group_id == g]
            groups.append(
                ScoredGroup(
                    group_id=g,
                    anchor=anchor,
                    predicted=tuple(e.predicted for e in members),
                    real=tuple(e.success for e in members) if anchor else None,
                    trajectories=tuple(members),
                    task_id=str(members[0].job.options.get("task_id", config.name)),
                )
            )
        return groups

    def trainable(self, trajectory: Episode) -> bool:
        """Only an episode with actions, all finite, can be re-scored by the policy."""
        return trajectory.finite and bool(trajectory.actions)

    def step_metrics(
        self, groups: Sequence[ScoredGroup], batch: Sequence[Episode], seconds: float
    ) -> dict[str, float]:
        """Episode outcomes, rewards, scorer diagnostics, timing and the training compute so far."""
        episodes: list[Episode] = [e for group in groups for e in group.trajectories]
        self.counts["sim_episodes"] += len(episodes)
        self.counts["sim_steps"] += sum(len(e.actions) for e in episodes)
        self.counts["sim_seconds"] += sum(e.seconds for e in episodes)
        self.counts["real_labels"] += sum(e.success is not None for e in episodes if e.job.anchor)
        metrics = self._episode_metrics(groups, episodes)
        metrics["train/episodes_with_signal"] = float(len(batch))
        metrics["time/step_seconds"] = seconds
        metrics.update(self._compute_metrics())
        return metrics

    def learn_world_model(self, groups: Sequence[ScoredGroup]) -> None:
        """A learned progress scorer learns from the anchor groups' labelled episodes and refits."""
        if self.config.world_model != "learned" or not self.algorithm.uses_world_model:
            return
        started = time.perf_counter()
        if self.scorer.push_groups(groups):  # anchor groups only; unknown outcomes skipped
            self.scorer.refit()
        self.counts["world_model_seconds"] += time.perf_counter() - started

    def _episode_metrics(
        self, groups: Sequence[ScoredGroup], episodes: Sequence[Episode]
    ) -> dict[str, float]:
        real = [score for group in groups if group.real is not None for score in group.real]
        predicted = [e.predicted for e in episodes]
        calibrated = self.loop.debiaser.apply(list(predicted))
        outcomes = [e.outcome for e in episodes]
        values: dict[str, float | None] = {
            "reward/real_mean": mean_known(real),
            "reward/predicted_mean": mean_known(predicted),
            "reward/calibrated_mean": mean_known(calibrated),
            "reward/predicted_unknown": float(sum(p is None for p in predicted)),
            # Diagnostics the learner never sees: every episode's simulator outcome.
            "diag/sim_success_rate": mean_known([e.success for e in episodes]),
            "diag/scorer_auroc": auroc(predicted, [e.success for e in episodes]),
            "diag/calibrated_auroc": auroc(calibrated, [e.success for e in episodes]),
            "train/policy_errors": float(outcomes.count("policy_error")),
            "train/worker_crashes": float(outcomes.count("worker_crash")),
            "train/sim_errors": float(outcomes.count("sim_error")),
            "train/episodes": float(len(episodes)),
        }
        return {key: value for key, value in values.items() if value is not None}

    def update_policy(self, batch: Sequence[Episode], advantages: torch.Tensor) -> dict[str, float]:
        """The GRPO update on the episodes' per-step log-probs, plus the policy's action spread."""
        started = time.perf_counter()
        metrics = self.policy_update(lambda: self._logprobs(batch), advantages)
        log_std = getattr(self.policy, "log_std", None)
        if log_std is not None:
            metrics["losses/action_std"] = float(log_std.detach().clamp(-5.0, 1.0).exp().mean())
        self.counts["policy_seconds"] += time.perf_counter() - started
        return metrics

    def _logprobs(self, batch: Sequence[Episode]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B, T)`` per-step log-probs of the episodes' actions under the current policy, and the mask."""
        observations = [obs for e in batch for obs in e.observations[: len(e.actions)]]
        actions = torch.as_tensor(np.stack([a for e in batch for a in e.actions]), dtype=torch.float32)
        flat = self.policy.distribution(observations).log_prob(actions)
        longest = max(len(e.actions) for e in batch)
        logprobs = torch.zeros(len(batch), longest)
        mask = torch.zeros(len(batch), longest)
        offset = 0
        for row, episode in enumerate(batch):
            n = len(episode.actions)
            logprobs[row, :n] = flat[offset : offset + n]
            mask[row, :n] = 1.0
            offset += n
        return logprobs, mask

    # ------------------------------------------------------------------------------------------ SFT
    def _sft_step(self) -> dict[str, float]:
        from wmrl_envs.embodied.demos import collect_demonstrations

        config = self.config
        started = time.perf_counter()
        env = self.runner.acquire()
        try:
            demos = collect_demonstrations(
                env,
                self.expert,
                episodes=config.demos,
                horizon=config.horizon,
                noise=config.demo_noise,
                seed=config.seed * 10_000,
                tasks=(config.tasks() or list(range(self._n_tasks))) if self._has_init_states else None,
            )
        finally:
            self.runner.release(env)
        self.counts["demo_episodes"] += demos.episodes
        self.counts["sim_episodes"] += demos.episodes  # a demonstration is a simulator episode too
        self.counts["sim_steps"] += demos.steps
        self.counts["sim_seconds"] += time.perf_counter() - started
        if not len(demos):
            raise ConfigError(
                f"none of the {demos.episodes} scripted demonstrations succeeded (demo_noise="
                f"{config.demo_noise}, horizon={config.horizon}); lower demo_noise or raise horizon"
            )
        fit_started = time.perf_counter()
        losses = behaviour_cloning(
            self.policy, demos.observations, demos.actions, epochs=config.bc_epochs, seed=config.seed
        )
        self.counts["policy_seconds"] += time.perf_counter() - fit_started
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
    def evaluate_metrics(self) -> dict[str, float]:
        """Success rate of the current (sampling) policy on ``eval_samples`` fixed initial states."""
        config = self.config
        tasks = config.tasks() or list(range(self._n_tasks))
        jobs = []
        for i in range(config.eval_samples):
            options: dict[str, Any] = {}
            if self._has_init_states:
                options = {"task_id": tasks[i % len(tasks)], "init_index": (i // len(tasks)) % 50}
            jobs.append(EpisodeJob(reset_seed=EVAL_SEED + i, options=options, sample_seed=EVAL_SEED + i))
        started = time.perf_counter()
        episodes = self.runner.run(jobs, self.policy)
        outcomes = [e.success for e in episodes]
        known = [o for o in outcomes if o is not None]
        self.counts["eval_episodes"] += len(episodes)
        self.counts["eval_seconds"] += time.perf_counter() - started
        rate = float(np.mean(known)) if known else float("nan")
        return {
            "eval/success_rate": rate,
            "eval/success_se": float(np.sqrt(rate * (1 - rate) / len(known))) if known else float("nan"),
            "eval/episodes": float(len(known)),
            "eval/unknown": float(len(outcomes) - len(known)),
            "eval/mean_steps": float(np.mean([len(e.actions) for e in episodes])),
            # Totals so far, reported here: the step's compute metrics were taken before this evaluation.
            "time/eval_episodes": self.counts["eval_episodes"],
            "time/eval_seconds": self.counts["eval_seconds"],
        }

    # ------------------------------------------------------------------------- run-directory hooks
    def _compute_metrics(self) -> dict[str, float]:
        counts = self.counts
        charged = counts["sim_seconds"] + counts["world_model_seconds"] + counts["policy_seconds"]
        return {  # training compute; the evaluation's totals come with its metrics (evaluate_metrics)
            "compute/sim_episodes": counts["sim_episodes"],
            "compute/sim_steps": counts["sim_steps"],
            "compute/real_labels": counts["real_labels"],
            "compute/sim_seconds": counts["sim_seconds"],
            "compute/world_model_seconds": counts["world_model_seconds"],
            "compute/policy_seconds": counts["policy_seconds"],
            "compute/charged_total": charged,
            "compute/demo_episodes": counts["demo_episodes"],
        }

    def postfix(self, metrics: Mapping[str, float]) -> dict[str, Any]:
        """The tqdm bar's real reward, evaluation success and simulator episodes."""
        return {
            "real": metrics.get("reward/real_mean"),
            "eval": metrics.get("eval/success_rate"),
            "episodes": metrics.get("compute/sim_episodes"),
        }

    def plot(self, lines: list[dict[str, float]]) -> list[Path]:
        """The embodied panels (success, rewards, anchor weight, bias reduction, scorer AUROC, compute)."""
        from wmrl_adapters.train.plots import EMBODIED_PANELS, plot_run

        return plot_run(lines, self.run_dir / "plots", panels=EMBODIED_PANELS)

    def close(self) -> None:
        """Stop the simulator workers and close TensorBoard."""
        self.runner.close()
        super().close()

    def extra_state(self) -> dict[str, Any]:
        """Policy, optimiser, correction state, the learned scorer (if any), counters."""
        return {
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "loop": self.loop.state_dict(),
            "scorer": self.scorer.state_dict() if self.config.world_model == "learned" else None,
            "counts": dict(self.counts),
        }

    def restore_extra(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`extra_state` returned."""
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.loop.load_state_dict(state["loop"])
        if state["scorer"] is not None:
            self.scorer.load_state_dict(state["scorer"])
        self.counts.update(state["counts"])
