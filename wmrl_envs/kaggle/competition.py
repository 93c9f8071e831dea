"""The competition format, and loaders for competitions prepared by MLE-bench or MLE-Dojo.

Why a format of our own, shaped like MLE-bench's: a Kaggle-style task is a description, public files
the agent may read (train, test features, a sample submission), hidden answers it must never read, a
metric with a direction and a leaderboard. Keeping the public and the hidden parts in separate
directories makes "hidden answers are never mounted in the sandbox" a property of the file layout,
not of careful code. Users who already prepared real Kaggle data with MLE-bench or MLE-Dojo can train
on it directly through the two loaders below.

Layouts (what each loader assumes; all three keep hidden answers outside the public directory):

* **wmrl** (the built-in suite, :mod:`wmrl_envs.kaggle.suite`)::

      <competition>/competition.json          metadata (metric, direction, target, id column, ...)
      <competition>/public/description.md     task overview
      <competition>/public/train.csv          features + target
      <competition>/public/test.csv           features only
      <competition>/public/sample_submission.csv
      <competition>/public/data_inventory.md
      <competition>/private/answers.csv       id, target, Usage (Public / Private, as Kaggle's solution files)

* **MLE-bench** (``mlebench prepare``; ``~/.cache/mle-bench/data/<id>/``)::

      <id>/prepared/public/...                 description.md, sample_submission.csv, train/test files
      <id>/prepared/private/test.csv           answers in the sample submission's columns
      <info_dir>/config.yaml                   ``dataset: answers:`` / ``sample_submission:`` locate
                                               the answers and the schema; ``grader: name:`` the metric
      <info_dir>/description.md                optional if the public dir holds one
      <info_dir>/leaderboard.csv               optional: a ``score`` column, best first

  ``info_dir`` is MLE-bench's ``mlebench/competitions/<id>/`` folder and defaults to ``<id>/`` itself.
  As MLE-bench's registry does, the ``dataset`` paths are read relative to the data directory (the
  parent of ``<id>/``), so they start with the competition id; a path that resolves outside ``<id>/``
  is refused, so a hostile config cannot point the grader at another competition's or the host's
  files. Without a ``dataset`` entry the paths ``mlebench prepare`` writes are used.

* **MLE-Dojo** (``prepare.py --data-dir ...``; ``<data-dir>/<competition>/``)::

      <competition>/data/public/...            description.txt or .md, sample_submission.csv, data files
      <competition>/data/private/test_answer.csv
      <info_dir>/public_leaderboard.csv        optional: a ``Score`` column
      <info_dir>/private_leaderboard.csv       optional

  ``info_dir`` is MLE-Dojo's ``mledojo/competitions/<competition>/info/`` and defaults to
  ``<competition>/info/``. MLE-Dojo's metrics are Python classes, so the metric name must be given.

Both outside layouts carry one test set with no public/private marking; the loaders mark half of the
rows Public by a hash of the id (stable across runs and machines), so the score shown to the agent
and the reward still come from disjoint rows. Only single-target submissions (one id column and one
prediction column) are supported.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from wmrl_algos.errors import ConfigError, DataError
from wmrl_envs.kaggle.leaderboard import Leaderboard, read_leaderboard_csv
from wmrl_envs.kaggle.metrics import get_metric, metric_from_alias
from wmrl_envs.kaggle.outcome import KaggleContext, TaskType

__all__ = [
    "COMPETITION_FORMAT",
    "Layout",
    "Competition",
    "load_competition",
    "load_wmrl_competition",
    "load_mlebench_competition",
    "load_mledojo_competition",
    "read_mlebench_config",
    "describe_public_files",
]

COMPETITION_FORMAT = "wmrl-competition/1"
Layout = Literal["wmrl", "mlebench", "mledojo"]
_USAGE = "Usage"


@dataclass(frozen=True)
class Competition:
    """One Kaggle-style competition: public files, hidden answers, a metric and leaderboards.

    Attributes:
        id: the competition id (kebab-case).
        title: a human-readable title.
        description: the task overview shown to the agent (markdown).
        public_dir: directory of the files the agent sees (mounted read-only as ``./input/``).
        answers_path: the hidden answers (CSV: id column, target column, ``Usage``); never mounted.
        metric: a :data:`~wmrl_envs.kaggle.metrics.METRICS` name.
        higher_is_better: the metric's direction.
        task_type: binary, multiclass or regression.
        target: the prediction column of the submission (and target column of the training file).
        id_column: the id column of the test file and the submission.
        feature_columns: the training file's feature columns.
        text_columns: feature columns holding free text.
        labels: valid class labels for label metrics (as strings); empty otherwise.
        heldout: whether the competition is reserved for evaluation (never trained on).
        source: where the data comes from (dataset, package, licence).
        train_target: the training file's target column when it differs from the submission's
            prediction column (MLE-Dojo renames some); ``None`` when they are the same.
        train_file: the training CSV, relative to ``public_dir``.
        test_file: the test-features CSV, relative to ``public_dir``.
        layout: which on-disk layout it was loaded from.
        leaderboard: the private leaderboard (the reward's position score and medals), if built.
        public_leaderboard: the public leaderboard (shown to the agent and the world model), if built.

    Example:
        >>> from wmrl_envs.kaggle.suite import load_suite
        >>> competition = load_suite().get("concrete-strength")  # doctest: +SKIP
        >>> competition.metric, competition.higher_is_better  # doctest: +SKIP
        ('rmse', False)
    """

    id: str
    title: str
    description: str
    public_dir: Path
    answers_path: Path
    metric: str
    higher_is_better: bool
    task_type: TaskType
    target: str
    id_column: str
    feature_columns: tuple[str, ...]
    text_columns: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    heldout: bool = False
    source: str = ""
    train_target: str | None = None
    train_file: str = "train.csv"
    test_file: str = "test.csv"
    layout: Layout = "wmrl"
    leaderboard: Leaderboard | None = None
    public_leaderboard: Leaderboard | None = None

    def __post_init__(self) -> None:
        get_metric(self.metric)
        if self.task_type not in ("binary", "multiclass", "regression"):
            raise ConfigError(
                f"task_type={self.task_type!r} for {self.id!r}; use 'binary', 'multiclass' or 'regression'"
            )
        public, answers = Path(self.public_dir).resolve(), Path(self.answers_path).resolve()
        if answers.is_relative_to(public):
            raise DataError(
                f"hidden answers {answers} lie inside the public dir {public}: the agent could read them; "
                "store them outside the public directory"
            )

    def public_files(self) -> dict[str, Path]:
        """Every regular file the agent sees, ``name under ./input/ -> host path`` (sorted, recursive)."""
        root = Path(self.public_dir)
        return {
            path.relative_to(root).as_posix(): path
            for path in sorted(root.rglob("*"))
            if path.is_file() and not path.is_symlink()
        }

    def inventory(self) -> str:
        """The data inventory text: every public file with its size, and for CSVs shape, dtypes, rows."""
        inventory_file = Path(self.public_dir) / "data_inventory.md"
        if inventory_file.is_file():
            return inventory_file.read_text(encoding="utf-8")
        return describe_public_files(Path(self.public_dir))

    def load_answers(self) -> pd.DataFrame:
        """The hidden answers with string ids and a ``Usage`` column (``Public`` / ``Private``)."""
        return _load_answers(Path(self.answers_path), self.id_column, self.target)

    def context(
        self,
        turn: int = 0,
        history: tuple[str, ...] = (),
        previous_solutions: tuple[str, ...] = (),
    ) -> KaggleContext:
        """The public context a participant (and a world model) may see at ``turn``."""
        return KaggleContext(
            competition_id=self.id,
            overview=self.description,
            inventory=self.inventory(),
            metric=self.metric,
            higher_is_better=self.higher_is_better,
            task_type=self.task_type,
            target=self.target,
            id_column=self.id_column,
            feature_columns=self.feature_columns,
            text_columns=self.text_columns,
            leaderboard=self.public_leaderboard.scores if self.public_leaderboard else (),
            turn=turn,
            history=history,
            previous_solutions=previous_solutions,
        )


@lru_cache(maxsize=64)
def _load_answers_cached(path: str, mtime_ns: int, id_column: str, target: str) -> pd.DataFrame:
    frame = pd.read_csv(path, dtype={id_column: str}, keep_default_na=False, na_values=[""])
    missing = [column for column in (id_column, target) if column not in frame.columns]
    if missing:
        raise DataError(f"answers {path} lack the columns {missing} (columns: {list(frame.columns)})")
    if _USAGE not in frame.columns:
        frame[_USAGE] = [_hash_usage(identifier) for identifier in frame[id_column]]
    return frame[[id_column, target, _USAGE]].reset_index(drop=True)


def _load_answers(path: Path, id_column: str, target: str) -> pd.DataFrame:
    if not path.is_file():
        raise DataError(f"hidden answers not found at {path}; regenerate or re-prepare the competition")
    return _load_answers_cached(str(path), path.stat().st_mtime_ns, id_column, target).copy()


def _hash_usage(identifier: Any) -> str:
    digest = hashlib.sha256(str(identifier).encode("utf-8")).digest()
    return "Public" if digest[0] % 2 == 0 else "Private"


def describe_public_files(public_dir: Path, rows: int = 3) -> str:
    """Render the data inventory of a public directory (what ``ls`` and ``df.head()`` would show)."""
    lines = ["# Data inventory", "", "Files under ./input/ (read-only):", ""]
    for path in sorted(Path(public_dir).rglob("*")):
        if not path.is_file() or path.name == "data_inventory.md":
            continue
        name = path.relative_to(public_dir).as_posix()
        lines.append(f"- `{name}` ({path.stat().st_size:,} bytes)")
    for path in sorted(Path(public_dir).rglob("*.csv")):
        frame = pd.read_csv(path)
        name = path.relative_to(public_dir).as_posix()
        lines += ["", f"## {name}: {frame.shape[0]} rows x {frame.shape[1]} columns", ""]
        lines.append("| column | dtype | missing | example |")
        lines.append("|---|---|---|---|")
        for column in frame.columns:
            series = frame[column]
            example = series.dropna().iloc[0] if series.notna().any() else ""
            example_text = " ".join(str(example).split())[:60]
            lines.append(f"| {column} | {series.dtype} | {int(series.isna().sum())} | {example_text} |")
        head = frame.head(rows).to_string(max_colwidth=40, max_cols=12)
        lines += ["", "First rows:", "", "```", head, "```"]
    return "\n".join(lines) + "\n"


def load_wmrl_competition(directory: Path) -> Competition:
    """Load a competition stored in wmrl's own layout (a ``competition.json`` next to public/private).

    Raises:
        DataError: missing or malformed metadata.
    """
    directory = Path(directory)
    meta_path = directory / "competition.json"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read competition metadata {meta_path}: {exc}") from exc
    if meta.get("format") != COMPETITION_FORMAT:
        raise DataError(f"{meta_path} has format {meta.get('format')!r}; expected {COMPETITION_FORMAT!r}")
    public_dir = directory / "public"
    return Competition(
        id=meta["id"],
        title=meta["title"],
        description=(public_dir / "description.md").read_text(encoding="utf-8"),
        public_dir=public_dir,
        answers_path=directory / "private" / "answers.csv",
        metric=meta["metric"],
        higher_is_better=bool(meta["higher_is_better"]),
        task_type=meta["task_type"],
        target=meta["target"],
        id_column=meta["id_column"],
        feature_columns=tuple(meta["feature_columns"]),
        text_columns=tuple(meta.get("text_columns", ())),
        labels=tuple(meta.get("labels", ())),
        heldout=bool(meta.get("heldout", False)),
        source=meta.get("source", ""),
        layout="wmrl",
    )


_YAML_KEY = re.compile(r"^(?P<indent>[ \t]*)(?P<key>[\w.-]+):(?:[ \t]+(?P<value>.*?))?[ \t]*$")


def _yaml_scalar(text: str | None) -> str | None:
    if text is None or text in ("", "~", "null", "Null", "NULL"):
        return None
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def read_mlebench_config(path: Path) -> dict[str, str | dict[str, str | None] | None]:
    """The keys of an MLE-bench ``config.yaml`` that a grader needs, read without a YAML dependency.

    MLE-bench's configs are flat: top-level ``key: value`` lines and one-level sections (``dataset:``,
    ``grader:``) of ``key: value`` lines. That subset is what is read; lists and deeper nesting (the
    ``prizes`` entries) are skipped, comments and quotes are stripped. ``null`` reads as ``None``.

    Args:
        path: the ``config.yaml``.

    Returns:
        Top-level keys to a scalar, or to a dict for a section.

    Raises:
        ConfigError: the file cannot be read, or a top-level line is not ``key: value`` (the message
            names the file and the line).

    Example:
        >>> import tempfile
        >>> config = Path(tempfile.mkdtemp()) / "config.yaml"
        >>> _ = config.write_text("id: x\\ngrader:\\n  name: accuracy  # metric\\n")
        >>> read_mlebench_config(config)
        {'id': 'x', 'grader': {'name': 'accuracy'}}
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the MLE-bench config {path}: {exc}") from exc
    config: dict[str, str | dict[str, str | None] | None] = {}
    section: dict[str, str | None] | None = None
    section_indent: str | None = None
    for number, raw in enumerate(lines, start=1):
        line = re.sub(r"(^|[ \t])#.*$", "", raw).rstrip()
        if not line.strip() or line.strip() == "---":
            continue
        match = _YAML_KEY.match(line)
        indent = line[: len(line) - len(line.lstrip())]
        if not indent:
            if match is None:
                raise ConfigError(
                    f"{path} line {number}: {raw.strip()!r} is not 'key: value'; is this MLE-bench's "
                    "competition config.yaml?"
                )
            value = match.group("value")
            section = {} if value is None else None
            section_indent = None
            config[match.group("key")] = section if value is None else _yaml_scalar(value)
        elif section is not None:
            section_indent = indent if section_indent is None else section_indent
            if indent == section_indent and match is not None:
                section[match.group("key")] = _yaml_scalar(match.group("value"))
    return config


