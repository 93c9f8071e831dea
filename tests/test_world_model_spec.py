"""One world-model spec builds one world model, and learning world models declare their protocol.

``wmrl train --world-model`` and ``wmrl fidelity --world-models`` read the same spec text; the model
measured must be the model trained. The trainer lets a world model learn from the anchors, and
checkpoints what it learnt, only when it is a :class:`~wmrl_envs.world_model.LearningWorldModel`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
from wmrl_adapters.train.world_models import NoWorldModel, build_world_model

from wmrl_envs.embodied.learned import LearnedProgressConfig, LearnedProgressScorer
from wmrl_envs.embodied.progress import ProgressWorldModel, SimStateProgressScorer
from wmrl_envs.kaggle.world_models.learned import LearnedWorldModel
from wmrl_envs.kaggle.world_models.llm import GenerationResult, LLMWorldModel, chatml
from wmrl_envs.kaggle.world_models.rubric import RubricWorldModel
from wmrl_envs.world_model import LearningWorldModel, Prediction, WorldModel, WorldModelQuery


class _SilentBackend:
    """A text generator that never answers (the LLM world model is only inspected, never asked)."""

    name = "silent"
    context_window = 4096

    def format_chat(self, system: str, user: str) -> str:
        return chatml(system, user)

    def count_tokens(self, text: str) -> int:
        return math.ceil(len(text) / 4)

    def generate(
        self, prompts: Sequence[str], max_new_tokens: int, **_: object
    ) -> list[GenerationResult]:
        raise AssertionError("the protocol check must not generate")


@pytest.mark.parametrize("spec", ["learned", "learned+rubric"])
def test_learned_world_models_are_learning_world_models(spec: str) -> None:
    model = build_world_model(spec)
    assert isinstance(model, LearnedWorldModel)
    assert isinstance(model, LearningWorldModel) and isinstance(model, WorldModel)


@pytest.mark.parametrize(
    "model",
    [
        RubricWorldModel(),
        NoWorldModel(),
        LLMWorldModel(_SilentBackend()),
        ProgressWorldModel(SimStateProgressScorer()),
        ProgressWorldModel(LearnedProgressScorer(LearnedProgressConfig(members=2))),
    ],
    ids=["rubric", "none", "llm", "sim-state", "embodied-learned-scorer"],
)
def test_frozen_world_models_are_not_learning_world_models(model: WorldModel) -> None:
    assert isinstance(model, WorldModel)
    assert not isinstance(model, LearningWorldModel)


def test_a_learning_world_model_state_survives_a_round_trip_through_the_protocol() -> None:
    queries = [WorldModelQuery(None, f"```python\nimport sklearn\nx = {i}\n```") for i in range(14)]
    model: LearningWorldModel = build_world_model("learned")  # type: ignore[assignment]
    model.observe(queries, [0.05 * i for i in range(14)])
    restored: LearningWorldModel = build_world_model("learned")  # type: ignore[assignment]
    assert restored.predict(queries[:1])[0].reward is None
    restored.load_state_dict(model.state_dict())
    before: list[Prediction] = list(model.predict(queries))
    after: list[Prediction] = list(restored.predict(queries))
    assert np.allclose([p.reward for p in before], [p.reward for p in after])
