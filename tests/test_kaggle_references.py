"""Reference solutions run for real, rank sensibly, and the committed leaderboards match a rebuild."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from wmrl_envs.kaggle.references import (
    COMMITTED_LEADERBOARDS,
    LEADERBOARDS_FORMAT,
    REFERENCE_NAMES,
    LeaderboardRecord,
    ReferenceEntry,
    build_leaderboard,
    load_leaderboard_record,
    reference_solutions,
    write_leaderboards,
)
from wmrl_envs.kaggle.suite import SPECS, KaggleSuite, build_suite
from wmrl_envs.sandbox.unsafe import UnsafeSandbox


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> KaggleSuite:
    return KaggleSuite(build_suite(tmp_path_factory.mktemp("suite"), progress=False))


def test_every_reference_of_every_competition_compiles(suite: KaggleSuite) -> None:
    assert len(REFERENCE_NAMES) == len(set(REFERENCE_NAMES)) >= 10
    for competition_id in suite.ids():
        solutions = reference_solutions(suite.get(competition_id, with_leaderboard=False))
        assert tuple(solution.name for solution in solutions) == REFERENCE_NAMES
        for solution in solutions:
            compile(solution.code, f"{competition_id}/{solution.name}.py", "exec")
            assert "input/" in solution.code and "submission.csv" in solution.code
            assert "answers" not in solution.code and "private" not in solution.code


def test_references_run_for_real_and_a_model_beats_the_prior(suite: KaggleSuite, tmp_path: Path) -> None:
    competition = suite.get("concrete-strength", with_leaderboard=False)
    sandbox = UnsafeSandbox()
    try:
        record = build_leaderboard(
            competition,
            sandbox,
            names=["prior", "random_guess", "linear_numeric"],
            cache_path=tmp_path / "cache.json",
            solutions_dir=tmp_path / "solutions",
            timeout_s=120,
            progress=False,
            committed=None,
        )
    finally:
        sandbox.close()
    scores = {entry.name: entry for entry in record.entries}
    assert all(entry.status == "valid" for entry in record.entries), record.entries
    assert scores["linear_numeric"].score < scores["prior"].score < scores["random_guess"].score  # type: ignore[operator]
    assert sorted(path.name for path in (tmp_path / "solutions").iterdir()) == [
        "linear_numeric.py",
        "prior.py",
        "random_guess.py",
    ]
    cached = build_leaderboard(
        competition, _NeverRuns(), names=["prior"], cache_path=tmp_path / "cache.json", committed=None
    )
    assert cached.entries == (scores["prior"],), "a current cache is reused without running anything"


def test_adding_a_reference_runs_only_the_new_one(suite: KaggleSuite, tmp_path: Path) -> None:
    competition = suite.get("concrete-strength", with_leaderboard=False)
    cache = tmp_path / "cache.json"
    sandbox = _Counting(UnsafeSandbox())
    try:
        first = build_leaderboard(competition, sandbox, names=["prior"], cache_path=cache, committed=None,
                                  progress=False)
        grown = build_leaderboard(competition, sandbox, names=["random_guess", "prior"], cache_path=cache,
                                  committed=None, progress=False)
    finally:
        sandbox.close()
    assert sandbox.codes == ["prior", "random_guess"], "the cached reference is not run again"
    assert [entry.name for entry in grown.entries] == ["prior", "random_guess"], "population order"
    assert grown.entries[0] == first.entries[0]
    stored = LeaderboardRecord.from_json("x", json.loads(cache.read_text()))
    assert [entry.name for entry in stored.entries] == ["prior", "random_guess"]


def test_committed_entries_on_the_same_data_are_reused(suite: KaggleSuite) -> None:
    if not COMMITTED_LEADERBOARDS.is_file():
        pytest.skip("leaderboards.json has not been built yet")
    competition = suite.get("titanic-survival", with_leaderboard=False)
    record = build_leaderboard(competition, _NeverRuns(), progress=False)
    assert record == load_leaderboard_record("titanic-survival")


class _Counting:
    """A real sandbox that records which reference each run was (the name from the code's docstring)."""

    def __init__(self, inner: UnsafeSandbox) -> None:
        self.inner, self.codes = inner, []
        self.name = inner.name

    def run(self, request: object) -> object:
        self.codes.append(request.code.split("`")[1])  # type: ignore[attr-defined]
        return self.inner.run(request)  # type: ignore[arg-type]

    def close(self) -> None:
        self.inner.close()


class _NeverRuns:
    """Stands in for a sandbox where the test asserts that a cached leaderboard is not rebuilt."""

    name = "never"

    def run(self, request: object) -> object:
        raise AssertionError("a cached leaderboard must not be rebuilt")

    def close(self) -> None:
        """Nothing to release."""


def test_leaderboard_records_round_trip_and_rank_only_valid_entries(tmp_path: Path) -> None:
    record = LeaderboardRecord(
        "demo",
        "f" * 64,
        (
            ReferenceEntry("a", "valid", 3.0, 2.5, 1.0),
            ReferenceEntry("b", "timeout", None, None, 9.0),
            ReferenceEntry("c", "valid", 1.0, 1.5, 1.0),
        ),
    )
    path = write_leaderboards([record], tmp_path / "boards.json")
    assert json.loads(path.read_text())["format"] == LEADERBOARDS_FORMAT
    loaded = load_leaderboard_record("demo", None, committed=path)
    assert loaded == record
    private, public = loaded.leaderboards(higher_is_better=False)  # type: ignore[union-attr]
    assert private.scores == (1.0, 3.0) and public.scores == (1.5, 2.5) and private.names == ("c", "a")


def test_committed_leaderboards_cover_the_suite_with_the_full_population() -> None:
    if not COMMITTED_LEADERBOARDS.is_file():
        pytest.skip("leaderboards.json has not been built yet")
    data = json.loads(COMMITTED_LEADERBOARDS.read_text())
    assert data["format"] == LEADERBOARDS_FORMAT
    assert set(data["competitions"]) == {spec.id for spec in SPECS}
    for competition_id, entry in data["competitions"].items():
        names = [reference["name"] for reference in entry["entries"]]
        assert names == list(REFERENCE_NAMES), competition_id
        valid = [reference for reference in entry["entries"] if reference["status"] == "valid"]
        assert len(valid) >= 12, competition_id
        distinct = {reference["score"] for reference in valid}
        assert len(distinct) >= 8, f"{competition_id}: too few distinct scores"


def test_committed_leaderboards_match_the_suite_data(suite: KaggleSuite) -> None:
    if not COMMITTED_LEADERBOARDS.is_file():
        pytest.skip("leaderboards.json has not been built yet")
    from wmrl_envs.kaggle.references import data_fingerprint

    for competition_id in suite.ids():
        record = load_leaderboard_record(competition_id)
        assert record is not None
        assert record.fingerprint == data_fingerprint(suite.get(competition_id, with_leaderboard=False))


@pytest.mark.long  # moved out of the default suite (its slowest; CI's long pass runs it)
@pytest.mark.slow
@pytest.mark.integration
def test_committed_leaderboard_matches_a_rebuild(suite: KaggleSuite) -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed: the local sandbox cannot run here")
    if not COMMITTED_LEADERBOARDS.is_file():
        pytest.skip("leaderboards.json has not been built yet")
    from wmrl_envs.sandbox.local import BubblewrapSandbox

    competition = suite.get("concrete-strength", with_leaderboard=False)
    committed = load_leaderboard_record("concrete-strength")
    assert committed is not None
    sandbox = BubblewrapSandbox()
    try:
        rebuilt = build_leaderboard(competition, sandbox, timeout_s=300, progress=False, force=True)
    finally:
        sandbox.close()
    assert rebuilt.fingerprint == committed.fingerprint
    for new, old in zip(rebuilt.entries, committed.entries, strict=True):
        assert (new.name, new.status) == (old.name, old.status)
        assert new.score == pytest.approx(old.score, abs=1e-6), new.name
        assert new.public_score == pytest.approx(old.public_score, abs=1e-6), new.name
