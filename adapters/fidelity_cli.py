"""``wmrl fidelity``: measure world models against real executions of the built-in Kaggle suite.

Why in the adapters: the harness itself (:mod:`wmrl_envs.kaggle.fidelity`) is core and knows nothing of
language models; this module builds world models *by name* — some of which live in adapters (the LLM
backends, the MiniLM embedder) — assembles the corpus from the suite, runs it, and writes the report.

The corpus:

* **the reference population** of every selected competition (the documented reference solutions
  the leaderboards are made of, :data:`~wmrl_envs.kaggle.references.REFERENCE_NAMES`). They are run for
  real through the sandbox by :func:`~wmrl_envs.kaggle.references.build_leaderboard` — the same runs
  that rank them, so nothing is executed twice — and their graded outcomes go into the execution cache;
* **agent rollouts**, when ``rollouts`` names a JSONL file of ``{"competition": id, "solution": text}``
  lines: each is executed through the sandbox and graded like any agent submission.

Real results are cached (``cache``, keyed by solution hash + competition): a second run with another
world model executes nothing.

After the agreement table, each world model gets one line of expected effect: its within-group
correlation with the real rewards (after OD's cross-fitted calibration, as training feeds the
predictions; :func:`~wmrl_envs.fidelity.within_group_agreement`) turned by
:class:`~wmrl_algos.power.ExpectedEffect` into the prediction-powered gradient's variance against GRPO
on the anchors alone at ``anchor_fraction``, and the executions that saves in the variance-limited
regime. The same numbers go to ``expected_effect.json``.

Example:
    >>> args = FidelityArgs(world_models=("rubric",), competitions=("titanic-survival",))  # doctest: +SKIP
    >>> report = run_fidelity(args)  # doctest: +SKIP
    >>> report.results[0].metrics.spearman is not None  # doctest: +SKIP
    True
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from wmrl_adapters.train.kaggle.config import TrainConfig
from wmrl_adapters.train.kaggle.world_models import (
    EMBEDDINGS,
    WORLD_MODEL_ALIASES,
    WORLD_MODEL_SPECS,
    WorldModelSpec,
    build_world_model,
    check_embeddings_available,
    split_world_model_specs,
    transformers_model_dir,
)
from wmrl_adapters.train.run.checks import check_model_dir, check_path

from wmrl_algos.errors import ConfigError, DataError
from wmrl_algos.power import ExpectedEffect, check_anchor_fraction
from wmrl_envs.fidelity import WithinGroupAgreement, within_group_agreement
from wmrl_envs.kaggle.competition import Competition
from wmrl_envs.kaggle.fidelity import (
    ExecutionCache,
    ExecutionStats,
    FidelityCase,
    FidelityResult,
    RealRecord,
    evaluate_world_model,
    execute_cases,
    plot_calibration,
    plot_reliability,
    write_table,
)
from wmrl_envs.kaggle.fingerprint import competition_fingerprint
from wmrl_envs.kaggle.grading import grade_execution
from wmrl_envs.kaggle.outcome import KaggleContext, Outcome, RewardLadder
from wmrl_envs.kaggle.references import REFERENCE_NAMES, ReferenceEntry
from wmrl_envs.kaggle.suite import KaggleSuite, Split, load_suite
from wmrl_envs.kaggle.world_models.features import extract_code
from wmrl_envs.sandbox.base import ExecutionRequest, Sandbox
from wmrl_envs.world_model import WorldModel

__all__ = [
    "FidelityArgs",
    "FidelityReport",
    "SandboxExecutor",
    "make_world_model",
    "reference_cases",
    "rollout_cases",
    "run_fidelity",
    "parse_args",
    "main",
]

_SINGLE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
_TRAIN_ANCHOR_FRACTION: float = next(
    spec.default for spec in dataclasses.fields(TrainConfig) if spec.name == "anchor_fraction"
)
"""``wmrl train``'s anchor fraction: the default against which the expected effect is stated."""


