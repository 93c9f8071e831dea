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

  ``info_dir`` is MLE-bench's ``mlebench/competitions/<id>/`` folder (``registry=`` names its parent,
  ``mlebench/competitions/``) and defaults to ``<id>/`` itself.
  As MLE-bench's registry does, the ``dataset`` paths are read relative to the data directory (the
  parent of ``<id>/``), so they start with the competition id; a path that resolves outside ``<id>/``
  is refused, so a hostile config cannot point the grader at another competition's or the host's
  files. Without a ``dataset`` entry the paths ``mlebench prepare`` writes are used.

* **MLE-Dojo** (``prepare.py --data-dir ...``; ``<data-dir>/<competition>/``)::

      <competition>/data/public/...            description.txt or .md, sample_submission.csv, data files
      <competition>/data/private/test_answer.csv
      <info_dir>/public_leaderboard.csv        optional: a ``Score`` column
      <info_dir>/private_leaderboard.csv       optional

  ``info_dir`` is MLE-Dojo's ``mledojo/competitions/<competition>/info/`` (``registry=`` names
  ``mledojo/competitions/``) and defaults to ``<competition>/info/``. MLE-Dojo's metrics are Python
  classes, so the metric name must be given.

Both outside layouts carry one test set with no public/private marking; the loaders mark half of the
rows Public by a hash of the id (stable across runs and machines), so the score shown to the agent
and the reward still come from disjoint rows. Only single-target submissions (one id column and one
prediction column) are supported.

