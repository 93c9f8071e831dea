"""The Kaggle fidelity harness: how well does a world model predict what the real sandbox does?

Why: every claim WMRL makes rests on the world model's error r̂ − r having a correctable structure (a
monotone bias plus bounded noise). Before training with a world model you want to see that error on
real solutions: status accuracy (does it know what crashes?), rank correlation within a task (GRPO
only uses within-group order), absolute error, how often it cannot say (``None``), how fast it is
compared with executing, and what Online Debiasing's isotonic map does to it.

Why under ``wmrl_envs.kaggle``: a case is a competition's public context plus one solution, and the
real side is a graded :class:`~wmrl_envs.kaggle.outcome.Outcome`; that is this track's vocabulary.
The calibration over (task, predicted, real) triples that any track can use stays in
:mod:`wmrl_envs.fidelity`.

Pipeline (pure functions over plain containers, so a CLI, a benchmark or a notebook compose them):

1. :func:`execute_cases` runs every :class:`FidelityCase` (a competition's public context plus one
   solution) through a real :class:`Executor` once; :class:`ExecutionCache` keys results by a hash of
   the solution and the competition, so re-running with another world model costs nothing.
2. :func:`predict_cases` asks a world model, in batches. A world model that learns online (has an
   ``observe`` method) is evaluated **prequentially**: the tasks are visited one at a time and every
   solution of a task is predicted *before* the model observes that task's real rewards, so its
   numbers are never in-sample.
3. :func:`~wmrl_envs.fidelity.cross_fitted_calibration` applies
   :class:`~wmrl_algos.debias.OnlineDebiaser`'s isotonic map honestly: the competitions are split in
   two halves, the map is fitted on one half's pairs and applied to the other's, and vice versa.
4. :func:`fidelity_metrics` and :func:`evaluate_world_model` compute the numbers;
   :func:`write_table`, :func:`plot_reliability` and :func:`plot_calibration` write the report.

Example:
    >>> from wmrl_envs.kaggle.outcome import KaggleContext
    >>> context = KaggleContext(competition_id="c", overview="", inventory="", metric="rmse",
    ...     higher_is_better=False, task_type="regression", target="y", id_column="id", feature_columns=())
    >>> case = FidelityCase(context=context, solution="print(1)")
    >>> len(case.key)
    64
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from tqdm.auto import tqdm

from wmrl_algos.errors import ConfigError, DataError, WorldModelError, require
from wmrl_envs.fidelity import cross_fitted_calibration
from wmrl_envs.kaggle.fingerprint import grading_code_version
from wmrl_envs.kaggle.outcome import (
    UNCACHED_STATUSES,
    ExecutionStatus,
    KaggleContext,
    Outcome,
    RewardLadder,
)
from wmrl_envs.world_model import LearningWorldModel, Prediction, WorldModel, WorldModelQuery

__all__ = [
    "CaseSource",
    "FidelityCase",
    "RealRecord",
    "Executor",
    "ExecutionCache",
    "ExecutionStats",
    "execute_cases",
    "predict_cases",
    "PredictionRun",
    "FidelityMetrics",
    "fidelity_metrics",
    "predicted_status",
    "FidelityResult",
    "evaluate_world_model",
    "write_table",
    "plot_reliability",
    "plot_calibration",
]

CaseSource = Literal["reference", "rollout"]
_UNKNOWN_STATUSES = ("sandbox_error",)


@dataclass(frozen=True)
class FidelityCase:
    """One solution to execute and predict.

    Attributes:
        context: the competition's public context (what the world model sees).
        solution: the agent's message or bare code (what both the sandbox and the world model get).
        source: ``"reference"`` (the suite's leaderboard population) or ``"rollout"`` (agent output).
        label: a human-readable name (e.g. the reference solution's recipe), for tables.
        fingerprint: the competition's content fingerprint
            (:func:`wmrl_envs.kaggle.fingerprint.competition_fingerprint`); empty: the competition id
            stands in for it (only safe while one id means one content, as in the embedded suite).
    """

    context: KaggleContext
    solution: str
    source: CaseSource = "reference"
    label: str = ""
    fingerprint: str = ""

    @property
    def competition_id(self) -> str:
        """The competition's id."""
        return self.context.competition_id

    @property
    def key(self) -> str:
        """Cache key: SHA-256 of the grading code's version, the competition and the solution text.

        Why the grading version and the content: the cache file outlives the code that wrote it, and a
        record made by another grader, or for another competition under the same id, is a wrong grade.
        """
        competition = self.fingerprint or f"id:{self.context.competition_id}"
        text = f"{grading_code_version()}\0{competition}\0{self.solution}"
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def query(self) -> WorldModelQuery:
        """The world-model query for this case."""
        return WorldModelQuery(context=self.context, action=self.solution, key=self.key[:16])


@dataclass(frozen=True)
class RealRecord:
    """What the real sandbox did with one case (``reward`` is ``None`` when the outcome is unknown)."""

    status: ExecutionStatus
    reward: float | None
    position: float | None = None
    score: float | None = None
    wall_s: float = 0.0
    cached: bool = False

    @classmethod
    def from_outcome(cls, outcome: Outcome, ladder: RewardLadder, *, cached: bool = False) -> RealRecord:
        """Record an :class:`Outcome` with its ladder reward."""
        return cls(
            status=outcome.status,
            reward=ladder.reward(outcome.status, outcome.position),
            position=outcome.position,
            score=outcome.score,
            wall_s=float(outcome.wall_s),
            cached=cached,
        )


@runtime_checkable
class Executor(Protocol):
    """Runs one case for real (sandbox + grading); failures of the solution are statuses, not raises."""

    def __call__(self, case: FidelityCase) -> Outcome:
        """Execute and grade one case."""
        ...


class ExecutionCache:
    """Real execution results on disk, one JSON line per (competition, solution hash).

    Args:
        path: the JSONL file (created with its parent directories on the first :meth:`put`); ``None``
            keeps the cache in memory only.

    Raises:
        DataError: the file exists but a line is not a valid record.

    Example:
        >>> cache = ExecutionCache(None)
        >>> cache.put("abc", RealRecord(status="valid", reward=0.75, position=0.5))
        >>> cache.get("abc").reward, cache.get("abc").cached, cache.get("zzz") is None
        (0.75, True, True)
    """

    def __init__(self, path: Path | str | None) -> None:
        self.path = Path(path) if path is not None else None
        self._records: dict[str, RealRecord] = {}
        if self.path is not None and self.path.is_file():
            for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                    key = entry.pop("key")
                    self._records[key] = RealRecord(**{**entry, "cached": True})
                except (ValueError, KeyError, TypeError) as exc:
                    raise DataError(
                        f"{self.path}:{number} is not a valid execution record ({exc!r}); delete the file to "
                        "re-execute everything"
                    ) from exc

    def __len__(self) -> int:
        return len(self._records)

    def get(self, key: str) -> RealRecord | None:
        """The cached record for ``key``, or ``None``."""
        return self._records.get(key)

    def put(self, key: str, record: RealRecord) -> None:
        """Store a record (appended to the file at once, so an interrupted run keeps what it did)."""
        stored = RealRecord(**{**asdict(record), "cached": True})
        self._records[key] = stored
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            entry = {"key": key, **asdict(record)}
            entry.pop("cached")
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(entry) + "\n")


@dataclass(frozen=True)
class ExecutionStats:
    """Cost of the real executions.

    Attributes:
        n_cases: cases with a real record.
        n_executed: cases executed fresh in this run.
        n_cached: cases read from the cache.
        execution_s: wall-clock seconds spent executing (and grading) in this run.
        sandbox_s: the sandbox wall-clock seconds recorded for every case when it ran (cached or fresh);
            the basis of :attr:`executions_per_s`, so the figure does not depend on what was cached.
    """

    n_cases: int
    n_executed: int
    n_cached: int
    execution_s: float
    sandbox_s: float = 0.0

    @property
    def executions_per_s(self) -> float | None:
        """Executions per sandbox wall-clock second, one at a time (``None`` when nothing was timed)."""
        if self.n_cases == 0 or self.sandbox_s <= 0:
            return None
        return self.n_cases / self.sandbox_s


def execute_cases(
    cases: Sequence[FidelityCase],
    executor: Executor,
    cache: ExecutionCache,
    *,
    ladder: RewardLadder | None = None,
    progress: bool = True,
) -> tuple[list[RealRecord], ExecutionStats]:
    """Real records for every case, executing only those not in the cache.

    Args:
        cases: the corpus.
        executor: runs one case for real.
        cache: results by case key; fresh definite results are added to it (a timeout or an unknown
            outcome is executed again next time: :data:`~wmrl_envs.kaggle.outcome.UNCACHED_STATUSES`).
        ladder: maps outcomes to rewards (default ladder if ``None``).
        progress: show a tqdm bar.

    Returns:
        One :class:`RealRecord` per case (in order) and the execution cost.
    """
    ladder = ladder if ladder is not None else RewardLadder()
    records: list[RealRecord] = []
    executed = 0
    seconds = 0.0
    for case in _progress(cases, progress, "executing"):
        record = cache.get(case.key)
        if record is None:
            start = time.perf_counter()
            outcome = executor(case)
            seconds += time.perf_counter() - start
            executed += 1
            record = RealRecord.from_outcome(outcome, ladder)
            if outcome.status not in UNCACHED_STATUSES:
                cache.put(case.key, record)
        records.append(record)
    return records, ExecutionStats(
        n_cases=len(cases),
        n_executed=executed,
        n_cached=len(cases) - executed,
        execution_s=seconds,
        sandbox_s=sum(record.wall_s for record in records),
    )


@dataclass(frozen=True)
class PredictionRun:
    """A world model's predictions for a corpus and their cost.

    Attributes:
        predictions: one per case, in case order.
        predict_s: seconds spent in ``predict`` (``observe`` excluded).
        prequential: whether the model learned from each task's real rewards after predicting it.
    """

    predictions: tuple[Prediction, ...]
    predict_s: float
    prequential: bool

    @property
    def predictions_per_s(self) -> float | None:
        """Predictions per second of ``predict`` time."""
        return len(self.predictions) / self.predict_s if self.predict_s > 0 else None


def predict_cases(
    world_model: WorldModel,
    cases: Sequence[FidelityCase],
    real: Sequence[RealRecord] | None = None,
    *,
    batch_size: int = 32,
    progress: bool = True,
) -> PredictionRun:
    """Predict every case; prequentially (per task, predict then observe) for online-learning models.

    A :class:`~wmrl_envs.world_model.LearningWorldModel` is evaluated prequentially when ``real`` is
    given: tasks are visited in first-appearance order; each task's cases are predicted, then its real
    rewards observed. So no prediction has seen its own task's outcomes.

    Args:
        world_model: any :class:`~wmrl_envs.world_model.WorldModel`.
        cases: the corpus.
        real: the real records (needed for prequential evaluation).
        batch_size: queries per ``predict`` call.
        progress: show a tqdm bar.

    Raises:
        ConfigError: ``batch_size`` < 1, or ``real`` has another length than ``cases``.
        WorldModelError: the world model returned another number of predictions than queries.
    """
    if batch_size < 1:
        raise ConfigError(f"batch_size={batch_size}; pass >= 1 queries per predict call")
    if real is not None and len(real) != len(cases):
        raise ConfigError(f"{len(cases)} cases but {len(real)} real records; pass one record per case")
    prequential = isinstance(world_model, LearningWorldModel) and real is not None
    by_task: dict[str, list[int]] = defaultdict(list)
    for index, case in enumerate(cases):
        by_task[case.competition_id if prequential else ""].append(index)
    predictions: list[Prediction | None] = [None] * len(cases)
    seconds = 0.0
    bar = _progress_bar(len(cases), progress, f"predicting ({world_model.name})")
    for indices in by_task.values():
        for start in range(0, len(indices), batch_size):
            chunk = indices[start : start + batch_size]
            queries = [cases[index].query() for index in chunk]
            began = time.perf_counter()
            batch = list(world_model.predict(queries))
            seconds += time.perf_counter() - began
            if len(batch) != len(chunk):
                raise WorldModelError(
                    f"world model {world_model.name!r} returned {len(batch)} predictions for {len(chunk)} "
                    "queries; it must return exactly one per query"
                )
            for index, prediction in zip(chunk, batch, strict=True):
                predictions[index] = prediction
            if bar is not None:
                bar.update(len(chunk))
        if prequential and isinstance(world_model, LearningWorldModel) and real is not None:
            world_model.observe(
                [cases[index].query() for index in indices], [real[index].reward for index in indices]
            )
    if bar is not None:
        bar.close()
    return PredictionRun(
        predictions=tuple(prediction for prediction in predictions if prediction is not None),
        predict_s=seconds,
        prequential=prequential,
    )


@dataclass(frozen=True)
class FidelityMetrics:
    """How well one world model predicted the real outcomes of a corpus (``None``: not computable).

    Attributes:
        n_cases: solutions in the corpus.
        n_tasks: competitions in the corpus.
        status_accuracy: share of cases whose predicted status equals the real one, among cases with a
            known real status and a predicted status.
        status_coverage: share of cases with a known real status for which the model gave a status.
        spearman: mean over tasks of Spearman's rank correlation between predicted and real reward
            (tasks with at least 3 pairs and no constant side).
        kendall: the same with Kendall's tau-b.
        n_rank_tasks: tasks that entered the rank correlations.
        mae: mean absolute error of the reward, over pairs where both sides are known.
        bias: mean of predicted − real reward over the same pairs.
        calibrated_mae / calibrated_bias / calibrated_spearman: the same after cross-fitted isotonic
            calibration.
        parse_failure_rate: share of predictions whose reward is ``None``.
        predictions_per_s: world-model throughput.
        executions_per_s: real-execution throughput (fresh runs; ``None`` if all were cached).
    """

    n_cases: int
    n_tasks: int
    status_accuracy: float | None
    status_coverage: float
    spearman: float | None
    kendall: float | None
    n_rank_tasks: int
    mae: float | None
    bias: float | None
    calibrated_mae: float | None
    calibrated_bias: float | None
    calibrated_spearman: float | None
    parse_failure_rate: float
    predictions_per_s: float | None
    executions_per_s: float | None

    def as_dict(self, prefix: str = "fidelity/") -> dict[str, float | int | None]:
        """The metrics as a flat dict with namespaced keys."""
        return {f"{prefix}{key}": value for key, value in asdict(self).items()}


def predicted_status(prediction: Prediction) -> str | None:
    """The execution status a prediction claims, or ``None`` when it claims none.

    Read from ``info["status"]`` (rubric, learned), else from the ``Outcome`` in ``info["outcome"]``
    (what the LLM world models parse from their simulated log).

    >>> predicted_status(Prediction(reward=0.1, info={"outcome": Outcome(status="runtime_error")}))
    'runtime_error'
    """
    status = prediction.info.get("status")
    if isinstance(status, str):
        return status
    outcome = prediction.info.get("outcome")
    return outcome.status if isinstance(outcome, Outcome) else None


def fidelity_metrics(
    cases: Sequence[FidelityCase],
    real: Sequence[RealRecord],
    predictions: Sequence[Prediction],
    calibrated: Sequence[float | None] | None = None,
    *,
    predictions_per_s: float | None = None,
    executions_per_s: float | None = None,
) -> FidelityMetrics:
    """Compute :class:`FidelityMetrics` (needs scipy: ``pip install 'wmrl[kaggle]'``).

    Raises:
        ConfigError: the sequences differ in length.
    """
    if not len(cases) == len(real) == len(predictions):
        raise ConfigError(
            f"{len(cases)} cases, {len(real)} real records and {len(predictions)} predictions; "
            "pass one of each"
        )
    tasks = [case.competition_id for case in cases]
    predicted = [prediction.reward for prediction in predictions]
    real_rewards = [record.reward for record in real]

    known_status = [index for index, record in enumerate(real) if record.status not in _UNKNOWN_STATUSES]
    statuses = [predicted_status(prediction) for prediction in predictions]
    with_status = [index for index in known_status if statuses[index] is not None]
    correct = sum(1 for index in with_status if statuses[index] == real[index].status)

    spearman, kendall, n_rank_tasks = _rank_correlations(tasks, predicted, real_rewards)
    mae, bias = _errors(predicted, real_rewards)
    calibrated_mae = calibrated_bias = calibrated_spearman = None
    if calibrated is not None:
        calibrated_mae, calibrated_bias = _errors(calibrated, real_rewards)
        calibrated_spearman = _rank_correlations(tasks, calibrated, real_rewards)[0]
    n = len(cases)
    return FidelityMetrics(
        n_cases=n,
        n_tasks=len(set(tasks)),
        status_accuracy=correct / len(with_status) if with_status else None,
        status_coverage=len(with_status) / len(known_status) if known_status else 0.0,
        spearman=spearman,
        kendall=kendall,
        n_rank_tasks=n_rank_tasks,
        mae=mae,
        bias=bias,
        calibrated_mae=calibrated_mae,
        calibrated_bias=calibrated_bias,
        calibrated_spearman=calibrated_spearman,
        parse_failure_rate=sum(value is None for value in predicted) / n if n else 0.0,
        predictions_per_s=predictions_per_s,
        executions_per_s=executions_per_s,
    )


def _errors(
    predicted: Sequence[float | None], real: Sequence[float | None]
) -> tuple[float | None, float | None]:
    pairs = [(p, r) for p, r in zip(predicted, real, strict=True) if p is not None and r is not None]
    if not pairs:
        return None, None
    difference = np.array([p - r for p, r in pairs])
    return float(np.abs(difference).mean()), float(difference.mean())


def _rank_correlations(
    tasks: Sequence[str], predicted: Sequence[float | None], real: Sequence[float | None]
) -> tuple[float | None, float | None, int]:
    stats = require("scipy.stats", "kaggle")
    by_task: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for task, p, r in zip(tasks, predicted, real, strict=True):
        if p is not None and r is not None:
            by_task[task].append((p, r))
    spearmans: list[float] = []
    kendalls: list[float] = []
    for pairs in by_task.values():
        values = np.asarray(pairs)
        if len(values) < 3 or np.ptp(values[:, 0]) == 0 or np.ptp(values[:, 1]) == 0:
            continue
        spearmans.append(float(stats.spearmanr(values[:, 0], values[:, 1]).statistic))
        kendalls.append(float(stats.kendalltau(values[:, 0], values[:, 1]).statistic))
    if not spearmans:
        return None, None, 0
    return float(np.mean(spearmans)), float(np.mean(kendalls)), len(spearmans)


@dataclass(frozen=True)
class FidelityResult:
    """One world model's evaluation: its metrics and the per-case numbers behind them (in case order)."""

    name: str
    metrics: FidelityMetrics
    predicted: tuple[float | None, ...]
    calibrated: tuple[float | None, ...]
    real: tuple[float | None, ...]
    predicted_status: tuple[str | None, ...] = ()
    competition_ids: tuple[str, ...] = ()


def evaluate_world_model(
    world_model: WorldModel,
    cases: Sequence[FidelityCase],
    real: Sequence[RealRecord],
    *,
    execution_stats: ExecutionStats | None = None,
    batch_size: int = 32,
    seed: int = 0,
    progress: bool = True,
) -> FidelityResult:
    """Predict the corpus (prequentially for learning models), calibrate out-of-fold, compute metrics."""
    run = predict_cases(world_model, cases, real, batch_size=batch_size, progress=progress)
    predicted = [prediction.reward for prediction in run.predictions]
    real_rewards = [record.reward for record in real]
    calibrated = cross_fitted_calibration(
        [case.competition_id for case in cases], predicted, real_rewards, seed=seed
    )
    metrics = fidelity_metrics(
        cases,
        real,
        run.predictions,
        calibrated,
        predictions_per_s=run.predictions_per_s,
        executions_per_s=execution_stats.executions_per_s if execution_stats is not None else None,
    )
    return FidelityResult(
        name=world_model.name,
        metrics=metrics,
        predicted=tuple(predicted),
        calibrated=tuple(calibrated),
        real=tuple(real_rewards),
        predicted_status=tuple(predicted_status(prediction) for prediction in run.predictions),
        competition_ids=tuple(case.competition_id for case in cases),
    )


_TABLE_COLUMNS = (
    ("world model", None),
    ("status acc.", "status_accuracy"),
    ("Spearman", "spearman"),
    ("Kendall", "kendall"),
    ("MAE", "mae"),
    ("bias", "bias"),
    ("MAE (cal.)", "calibrated_mae"),
    ("bias (cal.)", "calibrated_bias"),
    ("parse fail", "parse_failure_rate"),
    ("pred/s", "predictions_per_s"),
    ("exec/s", "executions_per_s"),
    ("cases", "n_cases"),
    ("tasks", "n_tasks"),
)


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, int):
        return str(value)
    return f"{value:.4g}" if abs(value) >= 100 else f"{value:.3f}"


