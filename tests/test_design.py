"""Tests of wmrl_envs.kaggle.design: header round trip, validation, rendering, real runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from wmrl_algos.errors import ConfigError
from wmrl_envs.kaggle.design import (
    DECISIONS,
    FEEDBACK_FEATURES,
    TASK_FEATURES,
    Design,
    design_header,
    feedback_features,
    parse_design,
    relevant_decisions,
    render_design,
    task_features,
)
from wmrl_envs.kaggle.outcome import Outcome
from wmrl_envs.kaggle.suite import load_suite

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def suite():
    return load_suite()


def test_design_survives_the_round_trip_through_its_rendered_script(suite):
    design = Design(model="lightgbm", validation="holdout", target="log1p", capacity="large")
    code = render_design(design, suite.get("concrete-strength"))
    assert code.startswith(design_header(design))
    assert parse_design(code) == design
    assert parse_design("```python\n" + code + "```") == design


def test_a_script_without_a_header_or_with_a_bad_one_has_no_design():
    assert parse_design("print(1)") is None
    assert parse_design('# wmrl-design: {"model": "gpt"}\n') is None


@pytest.mark.parametrize("field", list(DECISIONS))
def test_an_invalid_choice_names_the_valid_ones(field):
    with pytest.raises(ConfigError, match="pick from"):
        Design(**{field: "nonsense"})


@pytest.mark.parametrize("model", DECISIONS["model"])
@pytest.mark.parametrize(
    "competition_id", ["titanic-survival", "ames-house-prices", "diamond-cut", "food-review-sentiment"]
)
def test_every_model_family_renders_a_script_that_compiles(suite, model, competition_id):
    for validation in DECISIONS["validation"]:
        design = Design(model=model, validation=validation, categorical="ordinal", target="log1p")
        compile(render_design(design, suite.get(competition_id)), "solution.py", "exec")


def test_irrelevant_decisions_are_masked_by_task_and_model(suite):
    titanic, ames = suite.get("titanic-survival"), suite.get("ames-house-prices")
    names = list(DECISIONS)
    tree = dict(zip(names, relevant_decisions(Design(model="random_forest"), titanic), strict=True))
    assert not tree["target"] and not tree["scale"] and not tree["text"] and tree["capacity"]
    linear = dict(zip(names, relevant_decisions(Design(model="linear"), ames), strict=True))
    assert linear["target"] and linear["scale"] and not linear["capacity"]


def test_task_features_tell_task_kinds_apart(suite):
    binary = task_features(suite.get("titanic-survival"))
    regression = task_features(suite.get("concrete-strength"))
    assert binary.shape == regression.shape == (TASK_FEATURES,)
    assert binary[0] == 1.0 and regression[2] == 1.0
    assert np.isfinite(binary).all() and np.isfinite(regression).all()


def test_feedback_features_read_a_valid_run_as_a_public_position(suite):
    competition = suite.get("titanic-survival")
    best = max(competition.public_leaderboard.scores)
    row = feedback_features(Outcome(status="valid", score=best, public_score=best), competition)
    assert row.shape == (FEEDBACK_FEATURES,) and row[0] == 1.0 and row[-2] == 1.0 and row[-3] == 1.0
    assert feedback_features(None, competition).sum() == 0.0


@pytest.mark.integration
def test_a_rendered_design_runs_for_real_and_is_graded(suite):
    from wmrl_envs.kaggle.env import KaggleEnv

    env = KaggleEnv("titanic-survival", suite=suite, sandbox="local", max_turns=1, timeout_s=120)
    env.reset(seed=0)
    code = render_design(Design(model="linear", validation="kfold"), suite.get("titanic-survival"))
    _, reward, terminated, _, info = env.step(f"```python\n{code}```")
    env.close()
    assert info["status"] == "valid" and terminated
    assert 0.5 <= reward <= 1.0 and info["position"] is not None


@pytest.mark.integration
@pytest.mark.long  # out of the default suite (among CI's slowest); CI's long pass runs it
def test_design_sweep_smoke_writes_the_per_task_table(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "design_sweep.py"), "--smoke", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    table = (tmp_path / "table.md").read_text()
    assert "oracle position" in table and "distinct best designs" in table
