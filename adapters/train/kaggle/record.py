"""``wmrl record``: execute every design of a list on every competition once, for real, into a replay table.

Why: a powered comparison of many methods over many paired seeds cannot execute every trajectory live on
a small machine, and the design agent's space is small enough to tabulate. This command executes each
design (:class:`~wmrl_envs.kaggle.design.Design`) of a preset or a file on every competition of the
suite in the sandbox, and writes a :class:`~wmrl_envs.kaggle.replay.ReplayTable` that
:class:`~wmrl_envs.kaggle.replay.ReplayKaggleEnv` serves. Replay is a benchmark device; ``wmrl train``
executes live.

* Deterministic: the rendered scripts are seeded and single-threaded, and the table records the exact
  script (its digest), the competition's content fingerprint, the grading code and the limits.
* Resumable: the table is written atomically after every execution; ``--resume`` skips what is
  recorded and refuses a table recorded under another fingerprint, grading code, design list or limits
  (:class:`~wmrl_algos.errors.ReplayMismatchError`).
* Infrastructure failures are never outcomes: a ``sandbox_error`` or a timeout is executed once more
  (:func:`~wmrl_envs.kaggle.replay.execute_for_table`); one that is still unknown, or a timeout the
  overloaded host starved of CPU (:func:`~wmrl_envs.kaggle.replay.is_recordable`), is reported and left
  missing, so a later ``--resume`` retries it.
* ``--check N`` re-executes a seeded random sample of N recorded entries live and writes the agreement
  (same status, score within :data:`SCORE_TOLERANCE`) to a markdown report.

Example:
    ``nice -n 10 wmrl record --designs suite --out benchmarks/results/replay/suite_table.json --workers 2``
    then ``wmrl record --resume --check 12 --out benchmarks/results/replay/suite_table.json``.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wmrl_algos.errors import ConfigError, ReplayMismatchError
from wmrl_envs.kaggle.design import Design, render_design
from wmrl_envs.kaggle.env import KaggleEnv
from wmrl_envs.kaggle.fingerprint import competition_fingerprint
from wmrl_envs.kaggle.outcome import Outcome
from wmrl_envs.kaggle.replay import (
    RecordedOutcome,
    RecordingSettings,
    ReplayTable,
    code_digest,
    execute_for_table,
    is_recordable,
)
from wmrl_envs.kaggle.suite import KaggleSuite, load_suite
from wmrl_envs.sandbox import make_sandbox
from wmrl_envs.sandbox.base import Sandbox

__all__ = [
    "DESIGN_PRESETS",
    "SCORE_TOLERANCE",
    "SUITE_DESIGNS",
    "CheckRow",
    "RecordArgs",
    "check_table",
    "load_designs",
    "main",
    "record_table",
    "write_check",
]

SUITE_DESIGNS: tuple[Design, ...] = (
    Design(model="linear", scale="standard", categorical="onehot", text="tfidf"),
    Design(model="knn", scale="quantile", categorical="onehot", capacity="medium"),
    Design(model="svm", scale="standard", categorical="onehot"),
    Design(model="tree", categorical="ordinal", capacity="medium"),
    Design(model="random_forest", categorical="ordinal", capacity="large", rate="medium"),
    Design(model="extra_trees", categorical="onehot", capacity="large", rate="medium"),
    Design(model="hist_gbm", categorical="ordinal", capacity="medium", rate="medium", validation="holdout",
           target="log1p"),
    Design(model="sklearn_gbm", categorical="ordinal", capacity="medium", rate="medium"),
    Design(model="lightgbm", categorical="ordinal", capacity="large", rate="low", validation="holdout",
           target="log1p", text="tfidf"),
    Design(model="lightgbm", categorical="onehot", capacity="medium", rate="medium", text="tfidf"),
    Design(model="knn"),
    Design(model="tree"),
    Design(model="linear", categorical="ordinal", rate="low"),
    Design(model="random_forest", categorical="ordinal", capacity="small"),
    Design(model="hist_gbm", categorical="ordinal", capacity="large", rate="low", validation="holdout",
           target="log1p"),
    Design(model="lightgbm", categorical="ordinal", capacity="small", rate="high"),
)
"""The ``suite`` preset, in a fixed order: the ten designs of ``benchmarks/design_sweep.py`` (they hold
every task's best design of that sweep), two weak ones (kNN and a decision tree at the defaults), and
four that move one family along capacity or regularisation (a strongly regularised linear model, a small
forest, a large slow histogram boosting, a small fast LightGBM). 16 designs x 16 competitions = 256
executions: 32 min wall, 1020 sandbox CPU-s, on two cores at a load of 14-18 (``docs/replay.md``)."""
DESIGN_PRESETS: dict[str, tuple[Design, ...]] = {"suite": SUITE_DESIGNS}
"""Preset name -> design list, for ``--designs``."""
SCORE_TOLERANCE = 1e-6
"""``--check``: a live score agrees with the recorded one when they differ by at most this much (the
scripts are seeded and single-threaded, so a difference is a bug, not noise)."""


@dataclass(frozen=True)
class RecordArgs:
    """Settings of ``wmrl record``."""

    designs: str = field(default="suite", metadata={
        "help": "A preset (suite: the design sweep's 10 designs + 6 weaker or varied ones) or a JSON file "
                "holding a list of design objects (missing decisions take Design's defaults)."})
    out: str = field(default="benchmarks/results/replay/suite_table.json",
                     metadata={"help": "The replay table file (JSON), written after every execution."})
    competitions: str = field(default="", metadata={
        "help": "Comma-separated competition ids (default: all of the suite, train and held-out)."})
    sandbox: str = field(default="local", metadata={
        "help": "Sandbox: local (bubblewrap) or docker; unsafe is refused (its grades cannot be trusted)."})
    workers: int = field(default=2, metadata={"help": "Executions in parallel (at most the spare cores)."})
    warm: int = field(default=2, metadata={
        "help": "Warm sandbox workers kept ready (local only; 0 runs cold). Hides import latency, not CPU."})
    resume: bool = field(default=False, metadata={
        "help": "Continue a table: skip what it holds; refuse one recorded under other conditions."})
    check: int = field(default=0, metadata={
        "help": "After recording, re-execute this many random recorded entries live and report agreement."})
    check_out: str = field(default="", metadata={
        "help": "Where --check writes its markdown report (default: check.md beside the table)."})
    seed: int = field(default=0, metadata={"help": "Seed of the --check sample."})
    timeout_s: float = field(default=300.0, metadata={
        "help": "Wall-clock limit of one execution; replay serves only tables with the same limit."})
    memory_mb: int = field(default=4096, metadata={"help": "Memory limit of one execution."})

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ConfigError(f"workers={self.workers}; use >= 1 parallel executions")
        if self.warm < 0:
            raise ConfigError(f"warm={self.warm}; use 0 (cold) or a number of warm workers")
        if self.check < 0:
            raise ConfigError(f"check={self.check}; use 0 (no check) or a number of entries to re-execute")
        if self.sandbox == "unsafe":
            raise ConfigError("sandbox='unsafe' runs solutions unisolated, so their recorded grades cannot "
                              "be trusted; use sandbox='local' (bubblewrap) or 'docker'")

    def settings(self) -> RecordingSettings:
        """The execution limits of the recording."""
        return RecordingSettings(timeout_s=float(self.timeout_s), memory_mb=int(self.memory_mb))


def load_designs(spec: str) -> tuple[Design, ...]:
    """The design list named by ``spec``: a preset of :data:`DESIGN_PRESETS`, or a JSON file of designs.

    Raises:
        ConfigError: neither a preset nor a readable list of valid designs.
    """
    if spec in DESIGN_PRESETS:
        return DESIGN_PRESETS[spec]
    path = Path(spec)
    if not path.is_file():
        raise ConfigError(f"--designs {spec!r} is neither a preset ({sorted(DESIGN_PRESETS)}) nor a file")
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise TypeError("expected a JSON list of objects")
        return tuple(Design(**item) for item in items)
    except (OSError, UnicodeDecodeError, ValueError, TypeError) as error:
        raise ConfigError(
            f"--designs {spec}: not a list of designs ({error}); write a JSON list of objects such as "
            '[{"model": "linear"}, {"model": "lightgbm", "validation": "holdout"}]'
        ) from error


def _open_table(args: RecordArgs, designs: tuple[Design, ...], suite: KaggleSuite) -> ReplayTable:
    out = Path(args.out)
    if not out.exists():
        return ReplayTable(designs, settings=args.settings())
    if not args.resume:
        raise ConfigError(f"{out} exists; pass --resume to continue it, or choose another --out")
    table = ReplayTable.load(out, suite, designs=designs)
    if table.settings != args.settings():
        raise ReplayMismatchError(f"{out}: limits differ: recorded with {table.settings}, asked for "
                                  f"{args.settings()}; pass the recorded limits or record a new table")
    return table


def _make_sandbox(args: RecordArgs) -> Sandbox:
    if args.sandbox == "local" and args.warm:
        return make_sandbox("local", warm=args.warm)
    return make_sandbox(args.sandbox)


def _execute(
    suite: KaggleSuite, sandbox: Sandbox, settings: RecordingSettings, competition_id: str, design: Design
) -> tuple[str, Outcome]:
    """``(script, outcome)`` of one live execution of ``design`` on ``competition_id`` (retried once)."""
    env = KaggleEnv(suite=suite, split="all", sandbox=sandbox, max_turns=1, timeout_s=settings.timeout_s,
                    memory_mb=settings.memory_mb, max_submission_mb=settings.max_submission_mb)
    env.reset(options={"competition": competition_id})
    code = render_design(design, env.competition)  # type: ignore[arg-type]
    return code, execute_for_table(lambda: env.execute_solution(code))


def _bar(total: int, description: str) -> Any:
    """A tqdm progress bar on stderr (tqdm is imported only when something runs)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=description, unit="run", dynamic_ncols=True)


