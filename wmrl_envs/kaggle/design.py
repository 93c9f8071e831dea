"""The solution design space of the CPU code agent: a design is a few categorical choices, rendered to code.

Why a design space: training an LLM code agent needs a GPU, but WMRL's claim is about the *environment*
side (real executions are expensive, a world model is cheap and biased), and that can be measured on a
CPU with a policy that writes real, runnable solutions from a structured space. A :class:`Design` is
one choice per decision of :data:`DECISIONS`: the model family (linear, kNN, SVM, a tree, two forests,
three boosting libraries incl. LightGBM), numeric imputation, scaling, categorical encoding, text
vectorisation, a target transform, two discretised hyperparameters (capacity and learning
rate/regularisation, mapped per family) and the validation scheme (none, hold-out with early stopping
for boosting, 3-fold CV). :func:`render_design` turns it into a readable script on the same preamble as
the reference solutions (:func:`~wmrl_envs.kaggle.references.solution_preamble`), which the sandbox
runs for real.

Statelessness: the rendered script's first line is a ``# wmrl-design: {...}`` JSON header, so whoever
holds only the action text (a trainer re-scoring log-probs, a resumed run, a reader) recovers the exact
decisions with :func:`parse_design`.

Not every decision matters for every task (a target transform on a classification task, TF-IDF
without text columns, scaling for a tree): :func:`relevant_decisions` says which do, so a policy
gradient is not spent on choices that cannot change the outcome.

The space is rich enough that the best design differs between tasks (``benchmarks/design_sweep.py``
runs a sweep and writes the per-task best design).

Example:
    >>> design = Design(model="lightgbm", validation="holdout")
    >>> parse_design(design_header(design)) == design
    True
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from pathlib import Path

import numpy as np

from wmrl_algos.errors import ConfigError
from wmrl_envs.kaggle.competition import Competition
from wmrl_envs.kaggle.metrics import METRICS, get_metric
from wmrl_envs.kaggle.outcome import Outcome
from wmrl_envs.kaggle.references import SUBMISSION_WRITER, solution_preamble

__all__ = [
    "DECISIONS",
    "STATUSES",
    "Design",
    "design_header",
    "parse_design",
    "relevant_decisions",
    "render_design",
    "task_features",
    "TASK_FEATURES",
    "feedback_features",
    "FEEDBACK_FEATURES",
]

DECISIONS: dict[str, tuple[str, ...]] = {
    "model": (
        "linear",
        "knn",
        "svm",
        "tree",
        "random_forest",
        "extra_trees",
        "hist_gbm",
        "sklearn_gbm",
        "lightgbm",
    ),
    "impute": ("median", "mean", "most_frequent"),
    "scale": ("none", "standard", "quantile"),
    "categorical": ("ordinal", "onehot", "drop"),
    "text": ("length", "tfidf"),
    "target": ("none", "log1p"),
    "capacity": ("small", "medium", "large"),
    "rate": ("low", "medium", "high"),
    "validation": ("none", "holdout", "kfold"),
}
"""Every decision of a design and its choices, in a fixed order (the policy's heads follow it)."""

STATUSES: tuple[str, ...] = (
    "valid",
    "runtime_error",
    "timeout",
    "no_submission",
    "syntax_error",
    "malformed",
    "sandbox_error",
)
_HEADER = re.compile(r"^# wmrl-design: (\{.*\})\s*$", re.MULTILINE)
_TREES = ("tree", "random_forest", "extra_trees", "hist_gbm", "sklearn_gbm", "lightgbm")
_BOOSTING = ("hist_gbm", "sklearn_gbm", "lightgbm")


@dataclass(frozen=True)
class Design:
    """One solution design: a choice for every decision of :data:`DECISIONS`.

    Raises:
        ConfigError: a choice that is not in :data:`DECISIONS` (the message lists the valid ones).

    Example:
        >>> Design(model="knn", capacity="large").model
        'knn'
    """

    model: str = "linear"
    impute: str = "median"
    scale: str = "standard"
    categorical: str = "onehot"
    text: str = "tfidf"
    target: str = "none"
    capacity: str = "medium"
    rate: str = "medium"
    validation: str = "none"

    def __post_init__(self) -> None:
        for name, choices in DECISIONS.items():
            if getattr(self, name) not in choices:
                raise ConfigError(
                    f"design {name}={getattr(self, name)!r} is not a choice; pick from {choices}"
                )

    def indices(self) -> tuple[int, ...]:
        """The index of each choice in :data:`DECISIONS` order."""
        return tuple(DECISIONS[name].index(getattr(self, name)) for name in DECISIONS)

    @classmethod
    def from_indices(cls, indices: tuple[int, ...] | list[int]) -> Design:
        """Inverse of :meth:`indices`."""
        return cls(**{name: DECISIONS[name][int(i)] for name, i in zip(DECISIONS, indices, strict=True)})

    def short(self) -> str:
        """A compact one-line label, e.g. ``lightgbm/holdout/cap=large/rate=low``."""
        return f"{self.model}/{self.validation}/cap={self.capacity}/rate={self.rate}/{self.categorical}"


def design_header(design: Design) -> str:
    """The ``# wmrl-design: {...}`` comment line that makes a rendered script self-describing."""
    return f"# wmrl-design: {json.dumps(asdict(design), sort_keys=True)}\n"


def parse_design(code: str) -> Design | None:
    """The design a rendered script (or a message holding one) was made from; ``None`` if it has none."""
    match = _HEADER.search(code)
    if match is None:
        return None
    try:
        data = json.loads(match.group(1))
        if set(data) != {f.name for f in fields(Design)}:
            return None
        return Design(**data)
    except (ValueError, TypeError, ConfigError):
        return None


def relevant_decisions(design: Design, competition: Competition) -> tuple[bool, ...]:
    """Which decisions can change what ``design`` does on ``competition`` (in :data:`DECISIONS` order)."""
    model = design.model
    relevant = {
        "model": True,
        "impute": True,
        "scale": model not in _TREES,
        "categorical": True,
        "text": bool(competition.text_columns),
        "target": competition.task_type == "regression",
        "capacity": model not in ("linear", "svm"),
        "rate": model not in ("tree", "knn"),
        "validation": True,
    }
    return tuple(relevant[name] for name in DECISIONS)


def _estimator(design: Design, classify: bool, kind: str) -> tuple[str, str]:
    """``(import line, constructor)`` of the design's model."""
    level = DECISIONS["capacity"].index(design.capacity)
    rate = DECISIONS["rate"].index(design.rate)
    early = design.validation == "holdout"
    model = design.model
    if model == "linear":
        strength = (0.1, 1.0, 10.0)[rate]
        if classify:
            return (
                "from sklearn.linear_model import LogisticRegression",
                f"LogisticRegression(C={strength}, max_iter=2000)",
            )
        return "from sklearn.linear_model import Ridge", f"Ridge(alpha={1.0 / strength})"
    if model == "knn":
        k = (50, 15, 5)[level]
        name = "KNeighborsClassifier" if classify else "KNeighborsRegressor"
        return f"from sklearn.neighbors import {name}", f"{name}(n_neighbors={k})"
    if model == "svm":
        strength = (0.3, 1.0, 3.0)[rate]
        if classify:
            probability = ", probability=True" if kind == "probability" else ""
            return "from sklearn.svm import SVC", f"SVC(C={strength}{probability}, random_state=0)"
        return "from sklearn.svm import SVR", f"SVR(C={strength})"
    if model == "tree":
        depth = (3, 8, None)[level]
        name = "DecisionTreeClassifier" if classify else "DecisionTreeRegressor"
        return f"from sklearn.tree import {name}", f"{name}(max_depth={depth}, random_state=0)"
    if model in ("random_forest", "extra_trees"):
        trees = (30, 100, 300)[level]
        leaf = (5, 2, 1)[rate]
        stem = "RandomForest" if model == "random_forest" else "ExtraTrees"
        name = stem + ("Classifier" if classify else "Regressor")
        return (
            f"from sklearn.ensemble import {name}",
            f"{name}(n_estimators={trees}, min_samples_leaf={leaf}, random_state=0, n_jobs=1)",
        )
    learning_rate = (0.03, 0.1, 0.3)[rate]
    if model == "hist_gbm":
        rounds = (100, 300, 800)[level]
        name = "HistGradientBoosting" + ("Classifier" if classify else "Regressor")
        return (
            f"from sklearn.ensemble import {name}",
            f"{name}(learning_rate={learning_rate}, max_iter={rounds}, early_stopping={early}, "
            "validation_fraction=0.2, n_iter_no_change=30, random_state=0)",
        )
    if model == "sklearn_gbm":
        rounds = (50, 150, 400)[level]
        name = "GradientBoosting" + ("Classifier" if classify else "Regressor")
        stop = ", n_iter_no_change=20, validation_fraction=0.2" if early else ""
        return (
            f"from sklearn.ensemble import {name}",
            f"{name}(learning_rate={learning_rate}, n_estimators={rounds}, max_depth=3{stop}, "
            "random_state=0)",
        )
    rounds = (100, 400, 1200)[level]
    name = "LGBMClassifier" if classify else "LGBMRegressor"
    return (
        f"from lightgbm import {name}, early_stopping",
        f"{name}(n_estimators={rounds}, learning_rate={learning_rate}, num_leaves=31, subsample=0.8, "
        "subsample_freq=1, colsample_bytree=0.8, min_child_samples=10, random_state=0, n_jobs=1, "
        "deterministic=True, force_row_wise=True, verbose=-1)",
    )


_SCORERS = {
    "roc_auc": "roc_auc",
    "log_loss": "neg_log_loss",
    "accuracy": "accuracy",
    "macro_f1": "f1_macro",
    "rmse": "neg_root_mean_squared_error",
    "mae": "neg_mean_absolute_error",
    "rmsle": "neg_root_mean_squared_log_error",
}


def _features_block(design: Design, competition: Competition) -> str:
    scaler = {
        "none": None,
        "standard": "StandardScaler()",
        "quantile": 'QuantileTransformer(n_quantiles=200, output_distribution="normal", random_state=0)',
    }[design.scale if design.model not in _TREES else "none"]
    lines = [
        "from scipy import sparse",
        "from sklearn.impute import SimpleImputer",
        "",
        f'imputer = SimpleImputer(strategy="{design.impute}", keep_empty_features=True)',
        "blocks_train = [imputer.fit_transform(numeric_frame(train))]",
        "blocks_test = [imputer.transform(numeric_frame(test))]",
    ]
    if scaler is not None:
        lines += [
            "from sklearn.preprocessing import QuantileTransformer, StandardScaler",
            f"scaler = {scaler}",
            "blocks_train[0] = scaler.fit_transform(blocks_train[0])",
            "blocks_test[0] = scaler.transform(blocks_test[0])",
        ]
    if design.categorical == "ordinal":
        lines += [
            "if categorical:",
            "    from sklearn.preprocessing import OrdinalEncoder",
            '    encoder = OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1, '
            "encoded_missing_value=-2)",
            "    blocks_train.append(encoder.fit_transform(train[categorical].astype(str)))",
            "    blocks_test.append(encoder.transform(test[categorical].astype(str)))",
        ]
    elif design.categorical == "onehot":
        lines += [
            "if categorical:",
            "    from sklearn.preprocessing import OneHotEncoder",
            '    encoder = OneHotEncoder(handle_unknown="infrequent_if_exist", min_frequency=5, '
            "max_categories=30)",
            "    blocks_train.append(encoder.fit_transform(train[categorical].astype(str)))",
            "    blocks_test.append(encoder.transform(test[categorical].astype(str)))",
        ]
    if design.text == "tfidf" and competition.text_columns:
        lines += [
            "from sklearn.feature_extraction.text import TfidfVectorizer",
            "for column in TEXT:",
            "    tfidf = TfidfVectorizer(max_features=1500, ngram_range=(1, 2), min_df=2, sublinear_tf=True)",
            '    blocks_train.append(tfidf.fit_transform(train[column].fillna("").astype(str)))',
            '    blocks_test.append(tfidf.transform(test[column].fillna("").astype(str)))',
        ]
    dense = design.model in ("hist_gbm",)
    lines += [
        "X_train = sparse.hstack([sparse.csr_matrix(b) for b in blocks_train]).tocsr()",
        "X_test = sparse.hstack([sparse.csr_matrix(b) for b in blocks_test]).tocsr()",
        "if X_train.shape[1] == 0:",
        "    X_train = sparse.csr_matrix(np.zeros((len(train), 1)))",
        "    X_test = sparse.csr_matrix(np.zeros((len(test), 1)))",
    ]
    if dense:
        lines.append("X_train, X_test = X_train.toarray(), X_test.toarray()")
    return "\n" + "\n".join(lines) + "\n"


def render_design(design: Design, competition: Competition) -> str:
    """A complete, readable solution script for ``competition`` following ``design``.

    The script reads ``./input/``, prints a validation score when the design validates, and writes
    ``./submission.csv``; its first line is :func:`design_header`.
    """
    kind = get_metric(competition.metric).kind
    classify = competition.task_type != "regression"
    log_target = design.target == "log1p" and not classify
    importer, constructor = _estimator(design, classify, kind)
    scoring = _SCORERS.get(competition.metric, "neg_root_mean_squared_error")
    if log_target:
        scoring = "neg_root_mean_squared_error"
    lines = [
        "",
        "from threadpoolctl import threadpool_limits",
        "from sklearn.metrics import get_scorer",
        "from sklearn.model_selection import cross_val_score, train_test_split",
        importer,
        "",
        "threadpool_limits(1)  # one thread: runs are reproducible and share the machine fairly",
        f"y_fit = np.log1p(y.clip(lower=0)) if {log_target} else y",
        f"model = {constructor}",
        f'scorer = get_scorer("{scoring}")',
    ]
    stratify = "y_fit" if classify else "None"
    if design.validation == "holdout":
        lines += [
            "X_fit, X_valid, y_part, y_valid = train_test_split(",
            f"    X_train, y_fit, test_size=0.2, random_state=0, stratify={stratify})",
        ]
        if design.model == "lightgbm":
            lines += [
                "model.fit(X_fit, y_part, eval_set=[(X_valid, y_valid)],",
                "          callbacks=[early_stopping(50, verbose=False)])",
                'print("best iteration:", model.best_iteration_)',
            ]
        else:
            lines.append("model.fit(X_fit, y_part)")
        lines += [
            "try:",
            '    print("validation score:", round(abs(scorer(model, X_valid, y_valid)), 5))',
            "except ValueError as error:",
            '    print("validation failed:", error)',
        ]
        if design.model != "lightgbm":
            lines.append("model.fit(X_train, y_fit)")
    elif design.validation == "kfold":
        lines += [
            "try:",
            f'    scores = cross_val_score(model, X_train, y_fit, cv=3, scoring="{scoring}")',
            '    print("3-fold validation score:", round(abs(float(np.mean(scores))), 5))',
            "except ValueError as error:",
            '    print("validation failed:", error)',
            "model.fit(X_train, y_fit)",
        ]
    else:
        lines.append("model.fit(X_train, y_fit)")
    if kind == "probability":
        lines.append(
            "prediction = np.clip(model.predict_proba(X_test)[:, list(model.classes_).index(1)], "
            "1e-4, 1 - 1e-4)"
        )
    elif log_target:
        lines.append("prediction = np.expm1(model.predict(X_test))")
    else:
        lines.append("prediction = model.predict(X_test)")
    description = f"design {design.short()}"
    code = design_header(design) + solution_preamble(competition, "design", description)
    return code + _features_block(design, competition) + "\n".join(lines) + "\n" + SUBMISSION_WRITER


TASK_FEATURES = 20
"""Length of :func:`task_features`."""
FEEDBACK_FEATURES = len(STATUSES) + 3
"""Length of :func:`feedback_features`."""
_METRIC_NAMES = tuple(sorted(METRICS))


def task_features(competition: Competition) -> np.ndarray:
    """What a participant reads off a task before writing code, as ``TASK_FEATURES`` floats.

    Task type, metric and its direction, rows and columns (log scale), shares of numeric, categorical
    and text columns, the missing-value share, class balance (classification) or target skew
    (regression). Public files only; cached per competition directory.
    """
    return _task_features(
        str(Path(competition.public_dir) / competition.train_file),
        competition.task_type,
        competition.metric,
        competition.train_target or competition.target,
        tuple(competition.text_columns),
        competition.id_column,
    ).copy()


@lru_cache(maxsize=128)
def _task_features(
    train_path: str, task_type: str, metric: str, target: str, text: tuple[str, ...], id_column: str
) -> np.ndarray:
    import pandas as pd

    frame = pd.read_csv(train_path, nrows=20000)
    features = [c for c in frame.columns if c not in (id_column, target)]
    numeric = [c for c in features if c not in text and pd.api.types.is_numeric_dtype(frame[c])]
    categorical = [c for c in features if c not in text and c not in numeric]
    n_features = max(1, len(features))
    y = frame[target] if target in frame.columns else pd.Series(dtype=float)
    balance = skew = 0.0
    if task_type != "regression" and len(y):
        shares = y.value_counts(normalize=True)
        balance = float(shares.min())
        classes = float(len(shares))
    else:
        classes = 0.0
        values = pd.to_numeric(y, errors="coerce").dropna()
        skew = float(np.tanh(values.skew() / 3.0)) if len(values) > 2 else 0.0
    metric_onehot = [1.0 if metric == name else 0.0 for name in _METRIC_NAMES]
    metric_onehot = (metric_onehot + [0.0] * 7)[:7]
    row = [
        float(task_type == "binary"),
        float(task_type == "multiclass"),
        float(task_type == "regression"),
        *metric_onehot,
        float(get_metric(metric).higher_is_better),
        math.log10(max(10, len(frame))) / 5.0,
        math.log10(n_features + 1) / 2.0,
        len(numeric) / n_features,
        len(categorical) / n_features,
        float(bool(text)),
        float(frame[features].isna().mean().mean()) if features else 0.0,
        balance,
        skew,
        math.log10(classes + 1.0),
    ]
    return np.asarray(row, dtype=np.float32)


def feedback_features(outcome: Outcome | None, competition: Competition) -> np.ndarray:
    """What the agent learned from its last execution: status one-hot, public position, known flags.

    The public score is read as a position on the competition's PUBLIC leaderboard (what a Kaggle
    participant sees), so it is comparable across tasks; unknown when the run was not valid.
    """
    row = np.zeros(FEEDBACK_FEATURES, dtype=np.float32)
    if outcome is None:
        return row
    status = outcome.status if outcome.status in STATUSES else "sandbox_error"
    row[STATUSES.index(status)] = 1.0
    board = competition.public_leaderboard
    if outcome.status == "valid" and outcome.public_score is not None and board is not None:
        row[len(STATUSES)] = float(board.position(float(outcome.public_score)))
        row[len(STATUSES) + 1] = 1.0
    row[len(STATUSES) + 2] = 1.0
    return row
