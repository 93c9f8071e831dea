"""Deprecated: the configs moved to their wings; this module re-exports them for old imports.

:class:`~wmrl_adapters.train.kaggle.config.TrainConfig` is in :mod:`wmrl_adapters.train.kaggle.config`,
:class:`~wmrl_adapters.train.embodied.config.EmbodiedConfig` in :mod:`wmrl_adapters.train.embodied.config`,
the shared checks in :mod:`wmrl_adapters.train.run.checks`.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from wmrl_adapters.train.embodied.config import EMBODIED_ALGOS, EmbodiedConfig
from wmrl_adapters.train.kaggle.config import ALGOS, POLICIES, WORLD_MODELS, TrainConfig, paper_config
from wmrl_adapters.train.run import checks
from wmrl_adapters.train.run.checks import check_model_dir, check_path

__all__ = [
    "ALGOS",
    "EMBODIED_ALGOS",
    "POLICIES",
    "WORLD_MODELS",
    "EmbodiedConfig",
    "TrainConfig",
    "check_model_dir",
    "check_path",
    "coerce",
    "load_config",
    "paper_config",
]

warnings.warn(
    "wmrl_adapters.train.config is deprecated: import TrainConfig from wmrl_adapters.train.kaggle.config, "
    "EmbodiedConfig from wmrl_adapters.train.embodied.config and the checks from "
    "wmrl_adapters.train.run.checks",
    DeprecationWarning,
    stacklevel=2,
)


def coerce(key: str, text: str, cls: type = TrainConfig) -> Any:
    """:func:`wmrl_adapters.train.run.checks.coerce`, with the old default class."""
    return checks.coerce(key, text, cls)


def load_config(path: Path | None, overrides: dict[str, Any] | None = None, cls: type = TrainConfig) -> Any:
    """:func:`wmrl_adapters.train.run.checks.load_config`, with the old default class."""
    return checks.load_config(path, overrides, cls)
