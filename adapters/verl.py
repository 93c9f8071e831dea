"""WMRL inside verl (0.9.x): a batch reward manager that returns corrected advantages, and the estimator
that passes them through.

Why a batch reward manager. A verl ``compute_score`` sees one sample; WMRL needs the GRPO group: the
anchor decision is per group, the (predicted, real) pairs that calibrate the world model (Online
Debiasing) come from whole anchor groups, and the inverse-variance weight scales whole groups. Only a
reward manager with verl's batch interface, ``__call__(data: DataProto, return_dict=False)``, is handed
the whole batch with its ``uid`` column (one uid per prompt, shared by its ``rollout.n`` responses).
:class:`WMRLRewardManager` is one:

1. it forms the groups from ``data.non_tensor_batch["uid"]`` (rows of a group need not be adjacent:
   verl's ``balance_batch`` reorders them) and decodes the valid response tokens;
2. the :class:`~wmrl_algos.loop.CorrectionLoop` plans the anchor groups; those are scored by the
   ``real`` scorer (the expensive, trusted one: a sandbox, unit tests, a wmrl env), every sample by the
   ``world_model`` scorer;
3. the loop calibrates, weights and forms the advantages (unknown scores excluded, not zeroed);
4. it writes each advantage at the last valid response token, the place verl puts an outcome reward,
   and reports the per-sample predicted, real and calibrated scores and the group's weight in
   ``reward_extra_info``.

Why the advantages travel as the reward, and what the estimator does. verl's registered advantage
estimators are called with ``token_level_rewards``, ``response_mask``, ``index`` (the uids) and
``config`` only (verl 0.9.1 hands ``non_tensor_batch`` to its built-in GDPO estimator alone), so an
estimator cannot see per-sample (predicted, real) scores and cannot do the correction itself. The
corrected advantages have group mean 0 (unknown samples are 0 too), so GRPO's ``r - mean(r)`` returns
them unchanged; dividing by the group std would cancel the anchor weight. :func:`wmrl_grpo_advantage`,
registered as ``"wmrl_grpo"``, is verl's own GRPO without std normalisation plus a guard: it refuses
groups whose reward mean is not 0, which is what a plain reward (another reward manager) or a KL penalty
in the reward (``algorithm.use_kl_in_reward=True``) would hand it, so the equivalence cannot break
silently. The same pattern as the TRL adapter (``wmrl_adapters.trl``, ``scale_rewards="none"``).

Where verl 0.9.1 calls a batch reward manager: nowhere by default. Its trainers (the v1 one and the
deprecated v0 ``trainer.use_v1=False`` one alike) compute rewards through the reward loop, which scores
each rollout alone (``run_single(data[i:i+1])`` in reward-loop workers, as each rollout finishes), and
``verl.workers.reward_manager`` (the batch registry this manager registers in) is read by no trainer. So
the manager runs where it is handed the batch: ``python -m wmrl_adapters.verl_main`` (module
:mod:`wmrl_adapters.verl_main`) runs verl's own v1 trainer with its whole-batch reward step calling
:meth:`WMRLRewardManager.compute_rm_score`, or your own loop over verl's ``DataProto``
(``batch.union(manager.compute_rm_score(batch))``, then verl's ``compute_advantage(batch,
adv_estimator="wmrl_grpo", ...)``). docs/scale-out.md ("Add WMRL to an existing verl GRPO run") says what
runs where.

verl is imported lazily: it pins a ``transformers`` release below the one wmrl's ``[llm]``/``[trl]``
extras use, so it lives in its own environment (``bash scripts/verl.sh`` builds it).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from wmrl_algos.errors import ConfigError, MissingDependencyError, WorldModelError
from wmrl_algos.loop import CorrectionConfig, CorrectionLoop
from wmrl_algos.types import Score, ScoredGroup, StepResult

__all__ = [
    "ADV_ESTIMATOR_NAME",
    "EXTRA_INFO_KEYS",
    "REWARD_MANAGER_NAME",
    "BatchScorer",
    "VerlSample",
    "WMRLRewardManager",
    "register",
    "wmrl_grpo_advantage",
]

REWARD_MANAGER_NAME = "wmrl"
"""Name of :class:`WMRLRewardManager` in verl's batch reward-manager registry."""

ADV_ESTIMATOR_NAME = "wmrl_grpo"
"""Name of :func:`wmrl_grpo_advantage` in verl's advantage-estimator registry."""

EXTRA_INFO_KEYS = ("wmrl_anchor", "wmrl_predicted", "wmrl_real", "wmrl_calibrated", "wmrl_weight")
"""Per-sample columns of ``reward_extra_info`` (``None`` where unknown or not executed)."""

