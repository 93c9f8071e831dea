"""Tests of the offline MiniLM code embedder and its use by the learned world model (real model, CPU).

Loading sentence-transformers and the model takes 15-45 s on a busy 2-core machine, so every test that
needs the model is marked slow; the cheap checks run by default.
"""

from __future__ import annotations

import numpy as np
import pytest
from wmrl_adapters.embeddings import MiniLMEmbedder, minilm_model_dir

from wmrl_algos.errors import ConfigError
from wmrl_envs.kaggle.world_models.learned import Embedder, LearnedWorldModel, LearnedWorldModelConfig
from wmrl_envs.world_model import WorldModelQuery

LGBM_CLASSIFIER = "import lightgbm as lgb\nmodel = lgb.LGBMClassifier(n_estimators=300)\nmodel.fit(X, y)"
LGBM_REGRESSOR = "import lightgbm as lgb\nmodel = lgb.LGBMRegressor(n_estimators=300)\nmodel.fit(X, y)"
PROSE = "The weather in the mountains was cold and the hikers turned back before noon."


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    pytest.importorskip("sentence_transformers")
    return MiniLMEmbedder()


def test_the_model_directory_is_found_inside_the_installed_wheel() -> None:
    directory = minilm_model_dir()
    assert (directory / "modules.json").is_file()
    assert (directory / "model.safetensors").is_file()


@pytest.mark.slow
def test_embeddings_are_unit_vectors_of_fixed_width_and_deterministic(embedder: MiniLMEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    vectors = embedder.embed([LGBM_CLASSIFIER, PROSE])
    assert vectors.shape == (2, embedder.dim) == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(MiniLMEmbedder.embed(embedder, [PROSE])[0], vectors[1], atol=1e-6)
    assert embedder.embed([]).shape == (0, 384)


@pytest.mark.slow
def test_similar_solutions_embed_closer_than_unrelated_text(embedder: MiniLMEmbedder) -> None:
    classifier, regressor, prose = embedder.embed([LGBM_CLASSIFIER, LGBM_REGRESSOR, PROSE])
    assert classifier @ regressor > classifier @ prose + 0.3


@pytest.mark.slow
def test_repeated_texts_are_served_from_the_cache_not_re_encoded(embedder: MiniLMEmbedder) -> None:
    encoded: list[int] = []
    original = embedder._model.encode

    def counting(texts, **kwargs):
        encoded.append(len(texts))
        return original(texts, **kwargs)

    embedder._model.encode = counting
    try:
        embedder.embed(["x = 1", "x = 2", "x = 1"])
        embedder.embed(["x = 2", "x = 3"])
    finally:
        embedder._model.encode = original
    assert encoded == [2, 1]


@pytest.mark.slow
def test_the_learned_world_model_learns_from_minilm_embeddings(embedder: MiniLMEmbedder) -> None:
    good = [
        f"from lightgbm import LGBMRegressor\nmodel = LGBMRegressor(n_estimators={n})"
        for n in range(100, 112)
    ]
    bad = [f"import random\nprediction = random.random() * {n}" for n in range(12)]
    model = LearnedWorldModel(
        embedder=embedder, config=LearnedWorldModelConfig(min_observations=8, use_structural_features=False)
    )
    model.observe([WorldModelQuery(None, text) for text in good + bad], [0.9] * 12 + [0.3] * 12)
    good_new, bad_new = model.predict(
        [
            WorldModelQuery(
                None, "from lightgbm import LGBMRegressor\nmodel = LGBMRegressor(n_estimators=999)"
            ),
            WorldModelQuery(None, "import random\nprediction = random.random() * 77"),
        ]
    )
    assert good_new.reward is not None and bad_new.reward is not None
    assert good_new.reward - bad_new.reward > 0.3


@pytest.mark.parametrize("kwargs", [{"batch_size": 0}, {"max_chars": 0}, {"cache_size": 0}])
def test_invalid_embedder_sizes_are_rejected(kwargs: dict) -> None:
    with pytest.raises(ConfigError, match="positive"):
        MiniLMEmbedder(**kwargs)
