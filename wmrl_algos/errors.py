"""The one exception family of wmrl, and the helper that imports optional dependencies.

Why one family: a training loop that wraps an expensive environment must be able to tell *our*
failures (a misconfiguration, a world model that broke its contract, a sandbox that could not be
made safe) from everything else with a single ``except WMRLError``. Every error states the bad value
and the consequence or the fix, so the person reading a log at 3 a.m. knows what to change.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = [
    "WMRLError",
    "ConfigError",
    "WorldModelError",
    "BackendUnavailableError",
    "SandboxError",
    "IsolationUnavailableError",
    "CheckpointError",
    "DataError",
    "ReplayMiss",
    "ReplayMismatchError",
    "MissingDependencyError",
    "require",
]


class WMRLError(Exception):
    """Base class of every error raised by wmrl."""


class ConfigError(WMRLError, ValueError):
    """An argument or configuration value is invalid; the message names the value and the fix."""


class WorldModelError(WMRLError):
    """A world model broke its contract (raised, or returned the wrong number of predictions)."""


class BackendUnavailableError(WorldModelError):
    """A world-model backend (HTTP server, engine) cannot be reached at all at start-up."""


class SandboxError(WMRLError):
    """The sandbox itself failed (not the code it ran): the execution's score is unknown (``None``)."""


class IsolationUnavailableError(SandboxError):
    """The requested isolation cannot be provided here and ``strict`` forbids degrading it."""


class CheckpointError(WMRLError):
    """A checkpoint or state dict is corrupt, incomplete or from an incompatible version."""


class DataError(WMRLError):
    """A dataset, competition or submission is malformed."""


class ReplayMiss(DataError):
    """A replay table holds no recorded outcome for the requested competition and solution design."""


class ReplayMismatchError(DataError):
    """A replay table was recorded under another format, suite version, competition content, grading code
    or design list than the one asked for: serving it would be a silently wrong grade."""


class MissingDependencyError(WMRLError, ImportError):
    """An optional dependency is not installed; the message names the pip extra that provides it."""


def require(module: str, extra: str) -> ModuleType:
    """Import an optional dependency lazily, or fail with the install command.

    Args:
        module: the importable module name, e.g. ``"transformers"``.
        extra: the ``wmrl`` extra that installs it, e.g. ``"llm"``.

    Returns:
        The imported module.

    Raises:
        MissingDependencyError: the module is not installed; the message says
            ``pip install 'wmrl[<extra>]'``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"{module!r} is required for this feature but is not installed ({exc}); "
            f"install it with: pip install 'wmrl[{extra}]'"
        ) from exc