BatchScorer = Callable[..., Sequence[float | None]]
"""verl's batch ``compute_score``: ``f(data_sources=, solution_strs=, ground_truths=, extra_infos=)``
returning one score per sample, ``None`` where it cannot say."""

_MEAN_TOLERANCE = 1e-4


def _verl(module: str = "verl") -> ModuleType:
    """Import a verl module, or fail saying how to get verl (it cannot share wmrl's main environment)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"{module!r} is not importable ({exc}); verl 0.9 pins a transformers release that clashes with "
            "wmrl's [llm]/[trl] extras, so it has its own environment: run `bash scripts/verl.sh` and use "
            "the interpreter `bash scripts/verl.sh python` prints (it runs this checkout's wmrl)"
        ) from exc


@dataclass(frozen=True)
class VerlSample:
    """One decoded sample of a verl batch, as the scorers see it.

    Attributes:
        row: its row in the ``DataProto``.
        uid: its group id (``non_tensor_batch["uid"]``).
        response: the valid response tokens, decoded without special tokens.
        response_length: the number of valid response tokens.
    """

    row: int
    uid: str
    response: str
    response_length: int


class WMRLRewardManager:
    """A verl batch reward manager that returns WMRL's corrected advantages (use with ``wmrl_grpo``).

    It implements verl's ``AbstractRewardManager`` interface (``verl.workers.reward_manager``), so
    :func:`register` puts it in verl's registry under :data:`REWARD_MANAGER_NAME`.

    Args:
        tokenizer: the policy's tokenizer (decodes the responses).
        num_examine: verl's argument: how many samples of each batch to print with their advantage (0: none).
        compute_score: the real scorer, verl's batch ``compute_score`` form (:data:`BatchScorer`); called
            on the anchor groups only. A verl user's existing batch reward function fits as it is.
        reward_fn_key: the ``non_tensor_batch`` column naming each sample's data source.
        world_model: the cheap predictor, same form; called on every sample.
        correction: the correction settings (anchor share, OD, IVD, advantage scale).

    Raises:
        ConfigError: a scorer is not callable.

    Example:
        >>> tokenizer = None  # the policy's Hugging Face tokenizer
        >>> def run_tests(solution_strs, **kwargs):
        ...     return [1.0 if "return" in text else 0.0 for text in solution_strs]
        >>> def guess(solution_strs, **kwargs):
        ...     return [min(1.0, len(text) / 20) for text in solution_strs]
        >>> manager = WMRLRewardManager(tokenizer, 0, run_tests, world_model=guess)
        >>> manager.loop.config.anchor_fraction  # CorrectionConfig's default
        0.1
        >>> batch = ...  # a verl DataProto with a uid column
        >>> reward = manager(batch, return_dict=True)  # doctest: +SKIP
    """

    def __init__(
        self,
        tokenizer: Any,
        num_examine: int = 0,
        compute_score: BatchScorer | None = None,
        reward_fn_key: str = "data_source",
        *,
        world_model: BatchScorer | None = None,
        correction: CorrectionConfig | None = None,
    ) -> None:
        for role, scorer in (
            ("compute_score (the real scorer)", compute_score),
            ("world_model", world_model),
        ):
            if not callable(scorer):
                raise ConfigError(
                    f"{role}={scorer!r} is not callable; pass a verl batch reward function "
                    "f(data_sources, solution_strs, ground_truths, extra_infos) -> list[float | None]"
                )
        self.tokenizer = tokenizer
        self.num_examine = num_examine
        self.real: BatchScorer = compute_score  # type: ignore[assignment]
        self.world_model: BatchScorer = world_model  # type: ignore[assignment]
        self.reward_fn_key = reward_fn_key
        self.loop = CorrectionLoop(correction)
        self.last_result: StepResult | None = None
        self.last_groups: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def __call__(self, data: Any, return_dict: bool = False) -> Any:
        """Score, correct and return the advantages as token-level rewards (at the last response token).

        Args:
            data: a verl ``DataProto`` with ``prompts``, ``responses`` and ``attention_mask`` tensors and
                a ``uid`` column. ``meta_info["validate"]`` True scores every sample for real and leaves
                the loop untouched (evaluation reports real scores).
            return_dict: return ``{"reward_tensor", "reward_extra_info"}`` instead of the tensor alone.

        Raises:
            ConfigError: the batch has no ``uid`` column.
            WorldModelError: a scorer returned the wrong number of scores.
        """
        import torch

        samples = self.decode(data)
        reward_tensor = torch.zeros_like(data.batch["responses"], dtype=torch.float32)
        everything = [sample.row for sample in samples]
        if data.meta_info.get("validate", False):
            real = self._score(self.real, "real", everything, data, samples)
            self._write(reward_tensor, samples, real)
            extra = {"wmrl_real": real}
            return (
                {"reward_tensor": reward_tensor, "reward_extra_info": extra} if return_dict else reward_tensor
            )

        groups = self._groups(samples)
        anchors = self.loop.plan(len(groups)).tolist()
        predicted = self._score(self.world_model, "world_model", everything, data, samples)
        anchor_rows = [
            row for (_, rows), anchor in zip(groups, anchors, strict=True) if anchor for row in rows
        ]
        real_by_row = dict(
            zip(anchor_rows, self._score(self.real, "real", anchor_rows, data, samples), strict=True)
        )
        scored = [
            ScoredGroup(
                group_id=index,
                anchor=anchor,
                predicted=tuple(predicted[row] for row in rows),
                real=tuple(real_by_row[row] for row in rows) if anchor else None,
                task_id=uid,
            )
            for index, ((uid, rows), anchor) in enumerate(zip(groups, anchors, strict=True))
        ]
        result = self.loop.correct(scored)
        self.last_result, self.last_groups = result, tuple(groups)

        advantage: list[float] = [0.0] * len(samples)
        extra: dict[str, list[Any]] = {key: [None] * len(samples) for key in EXTRA_INFO_KEYS}
        for (_, rows), group, group_advantages in zip(groups, scored, result.advantages, strict=True):
            calibrated = self.loop.debiaser.apply(list(group.predicted))
            for k, row in enumerate(rows):
                advantage[row] = float(group_advantages.values[k])
                extra["wmrl_anchor"][row] = group.anchor
                extra["wmrl_predicted"][row] = predicted[row]
                extra["wmrl_real"][row] = real_by_row.get(row)
                extra["wmrl_calibrated"][row] = calibrated[k]
                extra["wmrl_weight"][row] = float(group_advantages.weight)
        self._write(reward_tensor, samples, advantage)
        self._examine(samples, advantage)
        if return_dict:
            return {"reward_tensor": reward_tensor, "reward_extra_info": extra}
        return reward_tensor

    def compute_rm_score(self, data: Any) -> Any:
        """:meth:`__call__` in the shape verl's ``RewardLoopManager.compute_rm_score`` returns.

        A ``DataProto`` with the ``rm_scores`` tensor, the ``reward_extra_info`` columns and
        ``meta_info["reward_extra_keys"]``: ``batch.union(...)`` it into the training batch and verl's
        ``extract_reward`` and advantage step read it as they read the reward loop's. verl's v1 trainer
        calls it on each whole batch under ``python -m wmrl_adapters.verl_main`` (docs/scale-out.md).
        """
        protocol = _verl("verl.protocol")
        tensordict = _verl("tensordict")
        reward = self(data, return_dict=True)
        extra = {key: np.array(values, dtype=object) for key, values in reward["reward_extra_info"].items()}
        return protocol.DataProto(
            batch=tensordict.TensorDict({"rm_scores": reward["reward_tensor"]}, batch_size=len(data)),
            non_tensor_batch=extra,
            meta_info={"reward_extra_keys": list(extra)},
        )

    def decode(self, data: Any) -> list[VerlSample]:
        """The batch's samples: valid response tokens (from the attention mask) decoded, with their uid.

        Raises:
            ConfigError: the batch has no ``uid`` column (verl adds it to every training batch).
        """
        if "uid" not in data.non_tensor_batch:
            raise ConfigError(
                f"the batch has no 'uid' column (columns: {sorted(data.non_tensor_batch)}); WMRL forms its "
                "groups from it: give each prompt a uid before repeating it rollout.n times, as verl's "
                "trainer does"
            )
        prompt_length = data.batch["prompts"].shape[-1]
        lengths = data.batch["attention_mask"][:, prompt_length:].sum(dim=-1).tolist()
        responses = data.batch["responses"]
        uids = data.non_tensor_batch["uid"]
        return [
            VerlSample(
                row=row,
                uid=str(uids[row]),
                response=self.tokenizer.decode(responses[row][: int(length)], skip_special_tokens=True),
                response_length=int(length),
            )
            for row, length in enumerate(lengths)
        ]

    def state_dict(self) -> dict[str, Any]:
        """The correction loop's state (anchor scheduler, calibration buffer and map, IV state)."""
        return self.loop.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output."""
        self.loop.load_state_dict(state)

    @staticmethod
    def _groups(samples: Sequence[VerlSample]) -> list[tuple[str, tuple[int, ...]]]:
        """(uid, rows) per group, groups in order of first appearance, rows in batch order."""
        rows: dict[str, list[int]] = {}
        for sample in samples:
            rows.setdefault(sample.uid, []).append(sample.row)
        return [(uid, tuple(members)) for uid, members in rows.items()]

    def _score(
        self, scorer: BatchScorer, role: str, rows: Sequence[int], data: Any, samples: Sequence[VerlSample]
    ) -> list[Score]:
        """Call ``scorer`` on ``rows`` with verl's batch ``compute_score`` arguments; floats or ``None``."""
        rows = list(rows)
        if not rows:
            return []
        columns = data.non_tensor_batch
        reward_model = columns.get("reward_model")
        extra_info = columns.get("extra_info")
        data_source = columns.get(self.reward_fn_key)
        scores = list(
            scorer(
                data_sources=[None if data_source is None else data_source[row] for row in rows],
                solution_strs=[samples[row].response for row in rows],
                ground_truths=[
                    None if reward_model is None else dict(reward_model[row]).get("ground_truth")
                    for row in rows
                ],
                extra_infos=[{} if extra_info is None else extra_info[row] for row in rows],
            )
        )
        if len(scores) != len(rows):
            raise WorldModelError(
                f"the {role} scorer {scorer!r} returned {len(scores)} scores for {len(rows)} samples; it "
                "must return one per sample (None where unknown)"
            )
        return [None if score is None else float(score) for score in scores]

    @staticmethod
    def _write(reward_tensor: Any, samples: Sequence[VerlSample], values: Sequence[Score]) -> None:
        """Each value at its sample's last valid response token (none for an empty response or unknown)."""
        for sample, value in zip(samples, values, strict=True):
            if sample.response_length > 0 and value is not None:
                reward_tensor[sample.row, sample.response_length - 1] = value

    def _examine(self, samples: Sequence[VerlSample], advantage: Sequence[float]) -> None:
        for sample in samples[: self.num_examine]:
            print(
                f"[wmrl] uid={sample.uid} advantage={advantage[sample.row]:+.4f} response={sample.response!r}"
            )