Symlinks: every file a loader opens is resolved and must stay inside the directory it belongs to: a
public file (the description, a CSV, the data inventory) inside the public directory, the hidden answers
inside the competition directory, a registry file (``config.yaml``, a description, a leaderboard) inside
the competition's registry folder. A symlink that leaves it is refused with a :class:`DataError` naming
the file: otherwise a host file's contents would reach the agent's observation, or the grader would
read answers from anywhere. A symlink that stays inside works like the file it points at.
"""

from __future__ import annotations

import fnmatch
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
from wmrl_envs.kaggle.metrics import METRICS, get_metric, metric_from_alias
from wmrl_envs.kaggle.outcome import KaggleContext, TaskType

__all__ = [
    "COMPETITION_FORMAT",
    "Layout",
    "Competition",
    "detect_layout",
    "load_competition",
    "load_wmrl_competition",
    "load_mlebench_competition",
    "load_mledojo_competition",
    "registry_info_dir",
    "read_mlebench_config",
    "describe_public_files",
]

COMPETITION_FORMAT = "wmrl-competition/1"
Layout = Literal["wmrl", "mlebench", "mledojo"]
_USAGE = "Usage"


def _contained(path: Path, root: Path, what: str) -> Path:
    """``path`` resolved (symlinks followed), refused unless it stays inside ``root``.

    Raises:
        DataError: ``path`` resolves outside ``root`` (the message names the file and where it points).
    """
    resolved, boundary = Path(path).resolve(), Path(root).resolve()
    if not resolved.is_relative_to(boundary):
        raise DataError(
            f"{what} {path} resolves to {resolved}, outside {boundary} (a symlink leaving the directory); "
            "refusing to read it: copy the file into the directory instead of linking it"
        )
    return resolved


def _public_listing(public_dir: Path) -> dict[str, Path]:
    """Every regular file under ``public_dir``, ``name -> resolved host path``, in path order.

    A symlink that stays inside ``public_dir`` lists as the file it points at; one that leaves it is
    refused, so no host file can be shown to the agent or mounted in its sandbox.

    Raises:
        DataError: a file or directory under ``public_dir`` resolves outside it.
    """
    root = Path(public_dir)
    listing: dict[str, Path] = {}
    for path in sorted(root.rglob("*")):
        resolved = _contained(path, root, "public file")
        if resolved.is_file():
            listing[path.relative_to(root).as_posix()] = resolved
    return listing


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
        """Every regular file the agent sees, ``name under ./input/ -> host path`` (sorted, recursive).

        Raises:
            DataError: a symlink under the public dir leads outside it (see the module docstring).
        """
        return _public_listing(Path(self.public_dir))

    def inventory(self) -> str:
        """The data inventory text: every public file with its size, and for CSVs shape, dtypes, rows.

        Raises:
            DataError: a symlink under the public dir leads outside it.
        """
        listing = _public_listing(Path(self.public_dir))
        if "data_inventory.md" in listing:
            return listing["data_inventory.md"].read_text(encoding="utf-8")
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
    """Render the data inventory of a public directory (what ``ls`` and ``df.head()`` would show).

    Raises:
        DataError: a symlink under ``public_dir`` leads outside it.
    """
    listing = _public_listing(Path(public_dir))
    lines = ["# Data inventory", "", "Files under ./input/ (read-only):", ""]
    for name, path in listing.items():
        if Path(name).name != "data_inventory.md":
            lines.append(f"- `{name}` ({path.stat().st_size:,} bytes)")
    for name, path in listing.items():
        if not name.endswith(".csv"):
            continue
        frame = pd.read_csv(path)
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
        DataError: missing or malformed metadata; a file that resolves outside its directory (the
            metadata and the answers outside ``directory``, a public file outside ``public/``).
    """
    directory = Path(directory)
    meta_path = _contained(directory / "competition.json", directory, "competition metadata")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read competition metadata {meta_path}: {exc}") from exc
    if meta.get("format") != COMPETITION_FORMAT:
        raise DataError(f"{meta_path} has format {meta.get('format')!r}; expected {COMPETITION_FORMAT!r}")
    public_dir = directory / "public"
    _contained(public_dir, directory, "public dir")
    description = _public_listing(public_dir).get("description.md")
    if description is None:
        raise DataError(f"{public_dir} has no description.md; regenerate the competition")
    return Competition(
        id=meta["id"],
        title=meta["title"],
        description=description.read_text(encoding="utf-8"),
        public_dir=public_dir,
        answers_path=_contained(directory / "private" / "answers.csv", directory, "hidden answers"),
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


def _info_file(info: Path, name: str) -> Path | None:
    """``info/name`` resolved (kept inside ``info``), or ``None`` when there is no such file."""
    resolved = _contained(info / name, info, "registry file")
    return resolved if resolved.is_file() else None


def _infer_columns(
    csvs: dict[str, Path], public_dir: Path, sample: Path | None = None
) -> tuple[str, str, Path]:
    if sample is None:
        names = ["sample_submission.csv"] if "sample_submission.csv" in csvs else []
        names += sorted(n for n in csvs if "/" not in n and fnmatch.fnmatchcase(n, "*ample*ubmission*.csv"))
        if not names:
            raise DataError(f"no sample submission in {public_dir}; the submission schema is unknown")
        sample = csvs[names[0]]
    columns = list(pd.read_csv(sample, nrows=0).columns)
    if len(columns) != 2:
        raise DataError(
            f"{sample} has columns {columns}: only single-target competitions (an id and one prediction "
            "column) are supported"
        )
    return columns[0], columns[1], sample


def _train_file(csvs: dict[str, Path], public_dir: Path, target: str, sample: Path) -> tuple[str, str]:
    """The training CSV's name under the public dir and its target column.

    Either a CSV holds the submission's prediction column, or (MLE-Dojo renames it, e.g. a
    ``SeriousDlqin2yrs`` training target submitted as ``Probability``) a CSV has exactly one column
    more than another CSV (the test file): that column is the training target.
    """
    headers = {
        name: list(pd.read_csv(path, nrows=0).columns) for name, path in csvs.items() if path != sample
    }
    for name, columns in headers.items():
        if target in columns:
            return name, target
    for name, columns in headers.items():
        for other, other_columns in headers.items():
            extra = set(columns) - set(other_columns)
            if other != name and set(other_columns) < set(columns) and len(extra) == 1:
                return name, extra.pop()
    raise DataError(
        f"no training CSV under {public_dir} has the target column {target!r}, and no CSV has exactly "
        "one column more than the test file"
    )


def _test_file(
    csvs: dict[str, Path], public_dir: Path, id_column: str, train_target: str, exclude: tuple[Path, ...]
) -> str:
    for name, path in csvs.items():
        if path in exclude:
            continue
        columns = list(pd.read_csv(path, nrows=0).columns)
        if id_column in columns and train_target not in columns:
            return name
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
    directory: Path,
    public_dir: Path,
    answers_path: Path,
    sample_path: Path | None = None,
    public_descriptions: tuple[str, ...],
    info_description: Path | None,
    metric_name: str,
    higher_is_better: bool | None,
    task_type: TaskType | None,
    leaderboard: Leaderboard | None,
    public_leaderboard: Leaderboard | None,
    layout: Layout,
) -> Competition:
    """A competition of an outside layout; ``public_descriptions`` are tried (by name under the public
    dir) before ``info_description``, every path checked as the module docstring says."""
    competition_id = directory.name
    _contained(public_dir, directory, "public dir")
    if not public_dir.is_dir():
        raise DataError(f"public dir {public_dir} not found; is the competition prepared?")
    answers_path = _contained(answers_path, directory, "hidden answers")
    metric = metric_from_alias(metric_name)
    listing = _public_listing(public_dir)
    csvs = {name: path for name, path in listing.items() if name.endswith(".csv")}
    id_column, target, sample = _infer_columns(csvs, public_dir, sample_path)
    train_name, train_target = _train_file(csvs, public_dir, target, sample)
    test_name = _test_file(csvs, public_dir, id_column, train_target, (sample, csvs[train_name]))
    train = pd.read_csv(csvs[train_name])
    features = tuple(column for column in train.columns if column not in (id_column, train_target))
    answers = _load_answers(answers_path, id_column, target)
    direction = metric.higher_is_better if higher_is_better is None else higher_is_better
    resolved_task = task_type or _infer_task(metric.kind, answers[target])
    labels = tuple(sorted(answers[target].astype(str).unique())) if metric.kind == "label" else ()
    description_path = next(
        (listing[name] for name in public_descriptions if name in listing), info_description
    )
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
        train_file=train_name,
        test_file=test_name,
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
        DataError: the layout is incomplete; a file resolves outside its directory (see the module
            docstring).
    """
    directory = Path(directory)
    info = Path(info_dir) if info_dir is not None else directory
    public_dir = directory / "prepared" / "public"
    config_path = info / "config.yaml"
    config_file = _info_file(info, "config.yaml")
    config = read_mlebench_config(config_file) if config_file is not None else {}
    metric_name = metric or _config_section(config, "grader", config_path).get("name")
    if metric_name is None:
        state = "names no 'grader: name: <metric>'" if config_file is not None else "does not exist"
        raise ConfigError(
            f"no metric for {directory.name!r}: {config_path} {state}. A real MLE-bench install keeps "
            f"config.yaml in its registry: pass registry=.../mlebench/competitions (wmrl eval: --registry "
            ".../mlebench/competitions), or the metric itself (metric=, wmrl eval: --metric NAME)"
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
    board_path = _info_file(info, "leaderboard.csv")
    leaderboard = read_leaderboard_csv(board_path, higher_is_better) if board_path is not None else None
    if higher_is_better is None and leaderboard is not None:
        higher_is_better = leaderboard.higher_is_better
    return _outside_competition(
        directory=directory,
        public_dir=public_dir,
        answers_path=answers_path,
        sample_path=sample_path,
        public_descriptions=("description.md",),
        info_description=_info_file(info, "description.md"),
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
        DataError: the layout is incomplete; a file resolves outside its directory (see the module
            docstring).
    """
    directory = Path(directory)
    info = Path(info_dir) if info_dir is not None else _contained(directory / "info", directory, "info dir")
    public_dir = directory / "data" / "public"
    direction = metric_from_alias(metric).higher_is_better if higher_is_better is None else higher_is_better
    private_path = _info_file(info, "private_leaderboard.csv")
    public_path = _info_file(info, "public_leaderboard.csv")
    private_board = read_leaderboard_csv(private_path, direction) if private_path is not None else None
    public_board = read_leaderboard_csv(public_path, direction) if public_path is not None else None
    return _outside_competition(
        directory=directory,
        public_dir=public_dir,
        answers_path=directory / "data" / "private" / "test_answer.csv",
        public_descriptions=("description.txt", "description.md"),
        info_description=_info_file(info, "description.txt"),
        metric_name=metric,
        higher_is_better=direction,
        task_type=task_type,
        leaderboard=private_board or public_board,
        public_leaderboard=public_board,
        layout="mledojo",
    )


