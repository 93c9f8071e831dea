"""The powered, pre-registered Kaggle comparison: GRPO and WMRL's corrections replayed on recorded executions.

Why: the live Kaggle table (``benchmarks/results/kaggle_table1``) cannot resolve a difference of 0.01-0.03:
3 seeds x 8 sampled evaluation episodes give a standard error of about 0.04 per method difference. Here
every real execution comes from a replay table (:class:`~wmrl_envs.kaggle.replay.ReplayTable`: each design
of a fixed list executed once, for real, in the sandbox, on every competition), so twenty paired seeds
of ten methods cost minutes, and the held-out score is computed exactly,
``sum_d pi(d | task) * position(d, task)``, with zero evaluation noise. The protocol (methods, metrics,
decision rule, targets) is ``benchmarks/protocols/kaggle_powered.md``, committed before any result.

Setup: the library's :class:`~wmrl_adapters.train.design_policy.DesignPolicy` restricted to the table's
designs (:meth:`~wmrl_adapters.train.design_policy.DesignPolicy.design_logprobs`), GRPO with 8 groups x 8
trajectories per step, one anchor group per step, the library's
:class:`~wmrl_algos.loop.CorrectionLoop` and :func:`~wmrl_algos.grpo.grpo_update` (the trainer's clip,
epochs, gradient clip and learning rate). A trajectory's reward is what ``wmrl train`` gives the same
outcome: the ladder value ``RewardLadder().reward(status, position)`` of the recorded execution. k-fold:
every competition is held out once; the policy trains on the others and is evaluated exactly on the
held-out ones at step 0 and after every step.

Charged compute, all in CPU-seconds: the recorded sandbox CPU-seconds of every real execution, plus the
measured process CPU time (``time.process_time``) of the policy's sampling and update and of the world
model (for the rubric and the learned models: each prediction's CPU time measured when it was computed).

World models (``--world-models``): ``rubric`` (the static-analysis rubric, frozen); ``learned`` and
``learned_rubric`` (:class:`~wmrl_envs.kaggle.world_models.learned.LearnedWorldModel`, alone or stacked on
the rubric, fitted on the real outcomes of the *other* training competitions of the fold and frozen: the
transfer error a real model meets on a new task; it never sees the task it scores nor the held-out ones);
and stress models over the table a user can dial: ``judge`` (self-preference toward the policy's current
choices, over-rating complex designs, a family prior that is wrong wherever the family it favours is
not the task's best), ``monotone`` (the paper's convex monotone distortion plus noise) and ``useless``
(uniform noise). Every one is non-learning, so "direct mix" is uncorrected. Each one's fidelity is
measured on the policy's own rollouts (within-group Spearman, pairwise accuracy).

Run ``nice -n 10 python benchmarks/kaggle_powered.py --workers 2`` (writes ``results.md``,
``results.csv``, ``curves.csv`` and ``kaggle_powered.png`` into ``--output-dir``), or ``--quick`` on a
synthetic table (seconds).
"""

from __future__ import annotations

import csv
import inspect
import json
import math
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import torch
from bandit_ablation import mean_and_stderr, refuse_unknown_names
from toy_bandit import SyntheticWorldModel, WorldModelErrorConfig
from tqdm import tqdm
from wmrl_adapters.cli import parse_dataclass_args
from wmrl_adapters.train.kaggle.design_policy import DesignPolicy, design_action

from wmrl_algos.algorithms import algorithm
from wmrl_algos.errors import ConfigError, WMRLError
from wmrl_algos.grpo import grpo_update
from wmrl_algos.loop import CorrectionLoop
from wmrl_algos.residual import RidgeResidual
from wmrl_algos.types import ScoredGroup
from wmrl_envs.kaggle.design import DECISIONS, Design, render_design
from wmrl_envs.kaggle.fingerprint import competition_fingerprint
from wmrl_envs.kaggle.outcome import Outcome, RewardLadder
from wmrl_envs.kaggle.replay import RecordedOutcome, ReplayTable, code_digest
from wmrl_envs.kaggle.suite import KaggleSuite, load_suite
from wmrl_envs.kaggle.world_models.learned import LearnedWorldModel, LearnedWorldModelConfig
from wmrl_envs.kaggle.world_models.rubric import RubricWorldModel
from wmrl_envs.world_model import WorldModel, WorldModelQuery

__all__ = [
    "Args",
    "METHODS",
    "Method",
    "RunCurves",
    "TableArrays",
    "WORLD_MODELS",
    "exact_heldout_score",
    "main",
    "run_method",
    "design_sweep_table",
    "synthetic_table",
]

WORLD_MODELS: dict[str, str] = {
    "rubric": "rubric (static analysis, frozen)",
    "learned": "learned, transfer from other tasks",
    "learned_rubric": "learned + rubric, transfer",
    "judge": "judge-like stress model",
    "monotone": "monotone distortion + noise (paper)",
    "useless": "useless (uniform noise)",
}
"""World model -> its label. Every one is non-learning during a run (see the module docstring)."""

SEED_CHUNK = 5
"""Seeds run between two writes of the results after the power check (a cut-off run keeps its files)."""
REALISTIC = ("rubric", "learned", "learned_rubric", "judge")
"""The world models whose error is not a global monotone distortion: the speed target applies to them."""
DEFAULT_TABLE = "benchmarks/results/replay/suite_table.json"
LADDER = RewardLadder()
_FAMILY_PRIOR = {
    "lightgbm": 1.0,
    "hist_gbm": 1.0,
    "sklearn_gbm": 1.0,
    "random_forest": 0.6,
    "extra_trees": 0.6,
    "svm": 0.3,
    "linear": 0.2,
    "knn": 0.1,
    "tree": 0.0,
}
"""The judge's belief about model families (boosting first): right where boosting wins, wrong elsewhere."""


