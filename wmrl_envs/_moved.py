"""Deprecation shims for public modules that moved: old import paths keep working for a release.

Why: user scripts import by path, and a path that vanishes breaks them with a bare
``ModuleNotFoundError`` that says nothing of where the code went (four scripts broke on
``from wmrl_envs.world_models import LLMWorldModel`` when the Kaggle world models moved under
``wmrl_envs.kaggle``). A shim module at the old path calls :func:`reexport`: it warns with a
:class:`DeprecationWarning` naming the new path, and binds the new module's public names, the very same
objects, so ``isinstance`` checks and identity comparisons keep holding.

Shims are kept for at least one release after the move (the move happened in 0.1.0; they go no
earlier than 0.3.0).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import MutableMapping
from typing import Any

__all__ = ["REMOVED_IN", "reexport"]

REMOVED_IN = "0.3.0"
"""The first version that may drop the shims."""


def reexport(old: str, new: str, namespace: MutableMapping[str, Any]) -> list[str]:
    """Warn that module ``old`` moved to ``new`` and bind ``new``'s public names into ``namespace``.

    Args:
        old: the deprecated module path (the shim's ``__name__``).
        new: where the module lives now.
        namespace: the shim module's ``globals()``.

    Returns:
        The names bound (``new``'s ``__all__``), for the shim's own ``__all__``.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     names = reexport("old.place", "wmrl_algos.errors", {})
        >>> "ConfigError" in names, "wmrl_algos.errors" in str(caught[0].message)
        (True, True)
    """
    warnings.warn(
        f"{old} moved to {new}; import from {new} instead (the old path still works, with this warning, "
        f"until wmrl {REMOVED_IN})",
        DeprecationWarning,
        stacklevel=3,
    )
    module = importlib.import_module(new)
    names = list(module.__all__)
    namespace.update({name: getattr(module, name) for name in names})
    return names