def write_table(results: Sequence[FidelityResult], markdown_path: Path, csv_path: Path | None = None) -> str:
    """Write the metrics of every world model as a markdown table (and a CSV); returns the markdown."""
    header = "| " + " | ".join(title for title, _ in _TABLE_COLUMNS) + " |"
    rule = "|" + "|".join("---" for _ in _TABLE_COLUMNS) + "|"
    rows = [
        "| "
        + " | ".join(
            result.name if key is None else _cell(getattr(result.metrics, key)) for _, key in _TABLE_COLUMNS
        )
        + " |"
        for result in results
    ]
    markdown = "\n".join([header, rule, *rows]) + "\n"
    markdown_path.parent.mkdir(parents=True, exist_ok=True)
    markdown_path.write_text(markdown, encoding="utf-8")
    if csv_path is not None:
        lines = ["world_model," + ",".join(key for _, key in _TABLE_COLUMNS if key is not None)]
        for result in results:
            values = [getattr(result.metrics, key) for _, key in _TABLE_COLUMNS if key is not None]
            lines.append(
                result.name + "," + ",".join("" if value is None else str(value) for value in values)
            )
        csv_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return markdown


def _binned(
    predicted: Sequence[float | None], real: Sequence[float | None], bins: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pairs = np.array(
        [(p, r) for p, r in zip(predicted, real, strict=True) if p is not None and r is not None]
    )
    if pairs.size == 0:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.digitize(pairs[:, 0], edges[1:-1]), 0, bins - 1)
    centres, means, counts = [], [], []
    for index in range(bins):
        members = pairs[which == index]
        if len(members):
            centres.append(members[:, 0].mean())
            means.append(members[:, 1].mean())
            counts.append(len(members))
    return np.array(centres), np.array(means), np.array(counts)