@dataclass
class Args:
    """Command-line settings (``--name value``; booleans as ``--flag``)."""

    table: str = field(
        default=DEFAULT_TABLE,
        metadata={"help": "Replay table (wmrl record), or 'synthetic' for a generated one (tests, --quick)."},
    )
    steps: int = field(default=150, metadata={"help": "Training steps of every equal-step method."})
    seeds: int = field(default=20, metadata={"help": "Paired seeds (each runs every fold)."})
    power_check_seeds: int = field(
        default=10, metadata={"help": "Seeds after which the power check runs (0: no check)."}
    )
    max_seeds: int = field(
        default=40, metadata={"help": "Seeds the power check extends the run to when it fails."}
    )
    smallest_effect: float = field(
        default=0.01,
        metadata={"help": "Smallest effect of interest on the held-out position score (power check)."},
    )
    folds: int = field(default=5, metadata={"help": "Folds of the competitions; each is held out once."})
    groups_per_step: int = field(default=8, metadata={"help": "GRPO groups per step (paper: 8)."})
    group_size: int = field(default=8, metadata={"help": "Trajectories per group (paper: 8)."})
    anchor_fraction: float = field(
        default=0.125, metadata={"help": "Share of groups executed for real: one group of 8 per step."}
    )
    learning_rate: float = field(default=0.01, metadata={"help": "Adam learning rate (wmrl train's)."})
    update_epochs: int = field(default=2, metadata={"help": "GRPO epochs per step (wmrl train's)."})
    clip: float = field(default=0.2, metadata={"help": "GRPO ratio clip (wmrl train's)."})
    max_grad_norm: float = field(default=1.0, metadata={"help": "Gradient-norm clip (wmrl train's)."})
    self_preference: float = field(
        default=0.5,
        metadata={"help": "judge: bonus per unit of the policy's excess probability of a design."},
    )
    complexity_bias: float = field(
        default=0.1, metadata={"help": "judge: bonus of the most complex design (capacity, validation)."}
    )
    family_prior: float = field(
        default=0.15, metadata={"help": "judge: size of its fixed model-family prior (boosting first)."}
    )
    judge_noise: float = field(default=0.05, metadata={"help": "judge: noise std on the reward scale."})
    curvature: float = field(default=3.0, metadata={"help": "monotone: convexity of the distortion."})
    monotone_noise: float = field(default=0.1, metadata={"help": "monotone: noise std before distortion."})
    methods: str = field(default="all", metadata={"help": "Comma-separated method names, or 'all'."})
    world_models: str = field(default="all", metadata={"help": "Comma-separated world models, or 'all'."})
    output_dir: str = field(
        default="benchmarks/results/kaggle_powered", metadata={"help": "Where tables and the plot go."}
    )
    quick: bool = field(
        default=False, metadata={"help": "Tiny budget on a synthetic table (8 steps, 2 seeds, 2 folds)."}
    )
    workers: int = field(default=1, metadata={"help": "Processes running seeds in parallel (<= 2 here)."})

    def __post_init__(self) -> None:
        if self.quick:
            self.table = "synthetic"
            self.steps, self.seeds, self.folds = min(self.steps, 8), min(self.seeds, 2), min(self.folds, 2)
            self.power_check_seeds = 0
        for name in ("steps", "seeds", "folds", "groups_per_step", "workers", "update_epochs"):
            if getattr(self, name) < 1:
                raise SystemExit(f"--{name.replace('_', '-')}={getattr(self, name)!r}; pass 1 or more")
        if self.folds < 2:
            raise SystemExit(f"--folds={self.folds!r}; k-fold needs at least 2 folds")
        if self.group_size < 2:
            raise SystemExit(
                f"--group-size={self.group_size!r}; GRPO needs at least 2 trajectories per group"
            )
        if not 0.0 < self.anchor_fraction < 1.0:
            raise SystemExit(
                f"--anchor-fraction={self.anchor_fraction!r}; pass a share in (0, 1), e.g. 0.125"
            )
        if self.max_seeds < self.seeds:
            raise SystemExit(
                f"--max-seeds={self.max_seeds!r} < --seeds={self.seeds!r}; pass at least --seeds"
            )
        refuse_unknown_names("methods", self.method_names, [method.name for method in METHODS])
        refuse_unknown_names("world-models", self.world_model_names, list(WORLD_MODELS))

    @property
    def method_names(self) -> list[str]:
        """The methods to run, in table order (``ppi`` only where the library has it)."""
        every = [method.name for method in METHODS if method.name != "ppi" or ppi_available()]
        if self.methods == "all":
            return every
        return [name.strip() for name in self.methods.split(",") if name.strip()]

    @property
    def world_model_names(self) -> list[str]:
        """The world models to run, in table order."""
        if self.world_models == "all":
            return list(WORLD_MODELS)
        return [name.strip() for name in self.world_models.split(",") if name.strip()]


def ppi_available() -> bool:
    """Whether :class:`~wmrl_algos.loop.CorrectionLoop` takes a prediction-powered ``power`` tuner."""
    return "power" in inspect.signature(CorrectionLoop).parameters


@dataclass(frozen=True)
class Method:
    """One row of the comparison.

    Attributes:
        name: identifier (``--methods``, CSV).
        label: what the table and plot call it.
        algo: the row of :data:`wmrl_algos.algorithms.ALGORITHMS` it runs.
        weighting: ``CorrectionConfig.weighting``.
        residual: add a :class:`~wmrl_algos.residual.RidgeResidual` on (design, task x design) one-hots.
        power: the prediction-powered estimator (``CorrectionLoop(power=PowerTuner())``).
        equal_compute: not run: all-real GRPO read at the charged compute of the default WMRL.
    """

    name: str
    label: str
    algo: str
    weighting: str = "agreement"
    residual: bool = False
    power: bool = False
    equal_compute: bool = False

    @property
    def uses_world_model(self) -> bool:
        """False for the methods without a world model, which run once per seed whatever the model."""
        return algorithm(self.algo).uses_world_model


METHODS: tuple[Method, ...] = (
    Method("grpo_real", "GRPO, all real (equal steps)", "grpo"),
    Method("grpo_real_equal_compute", "GRPO, all real (equal charged compute)", "grpo", equal_compute=True),
    Method("anchors", "GRPO on the anchor groups only", "anchors"),
    Method("world_model_only", "world model only", "wm"),
    Method("direct_mix", "direct mix (non-learning world model)", "mix"),
    Method("od", "OD only", "od"),
    Method("ivd_paper", "IVD (paper rule)", "ivd", weighting="paper"),
    Method("wmrl_paper", "WMRL, paper rule", "wmrl", weighting="paper"),
    Method("wmrl", "WMRL, library default", "wmrl"),
    Method("wmrl_residual", "WMRL default + residual on design features", "wmrl", residual=True),
    Method("ppi", "WMRL + prediction-powered estimator", "wmrl", power=True),
)


@dataclass(frozen=True)
class TableArrays:
    """A replay table as arrays over (competition, design), with the folds and the world models' tables.

    Attributes:
        competitions: competition ids, the rows.
        designs: the table's designs, the columns.
        position: recorded position score (0.0 for a failed solution).
        reward: the ladder value ``wmrl train`` rewards the recorded outcome with.
        cpu_s: recorded sandbox CPU-seconds.
        folds: held-out competition rows of each fold.
        predicted: world model -> fold -> predicted rewards (NaN: unknown, or a held-out row), for the
            world models whose predictions are fixed (rubric, learned, learned_rubric).
        predict_cpu_s: the same keys -> measured CPU-seconds of each prediction.
    """

    competitions: tuple[str, ...]
    designs: tuple[Design, ...]
    position: np.ndarray
    reward: np.ndarray
    cpu_s: np.ndarray
    folds: tuple[np.ndarray, ...]
    predicted: dict[str, list[np.ndarray]]
    predict_cpu_s: dict[str, list[np.ndarray]]

    def train_rows(self, fold: int) -> np.ndarray:
        """The competition rows the policy trains on in ``fold``."""
        return np.setdiff1d(np.arange(len(self.competitions)), self.folds[fold])

    @property
    def oracle(self) -> float:
        """Mean over competitions of the best design's position: the ceiling of any policy here."""
        return float(self.position.max(axis=1).mean())


