"""Tests of wmrl_envs.kaggle.fingerprint: a competition's fingerprint follows its content, never its place."""

from __future__ import annotations

import dataclasses
import os
import shutil
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest

from wmrl_algos.errors import DataError
from wmrl_envs.kaggle import grading
from wmrl_envs.kaggle.competition import Competition, load_competition
from wmrl_envs.kaggle.fingerprint import (
    CHUNK_BYTES,
    GRADED_FIELDS,
    IGNORED_FIELDS,
    competition_fingerprint,
    data_digest,
    grading_code_version,
)
from wmrl_envs.kaggle.leaderboard import Leaderboard
from wmrl_envs.kaggle.references import data_fingerprint
from wmrl_envs.kaggle.suite import load_suite

BOARD = Leaderboard((5.0, 8.0, 12.0), higher_is_better=False)


@pytest.fixture()
def copy_of(tmp_path: Path) -> Callable[[str], Path]:
    """Copies the built-in concrete-strength competition under ``tmp_path/<name>`` (fresh mtimes)."""
    source = load_suite().get("concrete-strength", with_leaderboard=False).public_dir.parent

    def copy(name: str) -> Path:
        return Path(shutil.copytree(source, tmp_path / name / "concrete-strength", copy_function=shutil.copy))

    return copy


def _load(directory: Path) -> Competition:
    return dataclasses.replace(load_competition(directory), leaderboard=BOARD, public_leaderboard=BOARD)


def test_a_copy_under_another_path_with_new_mtimes_has_the_same_fingerprint(copy_of) -> None:
    first, second = copy_of("a"), copy_of("b")
    os.utime(second / "private" / "answers.csv", (1_000_000_000, 1_000_000_000))
    assert competition_fingerprint(_load(first)) == competition_fingerprint(_load(second))


def _edit_answers(directory: Path) -> Competition:
    answers = pd.read_csv(directory / "private" / "answers.csv")
    answers["compressive_strength"] += 30.0
    answers.to_csv(directory / "private" / "answers.csv", index=False)
    return _load(directory)


def _edit_public_file(directory: Path) -> Competition:
    train = directory / "public" / "train.csv"
    train.write_text(train.read_text().replace("1", "2", 1))
    return _load(directory)


def _rename_public_file(directory: Path) -> Competition:
    (directory / "public" / "data_inventory.md").rename(directory / "public" / "inventory.md")
    return _load(directory)


def _add_public_file(directory: Path) -> Competition:
    (directory / "public" / "extra.csv").write_text("a\n1\n")
    return _load(directory)


def _flip_direction(directory: Path) -> Competition:
    return dataclasses.replace(_load(directory), higher_is_better=True)


def _other_metric(directory: Path) -> Competition:
    return dataclasses.replace(_load(directory), metric="mae")


def _other_leaderboard(directory: Path) -> Competition:
    board = Leaderboard((5.0, 8.0, 13.0), higher_is_better=False)
    return dataclasses.replace(_load(directory), leaderboard=board)


def _other_public_leaderboard(directory: Path) -> Competition:
    return dataclasses.replace(_load(directory), public_leaderboard=None)


@pytest.mark.parametrize(
    "change",
    [
        _edit_answers, _edit_public_file, _rename_public_file, _add_public_file, _flip_direction,
        _other_metric, _other_leaderboard, _other_public_leaderboard,
    ],
    ids=lambda change: change.__name__.strip("_"),
)
def test_any_change_that_can_change_a_grade_changes_the_fingerprint(
    copy_of, change: Callable[[Path], Competition]
) -> None:
    original, changed = copy_of("original"), copy_of("changed")
    assert competition_fingerprint(change(changed)) != competition_fingerprint(_load(original))


def test_the_id_and_the_description_are_names_not_content(copy_of) -> None:
    competition = _load(copy_of("a"))
    renamed = dataclasses.replace(competition, id="another-id", title="Another", description="# Other\n")
    assert competition_fingerprint(renamed) == competition_fingerprint(competition)


def test_every_competition_field_is_fingerprinted_or_deliberately_left_out() -> None:
    fields = [field.name for field in dataclasses.fields(Competition)]
    assert sorted(fields) == sorted([*GRADED_FIELDS, *IGNORED_FIELDS]), (
        "a new Competition field must be added to GRADED_FIELDS or IGNORED_FIELDS"
    )


def test_a_file_rewritten_in_place_is_hashed_again(copy_of) -> None:
    directory = copy_of("a")
    before = competition_fingerprint(_load(directory))
    assert competition_fingerprint(_edit_answers(directory)) != before


def test_the_data_digest_is_the_leaderboard_records_data_fingerprint(copy_of) -> None:
    competition = _load(copy_of("a"))
    assert data_digest(competition) == data_fingerprint(competition)


def test_a_large_file_is_hashed_in_chunks_not_read_whole(copy_of) -> None:
    directory = copy_of("a")
    size = 32 * CHUNK_BYTES
    with (directory / "public" / "images.bin").open("wb") as handle:
        for _ in range(32):
            handle.write(os.urandom(CHUNK_BYTES))
    competition = _load(directory)
    tracemalloc.start()
    competition_fingerprint(competition)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < size / 8, f"peak {peak:,} bytes while hashing a {size:,}-byte file"


def test_missing_answers_are_a_data_error_that_names_the_file(copy_of) -> None:
    directory = copy_of("a")
    competition = _load(directory)
    (directory / "private" / "answers.csv").unlink()
    with pytest.raises(DataError, match="answers.csv"):
        competition_fingerprint(competition)


@pytest.fixture()
def fresh_grading_version() -> Iterator[None]:
    grading_code_version.cache_clear()
    yield
    grading_code_version.cache_clear()


@pytest.mark.parametrize(("edit", "same"), [("crlf", True), ("comment", False)])
def test_the_grading_version_follows_the_grading_source_not_its_line_endings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_grading_version: None, edit: str, same: bool
) -> None:
    before = grading_code_version()
    source = Path(grading.__file__).read_text()
    edited = source.replace("\n", "\r\n") if edit == "crlf" else source + "# changed\n"
    copy = tmp_path / "grading.py"
    copy.write_bytes(edited.encode())
    monkeypatch.setattr(grading, "__file__", str(copy))  # the same module, read from an edited copy
    grading_code_version.cache_clear()
    assert (grading_code_version() == before) is same
