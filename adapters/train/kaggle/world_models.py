"""The one place a world model is built from its name: ``wmrl train --world-model``, ``wmrl fidelity``.

Why one builder: the trainer and the fidelity harness must measure *the same* world model when a user
writes the same name; two builders with two spellings drift (one gets the embedder, the other the
generation budget). So a spec is one object, :class:`WorldModelSpec`: its text is what both commands
read (:data:`WORLD_MODEL_SPECS`), every setting of the model it builds is written in it (the LLM's token
budget, the learned models' embeddings), and the model is built from it and nothing else. The fidelity
CLI's older names are accepted as aliases (:data:`WORLD_MODEL_ALIASES`) so no user script breaks.

Why here and not in the core: ``llm:<backend>`` needs the adapters (transformers, HTTP) and the MiniLM
embedder lives in :mod:`wmrl_adapters.embeddings`; the core world models (rubric, learned) need nothing.
Optional dependencies are imported only when asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, get_args

from wmrl_algos.errors import ConfigError, MissingDependencyError
from wmrl_envs.world_model import Prediction, WorldModel, WorldModelQuery

if TYPE_CHECKING:
    from wmrl_envs.kaggle.world_models.llm import LLMWorldModelConfig

__all__ = [
    "WORLD_MODEL_SPECS",
    "WORLD_MODEL_ALIASES",
    "EMBEDDINGS",
    "WorldModelSpec",
    "NoWorldModel",
    "is_world_model_spec",
    "resolve_world_model_spec",
    "transformers_model_dir",
    "build_world_model",
    "llm_world_model_config",
    "split_world_model_specs",
    "check_embeddings_available",
]

WORLD_MODEL_SPECS = (
    "rubric",
    "learned[:embeddings=minilm]",
    "learned+rubric[:embeddings=minilm]",
    "llm:transformers[=MODEL_DIR][,max_new_tokens=N]",
    "llm:http://HOST:PORT/v1[,max_new_tokens=N]",
)
"""The spellings :class:`WorldModelSpec` parses (``MODEL_DIR``, the URL and ``N`` are the user's)."""

WORLD_MODEL_ALIASES = {
    "llm-transformers": "llm:transformers (model from llm_model)",
    "llm-http": "llm:<llm_base_url>",
}
"""Older names of ``wmrl fidelity``, kept working; :func:`resolve_world_model_spec` translates them."""

Embeddings = Literal["none", "minilm"]
EMBEDDINGS: tuple[str, ...] = get_args(Embeddings)
"""Code embeddings the learned world models may add to their structural features."""

WorldModelName = Literal["rubric", "learned", "learned+rubric", "llm"]
_LEARNED = ("learned", "learned+rubric")
_TRANSFORMERS = "transformers"
_OPTIONS = ("embeddings", "max_new_tokens")


@dataclass(frozen=True)
class WorldModelSpec:
    """Which world model to build and every setting it is built with; its text is the CLI's spelling.

    ``NAME[:OPTIONS]``: ``rubric``; ``learned`` and ``learned+rubric`` take ``embeddings=minilm``;
    ``llm:BACKEND[,max_new_tokens=N]`` where ``BACKEND`` is ``transformers[=MODEL_DIR]`` (without a
    folder: the offline SmolLM2-135M-Instruct) or an OpenAI-compatible server's ``http(s)://`` URL.
    ``str(spec)`` writes the canonical text (defaults left out), and ``WorldModelSpec.parse`` reads it
    back to an equal spec.

    Attributes:
        name: the world model.
        backend: ``llm`` only: ``"transformers"`` or the server URL.
        model_dir: ``llm:transformers`` only: the model folder (``None``: the offline SmolLM2).
        embeddings: learned models only: ``"minilm"`` adds all-MiniLM-L6-v2 code embeddings (needs
            ``wmrl[llm]``) to the structural features.
        max_new_tokens: ``llm`` only: generation budget per prediction; ``None`` is the LLM world
            model's own default (:class:`~wmrl_envs.kaggle.world_models.llm.LLMWorldModelConfig`, the
            paper's 1024 tokens). Lower it for speed on a CPU, at the price of reports cut short
            (read as unknown).

    Raises:
        ConfigError: an option the world model does not take, or an invalid value (the message names
            it and the valid spellings).

    Example:
        >>> spec = WorldModelSpec.parse("llm:transformers=/models/qwen,max_new_tokens=96")
        >>> spec.model_dir, spec.max_new_tokens, str(spec)
        ('/models/qwen', 96, 'llm:transformers=/models/qwen,max_new_tokens=96')
        >>> str(WorldModelSpec.parse("learned+rubric:embeddings=minilm"))
        'learned+rubric:embeddings=minilm'
    """

    name: WorldModelName
    backend: str | None = None
    model_dir: str | None = None
    embeddings: Embeddings = "none"
    max_new_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.name not in get_args(WorldModelName):
            raise _unknown(str(self.name))
        if self.embeddings not in EMBEDDINGS:
            raise ConfigError(
                f"embeddings={self.embeddings!r} is unknown; choose from {', '.join(EMBEDDINGS)}"
            )
        if self.embeddings != "none" and self.name not in _LEARNED:
            raise ConfigError(
                f"world model {self.name!r} takes no embeddings (got embeddings={self.embeddings!r}); "
                "only learned and learned+rubric do"
            )
        if self.name != "llm":
            if self.backend is not None or self.model_dir is not None or self.max_new_tokens is not None:
                raise ConfigError(
                    f"world model {self.name!r} takes no LLM settings (backend={self.backend!r}, "
                    f"model_dir={self.model_dir!r}, max_new_tokens={self.max_new_tokens!r}); "
                    "they belong to llm:..."
                )
            return
        if self.backend != _TRANSFORMERS and not _is_url(self.backend):
            raise _unknown(f"llm:{self.backend or ''}")
        if self.model_dir is not None and (self.backend != _TRANSFORMERS or not self.model_dir):
            raise ConfigError(
                f"model_dir={self.model_dir!r} needs backend 'transformers' and a folder; "
                "write llm:transformers=MODEL_DIR"
            )
        if self.max_new_tokens is not None and (
            isinstance(self.max_new_tokens, bool)
            or not isinstance(self.max_new_tokens, int)
            or self.max_new_tokens < 1
        ):
            raise ConfigError(
                f"max_new_tokens={self.max_new_tokens!r}; pass a positive number of tokens "
                "(e.g. llm:transformers,max_new_tokens=96)"
            )

    @classmethod
    def parse(
        cls, text: str, *, llm_model: str | None = None, llm_base_url: str | None = None
    ) -> WorldModelSpec:
        """Read a spec's text: the one parser of ``wmrl train``, ``wmrl fidelity`` and the builder.

        Args:
            text: a :data:`WORLD_MODEL_SPECS` spelling or a :data:`WORLD_MODEL_ALIASES` name.
            llm_model: model folder for ``llm-transformers`` / a bare ``llm:transformers`` (``None``:
                the offline SmolLM2-135M-Instruct).
            llm_base_url: the OpenAI-compatible server of ``llm-http``.

        Raises:
            ConfigError: an unknown world model or option (the message lists the valid spellings), or
                ``llm-http`` without ``llm_base_url``.

        Example:
            >>> WorldModelSpec.parse("llm-http", llm_base_url="http://127.0.0.1:8000/v1").backend
            'http://127.0.0.1:8000/v1'
        """
        if not isinstance(text, str):
            raise ConfigError(f"world model {text!r} is not text; pass a spec such as 'learned+rubric'")
        if text == "llm-http":
            if not llm_base_url:
                raise ConfigError(
                    "world model 'llm-http' needs llm_base_url (e.g. http://127.0.0.1:8000/v1)"
                )
            text = f"llm:{llm_base_url}"
        elif text == "llm-transformers":
            text = f"llm:{_TRANSFORMERS}"
        spec = cls._parse(text)
        if spec.backend == _TRANSFORMERS and spec.model_dir is None and llm_model:
            spec = replace(spec, model_dir=llm_model)
        return spec

    def with_defaults(
        self, *, embeddings: str | None = None, max_new_tokens: int | None = None
    ) -> WorldModelSpec:
        """This spec with the settings it leaves at their default filled in from a command's flags.

        ``embeddings`` reaches only the learned models, ``max_new_tokens`` only the LLM ones, so one
        flag can be given for a list of specs (``wmrl fidelity --world-models``).

        Raises:
            ConfigError: an unknown ``embeddings`` or a budget below 1.

        Example:
            >>> str(WorldModelSpec.parse("learned").with_defaults(embeddings="minilm", max_new_tokens=96))
            'learned:embeddings=minilm'
        """
        if embeddings is not None and embeddings not in EMBEDDINGS:
            raise ConfigError(f"embeddings={embeddings!r} is unknown; choose from {', '.join(EMBEDDINGS)}")
        changes: dict[str, object] = {}
        if embeddings is not None and self.name in _LEARNED and self.embeddings == "none":
            changes["embeddings"] = embeddings
        if max_new_tokens is not None and self.name == "llm" and self.max_new_tokens is None:
            changes["max_new_tokens"] = max_new_tokens
        return replace(self, **changes) if changes else self  # type: ignore[arg-type]

    @classmethod
    def _parse(cls, text: str) -> WorldModelSpec:
        name, colon, rest = text.partition(":")
        if name not in get_args(WorldModelName) or (colon and not rest):
            raise _unknown(text)
        items = rest.split(",") if colon else []
        fields: dict[str, object] = {"name": name}
        if name == "llm":
            backend = items.pop(0)
            if not _is_url(backend):
                backend, equals, model_dir = backend.partition("=")
                if backend != _TRANSFORMERS or (equals and not model_dir):
                    raise _unknown(text)
                fields["model_dir"] = model_dir or None
            fields["backend"] = backend
        for item in items:
            key, equals, value = item.partition("=")
            if not equals or key not in _OPTIONS or key in fields:
                raise ConfigError(
                    f"world model {text!r}: {item!r} is not an option; write KEY=VALUE with KEY one of "
                    f"{', '.join(_OPTIONS)} once (a model folder whose name holds a comma is not supported)"
                )
            if key == "max_new_tokens":
                if not value.isdigit():
                    raise ConfigError(
                        f"world model {text!r}: max_new_tokens={value!r} is not a number of tokens; "
                        "write e.g. max_new_tokens=96"
                    )
                fields[key] = int(value)
            else:
                fields[key] = value
        try:
            return cls(**fields)  # type: ignore[arg-type]
        except ConfigError as error:
            raise ConfigError(f"world model {text!r}: {error}") from error

    def __str__(self) -> str:
        items: list[str] = []
        if self.name == "llm":
            items.append(f"{self.backend}={self.model_dir}" if self.model_dir else str(self.backend))
            if self.max_new_tokens is not None:
                items.append(f"max_new_tokens={self.max_new_tokens}")
        if self.embeddings != "none":
            items.append(f"embeddings={self.embeddings}")
        return f"{self.name}:{','.join(items)}" if items else self.name


def _is_url(backend: str | None) -> bool:
    """Whether ``backend`` is an OpenAI-compatible server's address (``http(s)://`` and a host)."""
    return backend is not None and backend.startswith(("http://", "https://")) and bool(
        backend.partition("://")[2]
    )


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
    """Whether ``spec`` parses as a :class:`WorldModelSpec` (the older alias names do not count).

    Example:
        >>> is_world_model_spec("llm:transformers=/models/qwen"), is_world_model_spec("llm:ollama")
        (True, False)
    """
    if spec in WORLD_MODEL_ALIASES:
        return False
    try:
        WorldModelSpec.parse(spec)
    except ConfigError:
        return False
    return True


def transformers_model_dir(spec: str) -> str | None:
    """The ``MODEL_DIR`` of an ``llm:transformers=MODEL_DIR[,...]`` spec (``None`` for every other text).

    Example:
        >>> transformers_model_dir("llm:transformers=/models/qwen,max_new_tokens=96")
        '/models/qwen'
        >>> transformers_model_dir("rubric")
    """
    return WorldModelSpec.parse(spec).model_dir if is_world_model_spec(spec) else None


def resolve_world_model_spec(
    spec: str, *, llm_model: str | None = None, llm_base_url: str | None = None
) -> str:
    """The canonical text of ``spec`` (:meth:`WorldModelSpec.parse`, then ``str``).

    Raises:
        ConfigError: as :meth:`WorldModelSpec.parse`.

    Example:
        >>> resolve_world_model_spec("llm-http", llm_base_url="http://127.0.0.1:8000/v1")
        'llm:http://127.0.0.1:8000/v1'
        >>> resolve_world_model_spec("learned+rubric")
        'learned+rubric'
    """
    return str(WorldModelSpec.parse(spec, llm_model=llm_model, llm_base_url=llm_base_url))


def build_world_model(
    spec: str | WorldModelSpec, *, embeddings: str | None = None, llm_max_new_tokens: int | None = None
) -> WorldModel:
    """Build the world model ``spec`` names, with the settings it states (see :class:`WorldModelSpec`).

    Args:
        spec: a :class:`WorldModelSpec` or its text (an alias is read without an ``llm_model`` /
            ``llm_base_url``).
        embeddings: code embeddings of a learned model whose spec does not state them
            (:meth:`WorldModelSpec.with_defaults`); a learned model with MiniLM is named ``...+minilm``.
        llm_max_new_tokens: generation budget of an LLM model whose spec does not state one.

    Returns:
        A fresh world model.

    Raises:
        ConfigError: an unknown spec or ``embeddings`` (the message lists the valid ones).
        MissingDependencyError: the model's optional dependency is not installed.

    Example:
        >>> build_world_model("learned+rubric").name
        'learned+rubric'
    """
    parsed = spec if isinstance(spec, WorldModelSpec) else WorldModelSpec.parse(spec)
    parsed = parsed.with_defaults(embeddings=embeddings, max_new_tokens=llm_max_new_tokens)
    from wmrl_envs.kaggle.world_models.learned import LearnedWorldModel
    from wmrl_envs.kaggle.world_models.rubric import RubricWorldModel

    if parsed.name == "rubric":
        return RubricWorldModel()
    if parsed.name in _LEARNED:
        embedder = None
        if parsed.embeddings == "minilm":
            from wmrl_adapters.embeddings import MiniLMEmbedder

            embedder = MiniLMEmbedder()
        base = RubricWorldModel() if parsed.name == "learned+rubric" else None
        model = LearnedWorldModel(base, embedder=embedder)
        if embedder is not None:
            model.name += "+minilm"
        return model
    from wmrl_envs.kaggle.world_models.llm import LLMWorldModel

    config = llm_world_model_config(parsed)
    if parsed.backend == _TRANSFORMERS:
        from wmrl_adapters.transformers_backend import TransformersBackend, TransformersConfig

        return LLMWorldModel(TransformersBackend(TransformersConfig(model=parsed.model_dir)), config=config)
    from wmrl_adapters.openai_backend import OpenAIClientConfig, OpenAICompatibleBackend

    return LLMWorldModel(OpenAICompatibleBackend(OpenAIClientConfig(base_url=parsed.backend)), config=config)


def llm_world_model_config(spec: WorldModelSpec) -> LLMWorldModelConfig:
    """The settings an ``llm:`` spec builds its LLM world model with (no model is loaded).

    Raises:
        ConfigError: ``spec`` is not an ``llm:`` spec.

    Example:
        >>> llm_world_model_config(WorldModelSpec.parse("llm:transformers,max_new_tokens=96")).max_new_tokens
        96
    """
    from wmrl_envs.kaggle.world_models.llm import LLMWorldModelConfig

    if spec.name != "llm":
        raise ConfigError(f"world model {str(spec)!r} is not an LLM world model; pass an llm:... spec")
    if spec.max_new_tokens is None:
        return LLMWorldModelConfig()
    return LLMWorldModelConfig(max_new_tokens=spec.max_new_tokens)


def split_world_model_specs(text: str) -> tuple[str, ...]:
    """Split a comma-separated list of specs; a ``KEY=VALUE`` option stays with the spec before it.

    Example:
        >>> split_world_model_specs("rubric,llm:transformers,max_new_tokens=96,learned:embeddings=minilm")
        ('rubric', 'llm:transformers,max_new_tokens=96', 'learned:embeddings=minilm')
    """
    specs: list[str] = []
    for item in (piece for piece in text.split(",") if piece):
        if specs and item.partition("=")[0] in _OPTIONS:
            specs[-1] += f",{item}"
        else:
            specs.append(item)
    return tuple(specs)


def check_embeddings_available(spec: WorldModelSpec, flag: str) -> None:
    """Before anything loads: the MiniLM model is installed when ``spec`` asks for its embeddings.

    Raises:
        MissingDependencyError: ``embeddings=minilm`` without the offline model (the message names
            ``flag`` and the install command).
    """
    if spec.embeddings != "minilm":
        return
    from wmrl_adapters.embeddings import minilm_model_dir

    try:
        minilm_model_dir()
    except MissingDependencyError as error:
        raise MissingDependencyError(f"{flag} {spec}: {error}") from error
