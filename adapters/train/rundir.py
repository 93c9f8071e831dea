"""Deprecated alias of :mod:`wmrl_adapters.train.run.rundir`.

The module moved into its wing of ``wmrl_adapters.train``; this name is the same module object.
"""

from __future__ import annotations

import sys
import warnings

from wmrl_adapters.train.run import rundir as _moved

warnings.warn(
    "wmrl_adapters.train.rundir is deprecated: import wmrl_adapters.train.run.rundir",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