@dataclass(frozen=True)
class FidelityArgs:
    """What ``wmrl fidelity`` measures and where it writes.

    Attributes:
        world_models: world-model specs, as ``wmrl train --world-model`` spells them
            (:class:`~wmrl_adapters.train.world_models.WorldModelSpec`: ``rubric``,
            ``learned[:embeddings=minilm]``, ``learned+rubric[:embeddings=minilm]``,
            ``llm:transformers[=MODEL_DIR][,max_new_tokens=N]``, ``llm:http://HOST:PORT/v1[,...]``) or
            the older names ``llm-transformers`` / ``llm-http``; each is evaluated on the same corpus,
            and each builds the model ``wmrl train`` builds from the same text.
        competitions: competition ids to use; empty: every competition of ``split``.
        split: which part of the suite when ``competitions`` is empty (``train``, ``heldout``, ``all``).
        references: include the reference population of each competition.
        reference_names: a subset of the reference population (empty: all). A leaderboard built for
            a subset ranks only that subset; use it for smoke runs against a scratch ``WMRL_DATA_DIR``.
        rollouts: optional JSONL of ``{"competition": id, "solution": text}`` agent rollouts.
        sandbox: sandbox backend for real executions (``local`` = bubblewrap; ``unsafe`` = no isolation,
            only for trusted code such as the references).
        strict_sandbox: refuse to run when the backend cannot isolate here (instead of degrading).
        timeout_s: per-execution wall-clock limit.
        memory_mb: per-execution memory limit.
        cache: JSONL file of cached real results (``None``: ``~/.cache/wmrl/fidelity/executions.jsonl``).
        output_dir: where the table and plots go.
        embeddings: ``"minilm"`` adds all-MiniLM-L6-v2 code embeddings to the learned world models
            whose spec does not say (needs ``wmrl[llm]``): a shorthand for ``:embeddings=minilm`` on
            each of them. ``"none"``: as the specs say.
        llm_max_cases: the LLM world models see at most this many cases (a seeded subset, whole tasks
            first); they take seconds per prediction on CPU. 0 means all.
        llm_max_new_tokens: generation budget of the LLM world models whose spec does not state one
            (``None``: the spec's, by default the LLM world model's own). Deprecated on the command
            line: write ``,max_new_tokens=N`` into the spec.
        llm_model: model folder for ``llm:transformers`` / ``llm-transformers`` (``None``: the offline
            SmolLM2-135M-Instruct).
        llm_base_url: OpenAI-compatible server for ``llm-http``.
        batch_size: queries per ``predict`` call.
        seed: seed of the calibration split and subsets.
        anchor_fraction: the share of groups a training run would execute for real, in (0, 1]; the
            expected effect is stated at it (default: ``wmrl train``'s).
        progress: show progress bars.
    """

    world_models: tuple[str, ...] = ("rubric", "learned", "learned+rubric")
    competitions: tuple[str, ...] = ()
    split: Split = "all"
    references: bool = True
    reference_names: tuple[str, ...] = ()
    rollouts: Path | None = None
    sandbox: str = "local"
    strict_sandbox: bool = True
    timeout_s: float = 300.0
    memory_mb: int = 4096
    cache: Path | None = None
    output_dir: Path = Path("fidelity-results")
    embeddings: Literal["none", "minilm"] = "none"
    llm_max_cases: int = 32
    llm_max_new_tokens: int | None = None
    llm_model: str | None = None
    llm_base_url: str | None = None
    batch_size: int = 32
    seed: int = 0
    anchor_fraction: float = _TRAIN_ANCHOR_FRACTION
    progress: bool = True

    def __post_init__(self) -> None:
        if not self.world_models:
            raise ConfigError(
                f"world_models={self.world_models!r}: nothing to measure; choose from "
                f"{', '.join(WORLD_MODEL_SPECS)} (or the older names {', '.join(WORLD_MODEL_ALIASES)})"
            )
        if not self.references and self.rollouts is None:
            raise ConfigError("references=False and no rollouts: the corpus is empty; enable one of them")
        if self.timeout_s <= 0 or self.memory_mb < 64:
            raise ConfigError(
                f"timeout_s={self.timeout_s}, memory_mb={self.memory_mb}; "
                "pass a positive timeout and >= 64 MB"
            )
        if self.embeddings not in EMBEDDINGS:
            raise ConfigError(f"embeddings={self.embeddings!r}; use one of {', '.join(EMBEDDINGS)}")
        if self.llm_max_new_tokens is not None and self.llm_max_new_tokens < 1:
            raise ConfigError(
                f"llm_max_new_tokens={self.llm_max_new_tokens}; pass a positive budget "
                "(or write it into the spec: llm:transformers,max_new_tokens=96)"
            )
        if self.llm_max_cases < 0 or self.batch_size < 1:
            raise ConfigError(
                f"llm_max_cases={self.llm_max_cases}, batch_size={self.batch_size}; pass >= 0 and >= 1"
            )
        check_anchor_fraction(self.anchor_fraction)
        for name in self.world_models:
            self.spec(name)
        self._check_paths()

    def _check_paths(self) -> None:
        """Every path and model given exists, before the suite, a sandbox or a model is loaded."""
        if self.rollouts is not None:
            check_path("--rollouts", self.rollouts, "a JSONL file of agent rollouts", kind="file")
        if self.cache is not None and self.cache.is_dir():
            raise ConfigError(f"--cache {str(self.cache)!r} is a directory; pass the cache's JSONL file")
        if self.output_dir.exists() and not self.output_dir.is_dir():
            raise ConfigError(
                f"--output-dir {str(self.output_dir)!r} is a file; pass a directory for the table and plots"
            )
        if self.llm_model:
            check_model_dir("--llm-model", self.llm_model)
        for name in self.world_models:
            model_dir = transformers_model_dir(name)
            if model_dir:
                check_model_dir("--world-models", model_dir)
            check_embeddings_available(self.spec(name), "--world-models")

    def spec(self, name: str) -> WorldModelSpec:
        """The world-model spec of ``name``, with ``llm_model`` / ``llm_base_url`` and the flags filled in.

        Raises:
            ConfigError: an unknown name, or ``llm-http`` without ``llm_base_url``.
        """
        spec = WorldModelSpec.parse(name, llm_model=self.llm_model, llm_base_url=self.llm_base_url)
        return spec.with_defaults(embeddings=self.embeddings, max_new_tokens=self.llm_max_new_tokens)


