"""Deprecated alias of :mod:`wmrl_adapters.train.run.state_io`.

The module moved into its wing of ``wmrl_adapters.train``; this name is the same module object.
"""

from __future__ import annotations

import sys
import warnings

from wmrl_adapters.train.run import state_io as _moved

warnings.warn(
    "wmrl_adapters.train.state_io is deprecated: import wmrl_adapters.train.run.state_io",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