def plot_reliability(results: Sequence[FidelityResult], path: Path, *, bins: int = 10) -> Path:
    """Reliability plot: mean real reward per bin of predicted reward, one line per world model."""
    pyplot = _pyplot()
    figure, axes = pyplot.subplots(figsize=(6, 5))
    axes.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="perfect")
    for result in results:
        centres, means, counts = _binned(result.predicted, result.real, bins)
        if centres.size:
            axes.plot(centres, means, marker="o", label=result.name)
            for x, y, count in zip(centres, means, counts, strict=True):
                axes.annotate(str(int(count)), (x, y), fontsize=6, alpha=0.6)
    axes.set_xlabel("predicted reward (bin mean)")
    axes.set_ylabel("real reward (bin mean)")
    axes.set_xlim(-0.02, 1.02)
    axes.set_ylim(-0.02, 1.02)
    axes.set_title("World-model reliability (numbers: cases per bin)")
    axes.legend(fontsize=8)
    return _save(figure, path)


def plot_calibration(results: Sequence[FidelityResult], path: Path, *, seed: int = 0) -> Path:
    """Before/after cross-fitted isotonic calibration: predicted vs real reward, one row per model."""
    pyplot = _pyplot()
    rows = max(1, len(results))
    figure, axes = pyplot.subplots(rows, 2, figsize=(9, 3.6 * rows), squeeze=False)
    jitter = np.random.default_rng(seed)
    for row, result in enumerate(results):
        for column, (values, title) in enumerate(
            ((result.predicted, "raw"), (result.calibrated, "isotonic, cross-fitted"))
        ):
            axis = axes[row][column]
            pairs = np.array(
                [(p, r) for p, r in zip(values, result.real, strict=True) if p is not None and r is not None]
            )
            axis.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1)
            if pairs.size:
                axis.scatter(pairs[:, 0], pairs[:, 1] + jitter.normal(0, 0.01, len(pairs)), s=8, alpha=0.5)
                mae = float(np.abs(pairs[:, 0] - pairs[:, 1]).mean())
                title = f"{title}: MAE {mae:.3f}"
            axis.set_title(f"{result.name} — {title}", fontsize=9)
            axis.set_xlabel("predicted reward")
            axis.set_ylabel("real reward")
            axis.set_xlim(-0.02, 1.02)
            axis.set_ylim(-0.05, 1.05)
    return _save(figure, path)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot

    return matplotlib.pyplot


def _save(figure: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    figure.clf()
    _pyplot().close(figure)
    return path


def _progress(items: Sequence[FidelityCase], enabled: bool, description: str) -> Iterable[FidelityCase]:
    return tqdm(items, desc=description, unit="case") if enabled else items


def _progress_bar(total: int, enabled: bool, description: str) -> tqdm | None:
    return tqdm(total=total, desc=description, unit="case") if enabled else None