@dataclass(frozen=True)
class FidelityReport:
    """What :func:`run_fidelity` measured and wrote.

    Attributes:
        results: one evaluation per world model, in ``args.world_models`` order.
        execution: the cost of the real executions of this run.
        cases_by_source: corpus size per source (``reference`` / ``rollout``).
        table: the markdown table.
        files: written files by role (``table``, ``csv``, ``reliability``, ``calibration``,
            ``expected_effect``).
        agreements: per world model, the within-group agreement of its calibrated predictions with the
            real rewards (``None``: no group to measure it on).
        effects: per world model, the expected effect of that agreement at the run's anchor fraction
            (``None`` where the agreement is).
    """

    results: tuple[FidelityResult, ...]
    execution: ExecutionStats
    cases_by_source: dict[str, int]
    table: str
    files: dict[str, Path] = field(default_factory=dict)
    agreements: tuple[WithinGroupAgreement | None, ...] = ()
    effects: tuple[ExpectedEffect | None, ...] = ()

    def effect_lines(self) -> list[str]:
        """One line per world model: its pairwise accuracy and the expected effect of its agreement."""
        lines = []
        for result, agreement, effect in zip(self.results, self.agreements, self.effects, strict=True):
            if agreement is None or effect is None:
                lines.append(
                    f"{result.name}: no task has two known outcomes that differ, so the expected effect "
                    "is unknown; add solutions (--rollouts) whose real outcomes differ"
                )
                continue
            accuracy = agreement.pairwise_accuracy
            ordered = f"pairwise accuracy {100 * accuracy:.0f} %; " if accuracy is not None else ""
            lines.append(f"{result.name} (OD-calibrated): {ordered}{effect.summary()}")
        if self.results and not self.cases_by_source.get("rollout"):
            lines.append(
                "note: measured on the reference population, not on a policy's own rollouts; pass "
                "--rollouts with samples of the policy you will train for the number that applies"
            )
        return lines


