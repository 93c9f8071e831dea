"""Content fingerprints of a competition and of the grading code, for keys that must never go stale.

Why not the competition id: an id is a name, and two competitions can share it (an MLE-bench directory
named like a suite competition, with other answers). Anything that reuses a graded outcome (the
trainer's execution cache, a record/replay of executions) must key on what decides that outcome:

* :func:`competition_fingerprint`: the files a solution reads (the public files, by their names under
  ``./input/``), the hidden answers, and the metadata the grader uses (metric, direction, target and
  id columns, labels, both leaderboards). It leaves out what only names or presents the competition
  (:data:`IGNORED_FIELDS`): its id, title, description, source, split and layout, and where its files
  live. It hashes no absolute path and no modification time, so the same competition has the same
  fingerprint on every machine, under any directory, copied or not.
* :func:`grading_code_version`: the source of the modules that turn a sandbox result into an outcome
  (:data:`GRADING_MODULES`), so an outcome graded by older code is never reused by newer code.

Files are read in chunks (:data:`CHUNK_BYTES`), so a multi-gigabyte competition costs no memory. The
fingerprint is memoised per competition and per file signature (name, size, inode, modification time):
the signature only decides when to hash again, it is never part of the fingerprint. A rewrite that
keeps a file's size, inode and modification time (within the file system's clock resolution) is not
noticed until the process restarts: competition files are not meant to change under a running trainer.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from wmrl_algos.errors import DataError
from wmrl_envs.kaggle.competition import Competition
from wmrl_envs.kaggle.leaderboard import Leaderboard

__all__ = [
    "CHUNK_BYTES",
    "FINGERPRINT_FORMAT",
    "GRADED_FIELDS",
    "GRADING_MODULES",
    "IGNORED_FIELDS",
    "competition_fingerprint",
    "data_digest",
    "grading_code_version",
]

FINGERPRINT_FORMAT = "wmrl-competition-fingerprint/1"
"""Mixed into every fingerprint: bump it when what a fingerprint covers changes."""
CHUNK_BYTES = 1 << 20
"""Bytes read at a time from a file being hashed."""
GRADED_FIELDS: tuple[str, ...] = (
    "metric",
    "higher_is_better",
    "task_type",
    "target",
    "id_column",
    "feature_columns",
    "text_columns",
    "labels",
    "train_target",
    "train_file",
    "test_file",
    "leaderboard",
    "public_leaderboard",
)
"""The :class:`~wmrl_envs.kaggle.competition.Competition` fields in a fingerprint (besides the files)."""
IGNORED_FIELDS: tuple[str, ...] = (
    "id", "title", "description", "source", "heldout", "layout", "public_dir", "answers_path",
)
"""Fields left out: names and presentation, which decide no outcome, and the two locations, whose
files are hashed by content instead. Every field of a competition is in exactly one of the two lists
(``tests/test_fingerprint.py`` checks it, so a new field cannot be left out by accident)."""
GRADING_MODULES: tuple[str, ...] = (
    "wmrl_envs.kaggle.grading",
    "wmrl_envs.kaggle.metrics",
    "wmrl_envs.kaggle.leaderboard",
    "wmrl_envs.kaggle.outcome",
)
"""The modules whose code turns a sandbox result into a graded :class:`~wmrl_envs.kaggle.outcome.Outcome`."""


def _file_digest(path: Path) -> bytes:
    digest = hashlib.sha256()
    try:
        with Path(path).open("rb") as handle:
            while chunk := handle.read(CHUNK_BYTES):
                digest.update(chunk)
    except OSError as error:
        raise DataError(
            f"cannot read {path} to fingerprint its competition ({error}); regenerate or re-prepare it"
        ) from error
    return digest.digest()


def data_digest(competition: Competition) -> str:
    """SHA-256 (hex) over the public files (each name under ``./input/`` and its content) and the answers.

    Files are read in chunks, so a large one costs no memory; the leaderboard records key on it too
    (:func:`wmrl_envs.kaggle.references.data_fingerprint`).

    Raises:
        DataError: a file cannot be read.
    """
    digest = hashlib.sha256()
    for name, path in sorted(competition.public_files().items()):
        digest.update(name.encode())
        digest.update(_file_digest(path))
    digest.update(_file_digest(Path(competition.answers_path)))
    return digest.hexdigest()


def _plain(value: Any) -> Any:
    """``value`` as JSON-ready data, the same on every machine."""
    if isinstance(value, Leaderboard):
        return {
            "scores": list(value.scores),
            "higher_is_better": value.higher_is_better,
            "names": list(value.names),
        }
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    raise TypeError(f"cannot fingerprint a {type(value).__name__} ({value!r}); add its encoding to _plain")


def _signature(competition: Competition) -> tuple[tuple[str, int, int, int], ...]:
    """Names, sizes, inodes and modification times of the competition's files: when to hash again."""
    files = [*sorted(competition.public_files().items()), ("", Path(competition.answers_path))]
    signature = []
    for name, path in files:
        try:
            status = path.stat()
        except OSError as error:
            raise DataError(
                f"cannot read {path} to fingerprint competition {competition.id!r} ({error}); "
                "regenerate or re-prepare it"
            ) from error
        signature.append((name, status.st_size, status.st_ino, status.st_mtime_ns))
    return tuple(signature)


@lru_cache(maxsize=64)
def _fingerprint(competition: Competition, signature: tuple[tuple[str, int, int, int], ...]) -> str:
    metadata = {name: _plain(getattr(competition, name)) for name in GRADED_FIELDS}
    digest = hashlib.sha256(FINGERPRINT_FORMAT.encode())
    digest.update(b"\n" + data_digest(competition).encode() + b"\n")
    digest.update(json.dumps(metadata, sort_keys=True, allow_nan=False).encode())
    return digest.hexdigest()


def competition_fingerprint(competition: Competition) -> str:
    """SHA-256 (hex) of everything about ``competition`` that decides a graded outcome.

    Stable across machines and paths (see the module docstring for what it covers and leaves out);
    memoised until a file's size or modification time changes.

    Args:
        competition: the competition.

    Returns:
        64 hex digits.

    Raises:
        DataError: one of its files cannot be read.

    Example:
        >>> from wmrl_envs.kaggle.suite import load_suite
        >>> competition = load_suite().get("concrete-strength")  # doctest: +SKIP
        >>> len(competition_fingerprint(competition))  # doctest: +SKIP
        64
    """
    return _fingerprint(competition, _signature(competition))


def _source(module_name: str) -> bytes:
    origin = importlib.import_module(module_name).__file__
    if origin is None:
        raise DataError(f"module {module_name!r} has no source file, so its grading version is unknown")
    return Path(origin).read_bytes().replace(b"\r\n", b"\n")


@lru_cache(maxsize=1)
def grading_code_version() -> str:
    """SHA-256 (hex) of the source of :data:`GRADING_MODULES`: changes whenever the grading code does.

    Line endings are normalised, so a checkout with Windows line endings has the same version.

    Raises:
        DataError: a grading module has no source file.

    Example:
        >>> len(grading_code_version())
        64
    """
    digest = hashlib.sha256()
    for module_name in GRADING_MODULES:
        digest.update(module_name.encode() + b"\n")
        digest.update(hashlib.sha256(_source(module_name)).digest())
    return digest.hexdigest()

