"""The one world-model builder of ``wmrl train --world-model`` and ``wmrl fidelity --world-models``.

Real components throughout: the core world models, a real (stdlib) HTTP server answering the
OpenAI-compatible ``/models`` call, and (``llm`` marker) the offline SmolLM2-135M-Instruct.
"""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from wmrl_adapters.fidelity_cli import FidelityArgs, make_world_model, parse_args
from wmrl_adapters.train.kaggle.world_models import (
    WORLD_MODEL_ALIASES,
    WORLD_MODEL_SPECS,
    build_world_model,
    is_world_model_spec,
    resolve_world_model_spec,
)

from wmrl_algos.errors import BackendUnavailableError, ConfigError
from wmrl_envs.kaggle.world_models.learned import LearnedWorldModel
from wmrl_envs.kaggle.world_models.llm import LLMWorldModel
from wmrl_envs.kaggle.world_models.rubric import RubricWorldModel


@pytest.mark.parametrize(
    ("spec", "kind", "name"),
    [
        ("rubric", RubricWorldModel, "rubric"),
        ("learned", LearnedWorldModel, "learned"),
        ("learned+rubric", LearnedWorldModel, "learned+rubric"),
    ],
)
def test_trainer_and_fidelity_cli_build_the_same_core_world_model_from_one_spec(spec, kind, name) -> None:
    for model in (build_world_model(spec), make_world_model(spec, FidelityArgs(world_models=(spec,)))):
        assert isinstance(model, kind) and model.name == name


def test_an_unknown_spec_lists_every_valid_spelling_and_the_older_names() -> None:
    with pytest.raises(ConfigError, match="unknown world model 'oracle'") as error:
        build_world_model("oracle")
    for choice in (*WORLD_MODEL_SPECS, *WORLD_MODEL_ALIASES):
        assert choice in str(error.value)
    with pytest.raises(ConfigError, match="llm:transformers"):
        build_world_model("llm:ollama")
    with pytest.raises(ConfigError, match="unknown world model 'llm:'"):
        FidelityArgs(world_models=("rubric", "llm:"))


def test_the_fidelity_clis_older_names_resolve_to_the_trainers_specs() -> None:
    assert resolve_world_model_spec("llm-transformers") == "llm:transformers"
    assert resolve_world_model_spec("llm-transformers", llm_model="/m") == "llm:transformers=/m"
    assert resolve_world_model_spec("llm:transformers", llm_model="/m") == "llm:transformers=/m"
    assert resolve_world_model_spec("llm:transformers=/other", llm_model="/m") == "llm:transformers=/other"
    assert resolve_world_model_spec("llm-http", llm_base_url="http://h:1/v1") == "llm:http://h:1/v1"
    with pytest.raises(ConfigError, match="needs llm_base_url"):
        resolve_world_model_spec("llm-http")
    assert not any(is_world_model_spec(alias) for alias in WORLD_MODEL_ALIASES)
    parsed = parse_args(["--world-models", "learned+rubric,llm:http://h:1/v1,llm-transformers"])
    assert parsed.world_models == ("learned+rubric", "llm:http://h:1/v1", "llm-transformers")


def test_unknown_embeddings_are_refused_with_the_choices() -> None:
    with pytest.raises(ConfigError, match="none, minilm"):
        build_world_model("learned", embeddings="bert")


def test_an_http_spec_and_its_alias_build_the_same_llm_world_model_on_a_real_server(models_server) -> None:
    canonical = build_world_model(f"llm:{models_server}", llm_max_new_tokens=7)
    args = FidelityArgs(world_models=("llm-http",), llm_base_url=models_server, llm_max_new_tokens=7)
    alias = make_world_model("llm-http", args)
    for model in (canonical, alias):
        assert isinstance(model, LLMWorldModel) and model.config.max_new_tokens == 7
        assert model.name == canonical.name


def test_an_http_spec_whose_server_is_down_fails_at_build_naming_the_address() -> None:
    with ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as probe:
        closed = f"http://127.0.0.1:{probe.server_address[1]}/v1"
    with pytest.raises(BackendUnavailableError, match=closed.replace(".", "\\.")):
        build_world_model(f"llm:{closed}")


@pytest.mark.slow
@pytest.mark.llm
def test_the_transformers_alias_builds_the_offline_smollm2_world_model_with_the_budget() -> None:
    args = FidelityArgs(world_models=("llm-transformers",), llm_max_new_tokens=5)
    model = make_world_model("llm-transformers", args)
    assert isinstance(model, LLMWorldModel) and model.config.max_new_tokens == 5


@pytest.mark.llm
def test_minilm_embeddings_reach_the_learned_world_model_from_either_cli() -> None:
    model = make_world_model("learned+rubric", FidelityArgs(world_models=("learned",), embeddings="minilm"))
    assert model.name == "learned+rubric+minilm"
    assert build_world_model("learned", embeddings="minilm").name == "learned+minilm"
