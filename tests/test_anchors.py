"""Tests of the anchor scheduler: counts, reproducibility, convergence, in-flight cap, resume."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wmrl_algos.anchors import AnchorScheduler
from wmrl_algos.errors import CheckpointError, ConfigError


def test_paper_setting_anchors_one_group_of_eight_every_step() -> None:
    scheduler = AnchorScheduler(fraction=0.1, min_per_step=1, seed=3)
    counts = [int(scheduler.select(8).sum()) for _ in range(50)]
    assert counts == [1] * 50


def test_realised_fraction_converges() -> None:
    scheduler = AnchorScheduler(fraction=0.1, min_per_step=0, seed=0)
    counts = [int(scheduler.select(8).sum()) for _ in range(400)]
    assert set(counts) == {0, 1}
    assert scheduler.realised_fraction == pytest.approx(0.1, abs=1e-3)
    scheduler.release(scheduler.in_flight)


@pytest.mark.parametrize("fraction", [0.03, 0.1, 0.37, 0.5, 0.9])
def test_realised_fraction_tracks_any_target_with_many_groups(fraction: float) -> None:
    scheduler = AnchorScheduler(fraction=fraction, min_per_step=1, seed=1)
    for _ in range(200):
        scheduler.select(64)
    assert scheduler.realised_fraction == pytest.approx(fraction, abs=1.0 / (64 * 200) + 1e-9)


def test_min_per_step_binds_when_fraction_rounds_to_zero() -> None:
    scheduler = AnchorScheduler(fraction=0.01, min_per_step=2, seed=0)
    assert [int(scheduler.select(8).sum()) for _ in range(10)] == [2] * 10


def test_zero_fraction_and_zero_minimum_never_anchor() -> None:
    scheduler = AnchorScheduler(fraction=0.0, min_per_step=0, seed=0)
    assert not any(scheduler.select(16).any() for _ in range(20))
    assert scheduler.realised_fraction == 0.0


def test_anchor_count_never_exceeds_group_count() -> None:
    scheduler = AnchorScheduler(fraction=1.0, min_per_step=5, seed=0)
    assert scheduler.select(3).tolist() == [True, True, True]
    assert scheduler.select(0).shape == (0,)


def test_selection_is_reproducible_from_seed_and_differs_across_seeds() -> None:
    def masks(seed: int) -> list[list[bool]]:
        scheduler = AnchorScheduler(fraction=0.25, seed=seed)
        return [scheduler.select(8).tolist() for _ in range(20)]

    assert masks(7) == masks(7)
    assert masks(7) != masks(8)


def test_every_group_position_gets_anchored_eventually() -> None:
    scheduler = AnchorScheduler(fraction=0.125, seed=0)
    hits = sum(scheduler.select(8).astype(int) for _ in range(400))
    assert (hits > 20).all()


def test_in_flight_cap_limits_anchors() -> None:
    scheduler = AnchorScheduler(fraction=0.5, min_per_step=1, max_in_flight=3, seed=0)
    assert int(scheduler.select(8).sum()) == 3
    assert scheduler.in_flight == 3
    assert int(scheduler.select(8).sum()) == 0
    scheduler.release(2)
    assert int(scheduler.select(8).sum()) == 2
    assert scheduler.in_flight == 3


def test_release_more_than_in_flight_raises() -> None:
    scheduler = AnchorScheduler(fraction=0.125, seed=0)
    scheduler.select(8)
    with pytest.raises(ConfigError, match="in flight"):
        scheduler.release(2)


def test_in_flight_shortfall_is_not_repaid_in_a_burst() -> None:
    scheduler = AnchorScheduler(fraction=0.25, min_per_step=0, max_in_flight=2, seed=0)
    for _ in range(10):
        scheduler.select(8)
    scheduler.release(scheduler.in_flight)
    uncapped = AnchorScheduler(fraction=0.25, min_per_step=0, seed=0)
    assert int(scheduler.select(8).sum()) <= int(uncapped.select(8).sum()) + 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"fraction": -0.1}, "fraction=-0.1"),
        ({"fraction": 1.5}, "fraction=1.5"),
        ({"min_per_step": -1}, "min_per_step=-1"),
        ({"max_in_flight": -2}, "max_in_flight=-2"),
    ],
)
def test_invalid_arguments_raise_config_error_naming_the_value(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        AnchorScheduler(**kwargs)  # type: ignore[arg-type]


def test_negative_group_count_raises() -> None:
    with pytest.raises(ConfigError, match="n_groups=-1"):
        AnchorScheduler().select(-1)


def test_restored_scheduler_makes_the_same_selections() -> None:
    original = AnchorScheduler(fraction=0.15, min_per_step=0, max_in_flight=4, seed=11)
    for _ in range(7):
        original.select(8)
        original.release(original.in_flight // 2)
    state = pickle.loads(pickle.dumps(original.state_dict()))
    restored = AnchorScheduler(fraction=0.9, seed=999)
    restored.load_state_dict(state)
    for _ in range(30):
        assert np.array_equal(original.select(8), restored.select(8))
        original.release(1 if original.in_flight else 0)
        restored.release(1 if restored.in_flight else 0)
    assert restored.realised_fraction == original.realised_fraction


def test_corrupt_state_raises_checkpoint_error() -> None:
    state = AnchorScheduler().state_dict()
    del state["rng"]
    with pytest.raises(CheckpointError, match="anchor scheduler state"):
        AnchorScheduler().load_state_dict(state)


@settings(max_examples=60, deadline=None)
@given(
    fraction=st.floats(min_value=0.0, max_value=1.0),
    min_per_step=st.integers(min_value=0, max_value=4),
    max_in_flight=st.one_of(st.none(), st.integers(min_value=0, max_value=6)),
    steps=st.lists(st.tuples(st.integers(min_value=0, max_value=20), st.integers(0, 3)), max_size=15),
)
def test_selection_respects_every_bound(
    fraction: float, min_per_step: int, max_in_flight: int | None, steps: list[tuple[int, int]]
) -> None:
    scheduler = AnchorScheduler(fraction, min_per_step, max_in_flight, seed=0)
    for n_groups, finished in steps:
        free_before = scheduler.free_slots
        mask = scheduler.select(n_groups)
        k = int(mask.sum())
        assert mask.shape == (n_groups,) and k <= n_groups and k <= free_before
        if max_in_flight is None:
            assert k >= min(min_per_step, n_groups)
            assert abs(k - fraction * n_groups) <= max(1.5, min_per_step) + 1e-9
        else:
            assert scheduler.in_flight <= max_in_flight
        scheduler.release(min(finished, scheduler.in_flight))


def test_when_min_per_step_binds_the_realised_fraction_is_the_minimum_not_the_target() -> None:
    scheduler = AnchorScheduler(fraction=0.1, min_per_step=1, seed=0)
    for _ in range(100):
        scheduler.select(8)
    assert scheduler.realised_fraction == 1 / 8


def test_priority_with_no_random_share_anchors_the_highest_priority_groups() -> None:
    scheduler = AnchorScheduler(fraction=0.25, min_per_step=1, seed=0, random_share=0.0)
    mask = scheduler.select(8, priority=[0.1, 0.9, 0.2, 0.3, 0.8, 0.0, 0.4, 0.5])
    assert np.flatnonzero(mask).tolist() == [1, 4]
    assert not scheduler.last_random.any()


def test_priority_keeps_a_uniform_share_that_is_marked() -> None:
    scheduler = AnchorScheduler(fraction=0.125, min_per_step=1, seed=0, random_share=0.5)
    priority = np.arange(8.0)
    uniform, top = 0, 0
    for _ in range(400):
        mask = scheduler.select(8, priority=priority)
        scheduler.release(1)
        (chosen,) = np.flatnonzero(mask)
        if scheduler.last_random[chosen]:
            uniform += 1
        else:
            assert chosen == 7
            top += 1
    assert 150 < uniform < 250 and uniform + top == 400


def test_without_priority_every_anchor_is_uniform() -> None:
    scheduler = AnchorScheduler(fraction=0.25, seed=0)
    mask = scheduler.select(8)
    assert np.array_equal(scheduler.last_random, mask)


@pytest.mark.parametrize("priority", [[0.1, 0.2], [0.1, float("nan"), 0.3]])
def test_priority_of_the_wrong_length_or_with_nan_raises(priority: list[float]) -> None:
    with pytest.raises(ConfigError, match="one finite number per group"):
        AnchorScheduler().select(3, priority=priority)


def test_random_share_outside_the_unit_interval_raises() -> None:
    with pytest.raises(ConfigError, match="random_share=1.5"):
        AnchorScheduler(random_share=1.5)
