"""The correction loop: anchor plan, Online Debiasing, Inverse-Variance Denoising, advantages, in order.

Why one composing object: the pieces are simple, the *order* is where it goes wrong. The world model
must be measured on *calibrated* scores (bias that OD already removes is not noise) but out of sample;
anchor pairs must enter the calibration buffer before the map is used on world-model groups; anchor
groups train on their real scores; and the fusion weights multiply each group's advantages.
:class:`CorrectionLoop` does exactly that, every step, and keeps all its state (scheduler, buffer, map,
weighter, residual model) in one resumable ``state_dict``.

It never looks inside a trajectory: scores come from two :class:`Scorer` objects (a cheap one, the
world model, and a trusted one, the real execution), or already scored as
:class:`~wmrl_algos.types.ScoredGroup` from the rollout side. The one exception is opt-in: a
:class:`~wmrl_algos.residual.ResidualCorrection` passed to the loop reads the trajectory payload through
its own featurizer.

Order within a step, and why: (1) the world model is measured on this step's anchor groups with the map
(and residual model) fitted *before* their pairs arrive: out of sample, so the weight is not flattered
by the fit; (2) the pairs enter the buffer (``ScoredGroup.pairs`` when given, e.g. per execution,
otherwise the trajectory-level pairs) and the map refits; (3) world-model groups are calibrated by the
refitted map and the residual correction; (4) anchor groups train on their real scores; (5) advantages
are weighted by the fusion weights of :mod:`wmrl_algos.denoise`.

Defaults are the robust choices measured in ``benchmarks/bandit_ablation.py`` (``docs/method.md``):
the agreement rule (a useless world model's groups weigh ~0, so WMRL falls back to GRPO on the anchor
groups) and uncertainty-driven anchor selection whenever an uncertainty exists (uniform otherwise). The
residual correction needs trajectory features, so it is on only when one is passed; pass one whenever
features exist: it is what turned the strategy-specific-bias variant from a loss into a gain.

Opt-in as well: ``CorrectionLoop(..., power=PowerTuner())`` replaces the fusion weights by the
prediction-powered estimator of :mod:`wmrl_algos.ppi` (world-model advantages as a control variate on
the anchor groups, unbiased for any world-model error). Then the order changes in one place: every
group, anchors included, is calibrated with the map (and residual correction) fitted *before* this
step's pairs arrive, and the step uses the coefficient fitted on earlier steps; only afterwards do the
step's pairs enter the buffer and the tuner. That keeps the control variate independent of which
groups were drawn as anchors, which is what makes the step unbiased.

With ``debias=False`` and ``denoise=False`` it is plain GRPO on world-model scores mixed with real
anchor scores (the paper's "direct mix" ablation); with ``anchor_fraction=0``, ``min_anchor_groups=0``
and ``denoise=False`` it is world-model-only GRPO (with the agreement rule and no anchors there would be
no evidence for the world model, hence no gradient at all; the config refuses that combination).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

import numpy as np

from wmrl_algos.advantages import AdvantageScale, group_advantages
from wmrl_algos.anchors import AnchorScheduler
from wmrl_algos.debias import OnlineDebiaser
from wmrl_algos.denoise import InverseVarianceWeighter, WeightRule
from wmrl_algos.errors import CheckpointError, ConfigError, WorldModelError
from wmrl_algos.ppi import PowerTuner
from wmrl_algos.residual import ResidualCorrection
from wmrl_algos.types import GroupAdvantages, Score, ScoredGroup, StepResult, as_score_array

__all__ = ["Scorer", "CorrectionConfig", "CorrectionLoop"]

TrajectoryT_contra = TypeVar("TrajectoryT_contra", contravariant=True)


@runtime_checkable
class Scorer(Protocol[TrajectoryT_contra]):
    """Scores a batch of trajectories; ``None`` where the score is unknown.

    Attributes:
        trusted: True for the real execution (the anchor source), False for a cheap predictor (a world
            model). :class:`CorrectionLoop` checks it so the two cannot be swapped silently.
    """

    trusted: bool

    def score(self, trajectories: Sequence[TrajectoryT_contra]) -> Sequence[Score]:
        """One score per trajectory, in order (one batched call)."""
        ...


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True)
class CorrectionConfig:
    """Configuration of :class:`CorrectionLoop` (anchors, OD, IVD, advantages).

    Example:
        >>> CorrectionConfig(anchor_fraction=0.125).anchor_fraction
        0.125
    """

    anchor_fraction: float = field(
        default=0.1,
        metadata=_help(
            "Share of groups per step also executed for real (anchor groups), in [0, 1]. The paper uses "
            "0.1; raise it when the world model is poor, lower it when executions are very expensive."
        ),
    )
    min_anchor_groups: int = field(
        default=1,
        metadata=_help(
            "At least this many anchor groups every step (paper: 1), so calibration never starves. "
            "Set 0 together with anchor_fraction=0 for world-model-only training."
        ),
    )
    max_anchors_in_flight: int | None = field(
        default=None,
        metadata=_help(
            "Cap on anchor groups whose real execution is still pending (asynchronous executors); "
            "None: no cap."
        ),
    )
    seed: int = field(default=0, metadata=_help("Seed of the anchor selection (reproducible runs)."))
    debias: bool = field(
        default=True,
        metadata=_help(
            "Online Debiasing: map world-model scores through an isotonic fit on anchor pairs. "
            "False keeps the identity map (ablation)."
        ),
    )
    denoise: bool = field(
        default=True,
        metadata=_help(
            "Inverse-Variance Denoising: weight world-model and anchor groups by the fusion weights of "
            "`weighting`. False keeps every weight at 1.0 (ablation); the world model is still measured "
            "and logged."
        ),
    )
    weighting: WeightRule = field(
        default="agreement",
        metadata=_help(
            "'agreement' (default): world-model groups weigh beta/(2 - r^2) against an anchor's 1, from the "
            "out-of-sample agreement of world-model and real advantages on anchor groups; a useless world "
            "model weighs ~0 and WMRL falls back to GRPO on the anchors. 'paper': anchor weight "
            "1 + eta2/eta2_cal (capped at w_max), world-model groups 1; it stays ~2 whatever the world "
            "model's quality (docs/method.md)."
        ),
    )
    half_life_groups: float = field(
        default=64.0,
        metadata=_help("Anchor groups after which a measurement's weight in the moving average halves."),
    )
    warmup_groups: int = field(
        default=32,
        metadata=_help("Measured anchor groups before the paper rule freezes eta2_cal (weight 1.0 before)."),
    )
    w_max: float = field(
        default=4.0,
        metadata=_help("Cap of the paper rule's anchor weight (>= 1; the reference uses 4)."),
    )
    confidence: float = field(
        default=1.0,
        metadata=_help(
            "Standard errors subtracted from the agreement rule's slope before it is trusted (>= 0): a "
            "world model must show agreement beyond noise before its groups count."
        ),
    )
    min_pairs: int = field(
        default=16,
        metadata=_help(
            "Anchor pairs needed before the first isotonic fit; the map is the identity until then."
        ),
    )
    refit_every: int = field(default=8, metadata=_help("New anchor pairs between isotonic refits."))
    capacity: int = field(
        default=2048,
        metadata=_help(
            "Most recent anchor pairs kept for the fit (FIFO); smaller tracks drift faster, larger is "
            "smoother."
        ),
    )
    anchor_selection: Literal["auto", "random", "uncertainty"] = field(
        default="auto",
        metadata=_help(
            "'uncertainty': a share 1 - random_share of the anchor slots goes to the groups the world model "
            "is least sure about (plan(uncertainty=...), or the residual correction's standard deviation in "
            "step()); the world model is measured on the uniformly drawn ones only. 'random': all drawn "
            "uniformly. 'auto' (default): 'uncertainty' whenever an uncertainty is available, else "
            "'random'. With a residual correction it beat uniform anchors on all six world-model variants "
            "of benchmarks/bandit_ablation.py (+0.002 to +0.007 true reward)."
        ),
    )
    random_share: float = field(
        default=0.5,
        metadata=_help("With uncertainty-driven selection: probability an anchor slot is drawn uniformly."),
    )
    advantage_scale: AdvantageScale = field(
        default="std",
        metadata=_help("'std': GRPO's (r - mean)/(std + eps); 'none': Dr. GRPO's r - mean."),
    )
    normalise_weights: bool = field(
        default=True,
        metadata=_help(
            "Rescale group weights to mean 1 over groups with a signal, so a loss averaging over groups "
            "computes the paper's fusion (rho*sum_E + sum_WM)/(rho*|G_E| + |G_WM|)."
        ),
    )
    train_anchor_on: Literal["real", "calibrated"] = field(
        default="real",
        metadata=_help(
            "What anchor groups train on: 'real' scores (the method) or their 'calibrated' world-model "
            "scores (to isolate the world model's effect in ablations)."
        ),
    )

    def __post_init__(self) -> None:
        if not (0.0 <= self.anchor_fraction <= 1.0):
            raise ConfigError(
                f"anchor_fraction={self.anchor_fraction!r} is outside [0, 1]; pass a share such as 0.1"
            )
        for name in ("min_anchor_groups", "seed"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}={getattr(self, name)!r} is negative; pass 0 or more")
        if self.max_anchors_in_flight is not None and self.max_anchors_in_flight < 1:
            raise ConfigError(
                f"max_anchors_in_flight={self.max_anchors_in_flight!r}; pass None (no cap) or >= 1, "
                "otherwise no group could ever be anchored"
            )
        for name in ("min_pairs", "refit_every", "capacity", "warmup_groups"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)!r}; pass 1 or more")
        if self.min_pairs > self.capacity:
            raise ConfigError(
                f"min_pairs={self.min_pairs!r} exceeds capacity={self.capacity!r}; the map could never be "
                "fitted, lower min_pairs or raise capacity"
            )
        if not (np.isfinite(self.w_max) and self.w_max >= 1.0):
            raise ConfigError(f"w_max={self.w_max!r}; pass a finite value >= 1 (the anchor weight is >= 1)")
        if self.weighting not in ("agreement", "paper"):
            raise ConfigError(f"weighting={self.weighting!r} is unknown; pass 'agreement' or 'paper'")
        if not (np.isfinite(self.half_life_groups) and self.half_life_groups > 0.0):
            raise ConfigError(f"half_life_groups={self.half_life_groups!r}; pass a number > 0, e.g. 64")
        if not (np.isfinite(self.confidence) and self.confidence >= 0.0):
            raise ConfigError(f"confidence={self.confidence!r}; pass a finite z >= 0, e.g. 1.0")
        if (
            self.anchor_fraction == 0.0
            and self.min_anchor_groups == 0
            and self.denoise
            and self.weighting == "agreement"
        ):
            raise ConfigError(
                "anchor_fraction=0 and min_anchor_groups=0 with denoise=True: the agreement rule weighs "
                "world-model groups by agreement measured on anchors, and with no anchors they would weigh "
                "0 forever (no gradient). For world-model-only training pass denoise=False"
            )
        if self.anchor_selection not in ("auto", "random", "uncertainty"):
            raise ConfigError(
                f"anchor_selection={self.anchor_selection!r} is unknown; pass 'auto', 'random' or "
                "'uncertainty'"
            )
        if not (0.0 <= self.random_share <= 1.0):
            raise ConfigError(f"random_share={self.random_share!r} is outside [0, 1]; pass e.g. 0.5")
        if self.advantage_scale not in ("std", "none"):
            raise ConfigError(
                f"advantage_scale={self.advantage_scale!r} is unknown; pass 'std' (GRPO) or 'none' (Dr. GRPO)"
            )
        if self.train_anchor_on not in ("real", "calibrated"):
            raise ConfigError(
                f"train_anchor_on={self.train_anchor_on!r} is unknown; pass 'real' (the method) or "
                "'calibrated'"
            )


def _check_powered(config: CorrectionConfig) -> None:
    """Refuse the settings under which the prediction-powered step would no longer be unbiased."""
    if config.anchor_selection == "uncertainty":
        raise ConfigError(
            "anchor_selection='uncertainty' with a power tuner: the prediction-powered estimator is "
            "unbiased only when the anchor groups are a uniform random sample; pass 'random' or 'auto' "
            "('auto' draws uniformly under a power tuner)"
        )
    if config.min_anchor_groups < 1:
        raise ConfigError(
            f"min_anchor_groups={config.min_anchor_groups!r} with a power tuner: a step without an anchor "
            "group has no unbiased estimate and trains on nothing; pass min_anchor_groups >= 1"
        )
    if config.train_anchor_on != "real":
        raise ConfigError(
            f"train_anchor_on={config.train_anchor_on!r} with a power tuner: the estimator corrects the "
            "world model with real anchor scores; pass 'real'"
        )


class CorrectionLoop:
    """Turns a step's scored groups into corrected, weighted advantages (OD + IVD), statefully.

    Args:
        config: the correction settings.
        cheap: the world model as a :class:`Scorer` (``trusted`` False); needed by :meth:`step` only.
        trusted: the real execution as a :class:`Scorer` (``trusted`` True); needed by :meth:`step` only.
        residual: optional :class:`~wmrl_algos.residual.ResidualCorrection` applied after the isotonic
            map (it reads ``ScoredGroup.trajectories``, so groups must carry them).
        power: optional :class:`~wmrl_algos.ppi.PowerTuner`: the prediction-powered estimator instead of
            the fusion weights (``denoise``, ``weighting`` and ``normalise_weights`` then only change
            the logged agreement metrics). Choose it when the world model's error may be systematic
            (per strategy, or following the policy): the step stays unbiased for any error and is
            exactly GRPO on the anchors when the world model is useless. Its weights assume a loss that
            averages over every trajectory of the step (``loss_type="grpo"``).

    Raises:
        ConfigError: ``cheap.trusted`` is True or ``trusted.trusted`` is False (scorers swapped?); a
            ``power`` tuner with a setting that breaks its unbiasedness (anchors chosen by uncertainty,
            no anchors, anchors trained on calibrated scores).

    Example:
        >>> loop = CorrectionLoop(CorrectionConfig(min_pairs=2, refit_every=2))
        >>> groups = [
        ...     ScoredGroup(0, anchor=True, predicted=(0.2, 0.4), real=(0.0, 1.0)),
        ...     ScoredGroup(1, anchor=False, predicted=(0.2, None, 0.4)),
        ... ]
        >>> result = loop.correct(groups)
        >>> result.advantages[1].mask.tolist(), result.metrics["wmrl/anchor_groups"]
        ([True, False, True], 1.0)
        >>> result.metrics["wmrl/world_model_weight"]  # no evidence of agreement yet
        0.0
    """

    def __init__(
        self,
        config: CorrectionConfig | None = None,
        cheap: Scorer[Any] | None = None,
        trusted: Scorer[Any] | None = None,
        residual: ResidualCorrection | None = None,
        power: PowerTuner | None = None,
    ) -> None:
        self.config = CorrectionConfig() if config is None else config
        if power is not None:
            _check_powered(self.config)
        if cheap is not None and getattr(cheap, "trusted", None) is not False:
            raise ConfigError(
                f"the cheap scorer {cheap!r} has trusted={getattr(cheap, 'trusted', None)!r}; it must be "
                "False (a world model). Scorers swapped? Anchors would train on predictions."
            )
        if trusted is not None and getattr(trusted, "trusted", None) is not True:
            raise ConfigError(
                f"the trusted scorer {trusted!r} has trusted={getattr(trusted, 'trusted', None)!r}; it must "
                "be True (the real execution). Scorers swapped? The calibration would fit predictions "
                "to predictions."
            )
        self.cheap = cheap
        self.trusted = trusted
        self.residual = residual
        self.power = power
        config = self.config
        self.scheduler = AnchorScheduler(
            config.anchor_fraction,
            config.min_anchor_groups,
            config.max_anchors_in_flight,
            config.seed,
            config.random_share,
        )
        self.debiaser = OnlineDebiaser(config.capacity, config.min_pairs, config.refit_every)
        self.weighter = InverseVarianceWeighter(
            config.weighting,
            config.half_life_groups,
            config.warmup_groups,
            config.w_max,
            config.confidence,
            config.advantage_scale,
        )
        self._groups_seen = 0
        self._anchors_seen = 0
        self._steps = 0
        self._planned_random: np.ndarray | None = None

    def plan(self, n_groups: int, uncertainty: Sequence[float] | None = None) -> np.ndarray:
        """The anchor mask for the next step, decided before any real execution (occupies in-flight slots).

        Args:
            n_groups: groups in the step.
            uncertainty: one number per group (higher: the world model is less sure, e.g. the residual
                correction's standard deviation); required under ``anchor_selection="uncertainty"``, used
                under ``"auto"`` when given, ignored under ``"random"``.

        Raises:
            ConfigError: ``anchor_selection="uncertainty"`` without ``uncertainty``.
        """
        selection = self.config.anchor_selection
        if selection == "random" or (selection == "auto" and (uncertainty is None or self.power is not None)):
            mask = self.scheduler.select(n_groups)
            self._planned_random = None
            return mask
        if uncertainty is None:
            raise ConfigError(
                "anchor_selection='uncertainty' needs plan(n_groups, uncertainty=[one number per group]); "
                "pass the world model's uncertainty, a residual correction to step(), or use 'random'"
            )
        mask = self.scheduler.select(n_groups, priority=uncertainty)
        self._planned_random = self.scheduler.last_random
        return mask

    def _calibrate(self, group: ScoredGroup) -> list[Score]:
        """The group's world-model scores through the current map and the residual correction."""
        calibrated = self.debiaser.apply(list(group.predicted))
        if self.residual is None or not self.config.debias:
            return calibrated
        mean, _ = self.residual.predict(self._trajectories(group))
        return [
            None if score is None else float(score + shift)
            for score, shift in zip(calibrated, mean, strict=True)
        ]

    @staticmethod
    def _trajectories(group: ScoredGroup) -> tuple[Any, ...]:
        if not group.trajectories:
            raise ConfigError(
                f"group {group.group_id} carries no trajectories but a residual correction needs them to "
                "compute features; pass trajectories=... in every ScoredGroup, or no residual"
            )
        return group.trajectories

    def correct(self, groups: Sequence[ScoredGroup]) -> StepResult:
        """Correct one step's scored groups and form their advantages.

        Order: the world model is measured on the anchor groups with the map fitted *before* their pairs
        (out of sample) -> their pairs enter the buffer (``pairs`` when given) and the map refits -> the
        residual correction learns -> world-model groups calibrated -> anchor groups take their real
        scores -> advantages with the fusion weights. Releases one in-flight slot per anchor group.

        Bad input has a defined result and never a NaN: unknown (``None``) scores are left out of
        baselines and get advantage 0; a group with fewer than two known scores is masked out; a step
        whose world model returned only ``None`` trains on its anchors alone; a step without anchor
        groups measures nothing and trains on its world-model groups with the current weights (all
        zeros, hence a zero gradient, while the world model is not trusted).

        Args:
            groups: every group of the step, anchor and world-model ones, in order.

        Returns:
            The advantages (input order), the groups and the ``wmrl/...`` metrics.

        Raises:
            ConfigError: no groups, or a score is NaN or infinite.
        """
        if not groups:
            raise ConfigError("correct() got no groups; pass every scored group of the step")
        config = self.config
        anchors = [group for group in groups if group.anchor]
        self.scheduler.release(min(len(anchors), self.scheduler.in_flight))
        measured = self._measured_anchors(groups, anchors)
        out_of_sample = [self._calibrate(group) for group in groups] if self.power is not None else None

        anchor_predicted = [list(group.predicted) for group in anchors]
        anchor_real = [list(group.real or ()) for group in anchors]
        disagreement = self.weighter.update(
            [self._calibrate(group) for group in measured], [list(group.real or ()) for group in measured]
        )
        if config.debias:
            for group, predicted, real in zip(anchors, anchor_predicted, anchor_real, strict=True):
                if group.pairs is not None:
                    self.debiaser.push([p for p, _ in group.pairs], [r for _, r in group.pairs])
                else:
                    self.debiaser.push(predicted, real)
            if self.residual is not None:
                for group, predicted, real in zip(anchors, anchor_predicted, anchor_real, strict=True):
                    self.residual.update(
                        self._trajectories(group),
                        self.debiaser.apply(as_score_array(predicted)),
                        as_score_array(real),
                    )
        residual_raw, residual_calibrated = self.debiaser.residuals(anchor_predicted, anchor_real)
        anchor_weight = self.weighter.anchor_weight if config.denoise else 1.0
        world_model_weight = self.weighter.world_model_weight if config.denoise else 1.0

        rewards: list[list[Score]] = []
        for index, group in enumerate(groups):
            if group.anchor and config.train_anchor_on == "real":
                rewards.append(list(group.real or ()))
            else:
                rewards.append(self._calibrate(group) if out_of_sample is None else out_of_sample[index])
        powered: dict[str, float] = {}
        if self.power is not None and out_of_sample is not None:
            advantages, powered = self._powered(self.power, groups, out_of_sample)
            anchor_weight, world_model_weight = 1.0, powered["wmrl/power_coefficient"]
        else:
            advantages = group_advantages(
                rewards,
                [group.anchor for group in groups],
                anchor_weight,
                world_model_weight=world_model_weight,
                scale=config.advantage_scale,
                normalise_weights=config.normalise_weights,
            )

        self._steps += 1
        self._groups_seen += len(groups)
        self._anchors_seen += len(anchors)
        n_trajectories = sum(len(group_rewards) for group_rewards in rewards)
        n_ungraded = sum(score is None for group_rewards in rewards for score in group_rewards)
        metrics: dict[str, float] = {
            "wmrl/anchor_fraction": len(anchors) / len(groups),
            "wmrl/anchor_fraction_cumulative": self._anchors_seen / self._groups_seen,
            "wmrl/anchor_groups": float(len(anchors)),
            "wmrl/calibrated": 1.0 if self.debiaser.is_fitted else 0.0,
            "wmrl/pairs": float(self.debiaser.n_pairs),
            "wmrl/anchor_weight": float(anchor_weight),
            "wmrl/world_model_weight": float(world_model_weight),
            "wmrl/measured_groups": float(self.weighter.measured_groups),
            "wmrl/ungraded_fraction": n_ungraded / n_trajectories if n_trajectories else 0.0,
        }
        optional = {
            "wmrl/residual_raw": residual_raw,
            "wmrl/residual_calibrated": residual_calibrated,
            "wmrl/bias_reduction": (
                1.0 - residual_calibrated / residual_raw
                if residual_raw and residual_calibrated is not None
                else None
            ),
            "wmrl/disagreement": disagreement,
            "wmrl/eta2": self.weighter.eta2,
            "wmrl/eta2_cal": self.weighter.eta2_cal,
            "wmrl/agreement": self.weighter.agreement,
            "wmrl/agreement_slope": self.weighter.slope,
        }
        metrics.update({key: float(value) for key, value in optional.items() if value is not None})
        metrics.update(powered)
        return StepResult(advantages=tuple(advantages), groups=tuple(groups), metrics=metrics)

    def _powered(
        self, power: PowerTuner, groups: Sequence[ScoredGroup], calibrated: list[list[Score]]
    ) -> tuple[list[GroupAdvantages], dict[str, float]]:
        """The prediction-powered advantages of a step (with the coefficient of earlier steps); then the
        tuner learns this step's anchor pairs (real and out-of-sample predicted advantages) and refits
        for the next step."""
        scale = self.config.advantage_scale
        anchor = [group.anchor for group in groups]
        predicted = group_advantages(calibrated, anchor, scale=scale)
        real = group_advantages([list(group.real or ()) for group in groups], anchor, scale=scale)
        predicted_values = [np.where(a.mask, a.values, np.nan) for a in predicted]
        real_values = [
            np.where(a.mask, a.values, np.nan) if group.anchor else None
            for a, group in zip(real, groups, strict=True)
        ]
        coefficient = power.coefficient
        effective = power.apply(real_values, predicted_values)
        advantages = [
            GroupAdvantages(
                values=out.values,
                mask=out.mask,
                weight=out.scale if group.anchor else coefficient,
                rewards=(real if group.anchor else predicted)[index].rewards,
            )
            for index, (out, group) in enumerate(zip(effective, groups, strict=True))
        ]
        for truth, guess in zip(real_values, predicted_values, strict=True):
            if truth is not None:
                power.push(truth, guess)
        power.refit()
        metrics = {"wmrl/power_coefficient": coefficient, "wmrl/power_pairs": power.pairs}
        correlation = power.correlation
        ratio = power.variance_ratio(sum(anchor), len(groups))
        if correlation is not None:
            metrics["wmrl/power_correlation"] = correlation
        if ratio is not None:
            metrics["wmrl/power_variance_ratio"] = ratio
        return advantages, metrics

    def _measured_anchors(
        self, groups: Sequence[ScoredGroup], anchors: list[ScoredGroup]
    ) -> list[ScoredGroup]:
        """The anchor groups the world model is measured on: the uniformly drawn ones when the last plan
        chose some by uncertainty (an unbiased sample), all of them otherwise."""
        planned, self._planned_random = self._planned_random, None
        if planned is None or planned.size != len(groups):
            return anchors
        return [
            group for group, uniform in zip(groups, planned.tolist(), strict=True) if group.anchor and uniform
        ]

    def step(self, groups: Sequence[Sequence[Any]]) -> StepResult:
        """Plan anchors, score, and correct one step of raw trajectory groups.

        The cheap scorer scores every trajectory of every group in ONE batched call; the trusted scorer
        scores the anchor groups' trajectories in one call; then :meth:`correct`. Under
        ``anchor_selection="uncertainty"`` or ``"auto"`` the residual correction's mean standard deviation
        per group, when there is one, is the uncertainty.

        Args:
            groups: the trajectories of each group.

        Returns:
            As :meth:`correct`; each :class:`~wmrl_algos.types.ScoredGroup` carries its trajectories.

        Raises:
            ConfigError: a scorer is missing, or uncertainty selection without a residual correction.
            WorldModelError: a scorer returned the wrong number of scores.
        """
        if self.cheap is None or self.trusted is None:
            raise ConfigError(
                "step() needs both scorers: pass cheap= (world model) and trusted= (real execution) to "
                "CorrectionLoop, or score the groups yourself and call correct()"
            )
        uncertainty = None
        if self.config.anchor_selection != "random" and self.residual is not None:
            uncertainty = [
                float(np.mean(self.residual.predict(list(group))[1])) if group else 0.0 for group in groups
            ]
        mask = self.plan(len(groups), uncertainty)
        try:
            flat = [trajectory for group in groups for trajectory in group]
            predicted = self._score(self.cheap, flat, "cheap")
            anchor_flat = [
                trajectory
                for group, is_anchor in zip(groups, mask.tolist(), strict=True)
                if is_anchor
                for trajectory in group
            ]
            real = self._score(self.trusted, anchor_flat, "trusted") if anchor_flat else []
        except BaseException:
            self.scheduler.release(min(int(mask.sum()), self.scheduler.in_flight))
            self._planned_random = None
            raise
        scored: list[ScoredGroup] = []
        predicted_offset = real_offset = 0
        for index, (group, is_anchor) in enumerate(zip(groups, mask.tolist(), strict=True)):
            size = len(group)
            group_real: tuple[Score, ...] | None = None
            if is_anchor:
                group_real = tuple(real[real_offset : real_offset + size])
                real_offset += size
            scored.append(
                ScoredGroup(
                    group_id=index,
                    anchor=is_anchor,
                    predicted=tuple(predicted[predicted_offset : predicted_offset + size]),
                    real=group_real,
                    trajectories=tuple(group),
                )
            )
            predicted_offset += size
        return self.correct(scored)

    @staticmethod
    def _score(scorer: Scorer[Any], trajectories: list[Any], role: str) -> list[Score]:
        scores = list(scorer.score(trajectories))
        if len(scores) != len(trajectories):
            raise WorldModelError(
                f"the {role} scorer {scorer!r} returned {len(scores)} scores for {len(trajectories)} "
                "trajectories; it must return exactly one per trajectory (None where unknown)"
            )
        return [None if score is None else float(score) for score in scores]

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume exactly: config, scheduler, calibration buffer and map, IV state."""
        return {
            "config": dataclasses.asdict(self.config),
            "scheduler": self.scheduler.state_dict(),
            "debiaser": self.debiaser.state_dict(),
            "weighter": self.weighter.state_dict(),
            "residual": None if self.residual is None else self.residual.state_dict(),
            "power": None if self.power is None else self.power.state_dict(),
            "groups_seen": self._groups_seen,
            "anchors_seen": self._anchors_seen,
            "steps": self._steps,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a state produced by :meth:`state_dict` into a loop built with the same config.

        Raises:
            CheckpointError: the state is incomplete, or was saved with a different config.
        """
        try:
            saved_config = dict(state["config"])
            counters = (int(state["groups_seen"]), int(state["anchors_seen"]), int(state["steps"]))
            parts = (state["scheduler"], state["debiaser"], state["weighter"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(
                f"correction loop state is incomplete or corrupt ({exc!r}); pass a state produced by "
                "CorrectionLoop.state_dict()"
            ) from exc
        current = dataclasses.asdict(self.config)
        differing = sorted(
            key for key in current.keys() | saved_config.keys() if current.get(key) != saved_config.get(key)
        )
        if differing:
            details = ", ".join(
                f"{key}: saved {saved_config.get(key)!r} vs now {current.get(key)!r}" for key in differing
            )
            raise CheckpointError(
                f"the checkpoint was saved with a different CorrectionConfig ({details}); resuming would "
                "not continue the same run, build the loop with the saved config"
            )
        self.scheduler.load_state_dict(parts[0])
        self.debiaser.load_state_dict(parts[1])
        self.weighter.load_state_dict(parts[2])
        residual_state = state.get("residual")
        if (residual_state is None) != (self.residual is None):
            raise CheckpointError(
                "the checkpoint was saved "
                + ("without" if residual_state is None else "with")
                + " a residual correction but this loop has "
                + ("one" if self.residual is not None else "none")
                + "; build the loop as it was saved"
            )
        if self.residual is not None and residual_state is not None:
            self.residual.load_state_dict(residual_state)
        power_state = state.get("power")
        if (power_state is None) != (self.power is None):
            raise CheckpointError(
                "the checkpoint was saved "
                + ("without" if power_state is None else "with")
                + " a power tuner (prediction-powered estimator) but this loop has "
                + ("one" if self.power is not None else "none")
                + "; build the loop as it was saved"
            )
        if self.power is not None and power_state is not None:
            self.power.load_state_dict(power_state)
        self._groups_seen, self._anchors_seen, self._steps = counters
