"""Tests of the rubric world model and the static code features it reads."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wmrl_algos.errors import ConfigError
from wmrl_envs.kaggle.env import parse_action
from wmrl_envs.kaggle.feedback import parse_feedback
from wmrl_envs.kaggle.outcome import KaggleContext, position_score
from wmrl_envs.kaggle.world_models.features import (
    FEATURE_NAMES,
    analyze_solution,
    extract_code,
    feature_vector,
    inventory_files,
)
from wmrl_envs.kaggle.world_models.rubric import (
    DEFAULT_FAMILY_PRIORS,
    RubricConfig,
    RubricWorldModel,
    score_at_position,
)
from wmrl_envs.world_model import WorldModel, WorldModelQuery

INVENTORY = """# Data inventory
Files under ./input/ (read-only):
- `train.csv` (1,000 bytes)
- `test.csv` (500 bytes)
- `sample_submission.csv` (100 bytes)
## train.csv: 100 rows x 4 columns
| id | int64 | 0 | 1 |
| age | int64 | 0 | 30 |
| fare | float64 | 0 | 7.5 |
| survived | int64 | 0 | 1 |
"""

BINARY = KaggleContext(
    competition_id="toy-binary",
    overview="Predict survival.",
    inventory=INVENTORY,
    metric="roc_auc",
    higher_is_better=True,
    task_type="binary",
    target="survived",
    id_column="id",
    feature_columns=("age", "fare"),
    leaderboard=tuple(0.5 + 0.02 * rank for rank in range(20)),
)
REGRESSION = KaggleContext(
    competition_id="toy-regression",
    overview="Predict fare.",
    inventory=INVENTORY,
    metric="rmse",
    higher_is_better=False,
    task_type="regression",
    target="fare",
    id_column="id",
    feature_columns=("age", "survived"),
    leaderboard=tuple(1.0 + 0.1 * rank for rank in range(20)),
)
TEXT = KaggleContext(
    competition_id="toy-text",
    overview="Classify reviews.",
    inventory=INVENTORY.replace("fare", "review"),
    metric="accuracy",
    higher_is_better=True,
    task_type="binary",
    target="survived",
    id_column="id",
    feature_columns=("age", "review"),
    text_columns=("review",),
    leaderboard=(0.9, 0.8, 0.7, 0.6),
)

HEADER = "import pandas as pd\ntrain = pd.read_csv('input/train.csv')\ntest = pd.read_csv('input/test.csv')\n"
WRITE = "pd.DataFrame({'id': test['id'], 'survived': p}).to_csv('submission.csv', index=False)\n"
GBM_CV = (
    HEADER
    + (
        "from lightgbm import LGBMClassifier\nfrom sklearn.model_selection import cross_val_score\n"
        "model = LGBMClassifier()\n"
        "print(cross_val_score(model, train[['age', 'fare']], train['survived']).mean())\n"
        "model.fit(train[['age', 'fare']], train['survived'])\n"
        "p = model.predict_proba(test[['age', 'fare']])[:, 1]\n"
    )
    + WRITE
)
LINEAR = (
    HEADER
    + (
        "from sklearn.linear_model import LogisticRegression\nmodel = LogisticRegression()\n"
        "model.fit(train[['age', 'fare']], train['survived'])\n"
        "p = model.predict_proba(test[['age', 'fare']])[:, 1]\n"
    )
    + WRITE
)
CONSTANT = HEADER + "p = train['survived'].mean()\n" + WRITE


def predict(context: KaggleContext, action: str, model: RubricWorldModel | None = None) -> dict:
    [prediction] = (model or RubricWorldModel()).predict([WorldModelQuery(context, action)])
    return {"reward": prediction.reward, "observation": prediction.observation, **prediction.info}


def test_rubric_satisfies_the_world_model_protocol() -> None:
    assert isinstance(RubricWorldModel(), WorldModel)


def test_message_without_code_is_malformed_with_the_ladder_floor_not_none() -> None:
    result = predict(BINARY, "I would fit a gradient boosting model with 5-fold CV.")
    assert result["status"] == "malformed"
    assert result["reward"] == 0.0


def test_code_that_does_not_compile_is_predicted_syntax_error() -> None:
    result = predict(BINARY, "```python\nimport pandas as pd\ndef broken(:\n    pass\n```")
    assert result["status"] == "syntax_error"
    assert result["reward"] == 0.0


def test_reading_a_file_missing_from_the_inventory_is_predicted_runtime_error() -> None:
    result = predict(BINARY, GBM_CV.replace("input/test.csv", "input/holdout.csv"))
    assert result["status"] == "runtime_error"
    assert "holdout.csv" in result["gate"]
    assert result["reward"] == pytest.approx(0.1)


def test_naming_an_unknown_column_is_predicted_runtime_error() -> None:
    result = predict(BINARY, LINEAR.replace("'fare'", "'ticket_price'"))
    assert result["status"] == "runtime_error"
    assert "ticket_price" in result["gate"]


def test_columns_the_solution_creates_itself_are_not_unknown() -> None:
    code = LINEAR.replace(
        "model = LogisticRegression()",
        "train['age_x_fare'] = train['age'] * train['fare']\n"
        "model = LogisticRegression()\nprint(train['age_x_fare'].mean())",
    )
    assert predict(BINARY, code)["status"] == "valid"


def test_fitting_a_classifier_to_a_continuous_target_is_predicted_runtime_error() -> None:
    code = LINEAR.replace("'survived'", "'fare'").replace("'age', 'fare'", "'age'")
    result = predict(REGRESSION, code)
    assert result["status"] == "runtime_error"
    assert "classifier" in result["gate"]


def test_solution_that_never_writes_the_submission_is_predicted_no_submission() -> None:
    result = predict(BINARY, LINEAR.replace(WRITE, "print(p[:5])\n"))
    assert result["status"] == "no_submission"
    assert result["reward"] == pytest.approx(0.2)


def test_assessment_exposes_the_features_behind_a_prediction() -> None:
    assessment = RubricWorldModel().assess(WorldModelQuery(BINARY, GBM_CV))
    assert assessment.status == "valid" and assessment.gate == ""
    assert "gbm" in assessment.features.model_families and assessment.features.uses_cross_validation
    assert assessment.position == pytest.approx(predict(BINARY, GBM_CV)["position"])


def test_validated_gradient_boosting_outranks_linear_which_outranks_a_constant_baseline() -> None:
    rewards = [predict(BINARY, code)["reward"] for code in (GBM_CV, LINEAR, CONSTANT)]
    assert all(reward is not None and reward >= 0.5 for reward in rewards)
    assert rewards[0] > rewards[1] > rewards[2]


def test_text_task_rewards_a_text_vectoriser_and_penalises_ignoring_the_text() -> None:
    base = HEADER.replace("fare", "review") + "from sklearn.linear_model import LogisticRegression\n"
    with_text = (
        base
        + (
            "from sklearn.feature_extraction.text import TfidfVectorizer\nv = TfidfVectorizer()\n"
            "m = LogisticRegression().fit(v.fit_transform(train['review']), train['survived'])\n"
            "p = m.predict(v.transform(test['review']))\n"
        )
        + WRITE
    )
    without_text = (
        base + "m = LogisticRegression().fit(train[['age']], train['survived'])\n"
        "p = m.predict(test[['age']])\n" + WRITE
    )
    assert predict(TEXT, with_text)["position"] > predict(TEXT, without_text)["position"]


def test_hard_labels_on_a_ranking_metric_are_penalised() -> None:
    hard = LINEAR.replace(
        "model.predict_proba(test[['age', 'fare']])[:, 1]", "model.predict(test[['age', 'fare']])"
    )
    assert predict(BINARY, hard)["position"] < predict(BINARY, LINEAR)["position"]


def test_simulated_log_parses_back_to_the_predicted_status_and_public_score() -> None:
    result = predict(BINARY, GBM_CV)
    parsed = parse_feedback(result["observation"])
    assert parsed is not None
    assert parsed.status == "valid"
    assert parsed.public_score == pytest.approx(result["public_score"], rel=1e-5)
    failed = parse_feedback(predict(BINARY, "no code")["observation"])
    assert failed is not None and failed.status == "malformed"


def test_predictions_are_deterministic_and_returned_in_query_order() -> None:
    model = RubricWorldModel()
    queries = [WorldModelQuery(BINARY, code) for code in (CONSTANT, GBM_CV, "nothing", LINEAR)]
    first = [prediction.reward for prediction in model.predict(queries)]
    second = [prediction.reward for prediction in model.predict(list(reversed(queries)))]
    assert first == list(reversed(second))
    assert first[2] == 0.0


def test_noise_jitter_is_reproducible_per_seed_and_changes_with_it() -> None:
    noisy = RubricWorldModel(RubricConfig(noise_std=0.1, seed=1))
    again = RubricWorldModel(RubricConfig(noise_std=0.1, seed=1))
    other = RubricWorldModel(RubricConfig(noise_std=0.1, seed=2))
    assert predict(BINARY, LINEAR, noisy)["reward"] == predict(BINARY, LINEAR, again)["reward"]
    assert predict(BINARY, LINEAR, noisy)["reward"] != predict(BINARY, LINEAR, other)["reward"]


def test_query_without_a_kaggle_context_is_rejected_with_the_fix() -> None:
    with pytest.raises(ConfigError, match="KaggleContext"):
        RubricWorldModel().predict([WorldModelQuery({"obs": 1}, LINEAR)])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"noise_std": -0.1}, "noise_std"),
        ({"max_preprocessing_steps": -1}, "max_preprocessing_steps"),
        ({"family_priors": {"gbm": 0.5}}, "lacks"),
        ({"family_priors": {**DEFAULT_FAMILY_PRIORS, "gbm": 1.5}}, "outside"),
    ],
)
def test_invalid_rubric_config_is_rejected_naming_the_value(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RubricConfig(**kwargs)


@given(
    position=st.floats(0.0, 1.0),
    board=st.lists(st.floats(-100, 100, allow_nan=False), min_size=1, max_size=30, unique=True),
    higher=st.booleans(),
)
def test_printed_score_lands_within_one_rank_of_the_predicted_position(
    position: float, board: list[float], higher: bool
) -> None:
    score = score_at_position(position, tuple(board), higher)
    assert abs(position_score(score, tuple(board), higher) - position) <= 1.0 / len(board) + 1e-9


@pytest.mark.parametrize(
    "message",
    [
        "Plan:\n```python\nx = 1\n```\nFinal:\n```python\nimport pandas as pd\ny = 2\n```",
        "Here:\r\n```python\r\nimport os\r\nprint(os.getcwd())\r\n```\r\n",
        "Here:\r~~~python\rx = 1\r~~~\r",
        "~~~~\nx = '```'\n~~~~\n",
        "import os\nprint(os.getcwd())",
        "def broken(:\n  pass",
        "I think a random forest would do well here.",
        "",
        "x = '\ud800'\n",
        "```python\n" + "y = 1\n" * 40_000 + "```",
    ],
)
def test_the_world_model_judges_exactly_the_code_the_env_would_run(message: str) -> None:
    ran = parse_action(message)
    assert extract_code(message) == (ran if isinstance(ran, str) else None)


def test_inventory_files_normalise_input_prefixes() -> None:
    assert inventory_files(INVENTORY) == {"train.csv", "test.csv", "sample_submission.csv"}
    assert inventory_files("see ./input/extra/data.parquet") == {"extra/data.parquet"}


def test_feature_vector_matches_its_names_and_reflects_the_solution() -> None:
    gbm = feature_vector(analyze_solution(GBM_CV, BINARY), BINARY)
    constant = feature_vector(analyze_solution(CONSTANT, BINARY), BINARY)
    assert gbm.shape == constant.shape == (len(FEATURE_NAMES),)
    index = dict(zip(FEATURE_NAMES, range(len(FEATURE_NAMES)), strict=True))
    assert gbm[index["family_gbm"]] == 1 and constant[index["family_gbm"]] == 0
    assert gbm[index["cross_validation"]] == 1 and constant[index["family_constant"]] == 1
    assert gbm[index["proba_for_ranking_metric"]] == 1
