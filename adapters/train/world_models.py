"""Build the world model a run asks for (``--world-model``), and the null one of the all-real baselines.

Why here and not in the core: ``llm:<backend>`` needs the adapters (transformers, HTTP); the core
world models (rubric, learned) need nothing. Optional dependencies are imported only when asked for.
"""

from __future__ import annotations

from collections.abc import Sequence

from wmrl_algos.errors import ConfigError
from wmrl_envs.world_model import Prediction, WorldModel, WorldModelQuery

__all__ = ["NoWorldModel", "build_world_model"]


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


def build_world_model(spec: str) -> WorldModel:
    """``rubric``, ``learned``, ``learned+rubric``, ``llm:transformers[=MODEL_DIR]`` or ``llm:http://HOST/v1``.

    Raises:
        ConfigError: an unknown spec (the message lists the valid ones).
        MissingDependencyError: the LLM backend's extra is not installed.
    """
    from wmrl_envs.kaggle.world_models.learned import LearnedWorldModel
    from wmrl_envs.kaggle.world_models.rubric import RubricWorldModel

    if spec == "rubric":
        return RubricWorldModel()
    if spec == "learned":
        return LearnedWorldModel()
    if spec == "learned+rubric":
        return LearnedWorldModel(RubricWorldModel())
    if spec.startswith("llm:"):
        from wmrl_envs.kaggle.world_models.llm import LLMWorldModel

        backend = spec[len("llm:") :]
        if backend == "transformers" or backend.startswith("transformers="):
            from wmrl_adapters.transformers_backend import TransformersBackend, TransformersConfig

            model = backend.partition("=")[2]
            config = TransformersConfig(model=model) if model else TransformersConfig()
            return LLMWorldModel(TransformersBackend(config))
        if backend.startswith(("http://", "https://")):
            from wmrl_adapters.openai_backend import OpenAIClientConfig, OpenAICompatibleBackend

            return LLMWorldModel(OpenAICompatibleBackend(OpenAIClientConfig(base_url=backend)))
        raise ConfigError(
            f"world model {spec!r}: unknown LLM backend {backend!r}; use llm:transformers[=MODEL_DIR] or "
            "llm:http://HOST:PORT/v1"
        )
    raise ConfigError(
        f"unknown world model {spec!r}; choose from rubric, learned, learned+rubric, llm:transformers[=DIR], "
        "llm:http://HOST:PORT/v1"
    )
