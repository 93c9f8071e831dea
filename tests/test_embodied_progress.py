"""Progress scorers as world models: collapse functions, the sim-state scorer, and the world-model adapter.

These run without the simulator: trajectories are built from the observation layout the embodied envs
return (the env tests check that layout against the real simulator).
"""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_algos.errors import ConfigError
from wmrl_envs.embodied.progress import (
    ProgressCurve,
    ProgressInput,
    ProgressScorer,
    ProgressWorldModel,
    SimStateProgressScorer,
    collapse_progress,
    max_progress,
    potential_progress,
    progress_input,
)
from wmrl_envs.world_model import WorldModel, WorldModelQuery


def _trajectory(places: list[float], satisfied_at_end: bool = False, images: bool = False) -> list[dict]:
    observations = []
    for t, place in enumerate(places):
        features = np.zeros((4, 4), np.float32)
        features[0] = (1.0, 0.0, min(1.0, place * 2), place)
        if satisfied_at_end and t == len(places) - 1:
            features[0, 1] = 1.0
        obs = {
            "instruction": "lift the red cube",
            "goal_features": features,
            "proprio": np.full(9, place, np.float32),
        }
        if images:
            obs["agentview_image"] = np.zeros((8, 8, 3), np.uint8)
        observations.append(obs)
    return observations


def test_potential_collapse_rewards_the_change_not_the_starting_state() -> None:
    easy_start_no_work = np.array([0.8, 0.8, 0.8, 0.8])
    hard_start_real_work = np.array([0.0, 0.1, 0.5, 0.6])
    assert potential_progress(easy_start_no_work, k=1) == 0.0
    assert potential_progress(hard_start_real_work, k=1) == pytest.approx(0.6)


def test_max_collapse_is_fooled_by_a_single_spike_that_potential_ignores() -> None:
    dropped_grasp = np.array([0.0, 0.0, 0.9, 0.0, 0.0, 0.0])
    assert max_progress(dropped_grasp) == pytest.approx(0.9)
    assert potential_progress(dropped_grasp, k=2) == pytest.approx(0.0)


def test_potential_window_is_capped_at_half_the_trajectory() -> None:
    assert potential_progress(np.array([0.0, 1.0]), k=10) == pytest.approx(1.0)


def test_collapse_of_an_empty_or_non_finite_curve_is_unknown_not_zero() -> None:
    assert collapse_progress(np.array([])) is None
    assert collapse_progress(np.array([0.1, np.nan, 0.3])) is None


def test_progress_input_splits_images_from_states_and_stacks_frames() -> None:
    item = progress_input(_trajectory([0.0, 0.5, 1.0], images=True))
    assert item.instruction == "lift the red cube"
    assert set(item.frames) == {"agentview_image"} and item.frames["agentview_image"].shape == (3, 8, 8, 3)
    assert set(item.states) == {"goal_features", "proprio"} and item.length == 3


@pytest.mark.parametrize("observations", [[], [np.zeros(3)], [{"proprio": np.zeros(9)}]])
def test_progress_input_rejects_observations_without_the_embodied_layout(observations: list) -> None:
    with pytest.raises(ConfigError):
        progress_input(observations)


def test_sim_state_progress_reads_one_only_on_success() -> None:
    scorer = SimStateProgressScorer()
    [curve] = scorer.progress([progress_input(_trajectory([0.0, 0.5, 1.0, 1.0], satisfied_at_end=True))])
    assert curve is not None
    assert curve.progress[0] == pytest.approx(0.0)
    assert curve.progress[2] == pytest.approx(0.9)  # everything closed but not yet judged solved: capped
    assert curve.progress[-1] == pytest.approx(1.0)
    assert np.all(np.diff(curve.progress) >= 0)


def test_sim_state_progress_is_unknown_without_goal_features() -> None:
    item = ProgressInput("lift", states={"proprio": np.zeros((3, 9))})
    assert SimStateProgressScorer().progress([item]) == [None]


