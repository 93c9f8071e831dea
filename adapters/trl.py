"""WMRL inside an existing TRL ``GRPOTrainer`` script: a reward function that returns corrected advantages.

Why a reward function, and why it returns advantages. TRL turns rewards into advantages itself:
``A = r - mean_group(r)``, then divides by the group's std unless ``scale_rewards="none"``. A plain
reward cannot carry WMRL's anchor weight through that: dividing by each group's std cancels any
per-group scale, and the calibration (Online Debiasing) must see whole groups of (predicted, real)
pairs before any advantage is formed. So :class:`WMRLReward` does the whole correction itself, on the
batch TRL hands it:

1. it cuts the batch into groups of ``num_generations`` consecutive completions (TRL's
   ``RepeatSampler`` puts a prompt's generations next to each other);
2. the :class:`~wmrl_algos.loop.CorrectionLoop` plans the anchor groups; those are scored by the
   ``real`` scorer (the expensive, trusted one: a sandbox, unit tests), every group by the
   ``world_model`` scorer (the cheap predictor);
3. the loop calibrates, weights and forms the advantages (GRPO's std scaling, the anchor weight,
   unknown scores excluded);
4. it returns those advantages as the "reward". They have group mean 0, so with
   ``scale_rewards="none"`` TRL's ``r - mean`` gives them back unchanged, anchor weight included. An
   unknown score is returned as ``None``: TRL leaves it out of the group mean and gives it advantage 0,
   the same rule as wmrl's.

Both scorers have TRL's own reward-function signature
(``f(prompts, completions, completion_ids, **dataset_columns) -> list[float | None]``), so a TRL user's
existing reward function becomes the ``real`` scorer as it is. :meth:`WMRLReward.attach` checks the
trainer's settings that would silently break the equivalence (``scale_rewards``, other reward
functions, several processes) and saves the loop's state with every TRL checkpoint.

Small reward calls: TRL calls the reward function once per generation batch, which holds
``per_device_train_batch_size * steps_per_generation / num_generations`` groups (docs/trl.md). When
that is fewer than ``min_anchor_groups / anchor_fraction``, planning each call on its own would
anchor ``min_anchor_groups`` groups of every call (with one group per call: all of them, an anchor
fraction of 1.0). :class:`WMRLReward` then plans each such call with no per-call minimum and lets the
anchor scheduler carry the fractional credit from call to call (saved in its state, so a resumed run
keeps it): the running fraction is the one asked for, a single call anchors 0 or more groups, and it
warns once with the numbers.

Limits: one training process (each process would otherwise plan its own anchors on its slice of the
batch); in evaluation (``trainer.model.training`` False) every completion is scored for real and the
loop is left untouched.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from wmrl_adapters.train.run.state_io import load_state, save_state

from wmrl_algos.errors import CheckpointError, ConfigError, WorldModelError, require
from wmrl_algos.loop import CorrectionConfig, CorrectionLoop
from wmrl_algos.types import Score, ScoredGroup, StepResult

__all__ = ["STATE_FILE", "TRLRewardFunction", "WMRLReward"]

TRLRewardFunction = Callable[..., Sequence[float | None]]
"""TRL's custom reward function: ``f(prompts=..., completions=..., completion_ids=..., **kwargs)``."""

STATE_FILE = "wmrl_correction.pt"
"""File name of the correction loop's state inside each TRL checkpoint folder."""