class SandboxExecutor:
    """Runs a case's solution through a sandbox and grades it like the Kaggle env does.

    Args:
        suite: the suite the cases' competitions come from (with leaderboards attached).
        sandbox: the sandbox backend.
        timeout_s: per-run wall-clock limit.
        memory_mb: per-run memory limit.
    """

    def __init__(
        self, suite: KaggleSuite, sandbox: Sandbox, *, timeout_s: float = 300.0, memory_mb: int = 4096
    ) -> None:
        self.suite = suite
        self.sandbox = sandbox
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb

    def __call__(self, case: FidelityCase) -> Outcome:
        """Execute and grade one case (no Python solution in the message: ``malformed``, nothing runs)."""
        competition = self.suite.get(case.competition_id)
        code = extract_code(case.solution)
        if code is None:
            return Outcome(status="malformed", detail="no Python solution in the message")
        result = self.sandbox.run(
            ExecutionRequest(
                code=code,
                inputs=competition.public_files(),
                timeout_s=self.timeout_s,
                memory_mb=self.memory_mb,
                env=_SINGLE_THREAD,
            )
        )
        return grade_execution(result, competition)


def reference_cases(
    suite: KaggleSuite,
    competition_ids: Sequence[str],
    sandbox: Sandbox | None,
    cache: ExecutionCache,
    *,
    ladder: RewardLadder,
    timeout_s: float = 300.0,
    memory_mb: int = 4096,
    names: Sequence[str] = (),
    progress: bool = True,
) -> tuple[list[FidelityCase], ExecutionStats]:
    """The reference population as cases, with their real outcomes put into ``cache``.

    A competition whose leaderboard is not built yet is built now through ``sandbox``: those reference
    runs are the real executions, and their graded outcomes (ranked on the new private leaderboard) are
    cached under the case key, so nothing runs twice. A leaderboard built earlier is *not* trusted for
    the outcomes: its record identifies the data, not the reference code, which may have changed since.
    References missing from the cache are then executed through ``sandbox`` like any solution.
    ``names`` restricts the population (empty: all).

    Raises:
        DataError: something must be executed but ``sandbox`` is ``None``.
    """
    from wmrl_envs.kaggle.references import build_leaderboard, load_leaderboard_record, reference_solutions

    cases: list[FidelityCase] = []
    executed = 0
    seconds = 0.0
    uncached: list[FidelityCase] = []
    for competition_id in competition_ids:
        unranked = suite.get(competition_id, with_leaderboard=False)
        record = load_leaderboard_record(competition_id, suite.leaderboard_cache(competition_id))
        stale = (
            record is None
            or record.fingerprint != _fingerprint(unranked)
            or not set(names) <= {entry.name for entry in record.entries}
        )
        built: dict[str, ReferenceEntry] = {}
        if stale:
            if sandbox is None:
                raise DataError(
                    f"{competition_id!r} has no built leaderboard and no sandbox was given to build it"
                )
            record = build_leaderboard(
                unranked,
                sandbox,
                cache_path=suite.leaderboard_cache(competition_id),
                timeout_s=timeout_s,
                memory_mb=memory_mb,
                names=list(names) or None,
                progress=progress,
            )
            built = {entry.name: entry for entry in record.entries}
            executed += len(record.entries)
            seconds += sum(entry.wall_s for entry in record.entries)
        competition = suite.get(competition_id)
        context = competition.context()
        for solution in reference_solutions(competition):
            if names and solution.name not in names:
                continue
            case = FidelityCase(
                context=context,
                solution=solution.code,
                source="reference",
                label=solution.name,
                fingerprint=competition_fingerprint(competition),
            )
            cases.append(case)
            if cache.get(case.key) is not None:
                continue
            entry = built.get(solution.name)
            if entry is None:
                uncached.append(case)
                continue
            position = _position(competition, entry.score)
            cache.put(
                case.key,
                RealRecord(
                    status=entry.status,  # type: ignore[arg-type]
                    reward=ladder.reward(entry.status, position),  # type: ignore[arg-type]
                    position=position,
                    score=entry.score,
                    wall_s=entry.wall_s,
                ),
            )
    if uncached:
        if sandbox is None:
            raise DataError(
                f"{len(uncached)} reference runs are not cached and no sandbox was given to run them"
            )
        executor = SandboxExecutor(suite, sandbox, timeout_s=timeout_s, memory_mb=memory_mb)
        _, stats = execute_cases(uncached, executor, cache, ladder=ladder, progress=progress)
        executed += stats.n_executed
        seconds += stats.execution_s
    records = [cache.get(case.key) for case in cases]
    return cases, ExecutionStats(
        n_cases=len(cases),
        n_executed=executed,
        n_cached=len(cases) - executed,
        execution_s=seconds,
        sandbox_s=sum(record.wall_s for record in records if record is not None),
    )


