"""Static features of a Kaggle solution: what the code does, read without running it.

Why a separate module: two world models read the same facts from a solution. The rubric world model
(:mod:`wmrl_envs.kaggle.world_models.rubric`) turns them into gates and a hand-set quality prior; the learned
world model (:mod:`wmrl_envs.kaggle.world_models.learned`) turns them into a numeric vector and learns the
mapping from real executions. Both must agree on what "uses cross-validation" or "reads a file that is
not in the inventory" means, so that is decided once, here, with :mod:`ast` only (nothing is executed
and nothing is imported from the solution).

The analysis is deliberately shallow: it recognises names (``LGBMClassifier``, ``KFold``,
``TfidfVectorizer``) and string constants (``"input/train.csv"``, ``df["Age"]``), not data flow. A
solution that builds a path at run time is not flagged as reading an unknown file; one that names a
column only through a variable is not flagged as naming an unknown column. False negatives of that kind
are the price of being cheap and deterministic.

Example:
    >>> code = "import pandas as pd\\nfrom sklearn.linear_model import Ridge\\n"
    >>> features = analyze_solution(code)
    >>> features.compiles, features.model_families
    (True, ('linear',))
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from wmrl_envs.kaggle.env import parse_action
from wmrl_envs.kaggle.outcome import KaggleContext

__all__ = [
    "ModelFamily",
    "MODEL_FAMILIES",
    "CodeFeatures",
    "extract_code",
    "inventory_files",
    "known_columns",
    "analyze_solution",
    "FEATURE_NAMES",
    "feature_vector",
]

ModelFamily = Literal["gbm", "forest", "linear", "tree", "knn", "svm", "naive_bayes", "neural", "constant"]
"""The model families the analysis recognises (``constant``: a dummy model or no model at all)."""

MODEL_FAMILIES: tuple[ModelFamily, ...] = (
    "gbm",
    "forest",
    "linear",
    "tree",
    "knn",
    "svm",
    "naive_bayes",
    "neural",
    "constant",
)

_FAMILY_PATTERNS: tuple[tuple[ModelFamily, re.Pattern[str]], ...] = (
    ("gbm", re.compile(r"^(LGBM\w*|XGB\w*|CatBoost\w*|\w*GradientBoosting\w*|lightgbm|xgboost|catboost)$")),
    ("forest", re.compile(r"^(RandomForest\w*|ExtraTrees\w*|IsolationForest)$")),
    (
        "linear",
        re.compile(
            r"^(LogisticRegression\w*|LinearRegression|Ridge\w*|Lasso\w*|ElasticNet\w*|SGD(Classifier|Regressor)"
            r"|LinearSVC|LinearSVR|BayesianRidge|HuberRegressor|PoissonRegressor|TweedieRegressor)$"
        ),
    ),
    ("tree", re.compile(r"^DecisionTree\w*$")),
    ("knn", re.compile(r"^KNeighbors\w*$")),
    ("svm", re.compile(r"^(SVC|SVR|NuSVC|NuSVR)$")),
    ("naive_bayes", re.compile(r"^(MultinomialNB|GaussianNB|BernoulliNB|ComplementNB|CategoricalNB)$")),
    ("neural", re.compile(r"^(MLPClassifier|MLPRegressor|torch|keras|tensorflow)$")),
    ("constant", re.compile(r"^Dummy(Classifier|Regressor)$")),
)
_TEXT_VECTORISERS = re.compile(r"^(TfidfVectorizer|CountVectorizer|HashingVectorizer|TfidfTransformer)$")
_CROSS_VALIDATION = re.compile(
    r"^(cross_val_score|cross_validate|cross_val_predict|\w*KFold|ShuffleSplit|StratifiedShuffleSplit)$"
)
_HOLDOUT = re.compile(r"^train_test_split$")
_TUNING = re.compile(r"^(GridSearchCV|RandomizedSearchCV|HalvingGridSearchCV|HalvingRandomSearchCV|optuna)$")
_PREPROCESSING = re.compile(
    r"^(StandardScaler|MinMaxScaler|RobustScaler|OneHotEncoder|OrdinalEncoder|LabelEncoder|TargetEncoder"
    r"|SimpleImputer|KNNImputer|ColumnTransformer|get_dummies|fillna|PolynomialFeatures|QuantileTransformer"
    r"|PowerTransformer|factorize)$"
)
_ENSEMBLE = re.compile(r"^(VotingClassifier|VotingRegressor|StackingClassifier|StackingRegressor)$")
_CLASSIFIER = re.compile(r"^(\w*Classifier|LogisticRegression\w*|SVC|NuSVC|LinearSVC|\w+NB)$")
_REGRESSOR = re.compile(
    r"^(\w*Regressor|\w*Regression|Ridge|RidgeCV|Lasso\w*|ElasticNet\w*|SVR|NuSVR|LinearSVR"
    r"|BayesianRidge)$"
)
_READ_CALL = re.compile(r"^(read_\w+|open|load|loadtxt|genfromtxt|read_table)$")
_DATA_FILE = re.compile(r"[\w\-./]+\.(?:csv|tsv|parquet|feather|json|jsonl|txt|pkl|pickle|npy|npz|zip|gz)\b")
_SUBMISSION_NAME = "submission.csv"


@dataclass(frozen=True)
class CodeFeatures:
    """What a solution's source says about it, without running it.

    Attributes:
        has_code: the action contains a Python solution at all.
        compiles: it parses and compiles.
        writes_submission: it writes ``submission.csv`` (a ``to_csv``/``open(..., "w")`` and the name).
        read_files: the data files it reads (string constants in read calls), normalised to names
            relative to ``input/``.
        unknown_files: the subset of ``read_files`` that the inventory does not list (empty when no
            inventory was given).
        unknown_columns: column names it subscripts (``df["x"]``) that exist nowhere in the context and
            that it does not create itself (empty when no context was given).
        model_families: the model families it constructs or imports, in :data:`MODEL_FAMILIES` order.
        uses_text_vectoriser: it vectorises free text (TF-IDF, counts, hashing).
        uses_cross_validation: it cross-validates (``KFold``, ``cross_val_score``...).
        uses_holdout: it holds out a validation split (``train_test_split``).
        uses_tuning: it searches hyperparameters (grid / random search, optuna).
        preprocessing_steps: how many distinct preprocessing tools it uses (scalers, encoders, imputers).
        uses_ensemble: it combines models (voting, stacking, or several families).
        uses_predict_proba: it predicts probabilities (matters for ranking metrics such as ROC AUC).
        constructs_classifier: it constructs a classification estimator (``...Classifier``, logistic
            regression, SVC, naive Bayes).
        constructs_regressor: it constructs a regression estimator.
        n_lines: non-empty source lines.
        n_models: model constructor calls.
    """

    has_code: bool
    compiles: bool
    writes_submission: bool = False
    read_files: tuple[str, ...] = ()
    unknown_files: tuple[str, ...] = ()
    unknown_columns: tuple[str, ...] = ()
    model_families: tuple[ModelFamily, ...] = ()
    uses_text_vectoriser: bool = False
    uses_cross_validation: bool = False
    uses_holdout: bool = False
    uses_tuning: bool = False
    preprocessing_steps: int = 0
    uses_ensemble: bool = False
    uses_predict_proba: bool = False
    constructs_classifier: bool = False
    constructs_regressor: bool = False
    n_lines: int = 0
    n_models: int = 0


def extract_code(action: object) -> str | None:
    """The Python solution a world model should judge: exactly what the sandbox would run, or ``None``.

    Why one rule: a world model that reads another block than the one executed (the longest fenced
    block instead of the first ``python`` one, a CRLF message, a ``~~~`` fence) predicts the outcome of
    code that never runs, and its calibration pairs then measure nothing. So this delegates to
    :func:`wmrl_envs.kaggle.env.parse_action`, the env's one judge of an action: a message the env would
    grade ``malformed`` (no code, over-long, not valid Unicode) has no code here either.

    >>> extract_code("Here:\\r\\n```python\\r\\nprint(1)\\r\\n```")
    'print(1)\\n'
    >>> extract_code("I would train a random forest.") is None
    True
    """
    code = parse_action(action)
    return code if isinstance(code, str) else None


def inventory_files(inventory: str) -> frozenset[str]:
    """The data file names an inventory text mentions (``train.csv``, ``input/test.csv`` → ``test.csv``).

    >>> sorted(inventory_files("input/train.csv: 891 rows\\ntest.csv (418 rows)"))
    ['test.csv', 'train.csv']
    """
    return frozenset(_normalise_path(match) for match in _DATA_FILE.findall(inventory))


def known_columns(context: KaggleContext) -> frozenset[str]:
    """Every column name the public context mentions (declared columns plus words of the inventory)."""
    declared = {context.target, context.id_column, *context.feature_columns, *context.text_columns}
    words = re.findall(r"[^\s,:;|()\[\]{}'\"`]+", context.inventory)
    return frozenset(declared | set(words))


def _normalise_path(path: str) -> str:
    name = path.strip().replace("\\", "/")
    while name.startswith("./"):
        name = name[2:]
    for prefix in ("../input/", "/input/", "input/"):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def _called_name(node: ast.Call) -> str:
    function = node.func
    if isinstance(function, ast.Attribute):
        return function.attr
    if isinstance(function, ast.Name):
        return function.id
    return ""


def _string_constants(node: ast.AST) -> Iterable[str]:
    for child in ast.walk(node):
        if isinstance(child, ast.Constant) and isinstance(child.value, str):
            yield child.value


def _names_used(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.alias):
            names.update(node.name.split("."))
            if node.asname:
                names.add(node.asname)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.update(node.module.split("."))
    return names


def _subscripted_columns(tree: ast.AST) -> tuple[set[str], set[str]]:
    """Column names read through ``x["col"]`` / ``x[["a", "b"]]`` and those the code assigns itself."""
    read: set[str] = set()
    created: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            keys = set(_string_constants(node.slice))
            (created if isinstance(node.ctx, ast.Store) else read).update(keys)
        elif isinstance(node, ast.Call) and _called_name(node) in ("rename", "assign", "DataFrame"):
            created.update(_string_constants(node))
        elif isinstance(node, ast.Dict):
            created.update(
                key.value for key in node.keys if isinstance(key, ast.Constant) and isinstance(key.value, str)
            )
    return read, created


def analyze_solution(code: str | None, context: KaggleContext | None = None) -> CodeFeatures:
    """Read a solution's features; gates that need the context are skipped when it is ``None``.

    Args:
        code: the solution source (from :func:`extract_code`), or ``None`` when the action had none.
        context: the competition's public context, for the file and column gates.

    Returns:
        The solution's :class:`CodeFeatures`.
    """
    if code is None:
        return CodeFeatures(has_code=False, compiles=False)
    n_lines = sum(1 for line in code.splitlines() if line.strip())
    try:
        tree = ast.parse(code)
        compile(tree, "<solution>", "exec")
    except (SyntaxError, ValueError, TypeError):
        return CodeFeatures(has_code=True, compiles=False, n_lines=n_lines)

    names = _names_used(tree)
    families = tuple(
        family for family, pattern in _FAMILY_PATTERNS if any(pattern.match(name) for name in names)
    )
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    called = [_called_name(call) for call in calls]
    n_models = sum(1 for name in called if any(pattern.match(name) for _, pattern in _FAMILY_PATTERNS))
    if not families:
        families = ("constant",)

    read_files = sorted(
        {
            _normalise_path(constant)
            for call in calls
            if _READ_CALL.match(_called_name(call))
            for constant in _string_constants(call)
            if _DATA_FILE.fullmatch(constant.strip()) and not constant.endswith(_SUBMISSION_NAME)
        }
    )
    all_constants = set(_string_constants(tree))
    writes_submission = any(constant.endswith(_SUBMISSION_NAME) for constant in all_constants) and any(
        name in ("to_csv", "savetxt", "write", "open", "to_parquet", "copyfile", "copy", "copy2")
        for name in called
    )

    unknown_files: tuple[str, ...] = ()
    unknown_columns: tuple[str, ...] = ()
    if context is not None:
        listed = inventory_files(context.inventory)
        unknown_files = tuple(name for name in read_files if listed and name not in listed)
        read, created = _subscripted_columns(tree)
        columns = known_columns(context)
        unknown_columns = tuple(
            sorted(
                column
                for column in read - created
                if column not in columns
                and not _DATA_FILE.fullmatch(column)
                and column.strip() == column
                and column != ""
            )
        )

    preprocessing = {name for name in names | set(called) if _PREPROCESSING.match(name)}
    return CodeFeatures(
        has_code=True,
        compiles=True,
        writes_submission=writes_submission,
        read_files=tuple(read_files),
        unknown_files=unknown_files,
        unknown_columns=unknown_columns,
        model_families=families,
        uses_text_vectoriser=any(_TEXT_VECTORISERS.match(name) for name in names),
        uses_cross_validation=any(_CROSS_VALIDATION.match(name) for name in names),
        uses_holdout=any(_HOLDOUT.match(name) for name in names),
        uses_tuning=any(_TUNING.match(name) for name in names),
        preprocessing_steps=len(preprocessing),
        uses_ensemble=any(_ENSEMBLE.match(name) for name in names) or len(set(families) - {"constant"}) > 1,
        uses_predict_proba="predict_proba" in called,
        constructs_classifier=any(_CLASSIFIER.match(name) for name in called),
        constructs_regressor=any(_REGRESSOR.match(name) and not _CLASSIFIER.match(name) for name in called),
        n_lines=n_lines,
        n_models=n_models,
    )


_TASK_TYPES = ("binary", "multiclass", "regression")
FEATURE_NAMES: tuple[str, ...] = (
    "has_code",
    "compiles",
    "writes_submission",
    "reads_unknown_file",
    "names_unknown_column",
    *(f"family_{family}" for family in MODEL_FAMILIES),
    "text_vectoriser",
    "cross_validation",
    "holdout",
    "tuning",
    "preprocessing_steps",
    "ensemble",
    "predict_proba",
    "log_lines",
    "log_models",
    *(f"task_{task}" for task in _TASK_TYPES),
    "text_task",
    "text_task_without_vectoriser",
    "proba_for_ranking_metric",
    "higher_is_better",
)
"""Names of the entries of :func:`feature_vector`, in order."""

_RANKING_METRICS = ("roc_auc", "auc", "log_loss", "logloss", "gini", "average_precision")


def feature_vector(features: CodeFeatures, context: KaggleContext | None = None) -> np.ndarray:
    """A fixed-length float vector of a solution's features (names in :data:`FEATURE_NAMES`).

    Task-dependent entries (task type, text modality, metric interactions) are 0 without a context.

    >>> feature_vector(analyze_solution("x = 1")).shape == (len(FEATURE_NAMES),)
    True
    """
    task_type = context.task_type if context is not None else None
    text_task = bool(context is not None and context.text_columns)
    ranking_metric = bool(context is not None and context.metric.lower() in _RANKING_METRICS)
    values = [
        features.has_code,
        features.compiles,
        features.writes_submission,
        bool(features.unknown_files),
        bool(features.unknown_columns),
        *(family in features.model_families for family in MODEL_FAMILIES),
        features.uses_text_vectoriser,
        features.uses_cross_validation,
        features.uses_holdout,
        features.uses_tuning,
        features.preprocessing_steps,
        features.uses_ensemble,
        features.uses_predict_proba,
        np.log1p(features.n_lines),
        np.log1p(features.n_models),
        *(task_type == task for task in _TASK_TYPES),
        text_task,
        text_task and not features.uses_text_vectoriser,
        ranking_metric and features.uses_predict_proba,
        bool(context is not None and context.higher_is_better),
    ]
    return np.asarray(values, dtype=np.float64)
