"""``wmrl eval`` on MLE-bench and MLE-Dojo installs, and the isolation it refuses to take from a file.

A real MLE-bench install keeps its registry (``mlebench/competitions/<id>/``: config.yaml, description,
leaderboard) apart from the prepared data (``<data>/<id>/prepared/...``); MLE-Dojo keeps
``mledojo/competitions/<c>/info/`` apart from ``<data>/<c>/data/...``. These tests lay both out in a
temporary directory from a built-in suite competition, train a one-step run with the real bubblewrap
sandbox, and run ``wmrl eval`` as a user does (a subprocess).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from _helpers import TINY_GROUP_ARGS

pytestmark = pytest.mark.integration

SOURCE = "titanic-survival"
TRAIN = [
    "--steps",
    "1",
    *TINY_GROUP_ARGS,
    "--competitions",
    SOURCE,
    "--eval-samples",
    "0",
    "--warm",
    "0",
    "--progress",
    "false",
]


def wmrl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "wmrl_adapters.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=cwd)


def _leaderboard_scores() -> list[float]:
    """40 teams between 0.60 and 0.86 accuracy, best first: a position strictly inside (0, 1) is likely."""
    return [round(0.86 - 0.0065 * i, 4) for i in range(40)]


def _install(root: Path, layout: str) -> tuple[Path, Path]:
    """Lay the suite's titanic data out as ``layout`` prepares it, registry apart; (data dir, registry)."""
    from wmrl_envs.kaggle.suite import load_suite

    source = load_suite().get(SOURCE, with_leaderboard=False)
    name = "titanic-mle" if layout == "mlebench" else "TitanicDojo"
    data, registry = root / layout / "data" / name, root / layout / "registry"
    prepared = "prepared" if layout == "mlebench" else "data"
    public, private = f"{prepared}/public", f"{prepared}/private"
    shutil.copytree(source.public_dir, data / public)
    (data / private).mkdir(parents=True)
    answers = "test.csv" if layout == "mlebench" else "test_answer.csv"
    shutil.copy(source.answers_path, data / private / answers)
    board = pd.DataFrame({"teamName": [f"t{i}" for i in range(40)], "score": _leaderboard_scores()})
    if layout == "mlebench":
        entry = registry / name
        entry.mkdir(parents=True)
        (entry / "config.yaml").write_text(f"id: {name}\ngrader:\n  name: accuracy\n")
        board.to_csv(entry / "leaderboard.csv", index=False)
    else:
        entry = registry / name / "info"
        entry.mkdir(parents=True)
        board.rename(columns={"score": "Score"}).to_csv(entry / "private_leaderboard.csv", index=False)
    return data, registry


def _position(score: float, scores: list[float]) -> float:
    """MLE-Dojo's position score, computed here from the leaderboard file, apart from the library."""
    beaten = next((index for index, entry in enumerate(scores) if score >= entry), len(scores))
    return (len(scores) - beaten) / len(scores)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("eval-mlebench")
    result = wmrl("train", *TRAIN, "--out", str(root / "run"), cwd=root)
    assert result.returncode == 0, result.stderr[-3000:]
    return root / "run"


def _policy_solution_graded_directly(run: Path, data: Path, registry: Path, metric: str | None) -> float:
    """The run's first evaluation solution on ``data`` (same checkpoint, same sampling state), executed in
    a real sandbox and graded by score_submission's path, without wmrl eval."""
    from wmrl_adapters.train.kaggle.config import TrainConfig
    from wmrl_adapters.train.kaggle.trainer import Trainer, evaluation_seed
    from wmrl_adapters.train.run.checks import load_config

    from wmrl_envs.kaggle.competition import load_competition
    from wmrl_envs.kaggle.env import extract_code
    from wmrl_envs.kaggle.grading import grade_execution
    from wmrl_envs.rollouts import TurnContext
    from wmrl_envs.sandbox import make_sandbox
    from wmrl_envs.sandbox.base import ExecutionRequest

    competition = load_competition(data, registry=registry, metric=metric)
    config = load_config(None, json.loads((run / "config.json").read_text()), TrainConfig)
    trainer = Trainer(config, run, resume=True)
    try:
        trainer.set_eval_competitions([competition])
        trainer.policy.generator.manual_seed(evaluation_seed(trainer.config.seed))  # as every evaluation
        context = TurnContext(0, competition.id, 0, 0, ("task",), (), ({},))
        (action,) = trainer.policy.act(["task"], [{"competition_id": competition.id}], contexts=[context])
    finally:
        trainer.close()
    sandbox = make_sandbox("local")
    try:
        request = ExecutionRequest(code=extract_code(action) or action, inputs=competition.public_files())
        outcome = grade_execution(sandbox.run(request), competition)
    finally:
        sandbox.close()
    assert outcome.status == "valid" and outcome.score is not None, outcome.detail
    return _position(outcome.score, _leaderboard_scores())