def _mlebench_config(path: Path) -> dict[str, str | dict[str, str | None] | None]:
    return read_mlebench_config(path) if path.is_file() else {}


def _config_section(
    config: dict[str, str | dict[str, str | None] | None], key: str, path: Path
) -> dict[str, str | None]:
    value = config.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: {key!r} is {value!r}; MLE-bench expects a section of 'name: value' lines")
    return value


def _mlebench_data_path(
    dataset: dict[str, str | None], key: str, *, config_path: Path, directory: Path
) -> Path | None:
    """``dataset.<key>`` of an MLE-bench config (``None`` if absent), resolved as MLE-bench's registry
    does (relative to the data directory) and kept inside the competition ``directory``."""
    value = dataset.get(key)
    if value is None:
        return None
    if Path(value).is_absolute():
        raise ConfigError(
            f"{config_path}: dataset.{key}={value!r} is absolute; MLE-bench paths are relative to the "
            f"data directory and start with the competition id, e.g. {directory.name}/prepared/..."
        )
    resolved = (directory.parent / value).resolve()
    if not resolved.is_relative_to(directory.resolve()):
        raise ConfigError(
            f"{config_path}: dataset.{key}={value!r} resolves to {resolved}, outside the competition "
            f"directory {directory.resolve()}; refusing to read it"
        )
    if not resolved.is_file():
        raise ConfigError(
            f"{config_path}: dataset.{key}={value!r} points at {resolved}, which does not exist"
        )
    return resolved


