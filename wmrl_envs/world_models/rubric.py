"""Deprecated: moved to :mod:`wmrl_envs.kaggle.world_models.rubric` (each track keeps its own world models).

Importing this module warns with a :class:`DeprecationWarning` and gives the new module's public names,
the same objects; see :mod:`wmrl_envs._moved`.
"""

from __future__ import annotations

from wmrl_envs._moved import reexport

__all__ = reexport(__name__, "wmrl_envs.kaggle.world_models.rubric", globals())