def record_table(args: RecordArgs, suite: KaggleSuite | None = None) -> tuple[ReplayTable, list[str]]:
    """Execute every missing ``(competition, design)`` of ``args`` and write the table after each one.

    Returns:
        ``(table, failures)``: the table (saved at ``args.out``) and one line per entry that failed in the
        infrastructure twice (or timed out starved of CPU) and was left missing.

    Raises:
        ConfigError: a bad argument, an existing table without ``--resume``, an unknown competition.
        ReplayMismatchError: ``--resume`` on a table recorded under other conditions.
    """
    suite = suite or load_suite()
    designs = load_designs(args.designs)
    ids = [cid for cid in args.competitions.split(",") if cid] or suite.ids()
    unknown = [cid for cid in ids if cid not in suite]
    if unknown:
        raise ConfigError(f"unknown competitions {unknown}; choose from {suite.ids()}")
    table = _open_table(args, designs, suite)
    jobs = table.missing(ids)  # competition by competition: a warm worker's inputs match the next job
    out = Path(args.out)
    table.save(out)
    failures: list[str] = []
    save_lock = threading.Lock()
    sandbox = _make_sandbox(args)
    started = time.perf_counter()
    cpu_total = 0.0

    def run(job: tuple[str, Design]) -> tuple[str, Design, Outcome]:
        cid, design = job
        code, outcome = _execute(suite, sandbox, table.settings, cid, design)
        if not is_recordable(outcome, table.settings):
            return cid, design, outcome
        table.add(cid, competition_fingerprint(suite.get(cid)), design, code_digest(code),
                  RecordedOutcome.from_outcome(outcome))
        with save_lock:
            table.save(out)
        return cid, design, outcome

    try:
        with concurrent.futures.ThreadPoolExecutor(args.workers) as pool, \
                _bar(len(jobs), f"recording {len(jobs)} executions") as bar:
            for future in concurrent.futures.as_completed([pool.submit(run, job) for job in jobs]):
                cid, design, outcome = future.result()
                if not is_recordable(outcome, table.settings):
                    failures.append(f"{cid} {design.short()}: {outcome.status}: {outcome.detail}")
                else:
                    cpu_total += float(outcome.extra.get("cpu_s", 0.0))
                bar.set_postfix_str(f"{cid} {design.model}: {outcome.status}", refresh=False)
                bar.update()
    finally:
        sandbox.close()
    wall_s = time.perf_counter() - started
    print(f"recorded {len(jobs) - len(failures)} of {len(jobs)} executions in {wall_s:.0f} s wall "
          f"({cpu_total:.0f} sandbox CPU-s, {args.workers} workers); the table holds {len(table)} entries "
          f"over {len(table.competitions())} competitions: {out}")
    return table, failures