@pytest.mark.parametrize(
    "kwargs",
    [{"reach_weight": -0.1, "place_weight": 1.1}, {"reach_weight": 0.5, "place_weight": 0.6}, {"cap": 1.0}],
)
def test_sim_state_scorer_rejects_invalid_weights(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        SimStateProgressScorer(**kwargs)


def test_progress_world_model_is_a_world_model_and_scores_trajectories_in_one_batch() -> None:
    model = ProgressWorldModel(SimStateProgressScorer(), k=1)
    assert isinstance(model, WorldModel) and isinstance(SimStateProgressScorer(), ProgressScorer)
    good = WorldModelQuery(_trajectory([0.0, 0.3, 0.7, 1.0], satisfied_at_end=True), [None] * 3)
    idle = WorldModelQuery(_trajectory([0.0, 0.0, 0.0, 0.0]), [None] * 3)
    predictions = model.predict([good, idle])
    assert predictions[0].reward == pytest.approx(1.0) and predictions[1].reward == pytest.approx(0.0)
    assert predictions[0].info["progress"].shape == (4,)


class _Unsure:
    name = "unsure"

    def progress(self, batch):
        return [
            None
            if item.length < 3
            else ProgressCurve(np.linspace(0, 1, item.length), np.full(item.length, 0.2))
            for item in batch
        ]


def test_progress_world_model_passes_unknown_through_as_none_and_reports_spread() -> None:
    model = ProgressWorldModel(_Unsure())
    short, long = (WorldModelQuery(_trajectory([0.0] * n), []) for n in (2, 5))
    unknown, known = model.predict([short, long])
    assert unknown.reward is None
    assert known.reward == pytest.approx(np.linspace(0, 1, 5)[-2:].mean() - np.linspace(0, 1, 5)[:2].mean())
    assert known.info["spread"] == pytest.approx(0.2)


class _WrongLength:
    name = "wrong"

    def progress(self, batch):
        return [ProgressCurve(np.zeros(1)) for _ in batch]


def test_progress_world_model_rejects_a_curve_of_the_wrong_length() -> None:
    with pytest.raises(ConfigError, match="one per frame"):
        ProgressWorldModel(_WrongLength()).predict([WorldModelQuery(_trajectory([0.0, 0.1, 0.2]), [])])


@pytest.mark.parametrize("kwargs", [{"collapse": "mean"}, {"k": 0}, {"k": True}])
def test_progress_world_model_rejects_invalid_arguments(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        ProgressWorldModel(SimStateProgressScorer(), **kwargs)


class _NaNOnSecondTrajectory:
    """A scorer that returns NaN for one frame of the second trajectory of a batch (a VLM's bad frame)."""

    name = "nan-frame"

    def progress(self, batch):
        curves = [ProgressCurve(np.linspace(0.0, 1.0, item.length)) for item in batch]
        curves[1].progress[2] = np.nan
        return curves


def test_a_scorer_nan_for_one_frame_makes_that_episode_unknown_and_is_counted() -> None:
    model = ProgressWorldModel(_NaNOnSecondTrajectory(), k=1)
    queries = [WorldModelQuery(_trajectory([0.0] * 4), []) for _ in range(3)]
    first, broken, third = model.predict(queries)
    assert first.reward == pytest.approx(1.0) and third.reward == pytest.approx(1.0)
    assert broken.reward is None  # excluded, never 0
    assert broken.info["unknown"] == "non_finite" and broken.info["non_finite_frames"] == [2]
    assert model.unknown_counts == {"scorer": 0, "non_finite": 1}
    model.predict(queries)
    assert model.metrics()["wmrl/progress_unknown_non_finite"] == 2.0


def test_a_scorer_that_cannot_say_is_counted_apart_from_a_non_finite_one() -> None:
    model = ProgressWorldModel(_Unsure())
    model.predict([WorldModelQuery(_trajectory([0.0] * 2), [])])
    assert model.unknown_counts == {"scorer": 1, "non_finite": 0}