def _ladder_reward(outcome: Outcome) -> float:
    reward = LADDER.reward(outcome.status, outcome.position)
    if reward is None:
        raise ConfigError(
            f"a recorded {outcome.status!r} outcome has no reward; a finished replay table holds no unknown "
            "outcome, record the entry again"
        )
    return float(reward)


def synthetic_table(suite: KaggleSuite, n_competitions: int = 8, seed: int = 0) -> ReplayTable:
    """A generated replay table over real suite competitions, for tests and ``--quick``.

    Positions have a task-dependent best design (a per-family effect that differs between tasks), one
    design in six fails on a random task, and CPU-seconds grow with the design's capacity.
    """
    designs = [
        Design(model="linear"),
        Design(model="knn", scale="quantile"),
        Design(model="random_forest", capacity="large", categorical="ordinal"),
        Design(model="lightgbm", validation="holdout", categorical="ordinal"),
        Design(model="hist_gbm", validation="kfold", categorical="ordinal"),
        Design(model="tree", capacity="small", categorical="ordinal"),
    ]
    table = ReplayTable(designs)
    rng = np.random.default_rng(seed)
    for competition_id in suite.ids()[:n_competitions]:
        competition = suite.get(competition_id)
        quality = rng.uniform(0.2, 0.9, len(designs))
        for index, design in enumerate(designs):
            failed = rng.random() < 1 / 6
            outcome = (
                Outcome(status="runtime_error", exit_code=1)
                if failed
                else Outcome(status="valid", score=float(quality[index]), position=float(quality[index]))
            )
            recorded = RecordedOutcome(
                outcome,
                cpu_s=float(1.0 + 2.0 * DECISIONS["capacity"].index(design.capacity) + rng.uniform(0, 1)),
                wall_s=2.0,
            )
            table.add(
                competition_id,
                competition_fingerprint(competition),
                design,
                code_digest(render_design(design, competition)),
                recorded,
            )
    return table


def _queries(suite: KaggleSuite, competition_id: str, designs: Sequence[Design]) -> list[WorldModelQuery]:
    competition = suite.get(competition_id)
    context = competition.context()
    return [WorldModelQuery(context, design_action(design, competition)) for design in designs]


def _timed_predictions(model: WorldModel, queries: list[WorldModelQuery]) -> tuple[np.ndarray, np.ndarray]:
    """Each query's predicted reward (NaN: unknown) and its measured CPU-seconds (one call per query)."""
    rewards, seconds = [], []
    for query in queries:
        started = time.process_time()
        [prediction] = model.predict([query])
        seconds.append(time.process_time() - started)
        rewards.append(np.nan if prediction.reward is None else float(prediction.reward))
    return np.asarray(rewards), np.asarray(seconds)


def _transfer_predictions(
    suite: KaggleSuite,
    arrays: TableArrays,
    base: WorldModel | None,
    queries: list[list[WorldModelQuery]],
    fold: int,
) -> tuple[np.ndarray, np.ndarray]:
    """A learned model's predictions on each training row of ``fold``, fitted on the other training rows.

    The training rows are split into ``len(folds) - 1`` parts; each part is predicted by a model fitted on
    the real rewards of every design of the other parts: it has never seen the task it scores (nor any
    held-out one). Frozen afterwards. The hashed competition one-hot is off (``competition_buckets=0``):
    the scored task is never in the buffer, so a bucket could only carry another task's offset.
    """
    shape = arrays.reward.shape
    predicted, seconds = np.full(shape, np.nan), np.zeros(shape)
    train = arrays.train_rows(fold)
    parts = np.array_split(train, max(2, len(arrays.folds) - 1))
    for part in parts:
        model = LearnedWorldModel(base, config=LearnedWorldModelConfig(competition_buckets=0))
        fitted_on = [row for row in train if row not in part]
        model.observe(
            [query for row in fitted_on for query in queries[row]],
            [float(value) for row in fitted_on for value in arrays.reward[row]],
        )
        for row in part:
            predicted[row], seconds[row] = _timed_predictions(model, queries[row])
    return predicted, seconds


def table_arrays(table: ReplayTable, suite: KaggleSuite, args: Args) -> TableArrays:
    """The table's arrays, its folds (fixed for every seed) and the fixed world models' predictions."""
    competitions = tuple(cid for cid in table.competitions() if not table.missing([cid]))
    designs = table.designs
    if len(competitions) < args.folds:
        raise SystemExit(f"the table holds {len(competitions)} competitions, fewer than --folds={args.folds}")
    records = [[table.record(cid, design) for design in designs] for cid in competitions]
    order = np.random.default_rng(0).permutation(len(competitions))
    arrays = TableArrays(
        competitions=competitions,
        designs=designs,
        position=np.array([[table.position(cid, d) for d in designs] for cid in competitions]),
        reward=np.array([[_ladder_reward(record.outcome) for record in row] for row in records]),
        cpu_s=np.array([[record.cpu_s for record in row] for row in records]),
        folds=tuple(np.sort(part) for part in np.array_split(order, args.folds)),
        predicted={},
        predict_cpu_s={},
    )
    wanted = [name for name in ("rubric", "learned", "learned_rubric") if name in args.world_model_names]
    queries = [_queries(suite, cid, designs) for cid in competitions]
    if "rubric" in wanted:
        rubric = [_timed_predictions(RubricWorldModel(), row) for row in queries]
        arrays.predicted["rubric"] = [np.stack([r for r, _ in rubric])] * args.folds
        arrays.predict_cpu_s["rubric"] = [np.stack([s for _, s in rubric])] * args.folds
    for name, base in (("learned", None), ("learned_rubric", RubricWorldModel())):
        if name not in wanted:
            continue
        fitted = [
            _transfer_predictions(suite, arrays, base, queries, fold)
            for fold in tqdm(range(args.folds), desc=f"fitting {name} per fold", file=sys.stderr)
        ]
        arrays.predicted[name] = [predicted for predicted, _ in fitted]
        arrays.predict_cpu_s[name] = [seconds for _, seconds in fitted]
    return arrays


