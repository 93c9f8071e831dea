"""The embodied wing of ``wmrl train --env robosuite:TASK | libero:SUITE[/IDS]``: simulator episodes.

* :mod:`~wmrl_adapters.train.embodied.config`: :class:`EmbodiedConfig` (light: loads no simulator);
* :mod:`~wmrl_adapters.train.embodied.trainer`: :class:`EmbodiedTrainer` (the skeleton's hooks);
* :mod:`~wmrl_adapters.train.embodied.policy`: the policy interface a VLA fits and the CPU policy.

The trainer's names are re-exported here lazily (``from wmrl_adapters.train.embodied import
EmbodiedTrainer`` keeps working from before the wing layout) so that importing the config loads
neither torch nor a simulator.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["LIBERO_INIT_STATES", "POLICY_FILE", "EmbodiedTrainer", "RolloutPolicy", "make_embodied_env"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("wmrl_adapters.train.embodied.trainer"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
