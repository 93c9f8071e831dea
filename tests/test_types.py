"""Tests of the shared score containers: the one None-to-NaN conversion and the group invariants."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_algos.errors import ConfigError
from wmrl_algos.types import GroupAdvantages, ScoredGroup, StepResult, as_score_array


def test_unknown_scores_become_nan_and_known_ones_floats() -> None:
    array = as_score_array([1, None, 0.25])
    assert array.dtype == float
    assert array[0] == 1.0 and np.isnan(array[1]) and array[2] == 0.25


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_nan_or_inf_is_rejected_with_its_position_and_name(bad: float) -> None:
    with pytest.raises(ConfigError, match=r"predicted\[1\].*use None"):
        as_score_array([0.0, bad], name="predicted")


def test_anchor_group_without_real_scores_raises() -> None:
    with pytest.raises(ConfigError, match="anchor group but has no real scores"):
        ScoredGroup(3, anchor=True, predicted=(0.1, 0.2))


def test_real_and_predicted_lengths_must_match() -> None:
    with pytest.raises(ConfigError, match="2 predicted scores but 1 real"):
        ScoredGroup(0, anchor=True, predicted=(0.1, 0.2), real=(0.3,))


def test_trajectory_count_must_match_scores() -> None:
    with pytest.raises(ConfigError, match="3 trajectories but 2 scores"):
        ScoredGroup(0, anchor=False, predicted=(0.1, 0.2), trajectories=("a", "b", "c"))


def test_scored_group_is_frozen_and_reports_its_size() -> None:
    group = ScoredGroup(0, anchor=False, predicted=(0.1, None, 0.3))
    assert group.size == 3
    with pytest.raises(AttributeError):
        group.anchor = True  # type: ignore[misc]


def test_step_result_flattens_in_group_order() -> None:
    first = GroupAdvantages(np.array([1.0, -1.0]), np.array([True, True]), 1.0, np.array([1.0, 0.0]))
    second = GroupAdvantages(np.array([0.0]), np.array([False]), 2.0, np.array([np.nan]))
    values, mask = StepResult((first, second), ()).flat()
    assert values.tolist() == [1.0, -1.0, 0.0] and mask.tolist() == [True, True, False]
    empty_values, empty_mask = StepResult((), ()).flat()
    assert empty_values.size == 0 and empty_mask.dtype == bool


def test_pairs_are_accepted_on_anchor_groups_and_default_to_none() -> None:
    assert ScoredGroup(0, anchor=True, predicted=(0.1,), real=(0.2,)).pairs is None
    pairs = ((0.1, 0.0), (np.float32(0.3), 1))
    group = ScoredGroup(0, anchor=True, predicted=(0.1,), real=(0.2,), pairs=pairs)
    assert len(group.pairs or ()) == 2


def test_pairs_on_a_world_model_group_are_rejected() -> None:
    with pytest.raises(ConfigError, match="not an anchor group.*pairs=None"):
        ScoredGroup(0, anchor=False, predicted=(0.1,), pairs=((0.1, 0.2),))


@pytest.mark.parametrize("bad", [(0.1, None), (0.1, float("nan")), (0.1,), (True, 0.2)])
def test_a_pair_with_an_unknown_or_non_numeric_side_is_rejected(bad: tuple) -> None:
    with pytest.raises(ConfigError, match=r"pairs\[0\]"):
        ScoredGroup(0, anchor=True, predicted=(0.1,), real=(0.2,), pairs=(bad,))
