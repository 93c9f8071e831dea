"""Checks of what a user passes to ``wmrl train``: paths, model directories, values, config files.

Why one module under both tracks: a path that does not exist, a model directory without
``config.json`` or a config file that is no JSON object must fail before anything loads, with the same
message whichever track reads it; each config class (:class:`~wmrl_adapters.train.kaggle.config.TrainConfig`,
:class:`~wmrl_adapters.train.embodied.config.EmbodiedConfig`) calls these from its validation, and the
command line parses its values through :func:`coerce` / :func:`load_config` with its own class.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any, Literal

from wmrl_adapters.train.run.settings import check_keys

from wmrl_algos.errors import ConfigError

__all__ = ["check_model_dir", "check_path", "coerce", "field_help", "load_config"]


def field_help(text: str) -> dict[str, str]:
    """A dataclass field's ``metadata``: the help ``wmrl train --help`` shows for it."""
    return {"help": text}


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
"""``ORG/NAME``: a Hugging Face hub id (a relative path of one slash that does not exist reads as one)."""


def check_path(flag: str, value: str | Path, expected: str, *, kind: Literal["file", "directory"]) -> Path:
    """Refuse a path that is not an existing ``kind``, before anything tries to load it.

    Args:
        flag: the option the path came from (``--init``), named in the error.
        value: the path as the user wrote it (``~`` is expanded).
        expected: what the option wants, e.g. ``"the policy.pt of an sft run"``.
        kind: ``"file"`` or ``"directory"``.

    Returns:
        The path, ``~`` expanded.

    Raises:
        ConfigError: the path does not exist or is not a ``kind``; the message names ``flag``, the
            path and ``expected``.

    Example:
        >>> try:
        ...     check_path("--config", "/no/such.json", "a JSON file of config fields", kind="file")
        ... except ConfigError as error:
        ...     print(error)
        --config '/no/such.json' does not exist; pass a JSON file of config fields
    """
    path = Path(value).expanduser()
    if path.is_file() if kind == "file" else path.is_dir():
        return path
    if not path.exists():
        problem = "does not exist"
    elif path.is_dir():
        problem = "is a directory"
    else:
        problem = "is a file" if path.is_file() else "is neither a file nor a directory"
    raise ConfigError(f"{flag} {str(value)!r} {problem}; pass {expected}")


def check_model_dir(flag: str, value: str) -> None:
    """Refuse a model that ``from_pretrained`` could not load, before anything loads it.

    Accepted: a directory holding ``config.json`` (what ``save_pretrained`` and ``lerobot-train``
    write), or a hub id ``ORG/NAME`` that is no local path, when the hub may be reached
    (``HF_HUB_OFFLINE`` unset) or the id is in the local hub cache.

    Args:
        flag: the option the model came from (``--world-model``), named in the error.
        value: the directory or hub id.

    Raises:
        ConfigError: no such directory, a directory without ``config.json``, or an uncached hub id
            while the hub is offline; the message names ``flag``, the value and what is expected.

    Example:
        >>> try:
        ...     check_model_dir("--llm-model", "/nonexistent")
        ... except ConfigError as error:
        ...     print(error)  # doctest: +ELLIPSIS
        --llm-model '/nonexistent' does not exist; pass a model directory holding config.json...
    """
    expected = "a model directory holding config.json (as save_pretrained writes it)"
    path = Path(value).expanduser()
    if not path.exists() and _HUB_ID.fullmatch(value):
        if not _hub_offline() or _hub_cached(value):
            return
        raise ConfigError(
            f"{flag} {value!r} is no local directory and the hub id is not in the local cache while the "
            f"hub is offline (HF_HUB_OFFLINE); pass {expected}"
        )
    check_path(flag, value, expected, kind="directory")
    if not (path / "config.json").is_file():
        raise ConfigError(f"{flag} {value!r} has no config.json; pass {expected}")


def _hub_offline() -> bool:
    try:
        from huggingface_hub import constants
    except ImportError:  # without huggingface_hub nothing can download: the loader names the install
        return False
    return bool(constants.HF_HUB_OFFLINE)


def _hub_cached(repo_id: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)


def coerce(key: str, text: str, cls: type) -> Any:
    """Parse a command-line value for field ``key`` of config class ``cls`` by the field's type."""
    check_keys({key: text}, cls)
    kind = {f.name: f.type for f in dataclasses.fields(cls)}[key]
    try:
        if kind in ("bool", bool):
            if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(text)
            return text.lower() in ("true", "1", "yes")
        if kind in ("int", int):
            return int(text)
        if kind == "int | None":  # an optional count: "none" (any case) or empty is the default
            return None if text.strip().lower() in ("", "none") else int(text)
        if kind in ("float", float):
            return float(text)
    except ValueError:
        raise ConfigError(f"--{key.replace('_', '-')} {text!r} is not a valid {kind}") from None
    return text


def load_config(path: Path | None, overrides: dict[str, Any] | None, cls: type) -> Any:
    """A ``cls`` config from a JSON file (any subset of the fields) plus overrides; defaults for the rest.

    Raises:
        ConfigError: unreadable file, unknown key or invalid value.
    """
    values: dict[str, Any] = {}
    if path is not None:
        try:
            values = json.loads(Path(path).read_text())
        except (OSError, ValueError) as error:
            raise ConfigError(
                f"cannot read config file {path}: {error}; pass a JSON object of fields"
            ) from None
        if not isinstance(values, dict):
            raise ConfigError(
                f"config file {path} holds {type(values).__name__}; pass a JSON object of fields"
            )
    values.update(overrides or {})
    check_keys(values, cls)
    return cls(**values)