def _first_existing(*paths: Path) -> Path | None:
    return next((path for path in paths if path.is_file()), None)


def _infer_columns(public_dir: Path, sample: Path | None = None) -> tuple[str, str, Path]:
    sample = sample or public_dir / "sample_submission.csv"
    if not sample.is_file():
        candidates = sorted(public_dir.glob("*ample*ubmission*.csv"))
        if not candidates:
            raise DataError(f"no sample submission in {public_dir}; the submission schema is unknown")
        sample = candidates[0]
    columns = list(pd.read_csv(sample, nrows=0).columns)
    if len(columns) != 2:
        raise DataError(
            f"{sample} has columns {columns}: only single-target competitions (an id and one prediction "
            "column) are supported"
        )
    return columns[0], columns[1], sample


def _train_file(public_dir: Path, target: str, sample: Path) -> tuple[Path, str]:
    """The training CSV and its target column.

    Either a CSV holds the submission's prediction column, or (MLE-Dojo renames it, e.g. a
    ``SeriousDlqin2yrs`` training target submitted as ``Probability``) a CSV has exactly one column
    more than another CSV (the test file): that column is the training target.
    """
    headers = {
        path: list(pd.read_csv(path, nrows=0).columns)
        for path in sorted(public_dir.rglob("*.csv"))
        if path != sample
    }
    for path, columns in headers.items():
        if target in columns:
            return path, target
    for path, columns in headers.items():
        for other, other_columns in headers.items():
            extra = set(columns) - set(other_columns)
            if other != path and set(other_columns) < set(columns) and len(extra) == 1:
                return path, extra.pop()
    raise DataError(
        f"no training CSV under {public_dir} has the target column {target!r}, and no CSV has exactly "
        "one column more than the test file"
    )


