"""Tests of wmrl_algos.algorithms: each algorithm's row is the paper's definition, and a bad name says so."""

from __future__ import annotations

import pytest

from wmrl_algos.algorithms import ALGORITHMS, algorithm
from wmrl_algos.errors import ConfigError


@pytest.mark.parametrize(
    ("name", "real", "world_model", "debias", "denoise"),
    [
        ("grpo", "all", False, False, False),
        ("anchors", "anchors", False, False, False),
        ("wm", "none", True, False, False),
        ("mix", "anchors", True, False, False),
        ("od", "anchors", True, True, False),
        ("ivd", "anchors", True, False, True),
        ("wmrl", "anchors", True, True, True),
    ],
)
def test_each_row_is_the_papers_definition(name, real, world_model, debias, denoise):
    row = algorithm(name)
    assert (row.real, row.uses_world_model, row.debias, row.denoise) == (real, world_model, debias, denoise)
    config = row.correction_config(0.25, seed=3)
    assert (config.debias, config.denoise, config.seed) == (debias, denoise, 3)
    expected_plan = {"all": (1.0, 1), "none": (0.0, 0), "anchors": (0.25, 1)}[real]
    assert (config.anchor_fraction, config.min_anchor_groups) == expected_plan


def test_only_the_anchors_baseline_rolls_out_the_anchor_groups_alone():
    assert [name for name, row in ALGORITHMS.items() if row.rolls_out_only_anchors] == ["anchors"]


def test_an_unknown_algorithm_is_refused_naming_the_choices():
    with pytest.raises(ConfigError, match="algo='ppo' is unknown; choose from grpo, anchors, wm"):
        algorithm("ppo")
