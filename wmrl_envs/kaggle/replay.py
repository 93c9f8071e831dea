"""Record once, replay many: real, graded executions of a fixed design list, and an env that serves them.

Why: the executions are what WMRL saves, so a comparison of ten methods over twenty paired seeds cannot
execute every trajectory live on a small machine. ``wmrl record`` executes every design of a stated list
(:class:`~wmrl_envs.kaggle.design.Design`) on every competition of the suite once, for real, in the
sandbox; :class:`ReplayKaggleEnv` then serves those outcomes, charges the recorded sandbox CPU-seconds,
and says in ``info["replayed"]`` that it replayed. Replay is a benchmark device: live execution stays
the default of ``wmrl train``.

Why the table is keyed and checked so strictly: a recorded outcome is only the right grade for the same
solution code, on the same competition *content*, graded by the same code. The table stores the suite
version (:data:`~wmrl_envs.kaggle.suite.SUITE_VERSION`), the grading-code version
(:func:`~wmrl_envs.kaggle.fingerprint.grading_code_version`), each competition's content fingerprint
(:func:`~wmrl_envs.kaggle.fingerprint.competition_fingerprint`), the design list in its fixed order, the
execution limits it was recorded under, and for every entry the SHA-256 of the exact script that ran.
:meth:`ReplayTable.load` and :class:`ReplayKaggleEnv` refuse any difference with
:class:`~wmrl_algos.errors.ReplayMismatchError` naming the competition and what differs, never a silent
wrong grade; an entry that is not in the table is a :class:`~wmrl_algos.errors.ReplayMiss`.

The policy is an adversary here too: the env serves a recorded outcome only for a script that is,
byte for byte, the recorded rendering of a design of the table (a ``# wmrl-design`` header on other code
is a miss), and it judges the action with :func:`~wmrl_envs.kaggle.env.parse_action` before it looks at
the table, exactly as :class:`~wmrl_envs.kaggle.env.KaggleEnv` does.

Infrastructure failures are never in a finished table: the recorder retries an unknown outcome or a
timeout once (:func:`execute_for_table`) and records it only if :func:`is_recordable`: never a
``sandbox_error``, and a timeout only when the solution itself used the time (its CPU-seconds reach
:data:`STARVED_CPU_SHARE` of the limit; a timeout on a starved, overloaded host measures the host).
The rest is left missing for a later ``--resume``. Log tails are kept to their last
:data:`TAIL_CHARS` characters, so a table of a few hundred entries stays well under a megabyte.

Format (one JSON file, ``"format": "wmrl-replay/1"``)::

    {"format": "wmrl-replay/1", "suite_version": "v1", "grading_code_version": "<64 hex>",
     "settings": {"timeout_s": 300.0, "memory_mb": 4096, "max_submission_mb": 32},
     "designs": [{"model": "linear", ...}, ...],
     "competitions": {"<id>": {"fingerprint": "<64 hex>",
                               "records": {"<design index>": {"code_sha256": "...", "cpu_s": 1.9,
                                                               "wall_s": 2.4, "outcome": {...}}}}}}

Example:
    >>> from wmrl_envs.kaggle.design import Design
    >>> from wmrl_envs.kaggle.outcome import Outcome
    >>> table = ReplayTable([Design(model="linear"), Design(model="knn")])
    >>> table.add("toy", "f" * 64, Design(model="knn"), "c" * 64,
    ...           RecordedOutcome(Outcome(status="valid", score=0.8, position=0.5), cpu_s=2.0, wall_s=2.5))
    >>> table.position("toy", Design(model="knn")), table.cpu_s("toy", Design(model="knn"))
    (0.5, 2.0)
    >>> table.competitions()
    ['toy']
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeGuard, get_args

from wmrl_algos.errors import ConfigError, DataError, ReplayMismatchError, ReplayMiss, SandboxError
from wmrl_envs.kaggle.competition import Competition
from wmrl_envs.kaggle.design import Design, parse_design, render_design
from wmrl_envs.kaggle.env import KaggleEnv
from wmrl_envs.kaggle.fingerprint import competition_fingerprint, grading_code_version
from wmrl_envs.kaggle.outcome import UNCACHED_STATUSES, ExecutionStatus, Outcome
from wmrl_envs.kaggle.suite import SUITE_VERSION, KaggleSuite
from wmrl_envs.sandbox.base import ExecutionRequest, ExecutionResult

__all__ = [
    "REPLAY_FORMAT",
    "TAIL_CHARS",
    "MissPolicy",
    "STARVED_CPU_SHARE",
    "RecordedOutcome",
    "RecordingSettings",
    "ReplayKaggleEnv",
    "ReplayTable",
    "code_digest",
    "execute_for_table",
    "is_recordable",
]

REPLAY_FORMAT = "wmrl-replay/1"
"""The ``"format"`` of a replay table file; bump it when what a table holds changes."""
TAIL_CHARS = 1000
"""Characters kept of each log tail (stdout, stderr, traceback) of a recorded outcome."""
STARVED_CPU_SHARE = 0.5
"""A timeout is recorded only when its CPU-seconds reach this share of the wall-clock limit."""
MissPolicy = Literal["raise", "execute"]
"""What :class:`ReplayKaggleEnv` does with a solution the table does not hold: raise
:class:`~wmrl_algos.errors.ReplayMiss`, or execute it live (and add it to the table when it is a design
of the table)."""
_STATUSES = frozenset(get_args(ExecutionStatus))
_OUTCOME_FIELDS = frozenset(f.name for f in dataclasses.fields(Outcome)) - {"wall_s"}


def code_digest(code: str) -> str:
    """SHA-256 (hex) of a solution script: what a table entry says was executed.

    >>> len(code_digest("print(1)\\n"))
    64
    """
    return hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class RecordingSettings:
    """The execution limits a table was recorded under (they decide outcomes, so replay must match them).

    Example:
        >>> RecordingSettings().timeout_s
        300.0

    Attributes:
        timeout_s: wall-clock limit of one execution, seconds.
        memory_mb: memory limit of one execution.
        max_submission_mb: size cap on the graded submission file.
    """

    timeout_s: float = 300.0
    memory_mb: int = 4096
    max_submission_mb: int = 32

    @classmethod
    def of(cls, env: KaggleEnv) -> RecordingSettings:
        """The settings ``env`` executes under."""
        config = env.config
        return cls(timeout_s=float(config.timeout_s), memory_mb=int(config.memory_mb),
                   max_submission_mb=int(config.max_submission_mb))


@dataclass(frozen=True)
class RecordedOutcome:
    """One recorded execution: the graded outcome and its measured cost.

    Example:
        >>> RecordedOutcome(Outcome(status="runtime_error", exit_code=1), cpu_s=1.2, wall_s=1.5).cpu_s
        1.2

    Attributes:
        outcome: the graded :class:`~wmrl_envs.kaggle.outcome.Outcome` (status, score, position, medal,
            above_median, log tails cut to :data:`TAIL_CHARS`, exit code); never ``sandbox_error``.
        cpu_s: the sandbox CPU-seconds the execution measured (what a replay charges).
        wall_s: its wall-clock seconds.
    """

    outcome: Outcome
    cpu_s: float
    wall_s: float

    def __post_init__(self) -> None:
        if self.outcome.status == "sandbox_error":
            raise DataError("a sandbox_error outcome is unknown and is never recorded; execute it again")
        for name in ("cpu_s", "wall_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise DataError(f"recorded {name}={value!r}; it must be a finite number of seconds >= 0")

    @classmethod
    def from_outcome(cls, outcome: Outcome) -> RecordedOutcome:
        """The record of a live outcome: its tails cut to :data:`TAIL_CHARS`, its measured CPU and wall time.

        Raises:
            DataError: the outcome is ``sandbox_error`` (unknown), or it measured no CPU time.
        """
        cpu_s = outcome.extra.get("cpu_s")
        if cpu_s is None and outcome.status != "malformed":
            raise DataError(
                f"the {outcome.status} outcome measured no CPU time, so a replay could not charge it"
            )
        trimmed = dataclasses.replace(
            outcome,
            stdout_tail=outcome.stdout_tail[-TAIL_CHARS:],
            stderr_tail=outcome.stderr_tail[-TAIL_CHARS:],
            traceback=outcome.traceback[-TAIL_CHARS:],
            extra={key: float(value) for key, value in outcome.extra.items()
                   if key not in ("cpu_s", "replayed")},
        )
        return cls(trimmed, cpu_s=float(cpu_s or 0.0), wall_s=float(outcome.wall_s))

    def served(self) -> Outcome:
        """The outcome a replay serves: ``extra["cpu_s"]`` is the recorded CPU-s, ``extra["replayed"]`` 1."""
        return dataclasses.replace(
            self.outcome, wall_s=self.wall_s,
            extra={**self.outcome.extra, "cpu_s": self.cpu_s, "replayed": 1.0},
        )

    def to_json(self, code_sha256: str) -> dict[str, Any]:
        """The JSON entry of this record for the script with digest ``code_sha256``."""
        outcome = dataclasses.asdict(self.outcome)
        del outcome["wall_s"]
        return {"code_sha256": code_sha256, "cpu_s": self.cpu_s, "wall_s": self.wall_s, "outcome": outcome}

    @classmethod
    def from_json(cls, data: object, where: str) -> tuple[RecordedOutcome, str]:
        """``(record, code digest)`` from a JSON entry; ``where`` names it in errors.

        Raises:
            DataError: the entry is malformed.
        """
        entry = _mapping(data, where)
        outcome = _mapping(entry.get("outcome"), f"{where}.outcome")
        if set(outcome) != _OUTCOME_FIELDS:
            raise DataError(
                f"{where}.outcome has fields {sorted(outcome)}; expected {sorted(_OUTCOME_FIELDS)}"
            )
        if outcome["status"] not in _STATUSES:
            raise DataError(
                f"{where}.outcome.status={outcome['status']!r}; expected one of {sorted(_STATUSES)}"
            )
        for name in ("score", "public_score", "position"):
            if outcome[name] is not None and not _is_number(outcome[name]):
                raise DataError(f"{where}.outcome.{name}={outcome[name]!r}; expected a number or null")
        for name in ("stdout_tail", "stderr_tail", "traceback", "detail", "backend"):
            if not isinstance(outcome[name], str):
                raise DataError(f"{where}.outcome.{name} is a {type(outcome[name]).__name__}; expected text")
        extra = _mapping(outcome["extra"], f"{where}.outcome.extra")
        if not all(_is_number(value) for value in extra.values()):
            raise DataError(f"{where}.outcome.extra={extra!r}; expected numbers only")
        if outcome["exit_code"] is not None and type(outcome["exit_code"]) is not int:
            raise DataError(
                f"{where}.outcome.exit_code={outcome['exit_code']!r}; expected an integer or null"
            )
        if outcome["medal"] not in (None, "gold", "silver", "bronze"):
            raise DataError(
                f"{where}.outcome.medal={outcome['medal']!r}; expected gold, silver, bronze or null"
            )
        if outcome["above_median"] not in (None, True, False):
            raise DataError(
                f"{where}.outcome.above_median={outcome['above_median']!r}; expected a boolean or null"
            )
        digest = entry.get("code_sha256")
        if not _is_digest(digest):
            raise DataError(f"{where}.code_sha256={digest!r}; expected 64 hex digits")
        cpu_s, wall_s = entry.get("cpu_s"), entry.get("wall_s")
        if not (_is_number(cpu_s) and _is_number(wall_s)):
            raise DataError(f"{where}: cpu_s={cpu_s!r}, wall_s={wall_s!r}; expected numbers of seconds")
        fields = {**outcome, "extra": {k: float(v) for k, v in extra.items()}, "wall_s": float(wall_s)}
        record = cls(Outcome(**fields), cpu_s=float(cpu_s), wall_s=float(wall_s))
        return record, str(digest)


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_digest(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _mapping(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DataError(f"{where} is a {type(value).__name__}; expected a JSON object (the table is corrupt)")
    return value


@dataclass
class _CompetitionRecords:
    fingerprint: str
    records: dict[int, tuple[RecordedOutcome, str]]


class ReplayTable:
    """Recorded outcomes of a fixed design list on a set of competitions, with what they were graded under.

    Frozen-ish: the design list, versions and settings are fixed at construction; entries are only ever
    added (:meth:`add`, thread-safe), never changed.

    Args:
        designs: the design list, in its fixed order (no duplicates).
        settings: the execution limits the entries were recorded under.
        suite_version: the suite version the entries were recorded on.
        grading_code: the grading-code version they were graded by (default: this code's).

    Raises:
        ConfigError: an empty design list or a duplicate design.

    Example:
        >>> table = ReplayTable([Design(model="tree")])
        >>> table.record("toy", Design(model="tree"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        wmrl_algos.errors.ReplayMiss: the replay table has no competition 'toy' (it holds []); ...
    """

    def __init__(
        self,
        designs: Sequence[Design],
        *,
        settings: RecordingSettings | None = None,
        suite_version: str = SUITE_VERSION,
        grading_code: str | None = None,
    ) -> None:
        self.designs: tuple[Design, ...] = tuple(designs)
        if not self.designs:
            raise ConfigError("a replay table needs at least one design; pass the design list to record")
        self._index = {design: index for index, design in enumerate(self.designs)}
        if len(self._index) != len(self.designs):
            duplicate = next(d for d in self.designs if self.designs.count(d) > 1)
            raise ConfigError(f"design {duplicate.short()} appears twice in the design list; list each once")
        self.settings = settings or RecordingSettings()
        self.suite_version = suite_version
        self.grading_code = grading_code or grading_code_version()
        self._competitions: dict[str, _CompetitionRecords] = {}
        self._lock = threading.Lock()

    def competitions(self) -> list[str]:
        """The ids of the competitions the table holds entries for, sorted."""
        return sorted(self._competitions)

    def fingerprint(self, competition_id: str) -> str:
        """The content fingerprint ``competition_id`` was recorded with.

        Raises:
            ReplayMiss: the table holds no such competition.
        """
        return self._held(competition_id).fingerprint

    def __len__(self) -> int:
        """The number of recorded entries."""
        return sum(len(held.records) for held in self._competitions.values())

    def __contains__(self, key: object) -> bool:
        """Whether ``(competition_id, design)`` is recorded."""
        if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[1], Design)):
            return False
        held = self._competitions.get(key[0])
        index = self._index.get(key[1])
        return held is not None and index is not None and index in held.records

    def missing(self, competition_ids: Iterable[str]) -> list[tuple[str, Design]]:
        """Every ``(competition, design)`` of ``competition_ids`` × :attr:`designs` not recorded, in order."""
        return [(cid, design) for cid in competition_ids for design in self.designs
                if (cid, design) not in self]

    def index(self, design: Design) -> int:
        """The position of ``design`` in :attr:`designs`.

        Raises:
            ReplayMiss: the design is not in the list.
        """
        if design not in self._index:
            raise ReplayMiss(
                f"design {design.short()} is not in the replay table's design list of {len(self.designs)}; "
                "replay only designs of the list, or record a table for a list that holds it"
            )
        return self._index[design]

    def _held(self, competition_id: str) -> _CompetitionRecords:
        held = self._competitions.get(competition_id)
        if held is None:
            raise ReplayMiss(
                f"the replay table has no competition {competition_id!r} (it holds {self.competitions()}); "
                f"record it with: wmrl record --competitions {competition_id} --resume --out TABLE.json"
            )
        return held

    def _entry(self, competition_id: str, design: Design) -> tuple[RecordedOutcome, str]:
        held = self._held(competition_id)
        entry = held.records.get(self.index(design))
        if entry is None:
            raise ReplayMiss(
                f"the replay table has no entry for design {design.short()} on {competition_id!r} (its "
                "execution was never recorded, or failed in the infrastructure); record it with: wmrl record "
                "--resume"
            )
        return entry

    def record(self, competition_id: str, design: Design) -> RecordedOutcome:
        """The recorded outcome of ``design`` on ``competition_id``.

        Raises:
            ReplayMiss: the competition, the design or the entry is not in the table.
        """
        return self._entry(competition_id, design)[0]

    def code_sha256(self, competition_id: str, design: Design) -> str:
        """The digest of the script that was executed for the entry.

        Raises:
            ReplayMiss: the entry is not in the table.
        """
        return self._entry(competition_id, design)[1]

    def position(self, competition_id: str, design: Design) -> float:
        """The recorded leaderboard position score in [0, 1]; 0.0 for a failed solution.

        Raises:
            ReplayMiss: the entry is not in the table.
        """
        outcome = self.record(competition_id, design).outcome
        if outcome.status != "valid":
            return 0.0
        if outcome.position is None:
            raise DataError(f"the valid entry of {design.short()} on {competition_id!r} has no position; "
                            "record it again with a leaderboard")
        return float(outcome.position)

    def cpu_s(self, competition_id: str, design: Design) -> float:
        """The sandbox CPU-seconds the recorded execution measured.

        Raises:
            ReplayMiss: the entry is not in the table.
        """
        return self.record(competition_id, design).cpu_s

    def add(
        self,
        competition_id: str,
        fingerprint: str,
        design: Design,
        code_sha256: str,
        recorded: RecordedOutcome,
    ) -> None:
        """Add one entry (thread-safe); an entry already recorded is kept as it was.

        Raises:
            ReplayMiss: the design is not in the list.
            ReplayMismatchError: ``fingerprint`` differs from the one the competition was recorded with.
        """
        index = self.index(design)
        with self._lock:
            held = self._competitions.setdefault(competition_id, _CompetitionRecords(fingerprint, {}))
            if held.fingerprint != fingerprint:
                raise ReplayMismatchError(
                    f"competition {competition_id!r}: content differs (fingerprint {fingerprint[:12]}... "
                    f"against {held.fingerprint[:12]}... recorded); record it into a new table"
                )
            held.records.setdefault(index, (recorded, code_sha256))

    def to_json(self) -> dict[str, Any]:
        """The table as the JSON document :meth:`save` writes."""
        with self._lock:
            competitions = {
                cid: {
                    "fingerprint": held.fingerprint,
                    "records": {str(index): record.to_json(digest)
                                for index, (record, digest) in sorted(held.records.items())},
                }
                for cid, held in sorted(self._competitions.items())
            }
        return {
            "format": REPLAY_FORMAT,
            "suite_version": self.suite_version,
            "grading_code_version": self.grading_code,
            "settings": dataclasses.asdict(self.settings),
            "designs": [dataclasses.asdict(design) for design in self.designs],
            "competitions": competitions,
        }

    def save(self, path: Path | str) -> Path:
        """Write the table to ``path`` atomically (a crash leaves the old file or the new one, never half).

        Raises:
            DataError: the table holds a number JSON cannot carry.
        """
        path = Path(path)
        try:
            text = json.dumps(self.to_json(), indent=1, allow_nan=False) + "\n"
        except ValueError as error:
            raise DataError(
                f"the replay table holds a non-finite number ({error}); it cannot be saved"
            ) from error
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(text)
                stream.flush()
                os.fsync(stream.fileno())
            os.chmod(temporary, 0o644)  # mkstemp makes it private; a table is shared data
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return path

    @classmethod
    def load(
        cls, path: Path | str, suite: KaggleSuite | None = None, *, designs: Sequence[Design] | None = None
    ) -> ReplayTable:
        """Read a table and verify that it is the right grade for this code (and ``suite``, ``designs``).

        Always checked: the format, the suite version and the grading-code version. With ``suite``: every
        competition of the table is in it with the same content fingerprint, and every entry's script is
        the one this code renders for its design. With ``designs``: the table's design list is exactly it.

        Args:
            path: the table file.
            suite: the suite to replay on (``None`` skips the per-competition checks).
            designs: the design list the caller expects (``None`` accepts the table's).

        Raises:
            ReplayMismatchError: a check failed; the message names the competition and what differs.
            DataError: the file cannot be read or is not a replay table.
        """
        path = Path(path)
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise DataError(
                f"cannot read the replay table {path} ({error}); record it with: wmrl record"
            ) from error
        data = _mapping(document, str(path))
        table = cls._from_document(data, path)
        if designs is not None and tuple(designs) != table.designs:
            difference = _design_difference(table.designs, designs)
            raise ReplayMismatchError(
                f"{path}: design list differs: {difference}; record a table for this design list"
            )
        if suite is not None:
            table.verify(suite)
        return table

    @classmethod
    def _from_document(cls, data: dict[str, Any], path: Path) -> ReplayTable:
        if data.get("format") != REPLAY_FORMAT:
            raise ReplayMismatchError(f"{path}: format {data.get('format')!r} is not {REPLAY_FORMAT!r}; "
                                      "record the table again with this version of wmrl")
        if data.get("suite_version") != SUITE_VERSION:
            raise ReplayMismatchError(
                f"{path}: suite version differs: recorded on {data.get('suite_version')!r}, this suite is "
                f"{SUITE_VERSION!r}; record the table again"
            )
        current = grading_code_version()
        recorded = str(data.get("grading_code_version"))
        if recorded != current:
            raise ReplayMismatchError(
                f"{path}: grading code differs: recorded under {recorded[:12]}..., "
                f"this code is {current[:12]}...; record the table again (outcomes graded by other code are "
                "not reused)"
            )
        raw_designs = data.get("designs")
        if not isinstance(raw_designs, list):
            raise DataError(f"{path}: 'designs' is a {type(raw_designs).__name__}; expected a list")
        try:
            designs = [Design(**_mapping(item, f"{path}: designs[{i}]"))
                       for i, item in enumerate(raw_designs)]
            settings = RecordingSettings(**_mapping(data.get("settings"), f"{path}: settings"))
        except (TypeError, ConfigError) as error:
            raise DataError(f"{path}: a design or the settings are malformed ({error})") from error
        table = cls(designs, settings=settings, suite_version=SUITE_VERSION, grading_code=current)
        for cid, held in _mapping(data.get("competitions"), f"{path}: competitions").items():
            held = _mapping(held, f"{path}: competitions[{cid!r}]")
            fingerprint = held.get("fingerprint")
            if not _is_digest(fingerprint):
                raise DataError(
                    f"{path}: competition {cid!r} has fingerprint {fingerprint!r}; expected 64 hex digits"
                )
            records: dict[int, tuple[RecordedOutcome, str]] = {}
            for key, entry in _mapping(held.get("records"), f"{path}: {cid}.records").items():
                if not (key.isdigit() and int(key) < len(designs)):
                    raise DataError(f"{path}: {cid} has an entry for design index {key!r}; the list has "
                                    f"{len(designs)} designs")
                records[int(key)] = RecordedOutcome.from_json(entry, f"{path}: {cid}.records[{key}]")
            table._competitions[cid] = _CompetitionRecords(str(fingerprint), records)
        return table

    def verify(self, suite: KaggleSuite) -> None:
        """Check every competition of the table against ``suite``: same content, same rendered scripts.

        Raises:
            ReplayMismatchError: a competition is missing from the suite, its content fingerprint differs,
                or an entry's script is not what this code renders for its design.
        """
        for cid in self.competitions():
            if cid not in suite:
                raise ReplayMismatchError(f"competition {cid!r} of the replay table is not in the suite "
                                          f"{suite.ids()}; replay on the suite it was recorded on")
            self.verify_competition(suite.get(cid))

    def verify_competition(self, competition: Competition) -> None:
        """Check one competition of the table against ``competition`` (see :meth:`verify`).

        Raises:
            ReplayMiss: the table holds no such competition.
            ReplayMismatchError: its content or a rendered script differs.
        """
        held = self._held(competition.id)
        fingerprint = competition_fingerprint(competition)
        if fingerprint != held.fingerprint:
            raise ReplayMismatchError(
                f"competition {competition.id!r}: content differs: its files, answers or leaderboards have "
                f"fingerprint {fingerprint[:12]}..., the table was recorded on {held.fingerprint[:12]}...; "
                "record the table again"
            )
        for index, (_, digest) in sorted(held.records.items()):
            design = self.designs[index]
            if code_digest(render_design(design, competition)) != digest:
                raise ReplayMismatchError(
                    f"competition {competition.id!r}: solution code differs for design {design.short()}: "
                    "this code renders another script than the one recorded; record the table again"
                )


def _design_difference(recorded: Sequence[Design], expected: Sequence[Design]) -> str:
    if len(recorded) != len(expected):
        return f"the table has {len(recorded)} designs, {len(expected)} were expected"
    index = next(i for i, (a, b) in enumerate(zip(recorded, expected, strict=True)) if a != b)
    return f"design {index} is {recorded[index].short()} in the table, {expected[index].short()} expected"


def execute_for_table(execute: Callable[[], Outcome]) -> Outcome:
    """Execute once, and once more when the outcome says nothing definite (unknown, or a timeout).

    Whether the result may be recorded is :func:`is_recordable`'s decision.

    >>> outcomes = iter([Outcome(status="sandbox_error"), Outcome(status="valid", position=1.0)])
    >>> execute_for_table(lambda: next(outcomes)).status
    'valid'
    """
    outcome = execute()
    return execute() if outcome.status in UNCACHED_STATUSES else outcome


def is_recordable(outcome: Outcome, settings: RecordingSettings) -> bool:
    """Whether ``outcome`` is definite enough to record under ``settings``.

    Never a ``sandbox_error`` (unknown). A timeout only when the solution used the time itself: its
    CPU-seconds reach :data:`STARVED_CPU_SHARE` of ``settings.timeout_s``; one that the host starved
    of CPU says nothing about the code. Every other status is the solution's own result.

    >>> settings = RecordingSettings(timeout_s=10.0)
    >>> is_recordable(Outcome(status="timeout", extra={"cpu_s": 9.8}), settings)
    True
    >>> is_recordable(Outcome(status="timeout", extra={"cpu_s": 1.5}), settings)
    False
    """
    if outcome.status == "sandbox_error":
        return False
    if outcome.status == "timeout":
        return outcome.extra.get("cpu_s", 0.0) >= STARVED_CPU_SHARE * settings.timeout_s
    return True


class _NoSandbox:
    """The sandbox of a replay env that never executes: any run is an error (a miss raises before it)."""

    name = "replay"

    def run(self, request: ExecutionRequest) -> ExecutionResult:
        raise SandboxError("this ReplayKaggleEnv executes nothing (on_miss='raise'); "
                           "pass on_miss='execute' and a sandbox to execute misses live")

    def close(self) -> None:
        """Nothing to release."""


class ReplayKaggleEnv(KaggleEnv):
    """A :class:`~wmrl_envs.kaggle.env.KaggleEnv` that serves recorded outcomes instead of executing.

    Every action is judged by :func:`~wmrl_envs.kaggle.env.parse_action` first (a malformed one is
    malformed here too and replays nothing). A solution is served from the table when it carries a
    design header (:func:`~wmrl_envs.kaggle.design.parse_design`) and is, byte for byte, the recorded
    script of that design on the episode's competition; the outcome's ``extra["cpu_s"]`` is the
    recorded CPU-seconds and ``extra["replayed"]`` is 1.0, and ``step``'s ``info["replayed"]`` is
    ``True`` (``False`` for a malformed action or a live execution). The execution limits default to
    the table's; other limits are a mismatch (the outcomes were graded under the table's).

    Args:
        table: the recorded outcomes.
        on_miss: ``"raise"`` (default: :class:`~wmrl_algos.errors.ReplayMiss`) or ``"execute"``: run the
            solution live in ``sandbox`` and add it to the table when it is the rendered script of a design
            of the list and :func:`is_recordable`.
        **kwargs: :class:`~wmrl_envs.kaggle.env.KaggleEnv`'s arguments. ``sandbox`` defaults to one that
            executes nothing when ``on_miss="raise"``, to ``"local"`` otherwise.

    Raises:
        ConfigError: an unknown ``on_miss``.
        ReplayMismatchError: ``timeout_s``, ``memory_mb`` or ``max_submission_mb`` differ from the table's.

    Example:
        >>> table = ReplayTable.load("benchmarks/results/replay/suite_table.json")  # doctest: +SKIP
        >>> env = ReplayKaggleEnv(table, split="all")  # doctest: +SKIP
        >>> _ = env.reset(options={"competition": "titanic-survival"})  # doctest: +SKIP
        >>> from wmrl_adapters.train.kaggle.design_policy import design_action  # doctest: +SKIP
        >>> action = design_action(table.designs[0], env.competition)  # doctest: +SKIP
        >>> env.step(action)[4]["replayed"]  # doctest: +SKIP
        True
    """

    def __init__(self, table: ReplayTable, *, on_miss: MissPolicy = "raise", **kwargs: Any) -> None:
        if on_miss not in get_args(MissPolicy):
            raise ConfigError(
                f"on_miss={on_miss!r}; use 'raise' (a miss is an error) or 'execute' (run it live)"
            )
        settings = dataclasses.asdict(table.settings)
        for name, recorded in settings.items():
            if name in kwargs and kwargs[name] != recorded:
                raise ReplayMismatchError(
                    f"{name}={kwargs[name]!r}, but the replay table was recorded with {name}={recorded!r}; "
                    f"outcomes depend on it: pass {name}={recorded!r} or record a table with it"
                )
        kwargs = {**settings, **kwargs}
        kwargs.setdefault("sandbox", _NoSandbox() if on_miss == "raise" else "local")
        super().__init__(**kwargs)
        self.table = table
        self.on_miss: MissPolicy = on_miss
        self._verified: set[str] = set()
        self._replayed = False

    def _lookup(self, design: Design | None, code: str, competition: Competition) -> RecordedOutcome | None:
        """The record of exactly ``code`` (the recorded script of ``design``), or ``None``."""
        if design is None or competition.id not in self.table.competitions():
            return None
        if competition.id not in self._verified:
            self.table.verify_competition(competition)
            self._verified.add(competition.id)
        if (competition.id, design) not in self.table:
            return None
        if self.table.code_sha256(competition.id, design) != code_digest(code):
            return None
        return self.table.record(competition.id, design)

    def execute_solution(self, code: str) -> Outcome:
        """The recorded outcome of ``code``, or (``on_miss="execute"``) a live execution of it.

        Raises:
            ReplayMiss: the table holds no recorded outcome of exactly this script (``on_miss="raise"``).
            ReplayMismatchError: the competition's content or the rendered scripts differ from the table's.
        """
        competition = self._require_episode()
        design = parse_design(code)
        recorded = self._lookup(design, code, competition)
        if recorded is not None:
            self._replayed = True
            return recorded.served()
        if self.on_miss == "raise":
            if design is None:
                what = "a script without a design header"
            elif (competition.id, design) in self.table:
                what = (f"a script that carries the header of design {design.short()} but is not its "
                        "recorded script")
            else:
                what = f"design {design.short()}"
            raise ReplayMiss(
                f"no recorded outcome on {competition.id!r} for {what} (only the exact recorded scripts of "
                f"the table's {len(self.table.designs)} designs replay); record it, or pass on_miss='execute'"
            )
        outcome = execute_for_table(lambda: super(ReplayKaggleEnv, self).execute_solution(code))
        recordable = design in self.table.designs and is_recordable(outcome, self.table.settings)
        if design is not None and recordable and code == render_design(design, competition):
            self.table.add(competition.id, competition_fingerprint(competition), design, code_digest(code),
                           RecordedOutcome.from_outcome(outcome))
        return outcome

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """:meth:`KaggleEnv.step <wmrl_envs.kaggle.env.KaggleEnv.step>`, with ``info["replayed"]``."""
        self._replayed = False
        observation, reward, terminated, truncated, info = super().step(action)
        info["replayed"] = self._replayed
        return observation, reward, terminated, truncated, info
