"""The built-in suite: reproducible, idempotent, answers hidden, splits and task kinds covered."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from wmrl_algos.errors import ConfigError
from wmrl_envs.kaggle.metrics import get_metric
from wmrl_envs.kaggle.suite import HELDOUT, SPECS, KaggleSuite, build_suite, default_suite_dir


@pytest.fixture(scope="module")
def suite_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_suite(tmp_path_factory.mktemp("suite"), progress=False)


@pytest.fixture(scope="module")
def suite(suite_dir: Path) -> KaggleSuite:
    return KaggleSuite(suite_dir)


def test_suite_generation_is_deterministic(suite_dir: Path, tmp_path: Path) -> None:
    again = build_suite(tmp_path / "again", progress=False)
    first = json.loads((suite_dir / "manifest.json").read_text())
    second = json.loads((again / "manifest.json").read_text())
    assert first == second
    for spec in SPECS:
        for name in ("public/train.csv", "public/test.csv", "private/answers.csv"):
            assert (suite_dir / spec.id / name).read_bytes() == (again / spec.id / name).read_bytes()


def test_generation_is_idempotent_and_repairs_tampered_files(suite_dir: Path, tmp_path: Path) -> None:
    root = build_suite(tmp_path / "s", ids=["concrete-strength"], progress=False)
    train = root / "concrete-strength" / "public" / "train.csv"
    stamp = train.stat().st_mtime_ns
    build_suite(root, ids=["concrete-strength"], progress=False)
    assert train.stat().st_mtime_ns == stamp, "an up-to-date competition must be left alone"
    original = train.read_bytes()
    train.write_text("tampered\n")
    build_suite(root, ids=["concrete-strength"], progress=False)
    assert train.read_bytes() == original


def test_hidden_answers_are_not_in_the_public_dir(suite: KaggleSuite) -> None:
    for competition_id in suite.ids():
        competition = suite.get(competition_id, with_leaderboard=False)
        public = Path(competition.public_dir).resolve()
        assert not Path(competition.answers_path).resolve().is_relative_to(public)
        answers = competition.load_answers()
        test = pd.read_csv(public / "test.csv")
        train = pd.read_csv(public / "train.csv")
        assert competition.target not in test.columns
        assert set(answers[competition.id_column]) == set(test[competition.id_column].astype(str))
        assert not set(train[competition.id_column].astype(str)) & set(answers[competition.id_column])
        for name, path in competition.public_files().items():
            assert "answer" not in name and path.resolve().is_relative_to(public)
            if name == "test.csv":
                assert competition.target not in pd.read_csv(path, nrows=0).columns


def test_sample_submission_targets_carry_no_answers(suite: KaggleSuite) -> None:
    for competition_id in suite.ids():
        competition = suite.get(competition_id, with_leaderboard=False)
        sample = pd.read_csv(Path(competition.public_dir) / "sample_submission.csv")
        assert sample[competition.target].nunique() == 1


def test_public_and_private_rows_split_the_test_set_in_halves(suite: KaggleSuite) -> None:
    for competition_id in suite.ids():
        usage = suite.get(competition_id, with_leaderboard=False).load_answers()["Usage"]
        assert set(usage) == {"Public", "Private"}
        assert abs((usage == "Public").mean() - 0.5) < 0.01


def test_suite_covers_task_kinds_text_and_a_heldout_split(suite: KaggleSuite) -> None:
    assert len(suite.ids()) >= 12
    competitions = [suite.get(i, with_leaderboard=False) for i in suite.ids()]
    assert {c.task_type for c in competitions} == {"binary", "multiclass", "regression"}
    assert any(c.text_columns for c in competitions)
    assert set(suite.ids("heldout")) == set(HELDOUT)
    assert not set(suite.ids("train")) & set(suite.ids("heldout"))
    heldout_kinds = {suite.get(i, with_leaderboard=False).task_type for i in suite.ids("heldout")}
    assert heldout_kinds == {"binary", "multiclass", "regression"}


def test_competitions_are_small_enough_for_seconds_long_solutions(suite: KaggleSuite) -> None:
    for competition_id in suite.ids():
        train = pd.read_csv(Path(suite.get(competition_id, with_leaderboard=False).public_dir) / "train.csv")
        assert 500 <= len(train) <= 3500


def test_binary_targets_are_zero_one_and_labels_match_the_metric(suite: KaggleSuite) -> None:
    for competition_id in suite.ids():
        competition = suite.get(competition_id, with_leaderboard=False)
        train = pd.read_csv(Path(competition.public_dir) / "train.csv")
        kind = get_metric(competition.metric).kind
        if competition.task_type == "binary":
            assert set(train[competition.target].unique()) == {0, 1}
        assert bool(competition.labels) == (kind == "label")


def test_titanic_leaking_columns_are_dropped(suite: KaggleSuite) -> None:
    train = pd.read_csv(Path(suite.get("titanic-survival", with_leaderboard=False).public_dir) / "train.csv")
    assert not {"boat", "body", "home.dest"} & set(train.columns)


def test_data_dir_follows_wmrl_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("WMRL_DATA_DIR", str(tmp_path))
    assert default_suite_dir().is_relative_to(tmp_path)
    monkeypatch.delenv("WMRL_DATA_DIR")
    assert default_suite_dir().is_relative_to(Path.home() / ".cache" / "wmrl")


def test_unknown_ids_and_splits_are_refused(suite: KaggleSuite, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nope"):
        build_suite(tmp_path, ids=["nope"], progress=False)
    with pytest.raises(ConfigError, match="nope"):
        suite.get("nope")
    with pytest.raises(ConfigError, match="split"):
        suite.ids("validation")  # type: ignore[arg-type]


def test_four_concurrent_builders_on_a_fresh_dir_all_succeed(tmp_path: Path) -> None:
    """Four trainers starting at once on a fresh machine used to race (``Directory not empty``)."""
    import subprocess
    import sys

    root = tmp_path / "fresh"
    ids = ["concrete-strength", "titanic-survival"]
    script = (
        "import sys; from pathlib import Path; from wmrl_envs.kaggle.suite import build_suite, KaggleSuite; "
        f"root = build_suite(Path(sys.argv[1]), ids={ids!r}, force=sys.argv[2] == '1', progress=False); "
        "print(sorted(KaggleSuite(root).ids()))"
    )
    builders = [subprocess.Popen([sys.executable, "-c", script, str(root), "1"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(4)]
    outputs = [builder.communicate(timeout=300) for builder in builders]
    for builder, (stdout, stderr) in zip(builders, outputs, strict=True):
        assert builder.returncode == 0, stderr[-2000:]
        assert stdout.strip() == repr(sorted(ids))
    manifest = json.loads((root / "manifest.json").read_text())
    assert sorted(manifest["competitions"]) == sorted(ids)
    leftovers = [path.name for path in root.iterdir() if path.name.startswith(".") and path.is_dir()]
    assert leftovers == [], "no staging directory may be left behind"
    assert KaggleSuite(root).get("titanic-survival", with_leaderboard=False).load_answers().shape[0] > 0