@dataclass(frozen=True)
class CheckRow:
    """One re-executed entry of ``--check``: the recorded and the live outcome, and whether they agree."""

    competition_id: str
    design: Design
    recorded: Outcome
    live: Outcome
    recorded_cpu_s: float
    live_known: bool = True

    @property
    def score_difference(self) -> float | None:
        """``|live - recorded|`` of the private score; ``None`` when either has no score."""
        if self.recorded.score is None or self.live.score is None:
            return None
        return abs(float(self.live.score) - float(self.recorded.score))

    @property
    def agrees(self) -> bool | None:
        """Same status and (when scored) scores within :data:`SCORE_TOLERANCE`; ``None`` when the live run
        failed in the infrastructure or timed out starved of CPU (unknown, not a disagreement)."""
        if not self.live_known:
            return None
        if self.live.status != self.recorded.status:
            return False
        difference = self.score_difference
        return (self.recorded.score is None) == (self.live.score is None) and (
            difference is None or difference <= SCORE_TOLERANCE)


def check_table(table: ReplayTable, args: RecordArgs, suite: KaggleSuite | None = None) -> list[CheckRow]:
    """Re-execute a seeded random sample of ``args.check`` recorded entries live, one at a time per worker."""
    suite = suite or load_suite()
    recorded = [(cid, design) for cid in table.competitions() for design in table.designs
                if (cid, design) in table]
    sample = random.Random(args.seed).sample(recorded, min(args.check, len(recorded)))
    sandbox = _make_sandbox(dataclasses.replace(args, warm=0))

    def run(job: tuple[str, Design]) -> CheckRow:
        cid, design = job
        live = _execute(suite, sandbox, table.settings, cid, design)[1]
        entry = table.record(cid, design)
        return CheckRow(cid, design, entry.outcome, live, entry.cpu_s, is_recordable(live, table.settings))

    try:
        with concurrent.futures.ThreadPoolExecutor(args.workers) as pool, \
                _bar(len(sample), f"checking {len(sample)} entries live") as bar:
            rows = []
            for row in pool.map(run, sample):
                rows.append(row)
                bar.update()
    finally:
        sandbox.close()
    return rows


