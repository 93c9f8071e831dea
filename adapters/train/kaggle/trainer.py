"""The GRPO trainer of ``wmrl train``: grouped rollouts, WMRL's corrections, the update, a run directory.

Why one loop for seven algorithms: the comparison is only fair if every method sees the same kind of
rollouts, the same anchor plan and the same update. Every step does, in this order:

1. draw ``groups`` training competitions (seeded by ``(seed, step)``: a resumed run draws the same);
2. plan the anchor groups (:meth:`CorrectionLoop.plan`; ``grpo`` anchors all, ``wm`` none, ``anchors``
   keeps only the planned anchor groups and rolls out nothing else);
3. roll out ``group_size`` trajectories per group with :class:`~wmrl_envs.rollouts.GroupedRollout` in
   simulate mode: anchor groups run for real (and are predicted, for the calibration pairs), the rest
   only through the world model; a trajectory scores its best execution (:func:`best_return`);
4. correct (:meth:`CorrectionLoop.correct`: OD, IVD, advantages) and let a learned world model learn
   from the anchor executions;
5. the clipped GRPO update (:func:`wmrl_algos.grpo.grpo_loss`) on the trajectories with a signal;
6. log a metrics line, save a checkpoint every ``checkpoint_every`` steps, evaluate when due.

With evaluation on, a fresh run first evaluates the initial policy (the ``step: 0`` line), and the
summary's ``held_out`` holds the start, the end and their paired change: every evaluation runs the same
episodes (competitions and reset seeds) and, for a policy that samples from a ``torch.Generator``
attribute ``generator`` (the design agent), the same random numbers, so the change's standard error is
the paired one (:func:`~wmrl_adapters.train.evaluate.paired_change`).

Run directory: ``config.json`` (resolved), ``metrics.jsonl`` (one line per step), ``checkpoint.pt``
(policy, optimiser, correction state, world-model state, RNG states, ledger, compute meters, execution
cache; written to a temporary file and renamed, so a failed write never destroys the previous one),
``tensorboard/`` when TensorBoard is installed, ``plots/`` and ``summary.json`` at the end.

Compute (``compute/*``), all in CPU-seconds: the sandbox's cgroup CPU for every real execution,
charged at cost on a cache hit (``compute/sandbox_cpu_charged``; see
:mod:`~wmrl_adapters.train.kaggle.execution`), the world model's process CPU (predictions and learning,
``compute/world_model_cpu_s``), the policy's sampling (``compute/policy_sample_cpu_s``) and update
(``compute/policy_update_cpu_s``); ``compute/charged_total`` is their sum, ``compute/spent_total`` the
same with the sandbox CPU this machine actually burnt. Wall seconds are kept apart (``time/*``): on a
loaded machine they measure the load. Evaluation compute is reported apart (``eval/...``).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from wmrl_adapters.train.kaggle.config import TrainConfig
from wmrl_adapters.train.kaggle.evaluate import (
    EvalResult,
    HeldOutScore,
    evaluate_policy,
    resolve_competitions,
)
from wmrl_adapters.train.kaggle.execution import (
    CachedKaggleEnv,
    ComputeMeter,
    CpuClock,
    CpuTimedPolicy,
    CpuTimedWorldModel,
    ExecutionCache,
)
from wmrl_adapters.train.kaggle.world_models import NoWorldModel, build_world_model
from wmrl_adapters.train.run.rundir import (
    CHECKPOINT,
    CONFIG,
    METRICS,
    SUMMARY,
    RunTrainer,
    learning_metrics,
    mean_known,
    read_metrics,
    write_atomic,
)
from wmrl_adapters.train.run.settings import correction_config

from wmrl_algos.algorithms import algorithm
from wmrl_algos.errors import ConfigError
from wmrl_algos.loop import CorrectionLoop
from wmrl_algos.types import ScoredGroup
from wmrl_envs.kaggle.competition import Competition
from wmrl_envs.kaggle.env import extract_code
from wmrl_envs.kaggle.outcome import Outcome
from wmrl_envs.kaggle.suite import KaggleSuite, load_suite
from wmrl_envs.ledger import CostLedger
from wmrl_envs.rollouts import GroupedRollout, RolloutConfig, RolloutTask, Trajectory, best_return
from wmrl_envs.world_model import LearningWorldModel, WorldModelQuery

__all__ = [
    "CHECKPOINT",
    "CONFIG",
    "METRICS",
    "SUMMARY",
    "Trainer",
    "build_policy",
    "correction_config",
    "evaluation_seed",
    "learning_metrics",
    "read_metrics",
    "write_atomic",
]

CLOCKS = ("policy_sample", "policy_update", "world_model_predict", "world_model_learn")
"""The in-process compute the trainer measures in CPU-seconds (:class:`CpuClock` each)."""
_EVAL_STREAM = 0xE7A1
"""Mixed with the run's seed into the seed of every evaluation's sampling (common random numbers)."""


def evaluation_seed(run_seed: int) -> int:
    """The seed every evaluation of a run draws its policy's samples from (one stream per run seed)."""
    return int(np.random.SeedSequence([run_seed, _EVAL_STREAM]).generate_state(1)[0])