def _test_file(public_dir: Path, id_column: str, train_target: str, exclude: tuple[Path, ...]) -> Path:
    for path in sorted(public_dir.rglob("*.csv")):
        if path in exclude:
            continue
        columns = list(pd.read_csv(path, nrows=0).columns)
        if id_column in columns and train_target not in columns:
            return path
    raise DataError(f"no test CSV under {public_dir} has the id column {id_column!r} without the target")


def _text_columns(train: pd.DataFrame, features: tuple[str, ...]) -> tuple[str, ...]:
    text: list[str] = []
    for column in features:
        series = train[column]
        if series.dtype == object and series.dropna().astype(str).str.len().mean() > 40:
            text.append(column)
    return tuple(text)


def _infer_task(metric_kind: str, answers: pd.Series) -> TaskType:
    if metric_kind == "probability":
        return "binary"
    if metric_kind == "number":
        return "regression"
    return "binary" if answers.nunique() == 2 else "multiclass"


def _outside_competition(
    *,
    competition_id: str,
    public_dir: Path,
    answers_path: Path,
    sample_path: Path | None = None,
    description_path: Path | None,
    metric_name: str,
    higher_is_better: bool | None,
    task_type: TaskType | None,
    leaderboard: Leaderboard | None,
    public_leaderboard: Leaderboard | None,
    layout: Layout,
) -> Competition:
    if not public_dir.is_dir():
        raise DataError(f"public dir {public_dir} not found; is the competition prepared?")
    metric = metric_from_alias(metric_name)
    id_column, target, sample = _infer_columns(public_dir, sample_path)
    train_path, train_target = _train_file(public_dir, target, sample)
    test_path = _test_file(public_dir, id_column, train_target, (sample, train_path))
    train = pd.read_csv(train_path)
    features = tuple(column for column in train.columns if column not in (id_column, train_target))
    answers = _load_answers(answers_path, id_column, target)
    direction = metric.higher_is_better if higher_is_better is None else higher_is_better
    resolved_task = task_type or _infer_task(metric.kind, answers[target])
    labels = tuple(sorted(answers[target].astype(str).unique())) if metric.kind == "label" else ()
    description = description_path.read_text(encoding="utf-8") if description_path else ""
    if leaderboard is not None and leaderboard.higher_is_better != direction:
        leaderboard = Leaderboard(leaderboard.scores, direction, leaderboard.names)
    if public_leaderboard is not None and public_leaderboard.higher_is_better != direction:
        public_leaderboard = Leaderboard(public_leaderboard.scores, direction, public_leaderboard.names)
    return Competition(
        id=competition_id,
        title=competition_id.replace("-", " ").title(),
        description=description or f"# {competition_id}\n\nPredict `{target}` for every test row.",
        public_dir=public_dir,
        answers_path=answers_path,
        metric=metric.name,
        higher_is_better=direction,
        task_type=resolved_task,
        target=target,
        id_column=id_column,
        feature_columns=features,
        text_columns=_text_columns(train, features),
        labels=labels,
        train_target=None if train_target == target else train_target,
        train_file=train_path.relative_to(public_dir).as_posix(),
        test_file=test_path.relative_to(public_dir).as_posix(),
        layout=layout,
        leaderboard=leaderboard,
        public_leaderboard=public_leaderboard or leaderboard,
    )


