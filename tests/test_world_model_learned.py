"""Tests of the online-learned world model, its uncertainty and the uncertainty anchor ranking.

The "real" rewards here come from a fixed hidden rule over the solution's recipe, not from executing
code: these tests check the learning algorithm (does it pick up a rule the rubric's priors get wrong,
does it know where it has not looked), and a rule is the only ground truth that makes those claims
checkable in milliseconds. Real executions are exercised in ``tests/test_fidelity.py``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from wmrl_algos.errors import CheckpointError, ConfigError
from wmrl_envs.kaggle.outcome import KaggleContext
from wmrl_envs.kaggle.world_models.learned import (
    Embedder,
    LearnedWorldModel,
    LearnedWorldModelConfig,
    UncertainWorldModel,
    uncertainty_anchor_ranking,
)
from wmrl_envs.kaggle.world_models.rubric import RubricWorldModel
from wmrl_envs.world_model import Prediction, WorldModel, WorldModelQuery

CONTEXT = KaggleContext(
    competition_id="toy",
    overview="",
    inventory="train.csv test.csv\nid a b c y",
    metric="rmse",
    higher_is_better=False,
    task_type="regression",
    target="y",
    id_column="id",
    feature_columns=("a", "b", "c"),
    leaderboard=tuple(float(rank) for rank in range(1, 21)),
)
MODELS = {
    "linear": ("from sklearn.linear_model import Ridge", "Ridge()"),
    "forest": ("from sklearn.ensemble import RandomForestRegressor", "RandomForestRegressor()"),
    "gbm": ("from lightgbm import LGBMRegressor", "LGBMRegressor()"),
    "knn": ("from sklearn.neighbors import KNeighborsRegressor", "KNeighborsRegressor()"),
}
# The hidden truth of this toy task: linear models win, boosting overfits (the rubric believes the opposite).
TRUTH = {"linear": 0.95, "forest": 0.7, "gbm": 0.6, "knn": 0.55}


def solution(family: str, cross_validation: bool, scaled: bool, variant: int) -> str:
    imported, constructor = MODELS[family]
    lines = [
        "import pandas as pd",
        imported,
        "train = pd.read_csv('input/train.csv')",
        "test = pd.read_csv('input/test.csv')",
        f"seed = {variant}",
        f"model = {constructor}",
    ]
    if scaled:
        lines.insert(1, "from sklearn.preprocessing import StandardScaler")
        lines.append("scaler = StandardScaler()")
    if cross_validation:
        lines.insert(1, "from sklearn.model_selection import cross_val_score")
        lines.append("print(cross_val_score(model, train[['a', 'b']], train['y']).mean())")
    lines += [
        "model.fit(train[['a', 'b']], train['y'])",
        "test[['id']].assign(y=model.predict(test[['a', 'b']])).to_csv('submission.csv', index=False)",
    ]
    return "\n".join(lines) + "\n"


def true_reward(family: str, cross_validation: bool, scaled: bool, variant: int) -> float:
    """The toy truth plus a fixed pseudo-random run-to-run scatter of up to ±0.02 (real scores are noisy)."""
    scatter = 0.02 * np.sin(7.0 * variant + 3.0 * len(family) + cross_validation + 2 * scaled)
    return TRUTH[family] - 0.05 * (not cross_validation) - 0.03 * (not scaled) + float(scatter)


def corpus(
    variants: range, families: tuple[str, ...] = tuple(MODELS)
) -> tuple[list[WorldModelQuery], list[float]]:
    queries, rewards = [], []
    for family, cross_validation, scaled, variant in itertools.product(
        families, (True, False), (True, False), variants
    ):
        queries.append(WorldModelQuery(CONTEXT, solution(family, cross_validation, scaled, variant)))
        rewards.append(true_reward(family, cross_validation, scaled, variant))
    return queries, rewards


class HashingEmbedder:
    """A real (if crude) embedder: hashed bag of identifiers, to exercise the Embedder path offline."""

    name = "hashing"

    def __init__(self, dim: int = 32) -> None:
        self.dim = dim
        self.calls = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += len(texts)
        rows = np.zeros((len(texts), self.dim))
        for row, text in zip(rows, texts, strict=True):
            for token in text.replace("(", " ").replace(")", " ").split():
                row[sum(map(ord, token)) % self.dim] += 1.0
        return rows


def small(**overrides: object) -> LearnedWorldModelConfig:
    return LearnedWorldModelConfig(**{"min_observations": 8, **overrides})  # type: ignore[arg-type]


def test_learned_model_satisfies_the_world_model_and_uncertainty_protocols() -> None:
    model = LearnedWorldModel()
    assert isinstance(model, WorldModel)
    assert isinstance(model, UncertainWorldModel)
    assert isinstance(HashingEmbedder(), Embedder)


def test_before_enough_observations_it_says_none_never_zero() -> None:
    model = LearnedWorldModel(config=small())
    queries, rewards = corpus(range(1))
    model.observe(queries[:5], rewards[:5])
    predictions = model.predict(queries[:3])
    assert [prediction.reward for prediction in predictions] == [None, None, None]
    assert not model.is_fitted
    assert np.isinf(model.uncertainty(queries[:3])).all()


def test_before_enough_observations_a_stacked_model_returns_its_base_unchanged() -> None:
    rubric = RubricWorldModel()
    model = LearnedWorldModel(rubric, config=small())
    queries, _ = corpus(range(1))
    assert model.name == "learned+rubric"
    assert [p.reward for p in model.predict(queries)] == [p.reward for p in rubric.predict(queries)]


def test_stacked_on_the_rubric_it_learns_a_task_truth_the_rubric_gets_wrong() -> None:
    rubric = RubricWorldModel()
    model = LearnedWorldModel(rubric, config=small())
    train_queries, train_rewards = corpus(range(3))
    test_queries, test_rewards = corpus(range(10, 12))
    model.observe(train_queries, train_rewards)
    learned_error = np.mean(
        [abs(p.reward - r) for p, r in zip(model.predict(test_queries), test_rewards, strict=True)]
    )
    rubric_error = np.mean(
        [abs(p.reward - r) for p, r in zip(rubric.predict(test_queries), test_rewards, strict=True)]
    )
    assert learned_error < 0.5 * rubric_error
    by_family = {
        family: model.predict([WorldModelQuery(CONTEXT, solution(family, True, True, 99))])[0].reward
        for family in MODELS
    }
    assert max(by_family, key=by_family.__getitem__) == "linear"


def test_it_learns_from_structural_features_alone_without_a_base() -> None:
    model = LearnedWorldModel(config=small())
    model.observe(*corpus(range(3)))
    test_queries, test_rewards = corpus(range(20, 21))
    predicted = np.array([p.reward for p in model.predict(test_queries)])
    assert np.abs(predicted - np.array(test_rewards)).mean() < 0.05
    assert all(0.0 <= value <= 1.0 for value in predicted)


def test_unknown_real_rewards_are_skipped_not_learned_as_zero() -> None:
    model = LearnedWorldModel(config=small())
    queries, rewards = corpus(range(2))
    model.observe(queries, [None if index % 2 else reward for index, reward in enumerate(rewards)])
    assert model.n_observations == len(queries) // 2
    assert min(p.reward for p in model.predict(queries)) > 0.4


def test_uncertainty_is_higher_for_kinds_of_solution_never_observed() -> None:
    model = LearnedWorldModel(config=small(competition_buckets=0))
    model.observe(*corpus(range(4), families=("linear", "forest")))
    seen, _ = corpus(range(30, 31), families=("linear",))
    unseen, _ = corpus(range(30, 31), families=("knn",))
    assert model.uncertainty(unseen).mean() > model.uncertainty(seen).mean()
    [prediction] = model.predict(unseen[:1])
    assert prediction.info["std"] == pytest.approx(model.uncertainty(unseen[:1])[0])
    assert prediction.info["epistemic_std"] <= prediction.info["std"]


def test_anchor_ranking_puts_the_most_uncertain_group_first() -> None:
    model = LearnedWorldModel(config=small(competition_buckets=0))
    model.observe(*corpus(range(4), families=("linear", "forest")))
    groups = [corpus(range(40, 41), families=(family,))[0] for family in ("linear", "knn", "forest")]
    ranking = uncertainty_anchor_ranking(groups, model)
    assert sorted(ranking) == [0, 1, 2]
    assert ranking[0] == 1


def test_anchor_ranking_rejects_a_model_that_returns_the_wrong_shape() -> None:
    class Broken:
        name = "broken"

        def predict(self, queries: list[WorldModelQuery]) -> list[Prediction]:
            return []

        def uncertainty(self, queries: list[WorldModelQuery]) -> np.ndarray:
            return np.zeros(1)

    with pytest.raises(ConfigError, match="shape"):
        uncertainty_anchor_ranking([corpus(range(1))[0][:3]], Broken())


def test_buffer_is_bounded_and_old_observations_age_out() -> None:
    model = LearnedWorldModel(config=small(buffer_size=10))
    queries, rewards = corpus(range(2))
    model.observe(queries, rewards)
    assert model.n_observations == 10
    assert model.n_observed_total == len(queries) > 10


def test_embedder_features_are_used_and_computed_once_per_solution() -> None:
    embedder = HashingEmbedder()
    model = LearnedWorldModel(embedder=embedder, config=small(use_structural_features=False))
    queries, rewards = corpus(range(2))
    model.predict(queries)
    model.observe(queries, rewards)
    assert embedder.calls == len(queries)
    assert model.is_fitted
    assert model.predict(queries[:1])[0].reward is not None


def test_state_dict_round_trip_reproduces_predictions_exactly() -> None:
    model = LearnedWorldModel(RubricWorldModel(), config=small())
    queries, rewards = corpus(range(2))
    model.observe(queries, rewards)
    restored = LearnedWorldModel(RubricWorldModel(), config=small())
    restored.load_state_dict(model.state_dict())
    assert [p.reward for p in restored.predict(queries)] == [p.reward for p in model.predict(queries)]
    np.testing.assert_array_equal(restored.uncertainty(queries), model.uncertainty(queries))


def test_corrupt_or_mismatched_state_is_rejected() -> None:
    model = LearnedWorldModel(config=small())
    model.observe(*corpus(range(1)))
    state = model.state_dict()
    with pytest.raises(CheckpointError, match="version"):
        LearnedWorldModel(config=small()).load_state_dict({**state, "version": 99})
    with pytest.raises(CheckpointError, match="must match"):
        LearnedWorldModel(config=small()).load_state_dict({**state, "targets": state["targets"][:-1]})
    other = LearnedWorldModel(embedder=HashingEmbedder(), config=small())
    other.observe(*corpus(range(1)))
    with pytest.raises(CheckpointError, match="width"):
        other.load_state_dict(state)


def test_observe_rejects_mismatched_lengths() -> None:
    queries, rewards = corpus(range(1))
    with pytest.raises(ConfigError, match="one reward"):
        LearnedWorldModel().observe(queries, rewards[:-1])


def test_a_model_without_any_features_is_rejected() -> None:
    with pytest.raises(ConfigError, match="no features"):
        LearnedWorldModel(config=LearnedWorldModelConfig(use_structural_features=False))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_observations": 1}, "min_observations"),
        ({"buffer_size": 4, "min_observations": 8}, "buffer_size"),
        ({"competition_buckets": -1}, "competition_buckets"),
        ({"reward_range": (1.0, 0.0)}, "reward_range"),
    ],
)
def test_invalid_learned_config_is_rejected_naming_the_value(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        LearnedWorldModelConfig(**kwargs)
