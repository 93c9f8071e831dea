"""The run-directory machinery shared by ``wmrl train``'s trainers (Kaggle code agent and embodied policy).

Why a shared base: what makes a run reproducible and inspectable is the same whatever is trained: the
resolved ``config.json``, one ``metrics.jsonl`` line per step, a ``checkpoint.pt`` written atomically
(temporary file + rename) with the RNG states, as plain data that loading cannot run code from
(:mod:`~wmrl_adapters.train.run.state_io`), ``--resume`` that refuses other settings (a new ``--steps``
extends or shortens the run) and recomputes the metrics after the checkpoint, Ctrl-C/SIGTERM saving the
last completed step, a tqdm bar, plots and ``summary.json`` at the end. A trainer that sets
:attr:`RunTrainer.evaluates_start` also evaluates the initial policy of a fresh run before step 1 (the
``step: 0`` metrics line), so a run shows whether training helped, not only where it ended.
:class:`RunTrainer` holds all of it, and the training step every track runs
(:meth:`RunTrainer.train_step`: plan anchors, collect, correct, let the world model learn, update); a
trainer supplies the step's hooks, the evaluation (:meth:`RunTrainer.evaluate_metrics`), what its
checkpoint holds beyond the common part (:meth:`RunTrainer.extra_state` /
:meth:`RunTrainer.restore_extra`) and its plots. The update itself,
:func:`~wmrl_algos.grpo.grpo_update`, lives beside the loss in ``wmrl_algos`` (still importable here).

What both trainers measure and report with is :mod:`wmrl_adapters.train.run.measure` (re-exported here).
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from tqdm.auto import tqdm
from wmrl_adapters.train.run.measure import (
    CpuClock,
    CpuTimedPolicy,
    CpuTimedWorldModel,
    HeldOutScore,
    PairedChange,
    describe_held_out,
    mean_se,
    paired_change,
)
from wmrl_adapters.train.run.settings import settings_before
from wmrl_adapters.train.run.state_io import load_state, state_bytes, write_atomic

from wmrl_algos.algorithms import Algorithm
from wmrl_algos.errors import CheckpointError, ConfigError
from wmrl_algos.grpo import grpo_update
from wmrl_algos.loop import CorrectionLoop
from wmrl_algos.types import ScoredGroup

__all__ = [
    "CHECKPOINT",
    "CONFIG",
    "METRICS",
    "SUMMARY",
    "CpuClock",
    "CpuTimedPolicy",
    "CpuTimedWorldModel",
    "HeldOutScore",
    "PairedChange",
    "RunConfig",
    "RunTrainer",
    "describe_held_out",
    "grpo_update",
    "learning_metrics",
    "mean_known",
    "mean_se",
    "paired_change",
    "read_metrics",
    "write_atomic",
]

CHECKPOINT = "checkpoint.pt"
METRICS = "metrics.jsonl"
CONFIG = "config.json"
SUMMARY = "summary.json"
_TIMING_PREFIXES = ("cost/", "compute/", "time/", "eval/sandbox_cpu")


class RunConfig(Protocol):
    """What :class:`RunTrainer` reads from a trainer's config (both configs of ``wmrl train`` have it)."""

    algo: str
    steps: int
    eval_every: int
    eval_samples: int
    checkpoint_every: int
    progress: bool

    def to_dict(self) -> dict[str, Any]: ...

    def learning_settings(self) -> dict[str, Any]: ...


def read_metrics(path: Path) -> list[dict[str, float]]:
    """The metrics lines of a run (a torn last line from a killed run is skipped)."""
    if not path.is_file():
        return []
    lines = []
    for text in path.read_text().splitlines():
        try:
            lines.append(json.loads(text))
        except ValueError:
            continue
    return lines


def learning_metrics(line: Mapping[str, float]) -> dict[str, float]:
    """A metrics line without its timing/compute keys (what must be identical after an exact resume)."""
    return {key: value for key, value in line.items() if not key.startswith(_TIMING_PREFIXES)}


