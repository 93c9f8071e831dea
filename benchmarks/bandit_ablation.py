"""WMRL's corrections under realistic world-model error, on a contextual bandit with known true rewards.

Why: WMRL's claims are about mechanics (a world-model-only run stops at a bias floor; Online Debiasing
removes a monotone bias; the fusion weights keep what the world model knows and drop what it does
not). A bandit whose true rewards are known exactly measures each claim without evaluation noise, in
minutes on a CPU. The paper's own setting (one global monotone distortion) is the one case where a
global isotonic map is the exact inverse, so this benchmark also runs the errors a real self-world-model
plausibly shows, and compares every method against the fair equal-budget baseline: GRPO on the anchor
groups alone (same steps, same real executions, no world model).

Setup: GRPO, 8 groups x 8 trajectories per step, one context per group, a tabular softmax policy
trained with the library's ``CorrectionLoop`` and ``grpo_loss``; one anchor group per step (``anchor
fraction 0.1`` with ``min_anchor_groups=1`` realises 1/8). Every world model starts from
``toy_bandit.SyntheticWorldModel`` (the fixture next to this script): the outcome plus noise through a
convex monotone distortion that drifts with the policy. Variants (``--variants``):

* ``monotone``: that model alone (the paper's setting; OD is its exact inverse).
* ``arm_bias``: plus a fixed bias per (context, action) on the outcome scale, sized so the within-group
  Spearman correlation with the real score is about 0.6 (the rubric world model measures 0.68).
* ``self_preference``: plus a bonus for actions the current policy already prefers
  (``self_preference * (pi(a|c) - 1/n_actions)``), which grows as the policy concentrates.
* ``heteroscedastic``: noise whose size differs per (context, action) (log-normal factor).
* ``unknown``: a share of predictions is unknown (``None``).
* ``realistic``: the four errors above at once (arm bias, self-preference, heteroscedastic noise, 30 %
  unknown): the error a real self-world-model plausibly shows, none of it a global monotone distortion.
* ``judge``: an LLM-judge-like model: self-preference, over-rating of the complex (ambitious)
  strategies, and a family prior (the even-numbered strategies rated higher on every task) that is
  wrong wherever that family is not the better one.
* ``useless``: predictions independent of the outcome.

Methods: ``grpo_real`` (every group executed, same steps), ``grpo_real_equal_budget`` (every group
executed, stopped at WMRL's executions), ``grpo_anchors_only`` (the baseline), ``world_model_only``,
``direct_mix`` (anchors real, the rest raw predictions, weight 1), ``od_only``, ``od_ivd_paper`` (OD +
the paper's anchor weight ``1 + eta2/eta2_cal``), ``wmrl`` (the library default: OD + agreement
weights), ``wmrl_residual`` (+ a ridge residual correction on one-hot (context, action) features),
``wmrl_uncertainty`` (+ residual + uncertainty-driven anchor selection), ``wmrl_ppi`` (OD-calibrated
predictions as the control variate of the prediction-powered estimator, :mod:`wmrl_algos.ppi`, instead
of the fusion weights) and ``wmrl_ppi_residual`` (the same with the residual correction's calibrated
predictions). The three all-real methods do not use a world model and run once per seed. Paired
differences use the same seeds (same reward tables) for every method.

Run ``nice -n 10 python benchmarks/bandit_ablation.py`` (10 seeds x 300 steps; wall time is printed
into ``results.md``) or ``--quick`` (seconds). It writes ``results.md``, ``results.csv``, ``curves.csv``
and ``bandit_ablation.png`` into ``--output-dir``. ``--report powered`` writes the pre-registered
powered comparison of ``benchmarks/protocols/bandit_powered.md`` instead (paired differences to
anchors-only, all-real GRPO and direct mix in final reward, curve area and steps to 90 % of the gap,
with s.e. and 95 % intervals, the power check and the decision rule): ``results.md``, ``results.csv``,
``curves.csv`` and ``bandit_powered.png``. ``--cache-dir`` keeps every finished run, so an interrupted
run resumes.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from toy_bandit import (
    BanditConfig,
    ContextualBandit,
    SyntheticWorldModel,
    WorldModelErrorConfig,
    policy_shift,
    sample_actions,
)
from tqdm import tqdm
from wmrl_adapters.cli import parse_dataclass_args

from wmrl_algos.anchors import AnchorScheduler
from wmrl_algos.grpo import GRPOConfig, grpo_loss
from wmrl_algos.loop import CorrectionConfig, CorrectionLoop
from wmrl_algos.ppi import PowerTuner
from wmrl_algos.residual import RidgeResidual
from wmrl_algos.types import ScoredGroup

__all__ = [
    "Args",
    "Method",
    "METHODS",
    "VARIANTS",
    "RunCurves",
    "VariantWorldModel",
    "run_method",
    "main",
    "mean_and_stderr",
    "refuse_unknown_names",
]

VARIANTS: dict[str, str] = {
    "monotone": "monotone (paper)",
    "arm_bias": "arm-specific bias",
    "self_preference": "self-preference",
    "heteroscedastic": "heteroscedastic noise",
    "unknown": "30% unknown",
    "realistic": "realistic (all four errors)",
    "judge": "judge-like",
    "useless": "useless",
}
"""World-model variant -> its column label. Every variant but ``useless`` carries signal."""

VARIANT_ERRORS: dict[str, frozenset[str]] = {
    "monotone": frozenset(),
    "arm_bias": frozenset({"arm_bias"}),
    "self_preference": frozenset({"self_preference"}),
    "heteroscedastic": frozenset({"heteroscedastic"}),
    "unknown": frozenset({"unknown"}),
    "realistic": frozenset({"arm_bias", "self_preference", "heteroscedastic", "unknown"}),
    "judge": frozenset({"self_preference", "over_rating", "family_prior"}),
    "useless": frozenset(),
}
"""World-model variant -> the errors added to the monotone distortion and noise of every variant."""


@dataclass
class Args:
    """Command-line settings (``--name value``; booleans as ``--flag``)."""

    steps: int = field(default=300, metadata={"help": "Training steps of every equal-step method."})
    seeds: int = field(default=10, metadata={"help": "Independent seeds per method (bandit, policy, noise)."})
    groups_per_step: int = field(default=8, metadata={"help": "GRPO groups per step (paper: 8)."})
    group_size: int = field(default=8, metadata={"help": "Trajectories per group (paper: 8)."})
    anchor_fraction: float = field(
        default=0.1, metadata={"help": "Share of groups executed for real (paper: 0.1)."}
    )
    n_contexts: int = field(default=16, metadata={"help": "Contexts (tasks) of the bandit."})
    n_actions: int = field(default=8, metadata={"help": "Actions (strategies) per context."})
    n_ambitious: int = field(
        default=3, metadata={"help": "High-variance actions per context; 0 removes the bias floor."}
    )
    curvature: float = field(
        default=3.0, metadata={"help": "Convexity of the world model's distortion (0: no bias)."}
    )
    curvature_drift: float = field(
        default=2.0, metadata={"help": "Growth of the convexity as the policy moves (0: no drift)."}
    )
    noise_std: float = field(
        default=0.15, metadata={"help": "Outcome-scale noise of the world model (0: none)."}
    )
    noise_drift: float = field(
        default=1.0, metadata={"help": "Relative growth of the noise as the policy moves."}
    )
    arm_bias_std: float = field(
        default=0.2,
        metadata={"help": "arm_bias: std of the per-(context, action) bias on the outcome scale."},
    )
    self_preference: float = field(
        default=0.4,
        metadata={"help": "self_preference: bonus per unit of the policy's excess probability of an action."},
    )
    noise_spread: float = field(
        default=0.75,
        metadata={"help": "heteroscedastic: std of the log of the per-(context, action) noise factor."},
    )
    unknown_share: float = field(
        default=0.3, metadata={"help": "unknown: share of predictions that are unknown (None)."}
    )
    over_rating: float = field(
        default=0.15,
        metadata={"help": "judge: outcome-scale bonus of the complex (ambitious) strategies."},
    )
    family_prior: float = field(
        default=0.15,
        metadata={"help": "judge: outcome-scale bonus of the even-numbered strategies on every task."},
    )
    learning_rate: float = field(default=0.1, metadata={"help": "Adam learning rate on the policy logits."})
    capacity: int = field(
        default=256,
        metadata={"help": "Anchor pairs the isotonic map is fitted on (FIFO, 32 steps of one anchor group)."},
    )
    methods: str = field(default="all", metadata={"help": "Comma-separated method names, or 'all'."})
    variants: str = field(default="all", metadata={"help": "Comma-separated world-model variants, or 'all'."})
    output_dir: str = field(
        default="benchmarks/results/bandit_ablation", metadata={"help": "Where tables and the plot go."}
    )
    quick: bool = field(default=False, metadata={"help": "Tiny budget (24 steps, 2 seeds) for tests."})
    workers: int = field(
        default=1, metadata={"help": "Processes running seeds in parallel (results identical)."}
    )
    cache_dir: str = field(
        default="",
        metadata={
            "help": "Folder keeping each finished run (one .npz per method, variant, seed and settings), so "
            "an interrupted run resumes where it stopped; '' keeps nothing."
        },
    )
    report: str = field(
        default="ablation",
        metadata={
            "help": "'ablation': the ablation tables; 'powered': the pre-registered powered comparison "
            "(benchmarks/protocols/bandit_powered.md) instead, with its decision rule and targets."
        },
    )

    def __post_init__(self) -> None:
        if self.quick:
            self.steps, self.seeds = min(self.steps, 24), min(self.seeds, 2)
        for name in ("steps", "seeds", "groups_per_step", "capacity", "workers"):
            if getattr(self, name) < 1:
                raise SystemExit(f"--{name.replace('_', '-')}={getattr(self, name)!r}; pass 1 or more")
        if self.group_size < 2:
            raise SystemExit(
                f"--group-size={self.group_size!r}; GRPO needs at least 2 trajectories per group"
            )
        if not 0.0 < self.anchor_fraction <= 1.0:
            raise SystemExit(f"--anchor-fraction={self.anchor_fraction!r}; pass a share in (0, 1], e.g. 0.1")
        if not 0.0 <= self.unknown_share < 1.0:
            raise SystemExit(f"--unknown-share={self.unknown_share!r}; pass a share in [0, 1)")
        if self.report not in ("ablation", "powered"):
            raise SystemExit(f"--report={self.report!r} is unknown; pass 'ablation' or 'powered'")
        refuse_unknown_names("methods", self.method_names, [method.name for method in METHODS])
        refuse_unknown_names("variants", self.variant_names, list(VARIANTS))

    @property
    def method_names(self) -> list[str]:
        """The methods to run, in table order."""
        return _names(self.methods, [method.name for method in METHODS])

    @property
    def variant_names(self) -> list[str]:
        """The world-model variants to run, in table order."""
        return _names(self.variants, list(VARIANTS))


def refuse_unknown_names(option: str, chosen: Sequence[str], valid: Sequence[str]) -> None:
    """Exit naming the unknown entries of ``--option`` and the valid ones (both powered benchmarks)."""
    unknown = set(chosen) - set(valid)
    if unknown:
        raise SystemExit(
            f"--{option} has unknown names {sorted(unknown)}; choose from {', '.join(valid)} or 'all'"
        )


def _names(option: str, every: list[str]) -> list[str]:
    if option == "all":
        return every
    return [name.strip() for name in option.split(",") if name.strip()]


@dataclass(frozen=True)
class Method:
    """One row of the ablation.

    Attributes:
        name: identifier (``--methods``, CSV).
        label: what the table and plot call it.
        mode: ``"real"`` (every group executed), ``"world_model"`` (none executed), ``"mix"`` (anchor
            groups executed, the correction loop decides the rest).
        debias: Online Debiasing on (mix only).
        denoise: fusion weights on (mix only).
        weighting: ``CorrectionConfig.weighting``.
        residual: add a :class:`~wmrl_algos.residual.RidgeResidual` on one-hot (context, action).
        uncertainty_anchors: ``anchor_selection="uncertainty"`` (needs ``residual``).
        power: the prediction-powered estimator (:class:`~wmrl_algos.ppi.PowerTuner`) instead of the
            fusion weights.
        equal_budget: stop an all-real run when it reaches the executions of the mixed methods.
        anchors_only: train on the anchor groups alone (one group per step, executed).
    """

    name: str
    label: str
    mode: str
    debias: bool = False
    denoise: bool = False
    weighting: str = "agreement"
    residual: bool = False
    uncertainty_anchors: bool = False
    power: bool = False
    equal_budget: bool = False
    anchors_only: bool = False

    @property
    def uses_world_model(self) -> bool:
        """False for the all-real methods, which run once per seed whatever the variant."""
        return self.mode != "real"


METHODS: tuple[Method, ...] = (
    Method("grpo_real", "GRPO, all real (equal steps)", "real"),
    Method("grpo_real_equal_budget", "GRPO, all real (equal executions)", "real", equal_budget=True),
    Method("grpo_anchors_only", "GRPO on anchor groups only (baseline)", "real", anchors_only=True),
    Method("world_model_only", "world model only", "world_model"),
    Method("direct_mix", "direct mix (no correction)", "mix"),
    Method("od_only", "OD only", "mix", debias=True),
    Method(
        "od_ivd_paper",
        "OD + IVD, paper rule 1 + η²/η²_cal",
        "mix",
        debias=True,
        denoise=True,
        weighting="paper",
    ),
    Method("wmrl", "WMRL default (OD + agreement weights)", "mix", debias=True, denoise=True),
    Method("wmrl_residual", "WMRL + residual correction", "mix", debias=True, denoise=True, residual=True),
    Method(
        "wmrl_uncertainty",
        "WMRL + residual + uncertainty anchors",
        "mix",
        debias=True,
        denoise=True,
        residual=True,
        uncertainty_anchors=True,
    ),
    Method("wmrl_ppi", "WMRL-PPI (OD + prediction-powered)", "mix", debias=True, power=True),
    Method(
        "wmrl_ppi_residual",
        "WMRL-PPI + residual correction",
        "mix",
        debias=True,
        residual=True,
        power=True,
    ),
)


@dataclass(frozen=True)
class RunCurves:
    """Per-step records of one run (one method, one variant, one seed).

    Attributes:
        true_reward: exact expected real score of the policy before each step, plus after the last.
        executions: cumulative real executions before each step, plus after the last.
        world_model_weight: weight of a world-model group relative to an anchor group at each step
            (``world_model_weight / anchor_weight`` of the loop; 1.0 where the weights are off; the
            coefficient λ under the prediction-powered estimator).
        agreement: the loop's out-of-sample agreement of calibrated world-model and real advantages on
            the anchor groups at each step (``wmrl/agreement``, the world model's fidelity on the policy's
            own rollouts); NaN where the loop measured none.
    """

    true_reward: np.ndarray
    executions: np.ndarray
    world_model_weight: np.ndarray
    agreement: np.ndarray


class VariantWorldModel:
    """One world-model variant over the bandit (module docstring); NaN marks an unknown prediction.

    Args:
        variant: a key of :data:`VARIANTS`.
        bandit: the bandit it predicts.
        args: the benchmark settings (error sizes).
        seed: seeds the variant's fixed per-arm draws (bias, noise factor).
    """

    def __init__(self, variant: str, bandit: ContextualBandit, args: Args, seed: int) -> None:
        self.variant = variant
        self.errors = VARIANT_ERRORS[variant]
        self.args = args
        self.base = SyntheticWorldModel(
            WorldModelErrorConfig(args.curvature, args.curvature_drift, args.noise_std, args.noise_drift)
        )
        shape = (bandit.n_contexts, bandit.n_actions)
        draws = np.random.default_rng([seed, 7])
        self.arm_bias = (
            draws.normal(0.0, args.arm_bias_std, shape) if "arm_bias" in self.errors else np.zeros(shape)
        )
        if "over_rating" in self.errors:
            self.arm_bias = self.arm_bias + args.over_rating * bandit.ambitious
        if "family_prior" in self.errors:
            self.arm_bias = self.arm_bias + args.family_prior * (np.arange(bandit.n_actions) % 2 == 0)
        self.noise_factor = (
            np.exp(draws.normal(0.0, args.noise_spread, shape))
            if "heteroscedastic" in self.errors
            else np.ones(shape)
        )

    def predict(
        self,
        contexts: np.ndarray,
        actions: np.ndarray,
        real: np.ndarray,
        probabilities: np.ndarray,
        shift: float,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """Predictions of shape ``actions.shape`` for trajectories with real scores ``real``."""
        if self.variant == "useless":
            return rng.uniform(0.0, 1.0, real.shape)
        rows = contexts[:, None]
        sigma = self.base.noise_std(shift) * self.noise_factor[rows, actions]
        outcome = real + sigma * rng.standard_normal(real.shape) + self.arm_bias[rows, actions]
        if "self_preference" in self.errors:
            excess = probabilities[rows, actions] - 1.0 / probabilities.shape[1]
            outcome = outcome + self.args.self_preference * excess
        predicted = self.base.distort(outcome, shift)
        if "unknown" in self.errors:
            predicted = np.where(rng.random(real.shape) < self.args.unknown_share, np.nan, predicted)
        return predicted


def within_group_spearman(variant: str, args: Args, seed: int, n_groups: int = 2000) -> float:
    """Mean within-group Spearman correlation of prediction and real score, uniform policy, no drift."""
    from scipy.stats import spearmanr

    bandit = ContextualBandit(BanditConfig(args.n_contexts, args.n_actions, args.n_ambitious, seed=seed))
    world_model = VariantWorldModel(variant, bandit, args, seed)
    rng = np.random.default_rng([seed, 3])
    uniform = np.full((args.n_contexts, args.n_actions), 1.0 / args.n_actions)
    contexts = bandit.sample_contexts(n_groups, rng)
    actions = sample_actions(uniform, contexts, args.group_size, rng)
    real = bandit.sample_outcomes(contexts, actions, rng)
    predicted = world_model.predict(contexts, actions, real, uniform, 0.0, rng)
    values = []
    for row_predicted, row_real in zip(predicted, real, strict=True):
        known = ~np.isnan(row_predicted)
        if known.sum() >= 3 and np.ptp(row_real[known]) > 0 and np.ptp(row_predicted[known]) > 0:
            values.append(float(spearmanr(row_predicted[known], row_real[known]).statistic))
    return float(np.mean(values))


def anchor_groups_per_run(args: Args) -> int:
    """Anchor groups a mixed run executes in ``args.steps`` steps (the count does not depend on the seed)."""
    scheduler = AnchorScheduler(args.anchor_fraction, min_per_step=1, seed=0)
    return int(sum(int(scheduler.select(args.groups_per_step).sum()) for _ in range(args.steps)))


def correction_config(method: Method, args: Args, seed: int) -> CorrectionConfig:
    """The library configuration that implements ``method`` (library defaults otherwise)."""
    if method.mode == "real":
        anchor_fraction, min_anchor_groups = 1.0, 1
    elif method.mode == "world_model":
        anchor_fraction, min_anchor_groups = 0.0, 0
    else:
        anchor_fraction, min_anchor_groups = args.anchor_fraction, 1
    return CorrectionConfig(
        anchor_fraction=anchor_fraction,
        min_anchor_groups=min_anchor_groups,
        seed=seed,
        debias=method.debias,
        denoise=method.denoise,
        weighting=method.weighting,  # type: ignore[arg-type]
        anchor_selection="uncertainty" if method.uncertainty_anchors else "random",
        capacity=args.capacity,
        min_pairs=min(16, args.capacity),
    )


def run_method(method: Method, variant: str, args: Args, seed: int, budget_groups: int) -> RunCurves:
    """Train one policy with one method on one world-model variant and one seed; return its curves.

    Args:
        method: the ablation row.
        variant: the world-model variant (ignored by the all-real methods).
        args: the benchmark settings.
        seed: seeds the bandit's reward table, the policy's sampling and the world model's noise (two
            separate streams, so the all-real methods do not depend on the variant).
        budget_groups: executed groups allowed for an equal-budget run (ignored otherwise).
    """
    bandit = ContextualBandit(BanditConfig(args.n_contexts, args.n_actions, args.n_ambitious, seed=seed))
    world_model = VariantWorldModel(variant, bandit, args, seed)
    residual = None
    if method.residual:
        one_hot = np.eye(args.n_contexts * args.n_actions)
        residual = RidgeResidual(lambda arm: one_hot[arm], one_hot.shape[0])
    power = PowerTuner() if method.power else None
    loop = CorrectionLoop(correction_config(method, args, seed), residual=residual, power=power)
    rng = np.random.default_rng([seed, 1])
    world_model_rng = np.random.default_rng([seed, 2])
    torch.manual_seed(seed)
    logits = torch.zeros(args.n_contexts, args.n_actions, requires_grad=True)
    optimizer = torch.optim.Adam([logits], lr=args.learning_rate)
    loss_config = GRPOConfig()
    initial = np.full((args.n_contexts, args.n_actions), 1.0 / args.n_actions)
    groups_per_step = 1 if method.anchors_only else args.groups_per_step
    steps = max(1, math.ceil(budget_groups / groups_per_step)) if method.equal_budget else args.steps

    true_reward, executions, world_model_weight, agreement = [], [0], [], []
    for _ in range(steps):
        probabilities = torch.softmax(logits.detach(), dim=1).numpy().astype(float)
        probabilities /= probabilities.sum(axis=1, keepdims=True)
        shift = min(1.0, policy_shift(probabilities, initial))
        true_reward.append(bandit.expected_reward(probabilities))

        contexts = bandit.sample_contexts(groups_per_step, rng)
        actions = sample_actions(probabilities, contexts, args.group_size, rng)
        arms = contexts[:, None] * args.n_actions + actions
        uncertainty = None
        if residual is not None and method.uncertainty_anchors:
            uncertainty = [float(residual.predict(row.tolist())[1].mean()) for row in arms]
        anchor_mask = loop.plan(groups_per_step, uncertainty)
        real = bandit.sample_outcomes(contexts, actions, rng)
        predicted = world_model.predict(contexts, actions, real, probabilities, shift, world_model_rng)
        groups = [
            ScoredGroup(
                group_id=index,
                anchor=bool(is_anchor),
                predicted=tuple(None if np.isnan(value) else float(value) for value in predicted[index]),
                real=tuple(real[index].tolist()) if is_anchor else None,
                trajectories=tuple(arms[index].tolist()),
            )
            for index, is_anchor in enumerate(anchor_mask)
        ]
        result = loop.correct(groups)
        advantages, mask = result.flat()
        executions.append(executions[-1] + int(anchor_mask.sum()) * args.group_size)
        world_model_weight.append(
            result.metrics["wmrl/world_model_weight"] / result.metrics["wmrl/anchor_weight"]
        )
        agreement.append(result.metrics.get("wmrl/agreement", math.nan))

        log_probabilities = torch.log_softmax(logits, dim=1)
        taken = log_probabilities[np.repeat(contexts, args.group_size), actions.ravel()].unsqueeze(1)
        loss, _ = grpo_loss(
            taken,
            taken.detach(),
            torch.as_tensor(advantages, dtype=torch.float32),
            torch.as_tensor(mask, dtype=torch.float32).unsqueeze(1),
            config=loss_config,
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    final = torch.softmax(logits.detach(), dim=1).numpy().astype(float)
    true_reward.append(bandit.expected_reward(final / final.sum(axis=1, keepdims=True)))
    return RunCurves(
        np.asarray(true_reward), np.asarray(executions), np.asarray(world_model_weight), np.asarray(agreement)
    )


_NOT_SETTINGS = frozenset(
    {"methods", "variants", "seeds", "workers", "output_dir", "report", "quick", "cache_dir"}
)
"""Args fields that do not change what one run computes (left out of a cached run's key)."""


def run_cached(
    method: Method, variant: str, args: Args, seed: int, budget_groups: int, cache: Path | None
) -> RunCurves:
    """:func:`run_method`, kept in ``cache`` under its method, variant, seed and settings when given."""
    if cache is None:
        return run_method(method, variant, args, seed, budget_groups)
    settings = {key: value for key, value in vars(args).items() if key not in _NOT_SETTINGS}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
    path = cache / f"{method.name}-{variant if method.uses_world_model else 'any'}-{seed}-{digest}.npz"
    if path.exists():
        with np.load(path) as saved:
            return RunCurves(**{name: saved[name] for name in RunCurves.__dataclass_fields__})
    curves = run_method(method, variant, args, seed, budget_groups)
    partial = path.with_suffix(".part.npz")
    np.savez(partial, **vars(curves))
    partial.replace(path)
    return curves


def reference_levels(args: Args) -> dict[str, float]:
    """Seed-averaged uniform-policy and optimal true rewards."""
    uniform, optimal = [], []
    for seed in range(args.seeds):
        bandit = ContextualBandit(BanditConfig(args.n_contexts, args.n_actions, args.n_ambitious, seed=seed))
        uniform.append(float(bandit.mean_reward.mean()))
        optimal.append(bandit.optimal_reward())
    return {"uniform": float(np.mean(uniform)), "optimal": float(np.mean(optimal))}


def mean_and_stderr(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error over seeds (std-err 0 for one seed)."""
    array = np.asarray(values, dtype=float)
    stderr = float(array.std(ddof=1) / np.sqrt(array.size)) if array.size > 1 else 0.0
    return float(array.mean()), stderr


Runs = dict[tuple[str, str], list[RunCurves]]
"""(method name, variant) -> one curve per seed; all-real methods are stored under every variant."""


def _final(runs: Runs, method: str, variant: str) -> np.ndarray:
    return np.array([curve.true_reward[-1] for curve in runs[(method, variant)]])


def summarise(runs: Runs, args: Args, spearman: dict[str, float]) -> list[dict[str, str]]:
    """One row per (variant, method): final reward, paired differences, weights."""
    rows = []
    methods = [method for method in METHODS if method.name in args.method_names]
    for variant in args.variant_names:
        for method in methods:
            final = _final(runs, method.name, variant)
            mean, stderr = mean_and_stderr(final)
            row = {
                "variant": variant,
                "within-group spearman": f"{spearman[variant]:.2f}",
                "method": method.name,
                "label": method.label,
                "steps": str(len(runs[(method.name, variant)][0].true_reward) - 1),
                "real executions": f"{np.mean([c.executions[-1] for c in runs[(method.name, variant)]]):.0f}",
                "final true reward": f"{mean:.4f} ± {stderr:.4f}",
            }
            for reference, column in (
                ("grpo_anchors_only", "vs anchors-only"),
                ("direct_mix", "vs direct mix"),
            ):
                if (reference, variant) in runs and reference != method.name:
                    difference = mean_and_stderr(final - _final(runs, reference, variant))
                    row[f"{column} (paired)"] = f"{difference[0]:+.4f} ± {difference[1]:.4f}"
                else:
                    row[f"{column} (paired)"] = "—"
            weights = [float(curve.world_model_weight[-20:].mean()) for curve in runs[(method.name, variant)]]
            row["WM weight / anchor weight (last 20 steps)"] = f"{np.mean(weights):.2f}"
            rows.append(row)
    return rows


def target_checks(runs: Runs, args: Args) -> list[str]:
    """The issue's targets for the default WMRL, each PASS or MISS with its numbers."""
    lines = []
    if not {"wmrl", "grpo_anchors_only", "direct_mix"} <= set(args.method_names):
        return ["(targets need wmrl, grpo_anchors_only and direct_mix)"]
    for variant in args.variant_names:
        wmrl = _final(runs, "wmrl", variant)
        versus_anchors = mean_and_stderr(wmrl - _final(runs, "grpo_anchors_only", variant))
        versus_mix = mean_and_stderr(wmrl - _final(runs, "direct_mix", variant))
        floor = versus_anchors[0] >= -versus_anchors[1]
        text = (
            f"- {variant}: WMRL − anchors-only = {versus_anchors[0]:+.4f} ± {versus_anchors[1]:.4f} "
            f"(≥ −1 s.e.: {'PASS' if floor else 'MISS'})"
        )
        if variant != "useless":
            above = versus_anchors[0] > 0
            above_mix = versus_mix[0] > 0
            text += (
                f"; > anchors-only: {'PASS' if above else 'MISS'}; WMRL − direct mix = "
                f"{versus_mix[0]:+.4f} ± {versus_mix[1]:.4f} (> 0: {'PASS' if above_mix else 'MISS'})"
            )
        lines.append(text)
    return lines


def pivot_table(runs: Runs, args: Args) -> str:
    """Method x variant: final true reward, and the paired difference to anchors-only GRPO."""
    variants = args.variant_names
    header = ["method"] + [VARIANTS[variant] for variant in variants]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for method in METHODS:
        if method.name not in args.method_names:
            continue
        cells = [method.label]
        for variant in variants:
            final = _final(runs, method.name, variant)
            cell = f"{final.mean():.3f}"
            if method.name != "grpo_anchors_only" and "grpo_anchors_only" in args.method_names:
                difference, stderr = mean_and_stderr(final - _final(runs, "grpo_anchors_only", variant))
                cell += f" ({difference:+.3f} ± {stderr:.3f})"
            cells.append(cell)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(runs: Runs, args: Args, levels: dict[str, float], path: Path) -> None:
    """One panel per variant (true reward vs step), and the relative world-model weight per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = args.variant_names
    columns = 4
    rows = math.ceil((len(variants) + 2) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(5 * columns, 4 * rows), squeeze=False)
    flat = axes.ravel()
    colours = {method.name: plt.get_cmap("tab10")(index) for index, method in enumerate(METHODS)}
    shown = [method for method in METHODS if method.name in args.method_names]
    for axis, variant in zip(flat, variants, strict=False):
        for method in shown:
            rewards = np.stack([curve.true_reward for curve in runs[(method.name, variant)]])
            if method.equal_budget:
                continue
            axis.plot(
                np.arange(rewards.shape[1]),
                rewards.mean(axis=0),
                color=colours[method.name],
                label=method.label,
            )
        axis.axhline(levels["optimal"], color="black", linestyle="--", linewidth=1)
        axis.set(title=f"{VARIANTS[variant]}: true reward (mean over seeds)", xlabel="step")
        axis.grid(alpha=0.3)
    flat[0].legend(fontsize=7)
    for axis, name in zip(flat[len(variants) : len(variants) + 2], ("wmrl", "od_ivd_paper"), strict=False):
        if name not in args.method_names:
            continue
        for index, variant in enumerate(variants):
            weights = np.stack([curve.world_model_weight for curve in runs[(name, variant)]]).mean(axis=0)
            axis.plot(
                np.arange(weights.size), weights, color=plt.get_cmap("tab10")(index), label=VARIANTS[variant]
            )
        label = "agreement rule (default)" if name == "wmrl" else "paper rule 1/(1 + η²/η²_cal)"
        axis.set(title=f"WM weight / anchor weight: {label}", xlabel="step", ylim=(-0.05, 1.05))
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    for axis in flat[len(variants) + 2 :]:
        axis.axis("off")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def write_curves(runs: Runs, args: Args, path: Path) -> None:
    """Long-format CSV of every run's per-step true reward, executions and relative world-model weight."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            ["variant", "method", "seed", "step", "true_reward", "executions", "world_model_weight"]
        )
        for (name, variant), curves in runs.items():
            method = next(method for method in METHODS if method.name == name)
            if not method.uses_world_model and variant != args.variant_names[0]:
                continue
            for seed, curve in enumerate(curves):
                for step, (reward, used) in enumerate(zip(curve.true_reward, curve.executions, strict=True)):
                    weight = (
                        f"{curve.world_model_weight[step]:.4f}"
                        if step < curve.world_model_weight.size
                        else ""
                    )
                    writer.writerow([variant, name, seed, step, f"{reward:.6f}", int(used), weight])


EVALUATION_EVERY = 25
"""The powered protocol's evaluation points: every 25 steps (step 0 is the same uniform policy for all)."""

GAP_SHARE = 0.9
"""Steps to reach this share of the gap from the start to all-real GRPO's final reward (same seed)."""

SMALLEST_EFFECT = 0.01
"""Smallest effect of interest (true reward): the power check wants s.e. <= a quarter of it."""

JUDGED = ("wmrl_ppi", "wmrl_ppi_residual", "wmrl", "wmrl_uncertainty")
"""The configurations the powered protocol judges against its targets (the default among them)."""

POWERED_NEEDS = ("grpo_real", "grpo_anchors_only", "direct_mix")
"""References every judged configuration is compared with."""


@dataclass(frozen=True)
class Paired:
    """Mean of per-seed values (a paired difference, or a level) with its standard error and 95 % interval."""

    mean: float
    stderr: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Paired:
        """From per-seed values (t interval with n - 1 degrees of freedom)."""
        from scipy.stats import t

        mean, stderr = mean_and_stderr(values)
        half = float(t.ppf(0.975, len(values) - 1)) * stderr if len(values) > 1 else 0.0
        return cls(mean, stderr, mean - half, mean + half, len(values))

    def text(self) -> str:
        """``+0.0123 ± 0.0020 [+0.0081, +0.0165]``."""
        return f"{self.mean:+.4f} ± {self.stderr:.4f} [{self.low:+.4f}, {self.high:+.4f}]"


def _area(runs: Runs, method: str, variant: str, seeds: int | None = None) -> np.ndarray:
    """Area under each seed's learning curve: its mean true reward over every step (0 .. steps)."""
    return np.array([curve.true_reward.mean() for curve in runs[(method, variant)][:seeds]])


def _at(runs: Runs, method: str, variant: str, step: int) -> np.ndarray:
    return np.array([curve.true_reward[step] for curve in runs[(method, variant)]])


def steps_to_gap(runs: Runs, method: str, variant: str) -> list[int | None]:
    """Per seed: the first step whose true reward reaches GAP_SHARE of the gap from the start to all-real
    GRPO's final reward on the same seed; None where it never does."""
    reached: list[int | None] = []
    for curve, reference in zip(runs[(method, variant)], runs[("grpo_real", variant)], strict=True):
        start = curve.true_reward[0]
        level = start + GAP_SHARE * (reference.true_reward[-1] - start)
        hits = np.flatnonzero(curve.true_reward >= level)
        reached.append(int(hits[0]) if hits.size else None)
    return reached


def powered_rows(runs: Runs, args: Args) -> list[dict[str, str]]:
    """Every (variant, method, metric) of the powered protocol: mean, s.e., 95 % interval, seeds."""
    rows = []
    methods = [method for method in METHODS if method.name in args.method_names and not method.equal_budget]
    for variant in args.variant_names:
        for method in methods:
            name = method.name
            metrics: dict[str, Paired] = {
                "final": Paired.of(_final(runs, name, variant)),
                "area": Paired.of(_area(runs, name, variant)),
            }
            for reference, label in (
                ("grpo_anchors_only", "anchors-only"),
                ("grpo_real", "all-real"),
                ("direct_mix", "direct mix"),
            ):
                if reference == name or (reference, variant) not in runs:
                    continue
                metrics[f"final − {label}"] = Paired.of(
                    _final(runs, name, variant) - _final(runs, reference, variant)
                )
                metrics[f"area − {label}"] = Paired.of(
                    _area(runs, name, variant) - _area(runs, reference, variant)
                )
            reached = steps_to_gap(runs, name, variant)
            known = [step for step in reached if step is not None]
            per_step = runs[(name, variant)][0].executions[1]
            if known:
                metrics[f"steps to {GAP_SHARE:.0%} of the gap (seeds reaching it)"] = Paired.of(known)
                metrics[f"executions to {GAP_SHARE:.0%} of the gap"] = Paired.of(
                    [s * per_step for s in known]
                )
            agreement = [float(np.nanmean(curve.agreement[-50:])) for curve in runs[(name, variant)]]
            if method.uses_world_model and np.isfinite(agreement).all():
                metrics["agreement on own rollouts (last 50 steps)"] = Paired.of(agreement)
            for metric, value in metrics.items():
                rows.append(
                    {
                        "variant": variant,
                        "method": name,
                        "metric": metric,
                        "mean": f"{value.mean:.5f}",
                        "stderr": f"{value.stderr:.5f}",
                        "ci95_low": f"{value.low:.5f}",
                        "ci95_high": f"{value.high:.5f}",
                        "seeds": str(value.n),
                        "of_seeds": str(len(reached)),
                    }
                )
    return rows


def powered_checks(runs: Runs, args: Args) -> list[str]:
    """The pre-registered targets of benchmarks/protocols/bandit_powered.md, PASS or MISS with numbers."""
    if not set(POWERED_NEEDS) <= set(args.method_names):
        return [f"(the targets need {', '.join(POWERED_NEEDS)})"]
    lines = []
    points = sorted({*range(EVALUATION_EVERY, args.steps + 1, EVALUATION_EVERY), args.steps})
    for name in (name for name in JUDGED if name in args.method_names):
        verdicts = []
        for variant in args.variant_names:
            if variant in ("realistic", "judge"):
                final = Paired.of(_final(runs, name, variant) - _final(runs, "grpo_real", variant))
                area = Paired.of(_area(runs, name, variant) - _area(runs, "grpo_real", variant))
                passed = final.mean >= -0.002 and area.mean >= -0.006
                detail = (
                    f"final − all-real {final.text()} (≥ −0.002), area − all-real {area.text()} (≥ −0.006)"
                )
            elif variant == "useless":
                at = {
                    step: Paired.of(
                        _at(runs, name, variant, step) - _at(runs, "grpo_anchors_only", variant, step)
                    )
                    for step in points
                }
                below = [step for step, difference in at.items() if difference.mean < -difference.stderr]
                worst = min(at, key=lambda step: at[step].mean / max(at[step].stderr, 1e-12))
                passed = not below
                detail = (
                    f"evaluation points below anchors-only by > 1 s.e.: {below or 'none'} (worst: step "
                    f"{worst}, {at[worst].text()})"
                )
            elif variant == "monotone":
                start = np.array([curve.true_reward[0] for curve in runs[(name, variant)]])
                gain = (_final(runs, name, variant) - start).mean() / (
                    _final(runs, "grpo_real", variant) - start
                ).mean()
                mix = Paired.of(_final(runs, name, variant) - _final(runs, "direct_mix", variant))
                passed = gain >= 0.95 and mix.low > 0.0
                detail = (
                    f"share of all-real's gain {gain:.3f} (≥ 0.95), final − direct mix {mix.text()} (CI > 0)"
                )
            else:
                continue
            verdicts.append(passed)
            lines.append(f"- {name} / {variant}: {'PASS' if passed else 'MISS'}: {detail}")
        if verdicts:
            lines.append(f"- **{name}: {'meets every target' if all(verdicts) else 'misses a target'}**")
    return lines


def power_check(runs: Runs, args: Args) -> str:
    """The s.e. of the primary comparison after 10 seeds and after all, against SMALLEST_EFFECT / 4."""
    primary = ("wmrl_ppi", "realistic")
    if primary not in runs or ("grpo_anchors_only", "realistic") not in runs:
        return "(the power check needs wmrl_ppi and grpo_anchors_only on the realistic variant)"
    threshold = SMALLEST_EFFECT / 4.0
    parts = []
    for seeds in sorted({min(10, args.seeds), args.seeds}):
        difference = _area(runs, *primary, seeds) - _area(runs, "grpo_anchors_only", "realistic", seeds)
        stderr = mean_and_stderr(difference)[1]
        verdict = "≤" if stderr <= threshold else ">"
        parts.append(f"{seeds} seeds: s.e. {stderr:.4f} ({verdict} {threshold:.4f})")
    return (
        "Power check (primary comparison: area of wmrl_ppi − anchors-only on the realistic variant; "
        f"smallest effect of interest {SMALLEST_EFFECT}, s.e. wanted ≤ a quarter of it): " + "; ".join(parts)
    )


def plot_powered(runs: Runs, args: Args, path: Path) -> None:
    """Top: true reward vs step with 95 % bands; bottom: paired difference to anchors-only vs step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy.stats import t

    variants = args.variant_names
    figure, axes = plt.subplots(2, len(variants), figsize=(5 * len(variants), 8), squeeze=False)
    shown = [m for m in METHODS if m.name in args.method_names and not m.equal_budget]
    colours = {method.name: plt.get_cmap("tab10")(index % 10) for index, method in enumerate(shown)}
    quantile = float(t.ppf(0.975, max(1, args.seeds - 1)))
    for column, variant in enumerate(variants):
        top, bottom = axes[0, column], axes[1, column]
        base = np.stack([curve.true_reward for curve in runs[("grpo_anchors_only", variant)]])
        for method in shown:
            rewards = np.stack([curve.true_reward for curve in runs[(method.name, variant)]])
            steps = np.arange(rewards.shape[1])
            for axis, values in ((top, rewards), (bottom, rewards - base)):
                mean = values.mean(axis=0)
                half = (
                    quantile * values.std(axis=0, ddof=1) / np.sqrt(len(values)) if len(values) > 1 else 0.0
                )
                axis.plot(steps, mean, color=colours[method.name], label=method.label, linewidth=1)
                axis.fill_between(steps, mean - half, mean + half, color=colours[method.name], alpha=0.15)
        top.set(title=f"{VARIANTS[variant]}: true reward (95 % band)", xlabel="step")
        bottom.axhline(0.0, color="black", linewidth=0.8)
        bottom.set(title=f"{VARIANTS[variant]}: paired difference to anchors-only", xlabel="step")
        for axis in (top, bottom):
            axis.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def write_powered(runs: Runs, args: Args, wall: float, output: Path) -> list[dict[str, str]]:
    """The powered protocol's results.md (decision rule written in), results.csv and bandit_powered.png."""
    rows = powered_rows(runs, args)
    spearman = {variant: within_group_spearman(variant, args, seed=0) for variant in args.variant_names}
    headline = ["| method | " + " | ".join(VARIANTS[v] for v in args.variant_names) + " |"]
    headline.append("|---" * (len(args.variant_names) + 1) + "|")
    for method in METHODS:
        if method.name not in args.method_names or method.equal_budget:
            continue
        cells = []
        for variant in args.variant_names:
            final, area = _final(runs, method.name, variant), _area(runs, method.name, variant)
            cell = f"{final.mean():.4f} / {area.mean():.4f}"
            if method.name != "grpo_anchors_only":
                versus = Paired.of(area - _area(runs, "grpo_anchors_only", variant))
                cell += f" (area {versus.mean:+.4f} ± {versus.stderr:.4f})"
            cells.append(cell)
        headline.append(f"| {method.label} | " + " | ".join(cells) + " |")
    text = "\n".join(
        [
            "# Bandit: the powered, pre-registered comparison",
            "",
            "Protocol: `benchmarks/protocols/bandit_powered.md` (committed before these results).",
            "",
            "## Decision rule (from the protocol)",
            "",
            "A configuration meets the targets when (1) on `realistic` and `judge` its paired final true "
            "reward is within 0.002 of all-real GRPO's (mean difference ≥ −0.002) and its curve area "
            "within 0.006 (≥ −0.006); (2) on `useless` no evaluation point (every 25 steps) is below "
            "anchors-only by more than 1 s.e.; (3) on `monotone` (noisy but informative) it keeps ≥ 0.95 "
            "of all-real's gain from the start and beats direct mix (paired 95 % interval above 0). If a "
            "prediction-powered configuration meets them where the default does not, the report "
            "recommends switching the default; otherwise it reports the misses with their numbers.",
            "",
            "## Final true reward / curve area (mean over seeds; area − anchors-only, paired ± s.e.)",
            "",
            *headline,
            "",
            f"{args.seeds} paired seeds × {args.steps} steps of {args.groups_per_step} groups × "
            f"{args.group_size}; one anchor group per step. Within-group Spearman at the start "
            "(uniform policy): "
            + ", ".join(f"{variant} {value:.2f}" for variant, value in spearman.items())
            + f". Wall time {wall:.0f} s.",
            "",
            power_check(runs, args),
            "",
            "## Targets",
            "",
            *powered_checks(runs, args),
            "",
            "## Every metric (paired over seeds; 95 % t interval)",
            "",
            "| variant | method | metric | mean ± s.e. [95 % CI] | seeds |",
            "|---|---|---|---|---|",
            *(
                f"| {row['variant']} | {row['method']} | {row['metric']} | {float(row['mean']):+.4f} ± "
                f"{float(row['stderr']):.4f} [{float(row['ci95_low']):+.4f}, "
                f"{float(row['ci95_high']):+.4f}] | {row['seeds']}/{row['of_seeds']} |"
                for row in rows
            ),
            "",
        ]
    )
    (output / "results.md").write_text(text)
    with (output / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    write_curves(runs, args, output / "curves.csv")
    plot_powered(runs, args, output / "bandit_powered.png")
    print(text)
    return rows


def _single_threaded() -> None:
    """Each worker: one torch and one BLAS thread, the fastest for these tiny matrices."""
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1)


def parse_args(argv: Sequence[str] | None = None) -> Args:
    """Build :class:`Args` from the command line, one ``--option`` per field with its help."""
    return parse_dataclass_args(Args, argv, __doc__.split("\n\n")[0])


def main(argv: Sequence[str] | None = None) -> list[dict[str, str]]:
    """Run every selected method on every selected variant and seed; write tables, curves and plot."""
    args = parse_args(argv)
    output = Path(args.output_dir)
    output.mkdir(parents=True, exist_ok=True)
    budget_groups = anchor_groups_per_run(args)
    selected = [method for method in METHODS if method.name in args.method_names]
    jobs = [
        (method, variant)
        for method in selected
        for variant in (args.variant_names if method.uses_world_model else args.variant_names[:1])
    ]
    runs: Runs = {}
    cache = Path(args.cache_dir) if args.cache_dir else None
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    tasks = [(method, variant, seed) for seed in range(args.seeds) for method, variant in jobs]
    with (
        ProcessPoolExecutor(args.workers, initializer=_single_threaded) as pool,
        tqdm(total=len(tasks), desc="bandit ablation", unit="run", file=sys.stderr) as progress,
    ):
        futures = [
            pool.submit(run_cached, method, variant, args, seed, budget_groups, cache)
            for method, variant, seed in tasks
        ]
        for future in futures:
            future.add_done_callback(lambda _: progress.update())
        curves = [future.result() for future in futures]
    for (method, variant, _), curve in zip(tasks, curves, strict=True):
        for target in args.variant_names if not method.uses_world_model else [variant]:
            runs.setdefault((method.name, target), []).append(curve)
    wall = time.perf_counter() - started
    if args.report == "powered":
        return write_powered(runs, args, wall, output)
    levels = reference_levels(args)
    spearman = {variant: within_group_spearman(variant, args, seed=0) for variant in args.variant_names}
    rows = summarise(runs, args, spearman)
    pivot = pivot_table(runs, args)
    checks = target_checks(runs, args)
    notes = (
        f"{args.seeds} seeds, {args.steps} steps of {args.groups_per_step} groups x {args.group_size} "
        f"trajectories, anchor fraction {args.anchor_fraction} (one anchor group per step: 12.5% of the "
        "all-real executions); final exact expected true reward, mean over seeds; in brackets the paired "
        "difference to GRPO on the anchor groups alone, ± standard error over seeds.\n"
        f"Reference true rewards: uniform policy {levels['uniform']:.4f}, optimal policy "
        f"{levels['optimal']:.4f}.\n"
        "Within-group Spearman of prediction and real score (uniform policy, no drift): "
        + ", ".join(f"{variant} {value:.2f}" for variant, value in spearman.items())
        + ".\n"
        f"Wall time {wall:.0f} s ({len(jobs) * args.seeds} runs)."
    )
    detail = "\n".join(
        "| " + " | ".join(row.values()) + " |" for row in [dict.fromkeys(rows[0], "---")] + rows
    )
    detail = "| " + " | ".join(rows[0]) + " |\n" + detail
    text = (
        f"# Bandit ablation\n\n{pivot}\n\n{notes}\n\n## Targets (default WMRL)\n\n"
        + "\n".join(checks)
        + f"\n\n## Every run\n\n{detail}\n"
    )
    (output / "results.md").write_text(text)
    with (output / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    write_curves(runs, args, output / "curves.csv")
    plot(runs, args, levels, output / "bandit_ablation.png")
    print(pivot)
    print()
    print(notes)
    print("\n".join(checks))
    print(f"Wrote {output / 'results.md'}, results.csv, curves.csv and bandit_ablation.png")
    return rows


if __name__ == "__main__":
    main()
