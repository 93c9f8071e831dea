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
from wmrl_adapters.fidelity_cli import FidelityArgs, make_world_model, parse_args
from wmrl_adapters.train.kaggle.config import TrainConfig
from wmrl_adapters.train.kaggle.world_models import (
    NoWorldModel,
    WorldModelSpec,
    build_world_model,
    llm_world_model_config,
)

from wmrl_algos.errors import ConfigError
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


SPELLINGS = [
    "rubric",
    "learned",
    "learned+rubric",
    "learned:embeddings=minilm",
    "learned+rubric:embeddings=minilm",
    "llm:transformers",
    "llm:transformers=/models/qwen",
    "llm:transformers=/models/qwen,max_new_tokens=96",
    "llm:http://127.0.0.1:8000/v1",
    "llm:https://models.example/v1,max_new_tokens=7",
]


@pytest.mark.parametrize("text", SPELLINGS)
def test_a_spec_written_back_reads_as_the_same_spec(text: str) -> None:
    spec = WorldModelSpec.parse(text)
    assert str(spec) == text
    assert WorldModelSpec.parse(str(spec)) == spec


def test_options_left_at_their_default_are_left_out_of_the_text() -> None:
    assert str(WorldModelSpec.parse("learned:embeddings=none")) == "learned"
    assert WorldModelSpec.parse("llm:transformers").max_new_tokens is None


@pytest.mark.parametrize(
    "text",
    [
        "llm:ollama",
        "oracle",
        "llm:",
        "llm:transformers=",
        "llm:http://",
        "llm-http",
        "rubric:embeddings=minilm",
        "learned:embeddings=bert",
        "learned:colour=red",
        "llm:transformers,max_new_tokens=0",
        "llm:transformers,max_new_tokens=many",
        "llm:transformers,max_new_tokens=5,max_new_tokens=6",
    ],
)
def test_a_spec_the_builder_refuses_is_refused_at_config_time_with_the_builders_message(text: str) -> None:
    with pytest.raises(ConfigError) as built:
        build_world_model(text)
    with pytest.raises(ConfigError) as configured:
        TrainConfig(world_model=text)
    assert str(configured.value) == str(built.value)
    assert repr(text) in str(built.value), "the message quotes the spec it refuses"


def _trained(text: str) -> object:
    """The world model ``wmrl train --world-model TEXT`` builds (the trainer's own call)."""
    return build_world_model(TrainConfig(world_model=text).world_model)


def _measured(text: str, **flags: object) -> object:
    """The world model ``wmrl fidelity --world-models TEXT`` builds."""
    return make_world_model(text, FidelityArgs(world_models=(text,), **flags))  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["rubric", "learned", "learned+rubric"])
def test_train_and_fidelity_build_the_same_core_world_model_from_one_spec(text: str) -> None:
    trained, measured = _trained(text), _measured(text)
    assert type(trained) is type(measured) and trained.name == measured.name  # type: ignore[attr-defined]
    if isinstance(trained, LearnedWorldModel):
        assert isinstance(measured, LearnedWorldModel)
        assert trained.config == measured.config and trained.embedder is measured.embedder is None
        assert type(trained.base) is type(measured.base)


@pytest.mark.parametrize("options", ["", ",max_new_tokens=96"])
def test_train_and_fidelity_build_the_same_llm_world_model_from_one_spec(
    models_server: str, options: str
) -> None:
    text = f"llm:{models_server}{options}"
    trained, measured = _trained(text), _measured(text)
    assert isinstance(trained, LLMWorldModel) and isinstance(measured, LLMWorldModel)
    assert trained.config == measured.config and trained.name == measured.name
    default = llm_world_model_config(WorldModelSpec.parse("llm:transformers")).max_new_tokens
    assert trained.config.max_new_tokens == (96 if options else default)


def test_the_transformers_spec_resolves_to_one_budget_in_both_commands_without_loading_a_model() -> None:
    for text in ("llm:transformers", "llm:transformers,max_new_tokens=96"):
        trained = llm_world_model_config(WorldModelSpec.parse(TrainConfig(world_model=text).world_model))
        measured = llm_world_model_config(FidelityArgs(world_models=(text,)).spec(text))
        assert trained == measured


def test_minilm_embeddings_are_a_spec_option_that_the_fidelity_flag_only_abbreviates() -> None:
    assert TrainConfig(world_model="learned:embeddings=minilm").world_model == "learned:embeddings=minilm"
    flag = FidelityArgs(world_models=("learned", "rubric"), embeddings="minilm")
    assert flag.spec("learned") == WorldModelSpec.parse("learned:embeddings=minilm")
    assert flag.spec("rubric") == WorldModelSpec.parse("rubric")


def test_fidelity_keeps_a_specs_options_inside_its_comma_separated_list() -> None:
    args = parse_args(["--world-models", "rubric,llm:http://h:1/v1,max_new_tokens=7,learned:embeddings=minilm"])
    assert args.world_models == ("rubric", "llm:http://h:1/v1,max_new_tokens=7", "learned:embeddings=minilm")


def test_the_deprecated_budget_flag_still_works_and_names_its_replacement(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = parse_args(["--world-models", "llm:http://h:1/v1", "--llm-max-new-tokens", "7"])
    assert args.spec("llm:http://h:1/v1").max_new_tokens == 7
    message = capsys.readouterr().err
    assert "--llm-max-new-tokens is deprecated" in message and "max_new_tokens=7" in message
