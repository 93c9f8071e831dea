"""Deprecated alias of :mod:`wmrl_adapters.train.kaggle.world_models`.

The module moved into its wing of ``wmrl_adapters.train``; this name is the same module object.
"""

from __future__ import annotations

import sys
import warnings

from wmrl_adapters.train.kaggle import world_models as _moved

warnings.warn(
    "wmrl_adapters.train.world_models is deprecated: import wmrl_adapters.train.kaggle.world_models",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