def build_policy(config: TrainConfig, competitions: Callable[[str], Competition]) -> Any:
    """The policy of ``config.policy``: the design-space agent or the LLM agent (``wmrl_adapters.llm_agent``).

    Raises:
        ConfigError: ``--policy llm`` but the LLM agent module is not available in this install.
    """
    if config.policy == "design":
        from wmrl_adapters.train.kaggle.design_policy import DesignPolicy

        return DesignPolicy(competitions, max_turns=config.max_turns, seed=config.seed)
    try:
        from wmrl_adapters.llm_agent import LLMAgent, LLMAgentConfig
    except ImportError as error:
        raise ConfigError(
            f"--policy llm needs wmrl_adapters.llm_agent ({error}); install wmrl[llm] or use --policy design"
        ) from error
    settings: dict[str, Any] = {"seed": config.seed}
    if config.llm_model:
        settings["model"] = config.llm_model
    return LLMAgent(LLMAgentConfig.from_settings(config.llm_settings or "", **settings))


class Trainer(RunTrainer):
    """One training run in a run directory (new or resumed); with evaluation on, a fresh run evaluates
    its initial policy first (step 0).

    Args:
        config: the run's settings.
        run_dir: the run directory (created; must not hold another run unless ``resume``).
        resume: continue the run in ``run_dir`` from its checkpoint; ``config`` must equal the saved one.
        suite: the task suite (default: the built-in one).
        ray: a Ray address (``"auto"`` or ``ray://...``) to run the real executions on Ray.
        cache: an execution cache shared with other runs (``wmrl compare``); hits are charged at cost.
        sandbox: run the executions in this backend instead of ``config.sandbox`` (``wmrl eval
            --sandbox``: isolation chosen on the command line, not by the run's ``config.json``, which
            keeps the run's own).

    Raises:
        ConfigError: ``run_dir`` holds another run (without ``resume``), or ``config`` differs from the
            saved config of the run being resumed (nothing is written then).
        CheckpointError: ``resume`` without a checkpoint.

    Example:
        >>> trainer = Trainer(TrainConfig(steps=1), Path("runs/demo"))  # doctest: +SKIP
        >>> summary = trainer.run()  # doctest: +SKIP
    """

    evaluates_start = True

    def __init__(
        self,
        config: TrainConfig,
        run_dir: Path,
        *,
        resume: bool = False,
        suite: KaggleSuite | None = None,
        ray: str | None = None,
        cache: ExecutionCache | None = None,
        sandbox: str | None = None,
    ) -> None:
        self.open_run_dir(config, run_dir, resume)
        self.suite = suite if suite is not None else load_suite()
        self.train_ids = self._train_ids()
        self._eval_competitions: list[Competition] | None = None
        self._known: dict[str, Competition] = {}
        self.policy = build_policy(config, self._lookup)
        self.optimizer = torch.optim.Adam(list(self.policy.parameters()), lr=config.learning_rate)
        self.loop = CorrectionLoop(correction_config(config))
        self.algorithm = algorithm(config.algo)
        self.world_model = (
            build_world_model(config.world_model) if self.algorithm.uses_world_model else NoWorldModel()
        )
        self.ledger = CostLedger()
        self.meter = ComputeMeter()
        self.eval_meter = ComputeMeter()
        self.cache = (cache if cache is not None else ExecutionCache()) if config.cache else None
        self.sandbox = self._make_sandbox(sandbox or config.sandbox, ray)
        self.clocks = {name: CpuClock() for name in CLOCKS}
        self.wall_seconds = 0.0
        self.held_out: dict[str, HeldOutScore] = {}
        executor = None
        if ray is not None:
            from wmrl_adapters.ray_exec import RayExecutor

            executor = RayExecutor(ray)
        self.rollout = GroupedRollout(
            self._make_env,
            CpuTimedWorldModel(self.world_model, self.clocks["world_model_predict"]),
            RolloutConfig(
                group_size=config.group_size,
                mode="simulate",
                scoring="step",
                max_turns=config.max_turns,
                tolerate_errors=True,
                max_workers=2,
            ),
            reducer=best_return,
            ledger=self.ledger,
            executor=executor,
        )
        self.start_run_dir()

    # ----------------------------------------------------------------------------------------- setup
    def _train_ids(self) -> list[str]:
        spec = self.config.competitions
        if spec == "train":
            return self.suite.ids("train")
        ids = [item.strip() for item in spec.split(",") if item.strip()]
        unknown = [cid for cid in ids if cid not in self.suite]
        if unknown or not ids:
            raise ConfigError(
                f"unknown competition(s) {unknown or spec!r}; choose from {self.suite.ids('train')}"
            )
        heldout = [cid for cid in ids if cid in self.suite.ids("heldout")]
        if heldout:
            raise ConfigError(
                f"competitions {heldout} are held out for evaluation and never trained on; choose from "
                f"{self.suite.ids('train')}"
            )
        return ids

    def _lookup(self, competition_id: str) -> Competition:
        if competition_id not in self._known:
            self._known[competition_id] = self.suite.get(competition_id)
        return self._known[competition_id]

    def _make_sandbox(self, backend: str, ray: str | None) -> Any:
        warm = backend == "local" and bool(self.config.warm)
        if ray is not None:
            # Only the sandbox run travels to a Ray worker node (built once per Ray worker process, so a
            # warm pool stays warm there); the env, its execution cache and compute meter stay here.
            from wmrl_adapters.ray_exec import RaySandbox

            options = {"warm": self.config.warm} if warm else None
            return RaySandbox(backend, options=options, address=ray)
        from wmrl_envs.sandbox import make_sandbox

        if warm:
            return make_sandbox("local", warm=self.config.warm)
        return make_sandbox(backend)

    def _make_env(self) -> CachedKaggleEnv:
        config = self.config
        return CachedKaggleEnv(
            self.meter,
            self.cache,
            suite=self.suite,
            split="train",
            sandbox=self.sandbox,
            max_turns=config.max_turns,
            timeout_s=config.timeout_s,
            memory_mb=config.memory_mb,
        )

    def eval_competitions(self) -> list[Competition]:
        """The evaluation tasks of ``config.eval_competitions`` (resolved once)."""
        if self._eval_competitions is None:
            specs = [item.strip() for item in self.config.eval_competitions.split(",") if item.strip()]
            self.set_eval_competitions(specs)
        assert self._eval_competitions is not None
        return self._eval_competitions

    def set_eval_competitions(self, specs: Sequence[str | Competition]) -> None:
        """Evaluate on these instead: suite ids, splits, competition directories, or loaded competitions
        (e.g. an MLE-bench one read with its registry, see :func:`resolve_competitions`). The policy acts
        on them through the trainer's lookup like on any training task, having never seen them."""
        self._eval_competitions = resolve_competitions(list(specs), self.suite)
        for competition in self._eval_competitions:
            self._known[competition.id] = competition

    # ------------------------------------------------------------------------------------ training
    def draw_groups(self, step: int) -> list[str]:
        """The ``groups`` training competitions of step ``step`` (seeded by ``(seed, step)``)."""
        rng = np.random.default_rng([self.config.seed, step])
        picks = rng.choice(
            len(self.train_ids), self.config.groups, replace=self.config.groups > len(self.train_ids)
        )
        return [self.train_ids[int(i)] for i in picks]

    def collect(self, starts: Sequence[str], anchors: Sequence[bool]) -> list[ScoredGroup]:
        """``group_size`` trajectories per competition, simulated; anchor groups also run for real."""
        rollout = CpuClock()
        with rollout.measure():
            groups = self.rollout.run(
                [RolloutTask(cid, {"competition": cid}) for cid in starts],
                CpuTimedPolicy(self.policy, self.clocks["policy_sample"]),
                anchors=list(anchors),
                seed=self.config.seed * 100_000 + self.step * 100,
            )
        self._rollout_seconds = rollout.wall_s
        return groups

    def step_metrics(
        self, groups: Sequence[ScoredGroup], batch: Sequence[Trajectory], seconds: float
    ) -> dict[str, float]:
        """Ledger, rewards, trajectory counts, timing and compute of the step."""
        self.wall_seconds += seconds
        metrics: dict[str, float] = {}
        metrics.update(self.ledger.as_metrics())
        metrics.update(self._reward_metrics(groups))
        metrics["train/trajectories"] = float(sum(len(group.trajectories) for group in groups))
        metrics["train/trajectories_with_signal"] = float(len(batch))
        metrics["time/rollout_seconds"] = self._rollout_seconds
        metrics["time/wall_seconds"] = self.wall_seconds
        metrics.update({f"time/{name}_seconds": clock.wall_s for name, clock in self.clocks.items()})
        metrics.update(self._compute_metrics())
        return metrics

    def learn_world_model(self, groups: Sequence[ScoredGroup]) -> None:
        """A learning world model observes the anchor groups' real executions, turn by turn."""
        if not isinstance(self.world_model, LearningWorldModel):
            return
        with self.clocks["world_model_learn"].measure():
            self._observe_anchors(groups)

    def _observe_anchors(self, groups: Sequence[ScoredGroup]) -> None:
        queries, rewards = [], []
        for group in groups:
            if not group.anchor:
                continue
            competition = self._lookup(str(group.task_id))
            for trajectory in group.trajectories:
                for turn, (action, real) in enumerate(zip(trajectory.actions, trajectory.real, strict=True)):
                    if real is None:
                        continue
                    context = competition.context(
                        turn=turn,
                        history=tuple(trajectory.observations[1 : turn + 1]),
                        previous_solutions=tuple(extract_code(a) or a for a in trajectory.actions[:turn]),
                    )
                    queries.append(WorldModelQuery(context, action))
                    rewards.append(real)
        if queries:
            self.world_model.observe(queries, rewards)

    def update_policy(self, batch: Sequence[Trajectory], advantages: torch.Tensor) -> dict[str, float]:
        """The GRPO update on the policy's per-turn log-probs, plus its entropy when it has one."""
        with self.clocks["policy_update"].measure():
            metrics = self.policy_update(lambda: self.policy.logprobs(batch), advantages)
            entropy = getattr(self.policy, "entropy", None)
            if entropy is not None:
                metrics["losses/entropy"] = float(entropy(batch))
        return metrics

    def _reward_metrics(self, groups: Sequence[ScoredGroup]) -> dict[str, float]:
        real = [score for group in groups if group.real is not None for score in group.real]
        predicted = [score for group in groups for score in group.predicted]
        calibrated = [score for group in groups for score in self.loop.debiaser.apply(list(group.predicted))]
        values = {
            "reward/real_mean": mean_known(real),
            "reward/predicted_mean": mean_known(predicted),
            "reward/calibrated_mean": mean_known(calibrated),
            "reward/real_valid_rate": mean_known([float(s >= 0.5) for s in real if s is not None]),
            "reward/predicted_unknown": float(sum(s is None for s in predicted)),
        }
        return {key: value for key, value in values.items() if value is not None}

    def _compute_metrics(self) -> dict[str, float]:
        """The training compute so far, every figure in CPU-seconds (see the module doc)."""
        meter = self.meter.state_dict()
        cpu = {name: clock.cpu_s for name, clock in self.clocks.items()}
        in_process = {
            "compute/world_model_cpu_s": cpu["world_model_predict"] + cpu["world_model_learn"],
            "compute/policy_sample_cpu_s": cpu["policy_sample"],
            "compute/policy_update_cpu_s": cpu["policy_update"],
        }
        return {
            "compute/real_executions": meter["executions"],
            "compute/cache_hits": meter["hits"],
            "compute/sandbox_cpu_charged": meter["charged_cpu_s"],
            "compute/sandbox_cpu_spent": meter["spent_cpu_s"],
            **in_process,
            "compute/charged_total": meter["charged_cpu_s"] + sum(in_process.values()),
            "compute/spent_total": meter["spent_cpu_s"] + sum(in_process.values()),
        }

    # ---------------------------------------------------------------------------------- evaluation
    def evaluate(self, samples: int | None = None) -> EvalResult:
        """Evaluate the current policy on the evaluation tasks (its sampling state is restored after).

        Every evaluation runs the same episodes; a policy that samples from a ``torch.Generator``
        attribute ``generator`` draws from it seeded by the run's seed alone, so two evaluations of a
        run (and ``wmrl eval`` of it) share their random numbers and differ only by the policy.
        """
        config = self.config
        snapshot = copy.deepcopy(self.policy.state_dict())
        generator = getattr(self.policy, "generator", None)
        if isinstance(generator, torch.Generator):
            generator.manual_seed(evaluation_seed(config.seed))
        try:
            result = evaluate_policy(
                self.policy,
                self.eval_competitions(),
                samples=samples or config.eval_samples,
                max_turns=config.max_turns,
                sandbox=self.sandbox,
                timeout_s=config.timeout_s,
                memory_mb=config.memory_mb,
                cache=self.cache,
            )
        finally:
            self.policy.load_state_dict(snapshot)
        for key in ("executions", "hits", "charged_cpu_s", "spent_cpu_s", "wall_s"):
            setattr(self.eval_meter, key, getattr(self.eval_meter, key) + result.compute[key])
        return result

    def evaluate_metrics(self) -> dict[str, float]:
        """The ``eval/...`` metrics of :meth:`evaluate` (called by the run loop when due); the held-out
        score is kept as the start (step 0) or the end (:meth:`summary_extra`)."""
        result = self.evaluate()
        self.held_out["start" if self.step == 0 else "end"] = result.held_out(self.step)
        return result.metrics()

    # ------------------------------------------------------------------------- run-directory hooks
    def postfix(self, metrics: Mapping[str, float]) -> dict[str, Any]:
        """The tqdm bar's mean real reward and charged compute."""
        return {"real": metrics.get("reward/real_mean"), "charged": metrics["compute/charged_total"]}

    def summary_extra(self) -> dict[str, Any]:
        """The evaluation's own compute (kept apart from training compute) and ``held_out``: the start
        and end :class:`HeldOutScore` (plain data; :func:`describe_held_out` prints them)."""
        return {
            "eval_compute": self.eval_meter.state_dict(),
            "held_out": {name: score.to_dict() for name, score in self.held_out.items()},
        }

    def start_message(self) -> str | None:
        """The initial policy's held-out score, printed before training starts."""
        start = self.held_out.get("start")
        return None if start is None else start.text()

    def close(self) -> None:
        """Close the rollout's environments, the sandbox and the TensorBoard writer."""
        self.rollout.close()
        close = getattr(self.sandbox, "close", None)
        if close is not None:
            close()
        super().close()

    def extra_state(self) -> dict[str, Any]:
        """Policy, optimiser, correction and world-model state, ledger, meters, execution cache, seconds."""
        return {
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "loop": self.loop.state_dict(),
            "world_model": self.world_model.state_dict()
            if isinstance(self.world_model, LearningWorldModel)
            else {},
            "ledger": self.ledger.state_dict(),
            "meter": self.meter.state_dict(),
            "eval_meter": self.eval_meter.state_dict(),
            "cache": None
            if self.cache is None
            else {
                key: {"outcome": dataclasses.asdict(outcome), "cpu_s": cpu_s}
                for key, (outcome, cpu_s) in self.cache.state_dict().items()
            },
            "clocks": {name: clock.state_dict() for name, clock in self.clocks.items()},
            "wall_seconds": self.wall_seconds,
            "held_out": {name: score.to_dict() for name, score in self.held_out.items()},
        }

    def restore_extra(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`extra_state` returned."""
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.loop.load_state_dict(state["loop"])
        if state["world_model"] and isinstance(self.world_model, LearningWorldModel):
            self.world_model.load_state_dict(state["world_model"])
        self.ledger.load_state_dict(state["ledger"])
        self.meter.load_state_dict(state["meter"])
        self.eval_meter.load_state_dict(state["eval_meter"])
        if self.cache is not None and state["cache"] is not None:
            saved = {
                key: (Outcome(**entry["outcome"]), float(entry["cpu_s"]))
                for key, entry in state["cache"].items()
            }
            self.cache.load_state_dict({**self.cache.state_dict(), **saved})
        if "clocks" in state:
            for name, clock in self.clocks.items():
                clock.load_state_dict(state["clocks"][name])
            self.wall_seconds = float(state["wall_seconds"])
        else:  # an older wmrl timed the policy and the world model in wall seconds: their CPU is unknown
            for clock in self.clocks.values():
                clock.load_state_dict({"cpu_s": math.nan, "wall_s": math.nan})
            self.wall_seconds = float(state["seconds"]["wall"])
        self.held_out = {
            name: HeldOutScore.from_dict(score) for name, score in state.get("held_out", {}).items()
        }
