"""Old module names of ``wmrl_adapters.train`` as aliases of the modules that moved into the wings.

Why aliases rather than re-exports (:mod:`wmrl_envs._moved` re-exports public names): these modules
were imported by path in user scripts *and* patched by path in their tests, so the old name must be
the very module object (private names, ``monkeypatch.setattr`` and ``isinstance`` all keep holding).
Each old file is two lines calling :func:`alias`; like the other shims they stay until wmrl 0.3.0.
"""

from __future__ import annotations

import importlib
import runpy
import sys
import warnings

__all__ = ["alias"]


def alias(old: str, new: str) -> None:
    """Make module ``old`` the module ``new`` and warn the importer that ``old`` is deprecated.

    Called from the old module's body while it is being imported: the import system returns whatever
    ``sys.modules[old]`` holds once that body has run, so every later import of ``old`` is ``new``.
    Run as a script (``python -m OLD ...``, ``old`` is then ``"__main__"``), it runs ``new`` as the
    script instead, with the same arguments.
    """
    if old == "__main__":
        spec = sys.modules["__main__"].__spec__
        warnings.warn(
            f"python -m {spec.name if spec else old} is deprecated: run python -m {new}",
            DeprecationWarning,
            stacklevel=3,
        )
        runpy.run_module(new, run_name="__main__", alter_sys=True)
        return
    warnings.warn(f"{old} is deprecated: import {new}", DeprecationWarning, stacklevel=3)
    sys.modules[old] = importlib.import_module(new)