@dataclass(frozen=True)
class RunCurves:
    """Per-step records of one run (one method, world model and seed, which holds out one fold).

    Attributes:
        score: exact held-out score before each step, plus after the last.
        charged: cumulative charged CPU-seconds at the same points.
        executions: cumulative real executions at the same points.
        world_model_weight: world-model group weight / anchor weight at each step (NaN: no world model).
        spearman: mean within-group Spearman of prediction and real reward over the run's rollout groups
            with a spread on both sides (NaN: no world model).
        pairwise: mean pairwise ranking accuracy over the same groups (prediction ties count 1/2).
        ceiling: the held-out score of the best design on every held-out task.
    """

    score: np.ndarray
    charged: np.ndarray
    executions: np.ndarray
    world_model_weight: np.ndarray
    spearman: float
    pairwise: float
    ceiling: float

    def score_at_compute(self, budget: float) -> float:
        """The score after the last step whose cumulative charged compute is within ``budget``."""
        return float(self.score[max(0, int(np.searchsorted(self.charged, budget, side="right")) - 1)])

    def compute_to_reach(self, target: float) -> float:
        """Charged CPU-seconds at the first evaluation with score >= ``target`` (inf if never)."""
        reached = np.flatnonzero(self.score >= target - 1e-12)
        return float(self.charged[reached[0]]) if reached.size else math.inf

    def area_over_compute(self, budget: float, points: int = 400) -> float:
        """Mean score over charged compute in [0, ``budget``] (the step curve's normalised area)."""
        return float(np.mean([self.score_at_compute(value) for value in np.linspace(0.0, budget, points)]))

    def truncated(self, budget: float) -> RunCurves:
        """The run stopped after the last step whose cumulative charged compute is within ``budget``."""
        cut = max(1, int(np.searchsorted(self.charged, budget, side="right")))
        return RunCurves(
            self.score[:cut],
            self.charged[:cut],
            self.executions[:cut],
            self.world_model_weight[: cut - 1],
            self.spearman,
            self.pairwise,
            self.ceiling,
        )