def load_mlebench_competition(
    directory: Path,
    *,
    info_dir: Path | None = None,
    metric: str | None = None,
    higher_is_better: bool | None = None,
    task_type: TaskType | None = None,
) -> Competition:
    """Load a competition prepared by MLE-bench (``<id>/prepared/{public,private}``).

    The answers and the sample submission are where ``config.yaml``'s ``dataset:`` section says
    (relative to ``directory``'s parent, MLE-bench's data directory); without it, where
    ``mlebench prepare`` writes them.

    Args:
        directory: the competition's data dir, e.g. ``~/.cache/mle-bench/data/spaceship-titanic``.
        info_dir: MLE-bench's ``mlebench/competitions/<id>/`` (config.yaml, description.md,
            leaderboard.csv); defaults to ``directory``.
        metric: metric name; defaults to ``grader: name:`` in ``config.yaml``.
        higher_is_better: direction; defaults to the leaderboard's order, else the metric's default.
        task_type: defaults to an inference from the metric and the answers.

    Raises:
        ConfigError: no metric given or found, or the metric is unknown; ``config.yaml`` is unreadable,
            or a ``dataset`` path is absolute, leaves the competition directory or names a missing
            file; no answers are found (the message names the file and the key).
        DataError: the layout is incomplete.
    """
    directory = Path(directory)
    info = Path(info_dir) if info_dir is not None else directory
    public_dir = directory / "prepared" / "public"
    config_path = info / "config.yaml"
    config = _mlebench_config(config_path)
    metric_name = metric or _config_section(config, "grader", config_path).get("name")
    if metric_name is None:
        raise ConfigError(
            f"no metric for {directory.name!r}: pass metric=... or provide {config_path} with "
            "'grader: name: <metric>'"
        )
    dataset = _config_section(config, "dataset", config_path)
    answers_path, sample_path = (
        _mlebench_data_path(dataset, key, config_path=config_path, directory=directory)
        for key in ("answers", "sample_submission")
    )
    if answers_path is None:
        answers_path = directory / "prepared" / "private" / "test.csv"
        if not answers_path.is_file():
            raise ConfigError(
                f"no hidden answers for {directory.name!r}: {config_path} gives no dataset.answers and the "
                f"default {answers_path} does not exist; add 'dataset: answers: {directory.name}/...' to "
                "the config or re-run `mlebench prepare`"
            )
    board_path = info / "leaderboard.csv"
    leaderboard = read_leaderboard_csv(board_path, higher_is_better) if board_path.is_file() else None
    if higher_is_better is None and leaderboard is not None:
        higher_is_better = leaderboard.higher_is_better
    return _outside_competition(
        competition_id=directory.name,
        public_dir=public_dir,
        answers_path=answers_path,
        sample_path=sample_path,
        description_path=_first_existing(public_dir / "description.md", info / "description.md"),
        metric_name=metric_name,
        higher_is_better=higher_is_better,
        task_type=task_type,
        leaderboard=leaderboard,
        public_leaderboard=None,
        layout="mlebench",
    )


