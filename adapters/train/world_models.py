"""The one place a world model is built from its name: ``wmrl train --world-model``, ``wmrl fidelity``.

Why one builder: the trainer and the fidelity harness must measure *the same* world model when a user
writes the same name; two builders with two spellings drift (one gets the embedder, the other the
generation budget). The spec syntax is the trainer's (:data:`WORLD_MODEL_SPECS`); the fidelity CLI's
older names are accepted as aliases (:data:`WORLD_MODEL_ALIASES`) so no user script breaks.

Why here and not in the core: ``llm:<backend>`` needs the adapters (transformers, HTTP) and the MiniLM
embedder lives in :mod:`wmrl_adapters.embeddings`; the core world models (rubric, learned) need nothing.
Optional dependencies are imported only when asked for.
"""

from __future__ import annotations

from collections.abc import Sequence

from wmrl_algos.errors import ConfigError
from wmrl_envs.world_model import Prediction, WorldModel, WorldModelQuery

__all__ = [
    "WORLD_MODEL_SPECS",
    "WORLD_MODEL_ALIASES",
    "EMBEDDINGS",
    "NoWorldModel",
    "is_world_model_spec",
    "resolve_world_model_spec",
    "transformers_model_dir",
    "build_world_model",
]

WORLD_MODEL_SPECS = (
    "rubric",
    "learned",
    "learned+rubric",
    "llm:transformers[=MODEL_DIR]",
    "llm:http://HOST:PORT/v1",
)
"""The spellings :func:`build_world_model` accepts (``MODEL_DIR`` and the URL are the user's)."""

WORLD_MODEL_ALIASES = {
    "llm-transformers": "llm:transformers (model from llm_model)",
    "llm-http": "llm:<llm_base_url>",
}
"""Older names of ``wmrl fidelity``, kept working; :func:`resolve_world_model_spec` translates them."""

EMBEDDINGS = ("none", "minilm")
"""Code embeddings the learned world models may add to their structural features."""

_LEARNED = ("learned", "learned+rubric")


class NoWorldModel:
    """The world model of ``--algo grpo`` and ``anchors``: never asked for a reward that is used.

    It answers ``None`` (unknown) instantly, so an all-real baseline is charged no world-model time.

    Example:
        >>> NoWorldModel().predict([WorldModelQuery(None, "x")])[0].reward is None
        True
    """

    name = "none"

    def predict(self, queries: Sequence[WorldModelQuery]) -> list[Prediction]:
        """One unknown prediction per query."""
        return [Prediction(reward=None) for _ in queries]


def _unknown(spec: str) -> ConfigError:
    return ConfigError(
        f"unknown world model {spec!r}; choose from {', '.join(WORLD_MODEL_SPECS)} "
        f"(or the older names {', '.join(WORLD_MODEL_ALIASES)})"
    )


def is_world_model_spec(spec: str) -> bool:
    """Whether ``spec`` is one of :data:`WORLD_MODEL_SPECS`' spellings (aliases are not).

    Example:
        >>> is_world_model_spec("llm:transformers=/models/qwen"), is_world_model_spec("llm:ollama")
        (True, False)
    """
    if spec in ("rubric", *_LEARNED):
        return True
    if not spec.startswith("llm:"):
        return False
    backend = spec[len("llm:") :]
    address = backend.partition("://")[2] if backend.startswith(("http://", "https://")) else None
    return bool(backend == "transformers" or transformers_model_dir(spec) or address)


def transformers_model_dir(spec: str) -> str | None:
    """The ``MODEL_DIR`` of an ``llm:transformers=MODEL_DIR`` spec (``None`` for every other spec).

    Example:
        >>> transformers_model_dir("llm:transformers=/models/qwen"), transformers_model_dir("rubric")
        ('/models/qwen', None)
    """
    prefix = "llm:transformers="
    if not spec.startswith(prefix):
        return None
    return spec[len(prefix) :] or None