@pytest.mark.long
@pytest.mark.parametrize("layout", ["mlebench", "mledojo"])
def test_eval_of_a_prepared_dir_with_its_registry_apart_prints_the_position_grading_gives(
    run: Path, tmp_path: Path, layout: str
) -> None:
    data, registry = _install(tmp_path, layout)
    metric = ["--metric", "accuracy"] if layout == "mledojo" else []
    args = ["eval", str(run), "--competitions", str(data), "--registry", str(registry), *metric]
    result = wmrl(*args, "--samples", "1", "--out", str(tmp_path / "eval.json"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    expected = _policy_solution_graded_directly(run, data, registry, "accuracy" if metric else None)
    printed = re.search(rf"{data.name}\s+position (\d\.\d+)", result.stdout)
    assert printed is not None, result.stdout
    assert float(printed.group(1)) == pytest.approx(expected, abs=5e-5)
    metrics = json.loads((tmp_path / "eval.json").read_text())
    assert metrics[f"eval/position/{data.name}"] == pytest.approx(expected)
    assert metrics["eval/isolated"] == 1.0 and "(isolated)" in result.stdout


@pytest.mark.parametrize(
    ("where", "extra", "message"),
    [
        ("data", [], "--registry"),
        ("registry entry", [], "looks like a registry folder"),
        ("data", ["--registry", "missing"], "is not a directory"),
        ("dojo", ["--registry", "dojo registry"], "--metric"),
    ],
)
def test_a_directory_of_neither_layout_is_one_error_line_naming_what_was_expected(
    run: Path, tmp_path: Path, where: str, extra: list[str], message: str
) -> None:
    data, registry = _install(tmp_path, "mlebench")
    dojo, dojo_registry = _install(tmp_path, "mledojo")
    paths = {
        "data": data,
        "registry entry": registry / data.name,
        "missing": tmp_path / "missing",
        "dojo": dojo,
        "dojo registry": dojo_registry,
    }
    args = [str(paths[item]) if item in paths else item for item in extra]
    result = wmrl("eval", str(run), "--competitions", str(paths[where]), *args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.fixture
def unsafe_run(run: Path, tmp_path: Path) -> Path:
    """A copy of the run whose config.json was edited to ask for the unisolated backend."""
    copy = Path(shutil.copytree(run, tmp_path / "unsafe-run"))
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "sandbox": "unsafe"}))
    return copy


def test_eval_refuses_the_unsafe_sandbox_a_run_config_asks_for(unsafe_run: Path, tmp_path: Path) -> None:
    result = wmrl("eval", str(unsafe_run), "--competitions", SOURCE, "--samples", "1", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--sandbox unsafe" in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.long
def test_eval_runs_unisolated_only_with_the_flag_and_says_so(unsafe_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "eval.json"
    args = ["--competitions", SOURCE, "--samples", "1", "--sandbox", "unsafe", "--out", str(out)]
    result = wmrl("eval", str(unsafe_run), *args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "UNISOLATED" in result.stdout
    assert json.loads(out.read_text())["eval/isolated"] == 0.0


def test_a_resume_refuses_the_unsafe_sandbox_a_run_config_asks_for(unsafe_run: Path, tmp_path: Path) -> None:
    before = {path.name: path.read_bytes() for path in unsafe_run.iterdir() if path.is_file()}
    result = wmrl("train", "--resume", str(unsafe_run), cwd=tmp_path)
    assert result.returncode == 2 and "--sandbox unsafe" in result.stderr, result.stderr[-2000:]
    assert before == {path.name: path.read_bytes() for path in unsafe_run.iterdir() if path.is_file()}


def test_a_directory_with_the_id_of_a_suite_competition_is_refused(tmp_path: Path) -> None:
    from wmrl_adapters.train.kaggle.evaluate import resolve_competitions

    from wmrl_algos.errors import ConfigError
    from wmrl_envs.kaggle.suite import load_suite

    data, registry = _install(tmp_path, "mlebench")
    (registry / data.name).rename(registry / SOURCE)
    clash = data.rename(data.with_name(SOURCE))
    with pytest.raises(ConfigError, match="built-in suite competition"):
        resolve_competitions([str(clash)], load_suite(), registry=registry)


def test_the_design_agent_writes_a_solution_for_a_competition_it_never_saw(tmp_path: Path) -> None:
    from wmrl_adapters.train.kaggle.design_policy import DesignPolicy

    from wmrl_algos.errors import ConfigError
    from wmrl_envs.kaggle.competition import load_competition
    from wmrl_envs.kaggle.design import parse_design, task_features
    from wmrl_envs.kaggle.suite import load_suite

    data, registry = _install(tmp_path, "mlebench")
    unseen = load_competition(data, registry=registry)
    info = {"competition_id": unseen.id}
    with pytest.raises(ConfigError, match="set_eval_competitions"):
        DesignPolicy(load_suite().get).act(["task"], [info])
    (action,) = DesignPolicy({unseen.id: unseen}.__getitem__).act(["task"], [info])
    assert parse_design(action) is not None and unseen.target in action
    assert task_features(unseen).shape == task_features(load_suite().get(SOURCE)).shape
