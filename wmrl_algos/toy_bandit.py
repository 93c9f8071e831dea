"""Deprecated: the contextual bandit is a benchmark fixture and moved to ``benchmarks/toy_bandit.py``.

Why a shim that works only in a checkout: ``benchmarks/`` is not part of the installed distribution
(nothing in the library uses the bandit; ``benchmarks/bandit_ablation.py`` and the tests do), so this
old path can forward only where the repository's ``benchmarks/`` folder sits next to the package.
There, importing it warns with a :class:`DeprecationWarning` and gives the fixture's public names, the
same objects the benchmark scripts use: the file is loaded once, as the module ``toy_bandit``, the name
those scripts import it by. In an installed wmrl the file is absent and the import fails with a
:class:`~wmrl_algos.errors.MissingDependencyError` (an ``ImportError``) that says where the code went.
Like the other moved modules' shims (``wmrl_envs._moved``, which ``wmrl_algos`` may not import: it is
the bottom layer), it is kept until wmrl 0.3.0.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path
from types import ModuleType

from wmrl_algos.errors import MissingDependencyError

FIXTURE = Path(__file__).resolve().parents[1] / "benchmarks" / "toy_bandit.py"
"""Where the module lives now, in a checkout of the repository."""

_MODULE_NAME = "toy_bandit"


def _load_fixture() -> ModuleType:
    """The fixture as the module ``toy_bandit``: the one already imported from :data:`FIXTURE`, or loaded now.

    Raises:
        MissingDependencyError: :data:`FIXTURE` is absent (an installed wmrl), or another module holds
            the name ``toy_bandit``.
    """
    if not FIXTURE.is_file():
        raise MissingDependencyError(
            f"{__name__} moved to benchmarks/toy_bandit.py, a benchmark fixture that ships only in a "
            f"checkout of the wmrl repository, not in an installed wmrl (there is no {FIXTURE}); clone the "
            "repository and import toy_bandit with its benchmarks/ folder on sys.path"
        )
    loaded = sys.modules.get(_MODULE_NAME)
    if loaded is not None:
        if Path(getattr(loaded, "__file__", None) or "").resolve() != FIXTURE:
            raise MissingDependencyError(
                f"{__name__} forwards to {FIXTURE}, but another module named {_MODULE_NAME!r} is already "
                f"imported (from {getattr(loaded, '__file__', None)!r}); rename that module, or import "
                f"toy_bandit from {FIXTURE.parent} before it"
            )
        return loaded
    spec = importlib.util.spec_from_file_location(_MODULE_NAME, FIXTURE)
    assert spec is not None and spec.loader is not None, f"{FIXTURE} is a file, so it has a loader"
    module = importlib.util.module_from_spec(spec)
    sys.modules[_MODULE_NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[_MODULE_NAME]
        raise
    return module


_fixture = _load_fixture()
warnings.warn(
    f"{__name__} moved to benchmarks/toy_bandit.py: it is a benchmark fixture, not library code, and this "
    "path is kept only in a checkout of the repository, until wmrl 0.3.0; import toy_bandit with "
    "benchmarks/ on sys.path instead (a script in benchmarks/ has it there)",
    DeprecationWarning,
    stacklevel=2,
)
__all__: list[str] = list(_fixture.__all__)
globals().update({name: getattr(_fixture, name) for name in __all__})