def rollout_cases(suite: KaggleSuite, path: Path) -> list[FidelityCase]:
    """Cases from a JSONL file of ``{"competition": id, "solution": text}`` lines.

    Raises:
        DataError: a line is not such an object, or names an unknown competition.
    """
    cases: list[FidelityCase] = []
    contexts: dict[str, KaggleContext] = {}
    fingerprints: dict[str, str] = {}
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            competition_id, solution = str(entry["competition"]), str(entry["solution"])
        except (ValueError, KeyError, TypeError) as exc:
            raise DataError(
                f"{path}:{number}: expected a JSON object with 'competition' and 'solution' ({exc!r})"
            ) from exc
        if competition_id not in suite:
            raise DataError(
                f"{path}:{number}: unknown competition {competition_id!r}; choose from {suite.ids()}"
            )
        if competition_id not in contexts:
            competition = suite.get(competition_id)
            contexts[competition_id] = competition.context()
            fingerprints[competition_id] = competition_fingerprint(competition)
        cases.append(
            FidelityCase(
                context=contexts[competition_id],
                solution=solution,
                source="rollout",
                fingerprint=fingerprints[competition_id],
                label=str(entry.get("label", "")),
            )
        )
    return cases


def make_world_model(name: str, args: FidelityArgs) -> WorldModel:
    """Build the world model ``name`` with ``args``' embedder, LLM model, server and generation budget.

    The builder is :func:`wmrl_adapters.train.world_models.build_world_model`, the trainer's, so a spec
    measured here is the world model ``wmrl train --world-model`` trains with.

    Raises:
        ConfigError: unknown name (the message lists the valid ones).
        MissingDependencyError: the model's optional dependency is missing.
    """
    return build_world_model(args.spec(name))


def run_fidelity(args: FidelityArgs) -> FidelityReport:
    """Build the corpus, execute what is not cached, evaluate every world model, write table and plots."""
    from wmrl_envs.sandbox import make_sandbox

    ladder = RewardLadder()
    suite = load_suite(progress=args.progress)
    competition_ids = list(args.competitions) or suite.ids(args.split)
    missing = [competition_id for competition_id in competition_ids if competition_id not in suite]
    if missing:
        raise ConfigError(f"unknown competitions {missing}; choose from {suite.ids()}")
    cache_path = args.cache if args.cache is not None else _default_cache()
    cache = ExecutionCache(cache_path)
    sandbox = make_sandbox(args.sandbox, strict=args.strict_sandbox)
    try:
        cases: list[FidelityCase] = []
        executed, cached, seconds = 0, 0, 0.0
        if args.references:
            reference, stats = reference_cases(
                suite,
                competition_ids,
                sandbox,
                cache,
                ladder=ladder,
                timeout_s=args.timeout_s,
                memory_mb=args.memory_mb,
                names=args.reference_names,
                progress=args.progress,
            )
            cases += reference
            executed, cached, seconds = stats.n_executed, stats.n_cached, stats.execution_s
        if args.rollouts is not None:
            rollouts = [
                case
                for case in rollout_cases(suite, args.rollouts)
                if not args.competitions or case.competition_id in competition_ids
            ]
            executor = SandboxExecutor(suite, sandbox, timeout_s=args.timeout_s, memory_mb=args.memory_mb)
            _, stats = execute_cases(rollouts, executor, cache, ladder=ladder, progress=args.progress)
            cases += rollouts
            executed, cached, seconds = (
                executed + stats.n_executed,
                cached + stats.n_cached,
                seconds + stats.execution_s,
            )
    finally:
        sandbox.close()
    records = [cache.get(case.key) for case in cases]
    real = [record for record in records if record is not None]
    execution = ExecutionStats(
        n_cases=len(cases),
        n_executed=executed,
        n_cached=cached,
        execution_s=seconds,
        sandbox_s=sum(record.wall_s for record in real),
    )

    results: list[FidelityResult] = []
    for name in args.world_models:
        model = make_world_model(name, args)
        subset: Sequence[int] = range(len(cases))
        if name.startswith("llm") and args.llm_max_cases:
            subset = _subset(cases, args.llm_max_cases, args.seed)
        results.append(
            evaluate_world_model(
                model,
                [cases[index] for index in subset],
                [real[index] for index in subset],
                execution_stats=execution,
                batch_size=args.batch_size,
                seed=args.seed,
                progress=args.progress,
            )
        )

    output = Path(args.output_dir)
    files = {
        "table": output / "fidelity.md",
        "csv": output / "fidelity.csv",
        "reliability": output / "reliability.png",
        "calibration": output / "calibration.png",
    }
    table = write_table(results, files["table"], files["csv"])
    plot_reliability(results, files["reliability"])
    plot_calibration(results, files["calibration"], seed=args.seed)
    agreements = tuple(
        within_group_agreement(result.competition_ids, result.calibrated, result.real) for result in results
    )
    effects = tuple(_expected_effect(agreement, args.anchor_fraction) for agreement in agreements)
    files["expected_effect"] = _write_effects(results, agreements, effects, output / "expected_effect.json")
    sources: dict[str, int] = {}
    for case in cases:
        sources[case.source] = sources.get(case.source, 0) + 1
    return FidelityReport(tuple(results), execution, sources, table, files, agreements, effects)


