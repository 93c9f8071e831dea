"""Sandboxes that execute untrusted solutions: the contract, the backends, and one factory.

Backends: ``local`` (bubblewrap, the default), ``docker`` (a real Docker engine) and ``unsafe`` (a
plain subprocess, only when asked for by name). ``make_sandbox(name, strict=True)`` refuses, with
:class:`~wmrl_algos.errors.IsolationUnavailableError`, to hand out a backend that cannot provide the
isolation it promises; ``strict=False`` degrades loudly (a warning, and the degradation named in each
result's ``detail``) but never to *no* isolation: on the ``unsafe`` backend the hidden answers are
one ``realpath`` away, so a policy trained on it learns to read them. Falling back to it takes an
explicit ``allow_unsafe=True``, and every result it produces says ``backend="unsafe"`` (the Kaggle
env records it as ``info["backend"]`` and ``info["isolated"] = False``).

Why a registry: the Docker backend needs the ``docker`` SDK and lives in ``wmrl_adapters.docker``, and
the core never imports adapters. So the core keeps a name -> factory registry; a backend module calls
:func:`register_backend` when it is imported, and :func:`make_sandbox` imports the module that provides
a missing name lazily, *by its name only*, through :mod:`importlib` (``"docker"`` ->
``"wmrl_adapters.docker"``). No entry points and no import-time cost for users who never ask for it.
Third-party backends register the same way (import your module, then ``make_sandbox("yours")``).
"""

from __future__ import annotations

import importlib
import shutil
import warnings
from collections.abc import Callable
from typing import Any, Literal

from wmrl_algos.errors import ConfigError, IsolationUnavailableError, MissingDependencyError
from wmrl_envs.sandbox.base import ExecutionRequest, ExecutionResult, RunStatus, Sandbox
from wmrl_envs.sandbox.lifetime import sweep_stale
from wmrl_envs.sandbox.local import BubblewrapSandbox
from wmrl_envs.sandbox.unsafe import UnsafeSandbox
from wmrl_envs.sandbox.warm import WarmSandbox

__all__ = [
    "BackendName",
    "BubblewrapSandbox",
    "ExecutionRequest",
    "ExecutionResult",
    "RunStatus",
    "Sandbox",
    "SandboxFactory",
    "UnsafeSandbox",
    "WarmSandbox",
    "available_backends",
    "make_sandbox",
    "register_backend",
    "sweep_stale",
]

BackendName = Literal["local", "docker", "unsafe"]
SandboxFactory = Callable[..., Sandbox]
"""Builds a backend; called as ``factory(strict=..., **kwargs)``."""

_REGISTRY: dict[str, SandboxFactory] = {}
_LAZY_MODULES: dict[str, str] = {"docker": "wmrl_adapters.docker"}
_AVAILABILITY: dict[str, Callable[[], bool]] = {}


def register_backend(name: str, factory: SandboxFactory, available: Callable[[], bool] | None = None) -> None:
    """Make a backend constructible by :func:`make_sandbox`.

    Args:
        name: the backend name.
        factory: called as ``factory(strict=..., **kwargs)``; raises
            :class:`~wmrl_algos.errors.IsolationUnavailableError` when it cannot isolate.
        available: a cheap check used by :func:`available_backends` (default: always available).
    """
    _REGISTRY[name] = factory
    _AVAILABILITY[name] = available or (lambda: True)


def _local_factory(
    *, strict: bool = True, warm: int = 0, allow_unsafe: bool = False, **kwargs: Any
) -> Sandbox:
    if shutil.which("bwrap", path="/usr/sbin:/usr/bin:/sbin:/bin") is None and not strict and allow_unsafe:
        warnings.warn("bubblewrap is not installed: falling back to the UNSAFE plain-subprocess backend "
                      "(allow_unsafe=True); results say backend='unsafe'; install bubblewrap for isolation",
                      RuntimeWarning, stacklevel=3)
        return UnsafeSandbox(**{k: v for k, v in kwargs.items() if k in ("python", "output_dir")})
    sandbox = BubblewrapSandbox(strict=strict, **kwargs)
    return WarmSandbox(sandbox, pool_size=warm) if warm else sandbox


