"""Deprecated alias of :mod:`wmrl_adapters.train.run.settings`.

The module moved into its wing of ``wmrl_adapters.train``; this name is the same module object.
"""

from __future__ import annotations

import sys
import warnings

from wmrl_adapters.train.run import settings as _moved

warnings.warn(
    "wmrl_adapters.train.settings is deprecated: import wmrl_adapters.train.run.settings",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