def _expected_effect(agreement: WithinGroupAgreement | None, anchor_fraction: float) -> ExpectedEffect | None:
    if agreement is None:
        return None
    return ExpectedEffect(
        correlation=agreement.correlation,
        anchor_fraction=anchor_fraction,
        correlation_se=agreement.correlation_se,
        n_groups=agreement.n_groups,
    )


def _write_effects(
    results: Sequence[FidelityResult],
    agreements: Sequence[WithinGroupAgreement | None],
    effects: Sequence[ExpectedEffect | None],
    path: Path,
) -> Path:
    """Write ``expected_effect.json``: each world model's agreement and expected effect (null: unknown)."""
    entries = {
        result.name: {
            "agreement": dataclasses.asdict(agreement) if agreement is not None else None,
            "expected_effect": effect.as_dict(prefix="") if effect is not None else None,
            "summary": effect.summary() if effect is not None else None,
        }
        for result, agreement, effect in zip(results, agreements, effects, strict=True)
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


_ARGUMENT_HELP = {
    "world_models": (
        "comma-separated world models, as wmrl train --world-model spells them: "
        f"{', '.join(WORLD_MODEL_SPECS)} (older names {', '.join(WORLD_MODEL_ALIASES)} still work)"
    ),
    "competitions": "comma-separated competition ids (default: every competition of --split)",
    "split": "suite split when --competitions is not given: train, heldout or all",
    "reference_names": (
        f"comma-separated subset of the reference population (default: all {len(REFERENCE_NAMES)})"
    ),
    "rollouts": 'JSONL of {"competition": id, "solution": text} agent rollouts to execute and predict',
    "sandbox": "sandbox backend for real executions (local = bubblewrap, docker, unsafe)",
    "timeout_s": "per-execution wall-clock limit in seconds",
    "memory_mb": "per-execution memory limit in MB",
    "cache": "execution cache JSONL (default: ~/.cache/wmrl/fidelity/executions.jsonl)",
    "output_dir": "where the table and the plots are written",
    "embeddings": (
        f"{' or '.join(EMBEDDINGS)}: code embeddings for the learned world models whose spec does not "
        "say (the same as learned:embeddings=minilm)"
    ),
    "llm_max_cases": "cases the LLM world models see (whole tasks first; 0 = all)",
    "llm_max_new_tokens": (
        "deprecated: write the budget into the spec, e.g. llm:transformers,max_new_tokens=96 "
        "(default: the spec's budget)"
    ),
    "llm_model": "model folder for llm:transformers (default: offline SmolLM2-135M-Instruct)",
    "llm_base_url": "OpenAI-compatible server for llm-http, e.g. http://127.0.0.1:8000/v1",
    "batch_size": "queries per predict call",
    "seed": "seed of the calibration split and of subsets",
    "anchor_fraction": (
        "share of groups a training run executes for real; the expected effect is stated at it "
        f"(default: wmrl train's, {_TRAIN_ANCHOR_FRACTION})"
    ),
}


def parse_args(argv: Sequence[str] | None = None) -> FidelityArgs:
    """Build :class:`FidelityArgs` from ``wmrl fidelity`` options (lists are comma-separated).

    >>> parse_args(["--world-models", "rubric,learned", "--competitions", "titanic-survival"]).world_models
    ('rubric', 'learned')
    """
    import argparse

    defaults = FidelityArgs()
    from wmrl_adapters.cli import plain_help

    parser = argparse.ArgumentParser(prog="wmrl fidelity", description=plain_help(__doc__.split("\n\n")[0]))
    for name, help_text in _ARGUMENT_HELP.items():
        default = getattr(defaults, name)
        shown = ",".join(default) if isinstance(default, tuple) else default
        if "(default:" not in help_text and shown not in (None, ""):
            help_text = f"{help_text} (default: {shown})"
        parser.add_argument("--" + name.replace("_", "-"), default=None, help=help_text.replace("%", "%%"))
    parser.add_argument("--no-references", action="store_true", help="leave the reference population out")
    parser.add_argument("--no-strict-sandbox", action="store_true", help="let the sandbox degrade isolation")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    namespace = vars(parser.parse_args(argv))
    if namespace["llm_max_new_tokens"] is not None:
        print(
            "wmrl fidelity: --llm-max-new-tokens is deprecated; write the budget into the world model's "
            "spec instead, e.g. --world-models llm:transformers,max_new_tokens="
            f"{namespace['llm_max_new_tokens']}",
            file=sys.stderr,
        )
    values: dict[str, object] = {}
    for name, text in namespace.items():
        if text is None or name not in _ARGUMENT_HELP:
            continue
        default = getattr(defaults, name)
        if name == "world_models":
            values[name] = split_world_model_specs(text)
        elif isinstance(default, tuple):
            values[name] = tuple(item for item in text.split(",") if item)
        elif name in ("rollouts", "cache", "output_dir"):
            values[name] = Path(text)
        elif name in ("llm_model", "llm_base_url", "split", "sandbox", "embeddings"):
            values[name] = text
        elif isinstance(default, int) or name == "llm_max_new_tokens":
            values[name] = _number(name, text, int, default)
        elif isinstance(default, float):
            values[name] = _number(name, text, float, default)
    return FidelityArgs(
        **values,  # type: ignore[arg-type]
        references=not namespace["no_references"],
        strict_sandbox=not namespace["no_strict_sandbox"],
        progress=not namespace["quiet"],
    )


def _number(name: str, text: str, kind: type[int] | type[float], default: object) -> int | float:
    """``text`` as ``kind``, or a ConfigError naming the option (never a bare ValueError traceback)."""
    try:
        return kind(text)
    except ValueError as exc:
        option = "--" + name.replace("_", "-")
        wanted = "an integer" if kind is int else "a number"
        example = f" such as the default, {default}" if default is not None else ""
        raise ConfigError(f"{option} {text!r} is not {wanted}; pass {wanted}{example}") from exc


def main(argv: Sequence[str] | None = None) -> int:
    """``wmrl fidelity``: run the harness, print the table, the expected effects and where files went."""
    report = run_fidelity(parse_args(argv))
    print(report.table)
    for line in report.effect_lines():
        print(line)
    print()
    for role, path in report.files.items():
        print(f"{role}: {path}")
    return 0


def _default_cache() -> Path:
    root = Path(os.environ.get("WMRL_DATA_DIR", Path.home() / ".cache" / "wmrl"))
    return root / "fidelity" / "executions.jsonl"


def _fingerprint(competition: Competition) -> str:
    from wmrl_envs.kaggle.references import data_fingerprint

    return data_fingerprint(competition)


def _position(competition: Competition, score: float | None) -> float | None:
    if score is None or competition.leaderboard is None:
        return None
    return float(competition.leaderboard.position(score))


def _subset(cases: Sequence[FidelityCase], limit: int, seed: int) -> list[int]:
    """Whole tasks in a seeded order until ``limit`` cases (so within-task ranks stay computable)."""
    import numpy as np

    tasks = sorted({case.competition_id for case in cases})
    order = [tasks[index] for index in np.random.default_rng(seed).permutation(len(tasks))]
    chosen: list[int] = []
    for task in order:
        members = [index for index, case in enumerate(cases) if case.competition_id == task]
        if chosen and len(chosen) + len(members) > limit:
            break
        chosen += members[: max(0, limit - len(chosen))]
    return sorted(chosen)