_REGISTRY_FILES: dict[Layout, str] = {
    "mlebench": "config.yaml, description.md, leaderboard.csv (MLE-bench's mlebench/competitions/<id>/)",
    "mledojo": "description.txt, public_leaderboard.csv, private_leaderboard.csv (MLE-Dojo's "
    "mledojo/competitions/<competition>/info/)",
}


def detect_layout(directory: Path) -> Layout | None:
    """The layout of a competition directory, from its contents; ``None`` when it matches none."""
    directory = Path(directory)
    if (directory / "competition.json").is_file():
        return "wmrl"
    if (directory / "prepared" / "public").is_dir():
        return "mlebench"
    if (directory / "data" / "public").is_dir():
        return "mledojo"
    return None


def registry_info_dir(registry: Path, competition_id: str, layout: Layout) -> Path:
    """The registry folder of one competition: ``registry/<id>/`` (MLE-bench) or ``registry/<id>/info/``
    (MLE-Dojo), resolved.

    Args:
        registry: MLE-bench's ``mlebench/competitions/`` or MLE-Dojo's ``mledojo/competitions/``.
        competition_id: the competition's id (its data directory's name).
        layout: ``"mlebench"`` or ``"mledojo"``.

    Raises:
        ConfigError: ``layout`` has no registry (wmrl's), or the registry has no folder for the id (the
            message names the folder and the files expected there).
        DataError: the folder resolves outside ``registry``.

    Example:
        >>> import tempfile
        >>> registry = Path(tempfile.mkdtemp())
        >>> (registry / "spaceship-titanic").mkdir()
        >>> registry_info_dir(registry, "spaceship-titanic", "mlebench").name
        'spaceship-titanic'
    """
    if layout not in _REGISTRY_FILES:
        raise ConfigError(
            f"layout {layout!r} has no registry: a wmrl competition keeps its metadata in competition.json"
        )
    entry = Path(registry) / competition_id
    info = entry if layout == "mlebench" else entry / "info"
    if not info.is_dir():
        raise ConfigError(
            f"the registry {registry} has no folder for {competition_id!r}: expected {info}/ with "
            f"{_REGISTRY_FILES[layout]}; pass the folder that holds one such folder per competition"
        )
    return _contained(info, Path(registry), "registry folder")