def _score(outcome: Outcome) -> str:
    return "-" if outcome.score is None else f"{outcome.score:.6g}"


def write_check(rows: Sequence[CheckRow], path: Path, table_path: Path) -> Path:
    """Write the ``--check`` report: one row per re-executed entry, then the agreement."""
    lines = [
        f"# Live re-execution of {len(rows)} random entries of `{table_path.name}`",
        "",
        f"Agreement: the same status, and private scores within {SCORE_TOLERANCE:g} (absolute). A live run "
        "that failed in the infrastructure (or timed out starved of CPU) is unknown, not a disagreement.",
        "",
        "| competition | design | recorded | live | score diff. | recorded CPU-s | live CPU-s | agrees |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        difference = row.score_difference
        live_cpu = row.live.extra.get("cpu_s")
        lines.append(
            f"| {row.competition_id} | {row.design.short()} | {row.recorded.status} {_score(row.recorded)} "
            f"| {row.live.status} {_score(row.live)} | {'-' if difference is None else f'{difference:.2g}'} "
            f"| {row.recorded_cpu_s:.2f} | {'-' if live_cpu is None else f'{live_cpu:.2f}'} "
            f"| {'unknown' if row.agrees is None else 'yes' if row.agrees else 'NO'} |"
        )
    known = [row for row in rows if row.agrees is not None]
    agreeing = sum(bool(row.agrees) for row in known)
    differences = [d for d in (row.score_difference for row in known) if d is not None]
    ratios = [row.live.extra["cpu_s"] / row.recorded_cpu_s for row in known
              if row.recorded_cpu_s > 0 and "cpu_s" in row.live.extra]
    lines += [
        "",
        f"**{agreeing}/{len(known)} agree** ({len(rows) - len(known)} unknown); largest score difference "
        f"{max(differences, default=0.0):.2g}; live/recorded CPU-s ratio "
        + (f"{min(ratios):.2f}-{max(ratios):.2f} (median {sorted(ratios)[len(ratios) // 2]:.2f})."
           if ratios else "-."),
        "CPU-seconds are measured, not replayed exactly: they vary with the machine's load; a replay "
        "charges the recorded ones.",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Record a replay table of real executions (see ``wmrl record --help``).

    Exit status 0 when every entry is recorded and the check (if any) agrees; 1 when an entry failed in
    the infrastructure twice (left missing: run again with ``--resume``) or a checked entry disagreed.
    """
    from wmrl_adapters.cli import parse_dataclass_args

    args = parse_dataclass_args(RecordArgs, argv, (__doc__ or "").split("\n\n")[0], prog="wmrl record")
    suite = load_suite()
    table, failures = record_table(args, suite)
    for line in failures:
        print(f"left missing (unknown or starved twice; run again with --resume): {line}")
    status = 1 if failures else 0
    if args.check:
        rows = check_table(table, args, suite)
        out = Path(args.out)
        report = write_check(rows, Path(args.check_out) if args.check_out else out.parent / "check.md", out)
        print(report.read_text())
        status = max(status, int(any(row.agrees is False for row in rows)))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