def _unsafe_factory(*, strict: bool = True, **kwargs: Any) -> Sandbox:
    return UnsafeSandbox(**kwargs)


def _local_available() -> bool:
    try:
        BubblewrapSandbox(strict=True).close()
    except IsolationUnavailableError:
        return False
    return True


register_backend("local", _local_factory, _local_available)
register_backend("unsafe", _unsafe_factory)


def _ensure_registered(name: str) -> None:
    if name in _REGISTRY or name not in _LAZY_MODULES:
        return
    importlib.import_module(_LAZY_MODULES[name])


def make_sandbox(
    name: BackendName | str, *, strict: bool = True, allow_unsafe: bool = False, **kwargs: Any
) -> Sandbox:
    """Build a sandbox backend by name.

    Args:
        name: ``"local"`` (bubblewrap), ``"docker"`` or ``"unsafe"`` (no isolation; only by name).
        strict: raise when the requested isolation is unavailable instead of degrading. With
            ``strict=False``: ``local`` without root or cgroups runs degraded, ``docker`` without an
            engine falls back to ``local``; each with a ``RuntimeWarning``. ``local`` without
            bubblewrap still raises unless ``allow_unsafe``.
        allow_unsafe: with ``strict=False``, let ``local`` without bubblewrap fall back to the
            unisolated ``unsafe`` backend (its results say ``backend="unsafe"``). Never implied.
        **kwargs: passed to the backend (e.g. ``output_dir=``; ``warm=N`` for ``local`` wraps it in a
            :class:`WarmSandbox` with N pre-warmed sandboxes; ``base_url=``/``image=`` for docker).

    Returns:
        The backend; call ``close()`` when done.

    Raises:
        ConfigError: unknown backend name.
        IsolationUnavailableError: (strict) the backend cannot isolate here.
        MissingDependencyError: (strict) the backend's optional dependency is not installed.

    Example:
        >>> sandbox = make_sandbox("local", strict=False)  # doctest: +SKIP
        >>> sandbox.run(ExecutionRequest(code="print('hi')", timeout_s=30)).stdout  # doctest: +SKIP
        'hi\\n'
        >>> sandbox.close()  # doctest: +SKIP
    """
    try:
        _ensure_registered(name)
    except MissingDependencyError:
        if strict:
            raise
        warnings.warn(f"backend {name!r} is not installed; falling back to 'local' (strict=False)",
                      RuntimeWarning, stacklevel=2)
        return _local_factory(strict=False, allow_unsafe=allow_unsafe)
    if name not in _REGISTRY:
        known = sorted({*_REGISTRY, *_LAZY_MODULES})
        raise ConfigError(f"unknown sandbox backend {name!r}; choose one of {known} or register yours "
                          f"with register_backend()")
    if name == "local":
        kwargs["allow_unsafe"] = allow_unsafe
    try:
        return _REGISTRY[name](strict=strict, **kwargs)
    except IsolationUnavailableError as exc:
        if strict or name != "docker":
            raise
        warnings.warn(f"docker backend unavailable ({exc}); falling back to 'local' (strict=False)",
                      RuntimeWarning, stacklevel=2)
        return _local_factory(strict=False, allow_unsafe=allow_unsafe)


def available_backends() -> list[str]:
    """The backends that :func:`make_sandbox` can build here with ``strict=True`` right now.

    Returns:
        Names in preference order (``local``, ``docker``, then ``unsafe``, which is always there).
    """
    names: list[str] = []
    for name in ("local", "docker", "unsafe", *sorted(set(_REGISTRY) - {"local", "docker", "unsafe"})):
        try:
            _ensure_registered(name)
        except ImportError:
            continue
        check = _AVAILABILITY.get(name)
        if check is not None and check():
            names.append(name)
    return names
