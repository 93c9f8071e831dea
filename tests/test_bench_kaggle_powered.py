"""Tests of benchmarks/kaggle_powered.py and the restricted design log-probs it trains with.

Real components throughout: the library's DesignPolicy, CorrectionLoop and grpo_update on real suite
competitions. The outcomes are a synthetic replay table (the recorded one takes an hour of sandbox time);
the script's --quick run says so in its results.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from _helpers import benchmark_script
from wmrl_adapters.train.kaggle.design_policy import DesignPolicy

from wmrl_algos.errors import ConfigError
from wmrl_envs.kaggle.design import Design
from wmrl_envs.kaggle.suite import load_suite

ROOT = Path(__file__).resolve().parents[1]
kaggle_powered = benchmark_script("kaggle_powered")

DESIGNS = [Design(model="linear"), Design(model="lightgbm", validation="holdout"), Design(model="knn")]


@pytest.fixture(scope="module")
def suite():
    return load_suite()


def _trained_policy(suite, seed: int = 0) -> DesignPolicy:
    """A policy moved away from uniform (random head weights), so the checks are not trivially true."""
    policy = DesignPolicy(suite.get, seed=seed)
    with torch.no_grad():
        for head in policy.heads:
            head.weight.normal_(0.0, 1.0, generator=torch.Generator().manual_seed(seed))
    return policy


def test_restricted_logprobs_sum_to_one_over_the_listed_designs(suite):
    policy = _trained_policy(suite)
    tasks = suite.ids()[:3]
    logprobs = policy.design_logprobs(tasks, DESIGNS)
    assert logprobs.shape == (3, len(DESIGNS))
    assert torch.allclose(logprobs.exp().sum(dim=1), torch.ones(3), atol=1e-6)
    assert logprobs.requires_grad
    assert not torch.allclose(logprobs.exp(), torch.full_like(logprobs, 1 / len(DESIGNS)), atol=1e-3)


def test_restricted_logprobs_are_the_joint_probability_renormalised(suite):
    policy = _trained_policy(suite, seed=1)
    task = suite.ids()[0]
    logits = policy._logits(policy._first_turn_inputs(task)[None])
    joint = torch.stack(
        [
            sum(
                torch.log_softmax(head[0], -1)[index]
                for head, index in zip(logits, design.indices(), strict=True)
            )
            for design in DESIGNS
        ]
    )
    expected = torch.softmax(joint, dim=0)
    assert torch.allclose(policy.design_logprobs([task], DESIGNS)[0].exp(), expected, atol=1e-6)


def test_an_untrained_policy_is_uniform_over_the_listed_designs(suite):
    probabilities = DesignPolicy(suite.get, seed=3).design_logprobs(suite.ids()[:2], DESIGNS).exp()
    assert torch.allclose(probabilities, torch.full_like(probabilities, 1 / len(DESIGNS)), atol=1e-6)


@pytest.mark.parametrize(
    ("tasks", "designs", "message"),
    [
        ([], DESIGNS, "no task ids"),
        (["adult-income"], [], "no designs"),
        (["adult-income"], [DESIGNS[0], DESIGNS[0]], "more than once"),
    ],
)
def test_restricted_logprobs_refuse_bad_arguments(suite, tasks, designs, message):
    with pytest.raises(ConfigError, match=message):
        DesignPolicy(suite.get, seed=0).design_logprobs(tasks, designs)


def test_exact_evaluation_equals_a_monte_carlo_estimate_within_its_standard_error(suite):
    policy = _trained_policy(suite, seed=2)
    tasks = suite.ids()[:4]
    position = np.random.default_rng(0).uniform(0.0, 1.0, (len(tasks), len(DESIGNS)))
    with torch.no_grad():
        probabilities = policy.design_logprobs(tasks, DESIGNS).exp().numpy()
    exact = kaggle_powered.exact_heldout_score(probabilities, position)
    rng = np.random.default_rng(1)
    draws = 20000
    sampled = kaggle_powered._sample(probabilities, rng.random((len(tasks), draws)))
    per_draw = position[np.arange(len(tasks))[:, None], sampled].mean(axis=0)
    estimate, stderr = per_draw.mean(), per_draw.std(ddof=1) / np.sqrt(draws)
    assert abs(exact - estimate) < 3 * stderr
    assert np.abs(probabilities - 1 / len(DESIGNS)).max() > 0.1  # not uniform: the check has teeth


def test_shared_uniforms_draw_equal_designs_from_equal_policies():
    probabilities = np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]])
    uniforms = np.random.default_rng(0).random((2, 8))
    first = kaggle_powered._sample(probabilities, uniforms)
    assert np.array_equal(first, kaggle_powered._sample(probabilities.copy(), uniforms))
    assert first.min() >= 0 and first.max() < 3


def test_a_missing_table_is_a_clear_error_not_a_traceback(tmp_path):
    with pytest.raises(SystemExit, match="cannot read the replay table .*wmrl record"):
        kaggle_powered.main(["--table", str(tmp_path / "no.json"), "--output-dir", str(tmp_path)])


@pytest.mark.long  # moved out of the default suite (its slowest; CI's long pass runs it)
@pytest.mark.slow
def test_quick_run_writes_the_table_and_the_plot(tmp_path):
    completed = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "kaggle_powered.py"),
            "--quick",
            "--workers",
            "2",
            "--output-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    text = (tmp_path / "results.md").read_text()
    assert "SYNTHETIC" in text
    assert "## Decision rule" in text and ("MET" in text or "MISSED" in text)
    for name in ("results.csv", "curves.csv", "kaggle_powered.png"):
        assert (tmp_path / name).stat().st_size > 0
    rows = (tmp_path / "results.csv").read_text().splitlines()
    assert len(rows) > 1 and "final vs anchors-only" in rows[0]