def resolve_world_model_spec(
    spec: str, *, llm_model: str | None = None, llm_base_url: str | None = None
) -> str:
    """The canonical spec of ``spec``: aliases translated, a bare ``llm:transformers`` given ``llm_model``.

    Args:
        spec: a :data:`WORLD_MODEL_SPECS` spelling or a :data:`WORLD_MODEL_ALIASES` name.
        llm_model: model folder for ``llm-transformers`` / a bare ``llm:transformers`` (``None``: the
            backend's default, the offline SmolLM2-135M-Instruct).
        llm_base_url: the OpenAI-compatible server of ``llm-http``.

    Returns:
        A spec :func:`build_world_model` builds.

    Raises:
        ConfigError: an unknown spec (the message lists the valid ones), or ``llm-http`` without
            ``llm_base_url``.

    Example:
        >>> resolve_world_model_spec("llm-http", llm_base_url="http://127.0.0.1:8000/v1")
        'llm:http://127.0.0.1:8000/v1'
        >>> resolve_world_model_spec("learned+rubric")
        'learned+rubric'
    """
    if spec == "llm-http":
        if not llm_base_url:
            raise ConfigError("world model 'llm-http' needs llm_base_url (e.g. http://127.0.0.1:8000/v1)")
        spec = f"llm:{llm_base_url}"
    elif spec == "llm-transformers":
        spec = "llm:transformers"
    if spec == "llm:transformers" and llm_model:
        spec = f"llm:transformers={llm_model}"
    if not is_world_model_spec(spec):
        raise _unknown(spec)
    return spec


def build_world_model(
    spec: str, *, embeddings: str = "none", llm_max_new_tokens: int | None = None
) -> WorldModel:
    """Build the world model ``spec`` names (see :data:`WORLD_MODEL_SPECS`; aliases are accepted).

    Args:
        spec: ``rubric``, ``learned``, ``learned+rubric``, ``llm:transformers[=MODEL_DIR]`` or
            ``llm:http://HOST:PORT/v1`` (or an alias, resolved by :func:`resolve_world_model_spec`
            without an ``llm_model`` / ``llm_base_url``).
        embeddings: ``"minilm"`` adds all-MiniLM-L6-v2 code embeddings to the learned world models
            (needs ``wmrl[llm]``; their name gets ``+minilm``); ``"none"`` keeps structural features.
        llm_max_new_tokens: generation budget of an LLM world model (``None``: its default).

    Returns:
        A fresh world model.

    Raises:
        ConfigError: an unknown spec or ``embeddings`` (the message lists the valid ones).
        MissingDependencyError: the model's optional dependency is not installed.

    Example:
        >>> build_world_model("learned+rubric").name  # doctest: +ELLIPSIS
        'learned...'
    """
    if embeddings not in EMBEDDINGS:
        raise ConfigError(f"embeddings={embeddings!r} is unknown; choose from {', '.join(EMBEDDINGS)}")
    spec = resolve_world_model_spec(spec)
    from wmrl_envs.kaggle.world_models.learned import LearnedWorldModel
    from wmrl_envs.kaggle.world_models.rubric import RubricWorldModel

    if spec == "rubric":
        return RubricWorldModel()
    if spec in _LEARNED:
        embedder = None
        if embeddings == "minilm":
            from wmrl_adapters.embeddings import MiniLMEmbedder

            embedder = MiniLMEmbedder()
        model = LearnedWorldModel(RubricWorldModel() if spec == "learned+rubric" else None, embedder=embedder)
        if embedder is not None:
            model.name += "+minilm"
        return model
    from wmrl_envs.kaggle.world_models.llm import LLMWorldModel, LLMWorldModelConfig

    config = (
        LLMWorldModelConfig()
        if llm_max_new_tokens is None
        else LLMWorldModelConfig(max_new_tokens=llm_max_new_tokens)
    )
    backend = spec[len("llm:") :]
    if backend.startswith("transformers"):
        from wmrl_adapters.transformers_backend import TransformersBackend, TransformersConfig

        return LLMWorldModel(
            TransformersBackend(TransformersConfig(model=transformers_model_dir(spec))), config=config
        )
    from wmrl_adapters.openai_backend import OpenAIClientConfig, OpenAICompatibleBackend

    return LLMWorldModel(OpenAICompatibleBackend(OpenAIClientConfig(base_url=backend)), config=config)