def mean_known(values: Sequence[float | None]) -> float | None:
    """The mean of the known, finite values (``None`` when there are none: never 0).

    Example:
        >>> mean_known([1.0, None, 3.0]), mean_known([None])
        (2.0, None)
    """
    known = [float(v) for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(known)) if known else None


@contextlib.contextmanager
def _signals_deferred(active: bool) -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends (main thread only), so a step commits whole.

    The handlers are swapped for one that only records the signal, and a recorded signal is raised again
    once the old handlers are back. Blocking the signals with ``pthread_sigmask`` held nothing: it masks
    the main thread alone, so with torch's or an executor's threads alive the kernel handed SIGTERM to
    another thread, and Python still ran the handler in the main thread, inside the block (seen: a
    metrics line with no checkpoint behind it, under load).
    """
    if not active:
        yield
        return
    received: list[int] = []

    def hold(signum: int, frame: Any) -> None:
        received.append(signum)

    previous = {number: signal.signal(number, hold) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if received:
            signal.raise_signal(received[0])


class RunTrainer:
    """Base of a trainer that lives in a run directory (new or resumed); see the module doc.

    A subclass calls :meth:`open_run_dir` early in its ``__init__`` (before it builds anything costly),
    then :meth:`start_run_dir` once its state exists (it restores the checkpoint when resuming).

    Example:
        >>> issubclass(RunTrainer, object)
        True
    """

    config: Any
    run_dir: Path
    step: int
    last_eval: dict[str, float]
    evaluates_start: bool = False
    """Evaluate the initial policy of a fresh run before step 1 when evaluation is on (its metrics line
    has ``step: 0`` and the evaluation's keys only; a step-0 checkpoint follows it, so a run stopped in
    step 1 resumes with its start recorded, and a resumed run never evaluates its start again)."""
    policy: Any
    optimizer: torch.optim.Optimizer
    algorithm: Algorithm
    loop: CorrectionLoop

    def policy_update(
        self, logprobs: Callable[[], tuple[torch.Tensor, torch.Tensor]], advantages: torch.Tensor
    ) -> dict[str, float]:
        """:func:`grpo_update` of ``self.policy`` with the run's clip, epochs and gradient-norm limit."""
        config = self.config
        return grpo_update(
            logprobs,
            self.optimizer,
            list(self.policy.parameters()),
            advantages,
            clip=config.clip,
            epochs=config.update_epochs,
            max_grad_norm=config.max_grad_norm,
        )

    # ----------------------------------------------------------------------------------- the directory
    def open_run_dir(self, config: RunConfig, run_dir: Path, resume: bool) -> None:
        """Check ``run_dir`` for a new run, or read the checkpoint of the run to resume (nothing is written).

        A resumed run may change ``steps`` (to extend a finished run, or stop an unfinished one sooner)
        down to the steps it has done; any other learning setting must equal the saved one (a setting
        the saved config predates reads as the code that wrote it used it:
        :func:`~wmrl_adapters.train.settings.settings_before`). The
        checkpoint is read here, before a trainer builds anything costly, so a file that is not plain
        data is refused first (:func:`~wmrl_adapters.train.state_io.load_state`).

        Raises:
            ConfigError: ``run_dir`` holds another run (without ``resume``), or ``config`` differs from
                the saved config of the run being resumed in more than ``steps``, or has fewer steps
                than the run has done.
            CheckpointError: ``resume`` without a checkpoint, or one that cannot be loaded safely.
        """
        self.run_dir = Path(run_dir)
        self.config = config
        self.step = 0
        self.last_eval = {}
        self._resume = resume
        self._boundary: bytes | None = None
        self._saved_state: dict[str, Any] | None = None
        self._saved_config: dict[str, Any] = {}
        saved = self.run_dir / CONFIG
        if resume:
            if not saved.is_file() or not (self.run_dir / CHECKPOINT).is_file():
                raise CheckpointError(f"{self.run_dir} has no {CONFIG} and {CHECKPOINT}; nothing to resume")
            self._saved_config = settings_before(json.loads(saved.read_text()))
            self._check_same_settings(self._saved_config)
            self._saved_state = self._read_checkpoint()
            done = int(self._saved_state["step"])
            if done > self.total_steps:
                raise ConfigError(
                    f"cannot resume {self.run_dir} with steps={config.steps}: the run has done {done} steps "
                    f"(it can only go on); pass --steps {done} or more"
                )
        elif saved.is_file():
            raise ConfigError(
                f"{self.run_dir} already holds a run; pass --resume {self.run_dir} to continue it or choose "
                "another --out directory (nothing was overwritten)"
            )

    def _check_same_settings(self, previous: Mapping[str, Any]) -> None:
        current = self.config.learning_settings()
        differing = sorted(
            key
            for key in current.keys() | previous.keys()
            if key not in ("progress", "steps") and current.get(key) != previous.get(key)
        )
        if differing:
            details = ", ".join(f"{k}: run {previous.get(k)!r} vs now {current.get(k)!r}" for k in differing)
            raise ConfigError(
                f"cannot resume {self.run_dir}: it was made with another config ({details}); resume "
                "without changing settings (only --steps may change), or start a new run directory"
            )

    def start_run_dir(self) -> None:
        """Write the new run's ``config.json`` and empty metrics, or restore the resumed checkpoint (and
        write the resumed run's ``config.json`` again when its ``steps`` changed)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self._saved_state is not None:
            self._restore(self._saved_state)
            self._saved_state = None
            if self.config.to_dict() != self._saved_config:
                self._write_config()
        else:
            self._write_config()
            (self.run_dir / METRICS).write_text("")
        self._tensorboard = self._open_tensorboard()

    def _write_config(self) -> None:
        write_atomic(self.run_dir / CONFIG, (json.dumps(self.config.to_dict(), indent=2) + "\n").encode())

    def _open_tensorboard(self) -> Any:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            return None
        return SummaryWriter(str(self.run_dir / "tensorboard"))

    # ------------------------------------------------------------------------------------- hooks
    @property
    def total_steps(self) -> int:
        """Steps of the run (``config.steps`` unless a trainer says otherwise)."""
        return int(self.config.steps)

    def train_step(self) -> dict[str, float]:
        """One GRPO / WMRL step, the same for every track; returns its metrics line.

        Plan the anchor groups, collect and score the rollouts, correct them, let the world model
        learn from the anchors, update the policy. A track supplies what a group starts from
        (:meth:`draw_groups`), how its rollouts are collected and scored (:meth:`collect`), what its
        world model learns (:meth:`learn_world_model`), which trajectories its policy can re-score
        (:meth:`trainable`), the update on its policy's log-probs (:meth:`update_policy`) and its own
        metrics (:meth:`step_metrics`). The order of the random draws is fixed here: tasks, anchor plan,
        rollouts.
        """
        started = time.perf_counter()
        starts = self.draw_groups(self.step)
        anchors = [bool(anchor) for anchor in self.loop.plan(len(starts))]
        if self.algorithm.rolls_out_only_anchors:
            starts = [start for start, anchor in zip(starts, anchors, strict=True) if anchor]
            anchors = [True] * len(starts)
        groups = self.collect(starts, anchors)
        result = self.loop.correct(groups)
        self.learn_world_model(groups)
        advantages, keep = result.flat()
        trajectories = [trajectory for group in groups for trajectory in group.trajectories]
        chosen = [i for i, t in enumerate(trajectories) if keep[i] and self.trainable(t)]
        batch = [trajectories[i] for i in chosen]
        signal_advantages = torch.as_tensor(advantages[chosen], dtype=torch.float32)
        update = self.update_policy(batch, signal_advantages) if batch else {}
        self.step += 1
        metrics: dict[str, float] = {"step": float(self.step)}
        metrics.update(result.metrics)
        metrics.update(update)
        metrics.update(self.step_metrics(groups, batch, time.perf_counter() - started))
        return metrics

    def draw_groups(self, step: int) -> list[Any]:
        """What each of step ``step``'s groups starts from (seeded by the run's seed and the step)."""
        raise TypeError(f"{type(self).__name__} must define draw_groups()")

    def collect(self, starts: Sequence[Any], anchors: Sequence[bool]) -> list[ScoredGroup]:
        """Roll out and score one group per start; anchor groups also get their real scores."""
        raise TypeError(f"{type(self).__name__} must define collect()")

    def learn_world_model(self, groups: Sequence[ScoredGroup]) -> None:
        """Let a learning world model learn from the anchor groups' real scores (default: nothing)."""

    def trainable(self, trajectory: Any) -> bool:
        """Whether the policy can re-score ``trajectory`` for the update (default: every one)."""
        return True

    def update_policy(self, batch: Sequence[Any], advantages: torch.Tensor) -> dict[str, float]:
        """The GRPO update on ``batch`` (its advantages); the loss metrics (subclasses)."""
        raise TypeError(f"{type(self).__name__} must define update_policy()")

    def step_metrics(
        self, groups: Sequence[ScoredGroup], batch: Sequence[Any], seconds: float
    ) -> dict[str, float]:
        """The track's own metrics of a finished step (``seconds``: its wall time)."""
        return {}

    def evaluate_metrics(self) -> dict[str, float]:
        """Evaluate the current policy; the ``eval/...`` metrics (subclasses)."""
        raise TypeError(f"{type(self).__name__} must define evaluate_metrics()")

    def extra_state(self) -> dict[str, Any]:
        """What the checkpoint holds beyond step, config, RNG states and the last evaluation."""
        return {}

    def restore_extra(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`extra_state` returned."""

    def plot(self, lines: list[dict[str, float]]) -> list[Path]:
        """Write the run's plots from its metrics lines; returns the files."""
        from wmrl_adapters.train.run.plots import plot_run

        return plot_run(lines, self.run_dir / "plots")

    def summary_extra(self) -> dict[str, Any]:
        """Extra keys of ``summary.json``."""
        return {}

    def postfix(self, metrics: Mapping[str, float]) -> dict[str, Any]:
        """What the tqdm bar shows after a step."""
        return {}

    def close(self) -> None:
        """Release what the trainer holds (subclasses extend; this closes TensorBoard)."""
        if getattr(self, "_tensorboard", None) is not None:
            self._tensorboard.close()

    # ----------------------------------------------------------------------------------- the loop
    def run(self) -> dict[str, Any]:
        """Train to ``config.steps`` (from where a resumed run stopped), evaluate, plot, summarise.

        Ctrl-C (SIGINT) or SIGTERM saves the last completed step's checkpoint before exiting.
        """
        config = self.config
        in_main_thread = threading.current_thread() is threading.main_thread()
        previous = signal.getsignal(signal.SIGTERM) if in_main_thread else None
        if previous is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, signal.default_int_handler)
        try:
            self._evaluate_start(in_main_thread)
            with tqdm(
                total=self.total_steps,
                initial=self.step,
                desc=f"wmrl train {config.algo}",
                disable=not config.progress,
            ) as bar:
                while self.step < self.total_steps:
                    metrics = self.train_step()
                    due = (
                        config.eval_every
                        and self.step % config.eval_every == 0
                        and self.step < self.total_steps
                    )
                    if config.eval_samples and (due or self.step == self.total_steps):
                        self.last_eval = self.evaluate_metrics()
                        metrics.update(self.last_eval)
                    checkpoint = self.step % config.checkpoint_every == 0 or self.step == self.total_steps
                    self._commit(metrics, checkpoint=checkpoint, in_main_thread=in_main_thread)
                    bar.update(1)
                    bar.set_postfix(self.postfix(metrics))
        except KeyboardInterrupt:
            if self._boundary is not None:
                write_atomic(self.run_dir / CHECKPOINT, self._boundary)
            print(
                f"interrupted: checkpoint of step {self.step_saved()} in {self.run_dir}; continue with "
                f"`wmrl train --resume {self.run_dir}`"
            )
            raise
        finally:
            if in_main_thread:
                signal.signal(signal.SIGTERM, previous)
            self.close()
        return self._finish()

    def _evaluate_start(self, in_main_thread: bool) -> None:
        """The step-0 evaluation of a fresh run (:attr:`evaluates_start`), committed with its checkpoint."""
        if not (self.evaluates_start and self.config.eval_samples) or self.step != 0:
            return
        if any(line.get("step") == 0 for line in read_metrics(self.run_dir / METRICS)):
            return  # resumed from the step-0 checkpoint: the start is recorded
        self.last_eval = self.evaluate_metrics()
        self._commit({"step": 0.0, **self.last_eval}, checkpoint=True, in_main_thread=in_main_thread)
        message = self.start_message()
        if message:
            print(message, flush=True)

    def _commit(self, metrics: Mapping[str, float], *, checkpoint: bool, in_main_thread: bool) -> None:
        """Append ``metrics`` to ``metrics.jsonl``, then take the state (and write it when ``checkpoint``).

        Both signals are held meanwhile: a signal landing between the metrics line and the checkpoint
        would leave a logged step that no checkpoint holds (seen: SIGTERM right after the line appeared).
        """
        with _signals_deferred(in_main_thread):
            with open(self.run_dir / METRICS, "a") as handle:
                handle.write(json.dumps(metrics, sort_keys=True) + "\n")
            self._boundary = self._state_bytes()
            if checkpoint:
                write_atomic(self.run_dir / CHECKPOINT, self._boundary)
        self._log_tensorboard(metrics)

    def start_message(self) -> str | None:
        """What to print after the step-0 evaluation (default: nothing)."""
        return None

    def step_saved(self) -> int:
        """The step of the checkpoint on disk (0 if none)."""
        if not (self.run_dir / CHECKPOINT).is_file():
            return 0
        return int(self._read_checkpoint()["step"])

    def _finish(self) -> dict[str, Any]:
        lines = read_metrics(self.run_dir / METRICS)
        last = lines[-1] if lines else {}
        plots = self.plot(lines)
        summary = {
            "run_dir": str(self.run_dir),
            "config": self.config.to_dict(),
            "steps": self.step,
            "final": last,
            "eval": self.last_eval or {k: v for k, v in last.items() if k.startswith("eval/")},
            "plots": [str(p) for p in plots],
            **self.summary_extra(),
        }
        (self.run_dir / SUMMARY).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
        return summary

    def _log_tensorboard(self, metrics: Mapping[str, float]) -> None:
        if getattr(self, "_tensorboard", None) is None:
            return
        for key, value in metrics.items():
            if key != "step":
                self._tensorboard.add_scalar(key, value, self.step)

    # ---------------------------------------------------------------------------------- checkpoints
    def _state_bytes(self) -> bytes:
        state = {
            "step": self.step,
            "config": self.config.learning_settings(),
            "rng": {
                "torch": torch.get_rng_state(),
                "numpy": np.random.get_state(),
                "python": random.getstate(),
            },
            "last_eval": self.last_eval,
            **self.extra_state(),
        }
        return state_bytes(state)

    def _read_checkpoint(self) -> dict[str, Any]:
        path = self.run_dir / CHECKPOINT
        state = load_state(
            path,
            if_older=(
                f"start a new run from its settings (wmrl train --config {self.run_dir / CONFIG} --out "
                "NEW_DIR) or train it with the wmrl version that wrote it"
            ),
        )
        if not isinstance(state.get("step"), int):
            raise CheckpointError(f"{path} has no integer 'step'; it is not a checkpoint of wmrl train")
        return state

    def _restore(self, state: Mapping[str, Any]) -> None:
        """Continue from a checkpoint's state; the metrics lines after its step are dropped."""
        try:
            self.step = int(state["step"])
            self.restore_extra(state)
            torch.set_rng_state(state["rng"]["torch"])
            np.random.set_state(state["rng"]["numpy"])
            random.setstate(state["rng"]["python"])
            self.last_eval = dict(state["last_eval"])
        except (KeyError, TypeError, ValueError, AttributeError, RuntimeError) as error:
            raise CheckpointError(
                f"the checkpoint {self.run_dir / CHECKPOINT} does not fit this run ({error!r}); resume it "
                "with the settings that wrote it, or start a new run directory"
            ) from error
        lines = [line for line in read_metrics(self.run_dir / METRICS) if line["step"] <= self.step]
        write_atomic(
            self.run_dir / METRICS,
            "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines).encode(),
        )
        self._boundary = None