def wmrl_grpo_advantage(
    token_level_rewards: Any,
    response_mask: Any,
    index: np.ndarray | None = None,
    config: Any = None,
    epsilon: float = 1e-6,
    **kwargs: Any,
) -> tuple[Any, Any]:
    """verl's GRPO without std normalisation, for rewards that already are WMRL's corrected advantages.

    Registered as :data:`ADV_ESTIMATOR_NAME` by :func:`register`. Returns ``(advantages, returns)``,
    both ``(batch, response_length)``, like every verl estimator.

    Raises:
        ConfigError: no ``index`` (uids), or a group's reward mean is not 0: the rewards are not
            :class:`WMRLRewardManager`'s advantages (another reward manager, or
            ``algorithm.use_kl_in_reward=True`` added a KL penalty to them).

    Example:
        >>> import torch
        >>> rewards = torch.tensor([[0.0, 0.5], [0.0, -0.5]])
        >>> advantages, _ = wmrl_grpo_advantage(rewards, torch.ones(2, 2), index=np.array(["a", "a"]))
        >>> advantages.tolist()
        [[0.5, 0.5], [-0.5, -0.5]]
    """
    core_algos = _verl("verl.trainer.ppo.core_algos")
    if index is None:
        raise ConfigError(
            "wmrl_grpo got no index; verl passes the uid column as index: keep 'uid' in the batch"
        )
    scores = token_level_rewards.sum(dim=-1).detach().cpu().double().numpy()
    uids = np.asarray(index)
    for uid in dict.fromkeys(uids.tolist()):
        members = scores[uids == uid]
        mean = float(members.mean())
        if abs(mean) > _MEAN_TOLERANCE * max(1.0, float(np.abs(members).max())):
            raise ConfigError(
                f"group {uid!r} has reward mean {mean:.6g}, not 0: wmrl_grpo expects WMRLRewardManager's "
                "corrected advantages as the reward; use reward manager 'wmrl' and set "
                "algorithm.use_kl_in_reward=False (a KL penalty in the reward shifts them; use the actor's "
                "KL loss instead)"
            )
    return core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=token_level_rewards,
        response_mask=response_mask,
        index=index,
        epsilon=epsilon,
        norm_adv_by_std_in_grpo=False,
        config=config,
    )


def register() -> None:
    """Put :class:`WMRLRewardManager` and :func:`wmrl_grpo_advantage` in verl's registries (idempotent).

    Raises:
        MissingDependencyError: verl is not importable here (build its environment with
            ``bash scripts/verl.sh``).
    """
    _verl("verl.workers.reward_manager").register(REWARD_MANAGER_NAME)(WMRLRewardManager)
    _verl("verl.trainer.ppo.core_algos").register_adv_est(ADV_ESTIMATOR_NAME)(wmrl_grpo_advantage)
