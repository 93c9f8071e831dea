"""Competition format and loaders for directories laid out as MLE-bench and MLE-Dojo prepare them."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from wmrl_algos.errors import ConfigError, DataError
from wmrl_envs.kaggle.competition import (
    Competition,
    describe_public_files,
    load_competition,
    load_mlebench_competition,
    load_mledojo_competition,
)
from wmrl_envs.kaggle.grading import score_submission


def _frame(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.integers(1, 80, rows)
    spend = rng.gamma(2.0, 100.0, rows).round(2)
    planet = rng.choice(["Earth", "Mars", "Europa"], rows)
    transported = (spend + rng.normal(0, 50, rows) > 200).astype(bool)
    return pd.DataFrame({"Age": age, "Spend": spend, "HomePlanet": planet, "Transported": transported})


def _mlebench_dir(root: Path) -> Path:
    """Lay out a competition as ``mlebench prepare`` does: prepared/public + prepared/private/test.csv."""
    competition = root / "spaceship-titanic"
    public, private = competition / "prepared" / "public", competition / "prepared" / "private"
    public.mkdir(parents=True)
    private.mkdir(parents=True)
    frame = _frame(300, seed=0)
    frame.insert(0, "PassengerId", [f"{i:04d}_01" for i in range(len(frame))])
    train, test = frame.iloc[:200], frame.iloc[200:]
    train.to_csv(public / "train.csv", index=False)
    test.drop(columns=["Transported"]).to_csv(public / "test.csv", index=False)
    test[["PassengerId"]].assign(Transported=False).to_csv(public / "sample_submission.csv", index=False)
    test[["PassengerId", "Transported"]].to_csv(private / "test.csv", index=False)
    (public / "description.md").write_text("# Spaceship Titanic\n\nPredict `Transported`.\n")
    (competition / "config.yaml").write_text(
        "id: spaceship-titanic\nname: Spaceship Titanic\ncompetition_type: simple\n"
        "dataset:\n  answers: spaceship-titanic/prepared/private/test.csv\n"
        "grader:\n  name: accuracy\n  grade_fn: mlebench.competitions.spaceship-titanic.grade:grade\n"
    )
    (competition / "leaderboard.csv").write_text(
        "teamName,score,submissionDate\n"
        + "".join(f"t{i},{0.9 - i * 0.05:.2f},2022-01-01\n" for i in range(10))
    )
    return competition


def _mledojo_dir(root: Path) -> Path:
    """Lay out a competition as MLE-Dojo prepares GiveMeSomeCredit: data/public + data/private."""
    competition = root / "GiveMeSomeCredit"
    public, private = competition / "data" / "public", competition / "data" / "private"
    info = competition / "info"
    for directory in (public, private, info):
        directory.mkdir(parents=True)
    frame = _frame(300, seed=1).rename(columns={"Transported": "SeriousDlqin2yrs"})
    frame["SeriousDlqin2yrs"] = frame["SeriousDlqin2yrs"].astype(int)
    frame.insert(0, "Id", np.arange(1, len(frame) + 1))
    train, test = frame.iloc[:220], frame.iloc[220:]
    train.to_csv(public / "cs-training.csv", index=False)
    test.drop(columns=["SeriousDlqin2yrs"]).to_csv(public / "cs-test.csv", index=False)
    pd.DataFrame({"Id": test["Id"], "Probability": 0.0}).to_csv(public / "sample_submission.csv", index=False)
    pd.DataFrame({"Id": test["Id"], "Probability": test["SeriousDlqin2yrs"]}).to_csv(
        private / "test_answer.csv", index=False
    )
    (public / "description.txt").write_text("Give Me Some Credit: predict serious delinquency.\n")
    for split, top in (("public", 0.87), ("private", 0.86)):
        rows = "".join(f"{i},team{i},2011-12-15,{top - i * 0.01:.4f}\n" for i in range(30))
        (info / f"{split}_leaderboard.csv").write_text("TeamId,TeamName,SubmissionDate,Score\n" + rows)
    return competition


def test_mlebench_layout_loads_and_grades(tmp_path: Path) -> None:
    competition = load_competition(_mlebench_dir(tmp_path))
    assert competition.layout == "mlebench"
    assert (competition.metric, competition.task_type) == ("accuracy", "binary")
    assert competition.higher_is_better
    assert (competition.id_column, competition.target) == ("PassengerId", "Transported")
    assert competition.feature_columns == ("Age", "Spend", "HomePlanet")
    assert competition.labels == ("False", "True")
    assert competition.leaderboard is not None and len(competition.leaderboard) == 10
    assert "Spaceship Titanic" in competition.description
    expected_files = {"train.csv", "test.csv", "sample_submission.csv", "description.md"}
    assert set(competition.public_files()) == expected_files

    answers = competition.load_answers()
    assert set(answers["Usage"]) == {"Public", "Private"}
    assert load_competition(tmp_path / "spaceship-titanic").load_answers()["Usage"].tolist() == answers[
        "Usage"
    ].tolist(), "the public/private marking must be stable"
    submission = answers[["PassengerId", "Transported"]]
    submission.to_csv(tmp_path / "submission.csv", index=False)
    report = score_submission(tmp_path / "submission.csv", competition)
    assert report.score == 1.0 and report.public_score == 1.0 and report.medal == "gold"


def test_mlebench_metric_can_be_given_when_config_is_missing(tmp_path: Path) -> None:
    directory = _mlebench_dir(tmp_path)
    (directory / "config.yaml").unlink()
    with pytest.raises(ConfigError, match="metric"):
        load_mlebench_competition(directory)
    assert load_mlebench_competition(directory, metric="macro-f1").metric == "macro_f1"


def test_mledojo_layout_loads_with_a_renamed_target(tmp_path: Path) -> None:
    competition = load_competition(_mledojo_dir(tmp_path), metric="auc")
    assert competition.layout == "mledojo"
    assert (competition.metric, competition.task_type) == ("roc_auc", "binary")
    assert (competition.id_column, competition.target, competition.train_target) == (
        "Id",
        "Probability",
        "SeriousDlqin2yrs",
    )
    assert competition.feature_columns == ("Age", "Spend", "HomePlanet")
    assert competition.leaderboard is not None and competition.leaderboard.scores[0] == 0.86
    assert competition.public_leaderboard is not None and competition.public_leaderboard.scores[0] == 0.87
    assert competition.description.startswith("Give Me Some Credit")

    answers = competition.load_answers()
    guess = answers[["Id"]].assign(Probability=answers["Probability"].astype(float) * 0.5 + 0.25)
    guess.to_csv(tmp_path / "submission.csv", index=False)
    report = score_submission(tmp_path / "submission.csv", competition)
    assert report.score == 1.0 and report.position == 1.0


def test_mledojo_needs_a_known_metric(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown metric"):
        load_mledojo_competition(_mledojo_dir(tmp_path), metric="quadratic_weighted_kappa")


def test_unknown_layout_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not a competition"):
        load_competition(tmp_path)


def test_answers_inside_the_public_dir_are_refused(tmp_path: Path) -> None:
    (tmp_path / "public").mkdir()
    with pytest.raises(DataError, match="inside the public dir"):
        Competition(
            id="leaky",
            title="Leaky",
            description="",
            public_dir=tmp_path / "public",
            answers_path=tmp_path / "public" / "answers.csv",
            metric="rmse",
            higher_is_better=False,
            task_type="regression",
            target="y",
            id_column="id",
            feature_columns=("x",),
        )


def test_multi_target_submissions_are_refused_with_a_clear_message(tmp_path: Path) -> None:
    directory = _mlebench_dir(tmp_path)
    sample = directory / "prepared" / "public" / "sample_submission.csv"
    pd.read_csv(sample).assign(Other=0).to_csv(sample, index=False)
    with pytest.raises(DataError, match="single-target"):
        load_competition(directory)


def test_reference_leaderboard_can_be_built_for_a_loaded_competition(tmp_path: Path) -> None:
    from wmrl_envs.kaggle.references import build_leaderboard
    from wmrl_envs.sandbox.unsafe import UnsafeSandbox

    competition = load_competition(_mledojo_dir(tmp_path), metric="auc")
    sandbox = UnsafeSandbox()
    try:
        record = build_leaderboard(competition, sandbox, names=["prior", "linear_numeric"], progress=False)
    finally:
        sandbox.close()
    scores = {entry.name: entry.score for entry in record.entries}
    assert scores["prior"] == 0.5
    assert scores["linear_numeric"] is not None and scores["linear_numeric"] > 0.7


def _move_to_config_paths(competition: Path) -> None:
    """Move the answers and the sample submission to non-default places that only config.yaml names,
    and leave a decoy of wrong answers at the default path (a loader that assumed it would grade 0)."""
    public, private = competition / "prepared" / "public", competition / "prepared" / "private"
    (private / "v2").mkdir()
    (private / "test.csv").rename(private / "v2" / "gold.csv")
    (public / "sample_submission.csv").rename(public / "format.csv")
    decoy = pd.read_csv(private / "v2" / "gold.csv")
    decoy.assign(Transported=~decoy["Transported"]).to_csv(private / "test.csv", index=False)
    (competition / "config.yaml").write_text(
        "# MLE-bench competition config\nid: spaceship-titanic\nname: Spaceship Titanic\n"
        "competition_type: simple\nawards_medals: true\nprizes:\n  - position: 1\n    value: 10000\n"
        "description: mlebench/competitions/spaceship-titanic/description.md\n\ndataset:\n"
        "  answers: spaceship-titanic/prepared/private/v2/gold.csv\n"
        "  sample_submission: 'spaceship-titanic/prepared/public/format.csv'\n\n"
        "grader:\n  name: accuracy\n  grade_fn: mlebench.competitions.spaceship-titanic.grade:grade\n"
        "preparer: mlebench.competitions.spaceship-titanic.prepare:prepare\n"
    )


def test_mlebench_answers_and_sample_submission_are_read_where_config_yaml_puts_them(tmp_path: Path) -> None:
    directory = _mlebench_dir(tmp_path)
    _move_to_config_paths(directory)
    competition = load_competition(directory)
    assert Path(competition.answers_path) == (directory / "prepared/private/v2/gold.csv").resolve()
    assert (competition.id_column, competition.target) == ("PassengerId", "Transported")
    assert competition.test_file == "test.csv" and competition.train_file == "train.csv"

    answers = competition.load_answers()
    answers[["PassengerId", "Transported"]].to_csv(tmp_path / "submission.csv", index=False)
    assert score_submission(tmp_path / "submission.csv", competition).score == 1.0, (
        "graded against the decoy at the default path, not the answers config.yaml names"
    )


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ("/etc/passwd", "is absolute"),
        ("../outside.csv", "outside the competition directory"),
        ("spaceship-titanic/../other-competition/prepared/private/test.csv", "outside the competition"),
        ("spaceship-titanic/prepared/private/missing.csv", "does not exist"),
    ],
)
def test_mlebench_config_paths_that_leave_the_competition_or_are_missing_are_refused(
    tmp_path: Path, answers: str, message: str
) -> None:
    directory = _mlebench_dir(tmp_path / "data")
    other = tmp_path / "data" / "other-competition" / "prepared" / "private"
    other.mkdir(parents=True)
    (other / "test.csv").write_text("PassengerId,Transported\n")
    (tmp_path / "outside.csv").write_text("PassengerId,Transported\n")
    (directory / "config.yaml").write_text(f"id: spaceship-titanic\ndataset:\n  answers: {answers}\n")
    with pytest.raises(ConfigError, match=message) as error:
        load_mlebench_competition(directory, metric="accuracy")
    assert "config.yaml" in str(error.value) and "dataset.answers" in str(error.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("dataset: [a, b]\ngrader:\n  name: accuracy\n", "'dataset' is"),
        ("id: x\nthis line is not yaml\n", "line 2"),
        (b"\xff\xfe\x00garbage", "cannot read"),
    ],
)
def test_a_corrupt_mlebench_config_names_the_file(tmp_path: Path, text: str | bytes, message: str) -> None:
    directory = _mlebench_dir(tmp_path)
    config = directory / "config.yaml"
    config.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError, match=message) as error:
        load_mlebench_competition(directory, metric="accuracy")
    assert str(config) in str(error.value)


def test_mlebench_without_config_or_default_answers_names_the_missing_key(tmp_path: Path) -> None:
    directory = _mlebench_dir(tmp_path)
    (directory / "config.yaml").unlink()
    (directory / "prepared" / "private" / "test.csv").unlink()
    with pytest.raises(ConfigError, match=r"config\.yaml gives no dataset\.answers"):
        load_mlebench_competition(directory, metric="accuracy")


def _wmrl_dir(root: Path) -> Path:
    """A copy of a built-in suite competition (wmrl's own layout: competition.json, public/, private/)."""
    from wmrl_envs.kaggle.suite import load_suite

    source = Path(load_suite().get("concrete-strength", with_leaderboard=False).public_dir).parent
    return Path(shutil.copytree(source, root / "concrete-strength"))


def _split_registry(data: Path, registry: Path) -> Path:
    """Move the MLE-bench registry files of ``data`` to ``registry/<id>/``, as a real install keeps them."""
    entry = registry / data.name
    entry.mkdir(parents=True)
    for name in ("config.yaml", "leaderboard.csv"):
        (data / name).rename(entry / name)
    (data / "prepared" / "public" / "description.md").rename(entry / "description.md")
    return entry


def _load(layout: str, directory: Path) -> Competition:
    return load_competition(directory, metric="auc") if layout == "mledojo" else load_competition(directory)


_LAYOUTS: dict[str, tuple[Callable[[Path], Path], str, str, str]] = {
    # layout: (builder, description, a public CSV, the hidden answers), paths under the competition dir
    "mlebench": (
        _mlebench_dir,
        "prepared/public/description.md",
        "prepared/public/train.csv",
        "prepared/private/test.csv",
    ),
    "mledojo": (
        _mledojo_dir,
        "data/public/description.txt",
        "data/public/cs-training.csv",
        "data/private/test_answer.csv",
    ),
    "wmrl": (_wmrl_dir, "public/description.md", "public/train.csv", "private/answers.csv"),
}


def _host_files(root: Path) -> dict[str, Path]:
    """Host files outside every competition directory, each holding a marker a leak would show."""
    root.mkdir()
    text = root / "secret.txt"
    text.write_text("HOST-SECRET\n")
    table = root / "secret.csv"
    table.write_text("HOST_SECRET,value\n1,2\n")
    return {"text": text, "table": table}


@pytest.mark.parametrize("layout", sorted(_LAYOUTS))
@pytest.mark.parametrize("role", ["description", "public CSV", "answers"])
def test_a_symlink_leaving_the_competition_is_refused_naming_the_file(
    tmp_path: Path, layout: str, role: str
) -> None:
    build, *relative = _LAYOUTS[layout]
    directory = build(tmp_path / "data")
    host = _host_files(tmp_path / "host")
    file = directory / relative[["description", "public CSV", "answers"].index(role)]
    if layout == "mlebench":  # the default answers path (a config.yaml path is checked by the test above)
        (directory / "config.yaml").write_text("id: spaceship-titanic\ngrader:\n  name: accuracy\n")
    file.unlink()
    file.symlink_to(host["text"] if role == "description" else host["table"])
    with pytest.raises(DataError, match="outside") as error:
        _load(layout, directory)
    assert str(file) in str(error.value) and "symlink" in str(error.value)


@pytest.mark.parametrize("layout", sorted(_LAYOUTS))
def test_symlinks_that_stay_inside_the_directory_still_work(tmp_path: Path, layout: str) -> None:
    build, description, table, _ = _LAYOUTS[layout]
    directory = build(tmp_path / "data")
    expected = _load(layout, directory)
    public = directory / Path(table).parent
    (public / "raw").mkdir()
    for name in (Path(description).name, Path(table).name):
        (public / name).rename(public / "raw" / name)
        (public / name).symlink_to(Path("raw") / name)
    competition = _load(layout, directory)
    assert competition.description == expected.description
    assert competition.feature_columns == expected.feature_columns
    files = competition.public_files()
    assert files[Path(table).name] == (public / "raw" / Path(table).name).resolve(), (
        "a symlink inside the public dir is mounted as the file it points at"
    )


def test_a_symlink_added_after_loading_reaches_neither_the_inventory_nor_the_sandbox(tmp_path: Path) -> None:
    competition = load_competition(_mlebench_dir(tmp_path / "data"))
    host = _host_files(tmp_path / "host")
    (Path(competition.public_dir) / "extra.csv").symlink_to(host["table"])
    for read in (competition.inventory, competition.public_files):
        with pytest.raises(DataError, match="extra.csv"):
            read()
    with pytest.raises(DataError, match="extra.csv"):
        describe_public_files(Path(competition.public_dir))


def test_a_public_dir_symlinked_out_of_the_competition_is_refused(tmp_path: Path) -> None:
    directory = _mlebench_dir(tmp_path / "data")
    public = directory / "prepared" / "public"
    public.rename(tmp_path / "elsewhere")
    public.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(DataError, match="public dir"):
        load_competition(directory)


def test_a_separate_mlebench_registry_supplies_metric_description_and_leaderboard(tmp_path: Path) -> None:
    directory = _mlebench_dir(tmp_path / "data")
    expected = load_competition(directory)
    _split_registry(directory, tmp_path / "competitions")
    with pytest.raises(ConfigError, match="--registry"):
        load_competition(directory)
    competition = load_competition(directory, registry=tmp_path / "competitions")
    assert (competition.metric, competition.description) == (expected.metric, expected.description)
    assert competition.leaderboard == expected.leaderboard
    assert Path(competition.answers_path) == Path(expected.answers_path)


@pytest.mark.parametrize("name", ["config.yaml", "leaderboard.csv", "description.md"])
def test_a_registry_file_symlinked_out_of_its_folder_is_refused(tmp_path: Path, name: str) -> None:
    directory = _mlebench_dir(tmp_path / "data")
    entry = _split_registry(directory, tmp_path / "competitions")
    host = _host_files(tmp_path / "host")
    (entry / name).rename(host["text"].with_name(name))
    (entry / name).symlink_to(host["text"].with_name(name))
    with pytest.raises(DataError, match="registry file") as error:
        load_competition(directory, registry=tmp_path / "competitions")
    assert str(entry / name) in str(error.value)


def test_an_mledojo_registry_is_read_from_its_info_folders(tmp_path: Path) -> None:
    directory = _mledojo_dir(tmp_path / "data")
    entry = tmp_path / "competitions" / directory.name
    entry.mkdir(parents=True)
    (directory / "info").rename(entry / "info")
    competition = load_competition(directory, registry=tmp_path / "competitions", metric="auc")
    assert competition.leaderboard is not None and competition.leaderboard.scores[0] == 0.86
    with pytest.raises(ConfigError, match="metric="):
        load_competition(directory, registry=tmp_path / "competitions")


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("registry entry", "looks like a registry folder"),
        ("empty", r"prepared/public/ \(MLE-bench"),
        ("missing", "no such directory"),
    ],
)
def test_a_directory_of_no_layout_says_what_was_expected(tmp_path: Path, setup: str, message: str) -> None:
    directory = tmp_path / "x"
    if setup != "missing":
        directory.mkdir()
    if setup == "registry entry":
        (directory / "config.yaml").write_text("id: x\n")
    with pytest.raises(DataError, match=message):
        load_competition(directory)


def test_a_registry_without_the_competition_names_the_folder_it_expected(tmp_path: Path) -> None:
    directory = _mlebench_dir(tmp_path / "data")
    (tmp_path / "competitions").mkdir()
    with pytest.raises(ConfigError, match="has no folder for 'spaceship-titanic'") as error:
        load_competition(directory, registry=tmp_path / "competitions")
    assert "config.yaml" in str(error.value)