def load_mledojo_competition(
    directory: Path,
    *,
    metric: str,
    info_dir: Path | None = None,
    higher_is_better: bool | None = None,
    task_type: TaskType | None = None,
) -> Competition:
    """Load a competition prepared by MLE-Dojo (``<competition>/data/{public,private}``).

    Args:
        directory: the competition's prepared dir, e.g. ``./data/prepared/GiveMeSomeCredit``.
        metric: metric name (MLE-Dojo's metrics are code, not names, so it must be given).
        info_dir: MLE-Dojo's ``mledojo/competitions/<competition>/info/`` with
            ``public_leaderboard.csv`` and ``private_leaderboard.csv``; defaults to ``directory/info``.
        higher_is_better: direction; defaults to the metric's.
        task_type: defaults to an inference from the metric and the answers.

    Raises:
        ConfigError: unknown metric.
        DataError: the layout is incomplete.
    """
    directory = Path(directory)
    info = Path(info_dir) if info_dir is not None else directory / "info"
    public_dir = directory / "data" / "public"
    direction = metric_from_alias(metric).higher_is_better if higher_is_better is None else higher_is_better
    private_path, public_path = info / "private_leaderboard.csv", info / "public_leaderboard.csv"
    private_board = read_leaderboard_csv(private_path, direction) if private_path.is_file() else None
    public_board = read_leaderboard_csv(public_path, direction) if public_path.is_file() else None
    return _outside_competition(
        competition_id=directory.name,
        public_dir=public_dir,
        answers_path=directory / "data" / "private" / "test_answer.csv",
        description_path=_first_existing(
            public_dir / "description.txt", public_dir / "description.md", info / "description.txt"
        ),
        metric_name=metric,
        higher_is_better=direction,
        task_type=task_type,
        leaderboard=private_board or public_board,
        public_leaderboard=public_board,
        layout="mledojo",
    )


def load_competition(directory: Path, **kwargs: Any) -> Competition:
    """Load a competition from any supported layout, detected from the directory's contents.

    Args:
        directory: a wmrl, MLE-bench or MLE-Dojo competition directory.
        **kwargs: passed to the layout's loader (``metric=`` is required for MLE-Dojo).

    Raises:
        DataError: the directory matches no known layout.
    """
    directory = Path(directory)
    if (directory / "competition.json").is_file():
        return load_wmrl_competition(directory)
    if (directory / "prepared" / "public").is_dir():
        return load_mlebench_competition(directory, **kwargs)
    if (directory / "data" / "public").is_dir():
        return load_mledojo_competition(directory, **kwargs)
    raise DataError(
        f"{directory} is not a competition: expected competition.json (wmrl), prepared/public "
        "(MLE-bench) or data/public (MLE-Dojo)"
    )