def _not_a_competition(directory: Path) -> str:
    expected = (
        "expected competition.json (wmrl), prepared/public/ (MLE-bench's data dir <data>/<id>) or "
        "data/public/ (MLE-Dojo's prepared dir)"
    )
    if not directory.is_dir():
        return f"{directory} is not a competition: no such directory ({expected})"
    if (directory / "config.yaml").is_file() or (directory / "info").is_dir():
        return (
            f"{directory} is not a competition but looks like a registry folder (MLE-bench's "
            "mlebench/competitions/<id>/ or MLE-Dojo's mledojo/competitions/<id>/): pass the prepared data "
            f"directory as the competition and this folder's parent {directory.parent} as the registry "
            "(registry=, wmrl eval: --registry)"
        )
    return f"{directory} is not a competition: {expected}"


def load_competition(directory: Path, *, registry: Path | None = None, **kwargs: Any) -> Competition:
    """Load a competition from any supported layout, detected from the directory's contents.

    Args:
        directory: a wmrl, MLE-bench or MLE-Dojo competition directory.
        registry: MLE-bench's ``mlebench/competitions/`` or MLE-Dojo's ``mledojo/competitions/``, where
            the competition's registry folder (config, description, leaderboards) lives apart from the
            prepared data; sets the loader's ``info_dir`` (:func:`registry_info_dir`). wmrl's layout
            carries its own metadata and ignores it (and ``kwargs``).
        **kwargs: passed to the layout's loader (``metric=`` is required for MLE-Dojo).

    Raises:
        DataError: the directory matches no known layout (the message says what was expected, and
            what to do when it is a registry folder instead of the data).
        ConfigError: an MLE-Dojo competition without ``metric=``; the registry has no folder for it.
    """
    directory = Path(directory)
    layout = detect_layout(directory)
    if layout is None:
        raise DataError(_not_a_competition(directory))
    if layout == "wmrl":
        return load_wmrl_competition(directory)
    if registry is not None:
        kwargs["info_dir"] = registry_info_dir(registry, directory.name, layout)
    if layout == "mlebench":
        return load_mlebench_competition(directory, **kwargs)
    if kwargs.get("metric") is None:
        raise ConfigError(
            f"{directory} is an MLE-Dojo competition, whose metric is code (utils/metric.py), not a name: "
            f"pass metric= (wmrl eval: --metric NAME), one of {sorted(METRICS)}"
        )
    return load_mledojo_competition(directory, **kwargs)