def exact_heldout_score(probabilities: np.ndarray, position: np.ndarray) -> float:
    """``mean_t sum_d pi(d | t) * position(d, t)`` over the held-out rows: the expected score, no noise.

    Example:
        >>> exact_heldout_score(np.array([[0.5, 0.5]]), np.array([[0.2, 0.6]]))
        0.4
    """
    return float(np.round((probabilities * position).sum(axis=1).mean(), 12))


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks with ties sharing their mean rank (as Spearman's correlation uses them)."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(values.size)
    ranks[order] = np.arange(values.size, dtype=float)
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    return (np.bincount(inverse, weights=ranks) / counts)[inverse]


def _rank_agreement(predicted: np.ndarray, real: np.ndarray) -> tuple[float, float] | None:
    """(Spearman, pairwise accuracy) of one group, or ``None`` when either side has no spread."""
    known = ~np.isnan(predicted)
    if known.sum() < 3 or np.ptp(real[known]) == 0 or np.ptp(predicted[known]) == 0:
        return None
    p, r = predicted[known], real[known]
    rho = float(np.corrcoef(_average_ranks(p), _average_ranks(r))[0, 1])
    i, j = np.triu_indices(p.size, 1)
    informative = r[i] != r[j]
    if not informative.any():
        return rho, math.nan
    agree = np.sign(p[i] - p[j]) * np.sign(r[i] - r[j])
    return rho, float(np.mean(np.where(agree == 0, 0.5, agree > 0)[informative]))


class _StressModel:
    """The judge, monotone and useless world models over the table (module docstring)."""

    def __init__(self, name: str, arrays: TableArrays, args: Args) -> None:
        self.name = name
        self.args = args
        self.monotone = SyntheticWorldModel(
            WorldModelErrorConfig(args.curvature, 0.0, args.monotone_noise, 0.0)
        )
        prior = np.array([_FAMILY_PRIOR[design.model] for design in arrays.designs])
        complexity = np.array(
            [
                (DECISIONS["capacity"].index(d.capacity) + DECISIONS["validation"].index(d.validation)) / 4.0
                for d in arrays.designs
            ]
        )
        self.fixed_bias = args.family_prior * (prior - prior.mean()) + args.complexity_bias * (
            complexity - complexity.mean()
        )

    def predict(
        self, real: np.ndarray, choices: np.ndarray, chosen_probability: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        if self.name == "useless":
            return rng.uniform(0.0, 1.0, real.shape)
        if self.name == "monotone":
            return self.monotone.predict(real, 0.0, rng)
        n_designs = self.fixed_bias.size
        judged = (
            real
            + self.fixed_bias[choices]
            + self.args.self_preference * (chosen_probability - 1.0 / n_designs)
            + self.args.judge_noise * rng.standard_normal(real.shape)
        )
        return np.clip(judged, 0.0, 1.0)


def _residual(arrays: TableArrays) -> RidgeResidual:
    n_rows, n_designs = arrays.reward.shape
    eye = np.eye(n_designs + n_rows * n_designs)

    def featurize(payload: tuple[int, int]) -> np.ndarray:
        row, design = payload
        return eye[design] + eye[n_designs + row * n_designs + design]

    return RidgeResidual(featurize, n_designs + n_rows * n_designs)


def _loop(method: Method, arrays: TableArrays, args: Args, seed: int) -> CorrectionLoop:
    config = algorithm(method.algo).correction_config(
        args.anchor_fraction, seed=seed, weighting=method.weighting
    )
    if method.power:
        from wmrl_algos.ppi import PowerTuner

        return CorrectionLoop(config, power=PowerTuner())
    return CorrectionLoop(config, residual=_residual(arrays) if method.residual else None)


def _sample(probabilities: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Inverse-CDF sampling with shared uniforms: methods at the same policy draw the same designs."""
    cumulative = np.cumsum(probabilities, axis=1)
    cumulative[:, -1] = 1.0
    return np.stack(
        [np.searchsorted(row, u, side="right") for row, u in zip(cumulative, uniforms, strict=True)]
    )


def _trajectory_logprobs(
    policy: DesignPolicy,
    group_tasks: list[str],
    designs: list[Design],
    choices: torch.Tensor,
    mask: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(B, 1)`` restricted log-probs of the chosen designs (``B`` = groups x group size) and the mask."""
    table = policy.design_logprobs(group_tasks, designs)
    group_of = torch.arange(len(group_tasks)).repeat_interleave(choices.numel() // len(group_tasks))
    return table[group_of, choices].unsqueeze(1), mask


def run_method(
    method: Method,
    world_model: str,
    seed: int,
    fold: int,
    arrays: TableArrays,
    args: Args,
    competitions: Callable[[str], object],
) -> RunCurves:
    """One run: train on the fold's training rows, evaluate exactly on its held-out rows after each step.

    Paired across methods: the same initial weights (``DesignPolicy(seed=seed)``), the same task draws,
    the same sampling uniforms, the same anchor plan (``CorrectionConfig.seed``) and world-model noise.
    """
    torch.manual_seed(seed)
    policy = DesignPolicy(competitions, seed=seed)  # type: ignore[arg-type]
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.learning_rate)
    loop = _loop(method, arrays, args, seed)
    row = algorithm(method.algo)
    stress = _StressModel(world_model, arrays, args) if world_model not in arrays.predicted else None
    train, heldout = arrays.train_rows(fold), arrays.folds[fold]
    tasks_rng = np.random.default_rng([seed, fold, 1])
    uniform_rng = np.random.default_rng([seed, fold, 2])
    noise_rng = np.random.default_rng([seed, fold, 3])
    ids = arrays.competitions
    designs = list(arrays.designs)
    heldout_ids = [ids[index] for index in heldout]
    n_groups, size = args.groups_per_step, args.group_size

    def evaluate() -> float:
        with torch.no_grad():
            probabilities = policy.design_logprobs(heldout_ids, designs).exp().numpy()
        return exact_heldout_score(probabilities, arrays.position[heldout])

    score, charged, executions, weights, spearman, pairwise = [evaluate()], [0.0], [0], [], [], []
    for _ in range(args.steps):
        tasks = tasks_rng.choice(train, size=n_groups)
        uniforms = uniform_rng.random((n_groups, size))
        started = time.process_time()
        with torch.no_grad():
            probabilities = policy.design_logprobs([ids[t] for t in tasks], designs).exp().numpy()
        choices = _sample(probabilities, uniforms)
        policy_cpu = time.process_time() - started
        real = arrays.reward[tasks[:, None], choices]
        uncertainty = None
        if method.residual:
            uncertainty = [
                float(loop.residual.predict([(t, d) for d in group])[1].mean())  # type: ignore[union-attr]
                for t, group in zip(tasks, choices, strict=True)
            ]
        mask = np.ones(n_groups, dtype=bool) if row.real == "all" else loop.plan(n_groups, uncertainty)
        world_model_cpu = 0.0
        predicted = real
        if row.uses_world_model:
            if stress is None:
                predicted = arrays.predicted[world_model][fold][tasks[:, None], choices]
                world_model_cpu = float(
                    arrays.predict_cpu_s[world_model][fold][tasks[:, None], choices].sum()
                )
            else:
                started = time.process_time()
                chosen = np.take_along_axis(probabilities, choices, axis=1)
                predicted = stress.predict(real, choices, chosen, noise_rng)
                world_model_cpu = time.process_time() - started
            for group_predicted, group_real in zip(predicted, real, strict=True):
                agreement = _rank_agreement(group_predicted, group_real)
                if agreement is not None:
                    spearman.append(agreement[0])
                    pairwise.append(agreement[1])
        kept = np.flatnonzero(mask) if row.rolls_out_only_anchors else np.arange(n_groups)
        groups = [
            ScoredGroup(
                group_id=position,
                anchor=bool(mask[index]),
                predicted=tuple(None if np.isnan(v) else float(v) for v in predicted[index]),
                real=tuple(real[index].tolist()) if mask[index] else None,
                trajectories=tuple((int(tasks[index]), int(d)) for d in choices[index]),
            )
            for position, index in enumerate(kept)
        ]
        started = time.process_time()
        result = loop.correct(groups)
        advantages, advantage_mask = result.flat()
        logprobs = partial(
            _trajectory_logprobs,
            policy,
            [ids[tasks[index]] for index in kept],
            designs,
            torch.as_tensor(choices[kept].reshape(-1), dtype=torch.long),
            torch.as_tensor(advantage_mask, dtype=torch.float32).unsqueeze(1),
        )
        grpo_update(
            logprobs,
            optimizer,
            list(policy.parameters()),
            torch.as_tensor(advantages, dtype=torch.float32),
            clip=args.clip,
            epochs=args.update_epochs,
            max_grad_norm=args.max_grad_norm,
        )
        policy_cpu += time.process_time() - started
        sandbox_cpu = float(arrays.cpu_s[tasks[:, None], choices][mask].sum())
        charged.append(charged[-1] + sandbox_cpu + world_model_cpu + policy_cpu)
        executions.append(executions[-1] + int(mask.sum()) * size)
        metrics = result.metrics
        weights.append(
            metrics["wmrl/world_model_weight"] / metrics["wmrl/anchor_weight"]
            if row.uses_world_model and metrics["wmrl/anchor_weight"] > 0
            else math.nan
        )
        score.append(evaluate())
    return RunCurves(
        np.asarray(score),
        np.asarray(charged),
        np.asarray(executions),
        np.asarray(weights),
        float(np.mean(spearman)) if spearman else math.nan,
        float(np.nanmean(pairwise)) if np.isfinite(pairwise).any() else math.nan,
        float(arrays.position[heldout].max(axis=1).mean()),
    )


_WORKER: dict[str, object] = {}


def _start_worker(arrays: TableArrays, args: Args) -> None:
    """Each worker: one torch and one BLAS thread (the fastest for these tiny networks), its own suite."""
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1)
    _WORKER.update(arrays=arrays, args=args, suite=load_suite())


def _run_job(method: Method, world_model: str, seed: int) -> RunCurves:
    """One (method, world model, seed): seed ``s`` holds out fold ``s mod folds``."""
    arrays, args, suite = _WORKER["arrays"], _WORKER["args"], _WORKER["suite"]
    fold = seed % args.folds  # type: ignore[attr-defined]
    return run_method(method, world_model, seed, fold, arrays, args, suite.get)  # type: ignore[arg-type, attr-defined]


Runs = dict[tuple[str, str], list[RunCurves]]
"""(method, world model) -> one entry per seed; methods without a world model are stored under each."""


def paired(values: np.ndarray, reference: np.ndarray) -> str:
    """``mean ± s.e. [95% CI]`` of the paired differences (Student t over seeds)."""
    from scipy.stats import t as student

    mean, stderr = mean_and_stderr(values - reference)
    half = float(student.ppf(0.975, max(1, values.size - 1))) * stderr
    return f"{mean:+.4f} ± {stderr:.4f} [{mean - half:+.4f}, {mean + half:+.4f}]"


def equal_compute_curves(runs: Runs, world_model: str) -> list[RunCurves]:
    """All-real GRPO stopped, per seed, at the final charged compute of the default WMRL (same seed)."""
    return [
        real.truncated(float(wmrl.charged[-1]))
        for real, wmrl in zip(runs[("grpo_real", world_model)], runs[("wmrl", world_model)], strict=True)
    ]


def _metric(curves: list[RunCurves], name: str, budget: float, half: int) -> np.ndarray:
    """Per seed: the final score, the area over compute in [0, ``budget``], or the first-half mean."""
    if name == "final":
        return np.array([curve.score[-1] for curve in curves])
    if name == "area":
        return np.array([curve.area_over_compute(budget) for curve in curves])
    return np.array([curve.score[: half + 1].mean() for curve in curves])


def _reach(curves: list[RunCurves], real: list[RunCurves], share: float | None) -> list[float]:
    """Per seed: CPU-s to reach all-real's final score of the same seed (``share=None``), or ``share`` of
    the gap from the step-0 score to the best design."""
    targets = [
        reference.score[-1]
        if share is None
        else reference.score[0] + share * (reference.ceiling - reference.score[0])
        for reference in real
    ]
    return [curve.compute_to_reach(target) for curve, target in zip(curves, targets, strict=True)]


def _median_text(values: list[float]) -> str:
    median = float(np.median(values))
    return f"{median:.0f}" if math.isfinite(median) else "not reached"


def summary(runs: Runs, args: Args) -> list[dict[str, str]]:
    """One row per (world model, method) with every pre-registered metric and paired difference."""
    names = args.method_names
    half = args.steps // 2
    rows = []
    for world_model in args.world_model_names:
        real = runs[("grpo_real", world_model)]
        budget = float(np.mean([curve.charged[-1] for curve in runs[("anchors", world_model)]]))
        real_reach = float(np.median(_reach(real, real, None)))
        for name in names:
            curves = runs[(name, world_model)]
            final, area, first_half = (
                _metric(curves, key, budget, half) for key in ("final", "area", "half")
            )
            reach = _reach(curves, real, None)
            median_reach = float(np.median(reach))
            row = {
                "world model": world_model,
                "method": name,
                "final held-out score": "{:.4f} ± {:.4f}".format(*mean_and_stderr(final)),
                "charged CPU-s": f"{np.mean([curve.charged[-1] for curve in curves]):.0f}",
                "real executions": f"{np.mean([curve.executions[-1] for curve in curves]):.0f}",
                "area over compute": "{:.4f} ± {:.4f}".format(*mean_and_stderr(area)),
                "first-half curve": "{:.4f} ± {:.4f}".format(*mean_and_stderr(first_half)),
                "CPU-s to all-real final (median)": _median_text(reach),
                "seeds reaching it": f"{sum(math.isfinite(v) for v in reach)}/{len(reach)}",
                "compute ratio vs all-real": (
                    f"{real_reach / median_reach:.2f}"
                    if math.isfinite(median_reach) and median_reach > 0
                    else "—"
                ),
                "CPU-s to 50% of the gap (median)": _median_text(_reach(curves, real, 0.5)),
            }
            for reference, column in (
                ("anchors", "vs anchors-only"),
                ("grpo_real", "vs all-real"),
                ("direct_mix", "vs direct mix"),
            ):
                keys = (f"final {column}", f"area {column}", f"first half {column}")
                if reference in names and reference != name:
                    base = runs[(reference, world_model)]
                    for key, mine, metric in zip(
                        keys, (final, area, first_half), ("final", "area", "half"), strict=True
                    ):
                        row[key] = paired(mine, _metric(base, metric, budget, half))
                else:
                    row.update(dict.fromkeys(keys, "—"))
            row["spearman on own rollouts"] = _nan_text(_nan_mean([c.spearman for c in curves]))
            row["pairwise accuracy on own rollouts"] = _nan_text(_nan_mean([c.pairwise for c in curves]))
            rows.append(row)
    return rows


def _nan_mean(values: list[float]) -> float:
    finite = [value for value in values if math.isfinite(value)]
    return float(np.mean(finite)) if finite else math.nan


def _nan_text(value: float) -> str:
    return "—" if not math.isfinite(value) else f"{value:.2f}"


def _first_half(curves: list[RunCurves], half: int) -> np.ndarray:
    return np.array([curve.score[: half + 1].mean() for curve in curves])


def target_checks(runs: Runs, args: Args) -> list[str]:
    """The pre-registered targets (protocol), each MET or MISSED with its numbers."""
    names = set(args.method_names)
    candidates = [name for name in ("wmrl", "wmrl_paper", "wmrl_residual", "ppi") if name in names]
    lines = []
    half = args.steps // 2
    for world_model in args.world_model_names:
        real = runs[("grpo_real", world_model)]
        anchors = runs[("anchors", world_model)]
        real_reach = float(np.median(_reach(real, real, None)))
        if world_model in REALISTIC and candidates:
            best = max(
                candidates, key=lambda name: float(_first_half(runs[(name, world_model)], half).mean())
            )
            curves = runs[(best, world_model)]
            reach = float(np.median(_reach(curves, real, None)))
            ratio = real_reach / reach if math.isfinite(reach) and reach > 0 else math.nan
            mean, stderr = mean_and_stderr(_first_half(curves, half) - _first_half(anchors, half))
            lines.append(
                f"- {world_model}: best WMRL configuration (highest first-half curve) = {best}; median CPU-s "
                f"to all-real's final score: all-real {real_reach:.0f}, {best} "
                f"{reach:.0f} -> {ratio:.2f}x less (>= 3x: {'MET' if ratio >= 3 else 'MISSED'}); first-half "
                f"curve - anchors-only {mean:+.4f} ± {stderr:.4f} "
                f"(>= 2 s.e.: {'MET' if stderr > 0 and mean >= 2 * stderr else 'MISSED'})"
            )
        if world_model == "useless" and "wmrl" in names:
            every = np.stack([c.score[::10] for c in runs[("wmrl", world_model)]]) - np.stack(
                [c.score[::10] for c in anchors]
            )
            means = every.mean(axis=0)
            errors = every.std(axis=0, ddof=1) / np.sqrt(every.shape[0]) if every.shape[0] > 1 else 0 * means
            worst = int(np.argmin(means + errors))
            met = bool(np.all(means >= -errors))
            lines.append(
                f"- useless: default WMRL - anchors-only never below -1 s.e. at any 10th step: "
                f"{'MET' if met else 'MISSED'} (closest at step {worst * 10}: {means[worst]:+.4f} ± "
                f"{errors[worst]:.4f})"
            )
        if world_model == "monotone" and {"wmrl", "direct_mix"} <= names:
            wmrl = _metric(runs[("wmrl", world_model)], "final", 0.0, half)
            start = np.array([c.score[0] for c in real])
            real_gain = float((_metric(real, "final", 0.0, half) - start).mean())
            share = float((wmrl - start).mean()) / real_gain if real_gain > 0 else math.nan
            mean, stderr = mean_and_stderr(
                wmrl - _metric(runs[("direct_mix", world_model)], "final", 0.0, half)
            )
            lines.append(
                f"- monotone (noisy but informative): default WMRL keeps {share:.2f} of all-real's gain "
                f"(>= 0.95: {'MET' if share >= 0.95 else 'MISSED'}); WMRL - direct mix {mean:+.4f} ± "
                f"{stderr:.4f} (> 0: {'MET' if mean > 0 else 'MISSED'})"
            )
    return lines


def power_check(runs: Runs, args: Args) -> tuple[bool, float]:
    """Whether the primary paired differences are powered: every s.e. <= smallest effect / 4."""
    worst = 0.0
    for world_model in args.world_model_names:
        anchors = np.array([c.score[-1] for c in runs[("anchors", world_model)]])
        for name in ("wmrl", "wmrl_residual", "ppi"):
            if (name, world_model) in runs:
                values = np.array([c.score[-1] for c in runs[(name, world_model)]])
                worst = max(worst, mean_and_stderr(values - anchors)[1])
    return worst <= args.smallest_effect / 4, worst


def plot(runs: Runs, args: Args, arrays: TableArrays, path: Path) -> None:
    """Score vs charged compute (mean over seeds, 95% band) per world model, and score vs step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    world_models = args.world_model_names
    figure, axes = plt.subplots(2, len(world_models), figsize=(5 * len(world_models), 8), squeeze=False)
    colours = {method.name: plt.get_cmap("tab20")(index) for index, method in enumerate(METHODS)}
    for column, world_model in enumerate(world_models):
        budget = float(np.mean([c.charged[-1] for c in runs[("anchors", world_model)]])) * 1.5
        grid = np.linspace(0.0, budget, 200)
        for name in args.method_names:
            if name == "grpo_real_equal_compute":
                continue
            curves = runs[(name, world_model)]
            by_compute = np.array([[c.score_at_compute(value) for value in grid] for c in curves])
            by_step = np.stack([c.score for c in curves])
            for axis, x, values in (
                (axes[0, column], grid, by_compute),
                (axes[1, column], np.arange(by_step.shape[1]), by_step),
            ):
                mean = values.mean(axis=0)
                band = (
                    1.96 * values.std(axis=0, ddof=1) / np.sqrt(values.shape[0]) if values.shape[0] > 1 else 0
                )
                axis.plot(x, mean, color=colours[name], label=name, linewidth=1.2)
                axis.fill_between(x, mean - band, mean + band, color=colours[name], alpha=0.15)
        for axis in axes[:, column]:
            axis.axhline(arrays.oracle, color="black", linestyle="--", linewidth=0.8)
            axis.grid(alpha=0.3)
        axes[0, column].set(
            title=f"{WORLD_MODELS[world_model]}",
            xlabel="charged CPU-s per fold run",
            ylabel="exact held-out score",
        )
        axes[1, column].set(xlabel="step", ylabel="exact held-out score")
    axes[0, 0].legend(fontsize=7)
    figure.suptitle("Exact held-out score (mean over paired seeds, 95% band); dashed: best design per task")
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def write_curves(runs: Runs, args: Args, path: Path) -> None:
    """Per (world model, method, step): mean score, its s.e., mean charged compute and executions."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            [
                "world_model",
                "method",
                "step",
                "score_mean",
                "score_se",
                "charged_cpu_s",
                "executions",
                "world_model_weight",
            ]
        )
        for (name, world_model), curves in runs.items():
            if name == "grpo_real_equal_compute":  # a per-seed prefix of grpo_real's curve
                continue
            scores = np.stack([c.score for c in curves])
            errors = scores.std(axis=0, ddof=1) / np.sqrt(len(curves)) if len(curves) > 1 else 0 * scores[0]
            charged = np.mean([c.charged for c in curves], axis=0)
            executions = np.mean([c.executions for c in curves], axis=0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: no world model
                weight = np.nanmean([c.world_model_weight for c in curves], axis=0)
            for step in range(scores.shape[1]):
                writer.writerow(
                    [
                        world_model,
                        name,
                        step,
                        f"{scores[:, step].mean():.6f}",
                        f"{errors[step]:.6f}",
                        f"{charged[step]:.2f}",
                        f"{executions[step]:.0f}",
                        f"{weight[step]:.4f}" if step < weight.size and math.isfinite(weight[step]) else "",
                    ]
                )


def design_sweep_table(suite: KaggleSuite, path: Path) -> ReplayTable:
    """A replay table built from ``benchmarks/design_sweep.py``'s ``results.json`` (real sandbox executions
    of its design list, recorded by the sweep rather than by ``wmrl record``)."""
    entries = json.loads(path.read_text(encoding="utf-8"))
    designs = list(dict.fromkeys(Design(**entry["design"]) for entry in entries))
    table = ReplayTable(designs)
    for entry in entries:
        competition = suite.get(entry["competition"])
        design = Design(**entry["design"])
        valid = entry["status"] == "valid"
        outcome = Outcome(
            status=entry["status"],
            score=entry["score"] if valid else None,
            position=entry["position"] if valid else None,
        )
        table.add(
            competition.id,
            competition_fingerprint(competition),
            design,
            code_digest(render_design(design, competition)),
            RecordedOutcome(outcome, cpu_s=float(entry["cpu_s"]), wall_s=float(entry["cpu_s"])),
        )
    return table


def load_table(args: Args, suite: KaggleSuite) -> tuple[ReplayTable, str]:
    """The replay table and a sentence saying what it is."""
    if args.table == "synthetic":
        return synthetic_table(suite), "a SYNTHETIC table (generated outcomes, not recorded executions)"
    if args.table.endswith("design_sweep/results.json"):
        return design_sweep_table(suite, Path(args.table)), (
            f"a table built from {args.table} (real sandbox executions by benchmarks/design_sweep.py, NOT "
            "the wmrl record replay table)"
        )
    table = ReplayTable.load(args.table, suite=suite)
    return table, f"the recorded replay table {args.table} (real sandbox executions)"


def _run_seeds(
    pool: ProcessPoolExecutor,
    jobs: list[tuple[Method, str]],
    seeds: range,
    arrays: TableArrays,
    runs: Runs,
    world_models: list[str],
) -> None:
    tasks = [(method, world_model, seed) for method, world_model in jobs for seed in seeds]
    with tqdm(
        total=len(tasks), desc=f"seeds {seeds.start}-{seeds.stop - 1}", unit="run", file=sys.stderr
    ) as bar:
        futures = [pool.submit(_run_job, *task) for task in tasks]
        for future in futures:
            future.add_done_callback(lambda _: bar.update())
        results = [future.result() for future in futures]
    for (method, world_model, _), curves in zip(tasks, results, strict=True):
        for target in world_models if not method.uses_world_model else [world_model]:
            runs.setdefault((method.name, target), []).append(curves)


def parse_args(argv: Sequence[str] | None = None) -> Args:
    """Build :class:`Args` from the command line, one ``--option`` per field with its help."""
    return parse_dataclass_args(Args, argv, __doc__.split("\n\n")[0])


def main(argv: Sequence[str] | None = None) -> list[dict[str, str]]:
    """Run the protocol: every method x world model x paired seed x fold; write tables, curves, plot."""
    args = parse_args(argv)
    output = Path(args.output_dir)
    output.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    suite = load_suite()
    try:
        table, provenance = load_table(args, suite)
    except WMRLError as error:
        raise SystemExit(f"--table {args.table}: {error}") from None
    arrays = table_arrays(table, suite, args)
    if args.table != "synthetic":
        table.save(output / "table_snapshot.json")
        provenance += f" (the table as read: {output / 'table_snapshot.json'})"
    if len(arrays.competitions) < len(table.competitions()):
        provenance += (
            f"; only its {len(arrays.competitions)} competitions recorded for every design "
            f"(of {len(table.competitions())} begun)"
        )
    selected = [method for method in METHODS if method.name in args.method_names and not method.equal_compute]
    world_models = args.world_model_names
    jobs = [
        (method, world_model)
        for method in selected
        for world_model in (world_models if method.uses_world_model else world_models[:1])
    ]
    runs: Runs = {}
    report = partial(_report, output, runs, arrays, args, provenance, started)
    with ProcessPoolExecutor(args.workers, initializer=_start_worker, initargs=(arrays, args)) as pool:
        first = min(args.power_check_seeds, args.seeds) if args.power_check_seeds else args.seeds
        _run_seeds(pool, jobs, range(first), arrays, runs, world_models)
        powered, worst = power_check(runs, args) if args.power_check_seeds else (True, math.nan)
        power_line = (
            "no power check (--power-check-seeds 0)"
            if not args.power_check_seeds
            else f"power check after {first} seeds: largest s.e. of a primary difference {worst:.4f} vs "
            f"{args.smallest_effect / 4:.4f} (a quarter of the smallest effect of interest "
            f"{args.smallest_effect}): {'powered' if powered else 'NOT powered'}"
        )
        target = args.seeds if powered else args.max_seeds
        if not powered:
            power_line += f"; the protocol extends the run to {target} seeds"
        print(power_line, file=sys.stderr)
        rows = report(power_line, first, target)
        for chunk in range(first, target, SEED_CHUNK):
            _run_seeds(pool, jobs, range(chunk, min(target, chunk + SEED_CHUNK)), arrays, runs, world_models)
            rows = report(power_line, min(target, chunk + SEED_CHUNK), target)
    print(f"Wrote {output / 'results.md'}, results.csv, curves.csv and kaggle_powered.png")
    return rows


def _report(
    output: Path,
    runs: Runs,
    arrays: TableArrays,
    args: Args,
    provenance: str,
    started: float,
    power_line: str,
    seeds_run: int,
    seeds_planned: int,
) -> list[dict[str, str]]:
    """Summarise the seeds run so far and write every file (after each chunk: a cut-off run keeps them)."""
    if {"grpo_real_equal_compute", "wmrl", "grpo_real"} <= set(args.method_names):
        for world_model in args.world_model_names:
            runs[("grpo_real_equal_compute", world_model)] = equal_compute_curves(runs, world_model)
    rows = summary(runs, args)
    checks = target_checks(runs, args)
    status = (
        f"{seeds_run} of the {seeds_planned} planned seeds"
        if seeds_run < seeds_planned
        else f"all {seeds_planned} planned seeds"
    )
    write_results(
        output,
        rows,
        checks,
        runs,
        arrays,
        args,
        provenance,
        f"{power_line}; this file: {status}",
        seeds_run,
        time.perf_counter() - started,
    )
    print("\n".join(checks), file=sys.stderr)
    return rows


def write_results(
    output: Path,
    rows: list[dict[str, str]],
    checks: list[str],
    runs: Runs,
    arrays: TableArrays,
    args: Args,
    provenance: str,
    power_line: str,
    seeds_run: int,
    wall: float,
) -> None:
    """``results.md`` (tables, decision rule, targets), ``results.csv``, ``curves.csv`` and the plot."""
    columns = [
        "method",
        "final held-out score",
        "final vs anchors-only",
        "final vs all-real",
        "area over compute",
        "area vs anchors-only",
        "first half vs anchors-only",
        "charged CPU-s",
        "compute ratio vs all-real",
        "seeds reaching it",
        "spearman on own rollouts",
        "pairwise accuracy on own rollouts",
    ]
    sections = []
    for world_model in args.world_model_names:
        mine = [row for row in rows if row["world model"] == world_model]
        lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
        lines += ["| " + " | ".join(row[column] for column in columns) + " |" for row in mine]
        fidelity = next((row for row in mine if row["method"] == "wmrl"), mine[0])
        sections.append(
            f"### {WORLD_MODELS[world_model]}\n\nFidelity on the default WMRL's own rollouts: within-group "
            f"Spearman {fidelity['spearman on own rollouts']}, pairwise accuracy "
            f"{fidelity['pairwise accuracy on own rollouts']}.\n\n" + "\n".join(lines)
        )
    real = runs[("grpo_real", args.world_model_names[0])]
    start, ceiling = np.mean([c.score[0] for c in real]), np.mean([c.ceiling for c in real])
    text = (
        "# Powered Kaggle comparison on a replay table\n\n"
        f"Outcomes: {provenance}; {len(arrays.competitions)} competitions x {len(arrays.designs)} "
        f"designs, {args.folds} folds (seed s holds out fold s mod {args.folds}, so every competition is "
        f"held out), {seeds_run} paired seeds, {args.steps} steps of {args.groups_per_step} groups x "
        f"{args.group_size}, one anchor group per step. Protocol: benchmarks/protocols/kaggle_powered.md "
        "(committed before these results).\n\n"
        "Exact held-out score (mean over the held-out competitions of sum_d pi(d|task) position(d, task)), "
        f"mean over seeds: uniform policy (step 0) {start:.4f}; best design per task {ceiling:.4f}. "
        f"{power_line}.\n\n"
        "Columns: final score ± s.e. over seeds; paired differences ± s.e. [95% CI]; 'area over compute' is "
        "the mean score over charged compute in [0, anchors-only's final compute]; 'first half' is the mean "
        "score over steps 0..steps/2 (equal executions for anchors-only and the world-model methods); the "
        "compute ratio is all-real GRPO's median CPU-s to reach its own final score (same seed) over this "
        "method's. Charged compute: recorded sandbox CPU-s + measured process CPU-s of the world model "
        "and of the policy (sampling and update). The 8x fewer executions of one anchor group in eight is a "
        "design choice, not a measured speed-up.\n\n"
        "## Decision rule (from the protocol)\n\nA target is MET only as stated below; the best WMRL "
        "configuration is the one with the highest mean first-half curve among wmrl, wmrl_paper, "
        "wmrl_residual and ppi (chosen on the same seeds: an optimistic choice, said as such).\n\n"
        + "\n".join(checks)
        + "\n\n## Results by world model\n\n"
        + "\n\n".join(sections)
        + f"\n\nWall time {wall:.0f} s.\n"
    )
    (output / "results.md").write_text(text)
    with (output / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    write_curves(runs, args, output / "curves.csv")
    plot(runs, args, arrays, output / "kaggle_powered.png")


if __name__ == "__main__":
    main()