class WMRLReward:
    """A TRL reward function that returns WMRL's corrected advantages (use with ``scale_rewards="none"``).

    Args:
        real: the trusted, expensive scorer (runs the completion for real), in TRL's reward-function form;
            called on the anchor groups only.
        world_model: the cheap predictor, same form; called on every completion.
        config: the correction settings (anchor share, OD, IVD, advantage scale).
        num_generations: TRL's group size; read from the trainer by :meth:`attach` when not given.

    Raises:
        ConfigError: a scorer is not callable, or ``num_generations < 2``.

    Example:
        >>> def run_tests(prompts, completions, **kwargs):
        ...     return [1.0 if "return" in c else 0.0 for c in completions]
        >>> def guess(prompts, completions, **kwargs):
        ...     return [min(1.0, len(c) / 20) for c in completions]
        >>> reward = WMRLReward(run_tests, guess, CorrectionConfig(anchor_fraction=0.5), num_generations=2)
        >>> completions = ["return 1", "x", "return", "y = 2"]
        >>> advantages = reward(prompts=["p", "p", "q", "q"], completions=completions)
        >>> round(sum(advantages[:2]), 6), round(sum(advantages[2:]), 6)
        (0.0, 0.0)
    """

    def __init__(
        self,
        real: TRLRewardFunction,
        world_model: TRLRewardFunction,
        config: CorrectionConfig | None = None,
        *,
        num_generations: int | None = None,
    ) -> None:
        for role, scorer in (("real", real), ("world_model", world_model)):
            if not callable(scorer):
                raise ConfigError(
                    f"{role}={scorer!r} is not callable; pass a TRL reward function "
                    "f(prompts, completions, **kwargs) -> list[float | None]"
                )
        if num_generations is not None and num_generations < 2:
            raise ConfigError(
                f"num_generations={num_generations!r}; GRPO needs at least 2 completions per prompt"
            )
        self.real = real
        self.world_model = world_model
        self.loop = CorrectionLoop(config)
        self.num_generations = num_generations
        self.last_result: StepResult | None = None
        self.__name__ = "wmrl"
        self._trainer: Any = None
        self._warned_small_calls = False

    def attach(self, trainer: Any) -> None:
        """Check a ``GRPOTrainer``'s settings, adopt its ``num_generations``, save state with its checkpoints.

        Raises:
            ConfigError: ``scale_rewards`` is not ``"none"``, the trainer has other reward functions or
                reward weights, ``multi_objective_aggregation`` normalises, more than one process
                trains, or ``num_generations`` disagrees with the one given here.
        """
        args = trainer.args
        if args.scale_rewards != "none":
            raise ConfigError(
                f"GRPOConfig.scale_rewards={args.scale_rewards!r}; pass scale_rewards='none'. WMRLReward "
                "already returns std-scaled, weighted advantages; TRL would divide them by the group std "
                "again and cancel the anchor weight"
            )
        if list(trainer.reward_funcs) != [self]:
            raise ConfigError(
                f"the trainer has reward functions {trainer.reward_func_names}; pass reward_funcs=<this "
                "WMRLReward> alone (TRL sums reward functions before the group mean, which would add raw "
                "rewards to corrected advantages): fold the others into the real scorer"
            )
        if getattr(args, "multi_objective_aggregation", "sum_then_normalize") != "sum_then_normalize":
            raise ConfigError(
                f"multi_objective_aggregation={args.multi_objective_aggregation!r} normalises each reward by "
                "its std; pass 'sum_then_normalize'"
            )
        if not torch.equal(trainer.reward_weights.detach().cpu().float(), torch.ones(1)):
            raise ConfigError(
                f"reward_weights={trainer.reward_weights.tolist()}; leave them unset (1.0), a weight "
                "would rescale the corrected advantages"
            )
        if trainer.accelerator.num_processes != 1:
            raise ConfigError(
                f"{trainer.accelerator.num_processes} training processes; WMRLReward needs one process, "
                "since each process would plan its own anchor groups on its slice of the batch"
            )
        if self.num_generations is not None and self.num_generations != args.num_generations:
            raise ConfigError(
                f"WMRLReward(num_generations={self.num_generations}) but GRPOConfig.num_generations="
                f"{args.num_generations}; leave it unset here, attach() reads the trainer's"
            )
        self.num_generations = int(args.num_generations)
        self._trainer = trainer
        trainer.add_callback(_checkpoint_callback(self))

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        """TRL's reward call: score, correct, and return the corrected advantages (``None`` = unknown).

        Raises:
            ConfigError: the batch does not split into whole groups of identical prompts.
            WorldModelError: a scorer returned the wrong number of scores.
        """
        size = len(completions)
        if self._trainer is not None and not self._trainer.model.training:
            return self._score(self.real, "real", range(size), prompts, completions, completion_ids, kwargs)
        group_size = self.num_generations
        if group_size is None:
            raise ConfigError(
                "WMRLReward does not know the group size: call reward.attach(trainer) after building the "
                "GRPOTrainer, or pass num_generations="
            )
        if size == 0 or size % group_size:
            raise ConfigError(
                f"TRL passed {size} completions, not a multiple of num_generations={group_size}; every "
                "group must be whole (one process, generation_batch_size divisible by num_generations)"
            )
        n_groups = size // group_size
        for group in range(n_groups):
            first = group * group_size
            if any(prompts[first + k] != prompts[first] for k in range(group_size)):
                raise ConfigError(
                    f"completions {first}..{first + group_size - 1} do not share one prompt; TRL's groups "
                    f"are {group_size} consecutive completions: is num_generations={group_size} right?"
                )
        anchors = self._plan(n_groups, group_size)
        anchor_rows = [row for row in range(size) if anchors[row // group_size]]
        everything = range(size)
        predicted = self._score(
            self.world_model, "world_model", everything, prompts, completions, completion_ids, kwargs
        )
        real = self._score(self.real, "real", anchor_rows, prompts, completions, completion_ids, kwargs)
        real_by_row = dict(zip(anchor_rows, real, strict=True))
        groups = [
            ScoredGroup(
                group_id=group,
                anchor=anchors[group],
                predicted=tuple(predicted[group * group_size : (group + 1) * group_size]),
                real=(
                    tuple(real_by_row[row] for row in range(group * group_size, (group + 1) * group_size))
                    if anchors[group]
                    else None
                ),
            )
            for group in range(n_groups)
        ]
        result = self.loop.correct(groups)
        self.last_result = result
        self._log(kwargs.get("log_metric"), result, predicted, real)
        values, _ = result.flat()
        trained_on = [real_by_row[row] if row in real_by_row else predicted[row] for row in range(size)]
        return [
            None if score is None else float(value)
            for value, score in zip(values.tolist(), trained_on, strict=True)
        ]

    def _plan(self, n_groups: int, group_size: int) -> list[bool]:
        """The anchor decisions of one reward call's groups, the fraction kept across small calls."""
        config = self.loop.config
        fraction, minimum = config.anchor_fraction, config.min_anchor_groups
        if not (0.0 < fraction * n_groups < minimum) or config.anchor_selection == "uncertainty":
            return [bool(anchor) for anchor in self.loop.plan(n_groups)]
        if not self._warned_small_calls:
            self._warned_small_calls = True
            needed = math.ceil(minimum / fraction)
            warnings.warn(
                f"each TRL reward call holds {n_groups} group(s) of num_generations={group_size}, fewer than "
                f"the {needed} that anchor_fraction={fraction} with min_anchor_groups={minimum} needs in "
                f"one call: planned call by call, every call would anchor {minimum} group(s), a fraction of "
                f"{min(1.0, minimum / n_groups):.2f}. WMRLReward carries the anchor credit across calls "
                f"instead: one call in about {1 / (fraction * n_groups):.1f} anchors, so the running "
                f"fraction is {fraction} (logged as wmrl/anchor_fraction_cumulative). To plan each call on "
                f"its own, give it at least {needed * group_size} completions: raise "
                "per_device_train_batch_size * steps_per_generation (or generation_batch_size)",
                stacklevel=3,
            )
        return [bool(anchor) for anchor in self.loop.scheduler.select(n_groups, min_per_step=0)]

    def state_dict(self) -> dict[str, Any]:
        """The correction loop's state (anchor scheduler with the anchor credit carried between reward
        calls, calibration buffer and map, IV state)."""
        return self.loop.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output."""
        self.loop.load_state_dict(state)

    def load_checkpoint(self, checkpoint_dir: str | Path) -> None:
        """Restore the state saved in a TRL checkpoint folder; call it before resuming the trainer.

        The file is loaded as plain data (:func:`~wmrl_adapters.train.state_io.load_state`): nothing in
        it can run code.

        Raises:
            CheckpointError: the folder holds no :data:`STATE_FILE` (not saved by an attached WMRLReward),
                or one that is not plain data (written by an older wmrl, or tampered with).
        """
        path = Path(checkpoint_dir) / STATE_FILE
        if not path.is_file():
            raise CheckpointError(
                f"{path} does not exist; the checkpoint was not written by a trainer with an attached "
                "WMRLReward, so the correction state cannot be resumed"
            )
        self.load_state_dict(
            load_state(
                path,
                if_older=(
                    "resume the TRL checkpoint without calling load_checkpoint (the calibration starts "
                    "again from nothing), or with the wmrl version that wrote it"
                ),
            )
        )

    @staticmethod
    def _score(
        scorer: TRLRewardFunction,
        role: str,
        rows: Sequence[int],
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Any] | None,
        kwargs: Mapping[str, Any],
    ) -> list[Score]:
        rows = list(rows)
        if not rows:
            return []
        size = len(completions)
        columns = {
            key: [value[row] for row in rows] if isinstance(value, list) and len(value) == size else value
            for key, value in kwargs.items()
        }
        scores = list(
            scorer(
                prompts=[prompts[row] for row in rows],
                completions=[completions[row] for row in rows],
                completion_ids=None if completion_ids is None else [completion_ids[row] for row in rows],
                **columns,
            )
        )
        if len(scores) != len(rows):
            raise WorldModelError(
                f"the {role} scorer {scorer!r} returned {len(scores)} scores for {len(rows)} completions; "
                "it must return one per completion (None where unknown)"
            )
        return [None if score is None else float(score) for score in scores]

    @staticmethod
    def _log(
        log_metric: Callable[[str, float], None] | None,
        result: StepResult,
        predicted: Sequence[Score],
        real: Sequence[Score],
    ) -> None:
        if log_metric is None:
            return
        for name, value in result.metrics.items():
            log_metric(name, float(value))
        for name, scores in (("wmrl/predicted_reward", predicted), ("wmrl/real_reward", real)):
            known = [score for score in scores if score is not None]
            if known:
                log_metric(name, sum(known) / len(known))


def _checkpoint_callback(reward: WMRLReward) -> Any:
    """A ``transformers.TrainerCallback`` that writes the loop's state into every TRL checkpoint folder."""
    transformers = require("transformers", "trl")

    class SaveCorrectionState(transformers.TrainerCallback):  # type: ignore[misc,name-defined]
        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            folder.mkdir(parents=True, exist_ok=True)
            save_state(folder / STATE_FILE, reward.state_dict())

    return SaveCorrectionState()
