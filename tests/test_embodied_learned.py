"""The learned progress scorer: unknown until it has seen both outcomes, then ranks them, with a spread."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_algos.errors import ConfigError
from wmrl_algos.types import ScoredGroup
from wmrl_envs.embodied.learned import LearnedProgressConfig, LearnedProgressScorer
from wmrl_envs.embodied.progress import collapse_progress, progress_input
from wmrl_envs.rollouts import Trajectory

FAST = LearnedProgressConfig(members=3, epochs=30, hidden=16)


def _trajectory(success: bool, rng: np.random.Generator, length: int = 12) -> list[dict]:
    """A success lifts its 'object' feature steadily; a failure wanders near the start."""
    end = 1.0 if success else 0.15
    heights = np.linspace(0.0, end, length) + rng.normal(0, 0.03, length)
    return [
        {"instruction": "lift", "proprio": np.r_[h, rng.normal(0, 0.1, 8)].astype(np.float32)}
        for h in heights
    ]


def test_scorer_is_unknown_until_it_has_seen_a_success_and_a_failure() -> None:
    rng = np.random.default_rng(0)
    scorer = LearnedProgressScorer(FAST)
    scorer.push(_trajectory(True, rng), success=True)
    scorer.refit()
    assert not scorer.fitted
    assert scorer.progress([progress_input(_trajectory(True, rng))]) == [None]


def test_fitted_scorer_ranks_held_out_successes_above_failures_with_a_spread() -> None:
    rng = np.random.default_rng(1)
    scorer = LearnedProgressScorer(FAST)
    for k in range(12):
        scorer.push(_trajectory(k % 2 == 0, rng), success=k % 2 == 0)
    scorer.refit()
    successes = scorer.progress([progress_input(_trajectory(True, rng)) for _ in range(5)])
    failures = scorer.progress([progress_input(_trajectory(False, rng)) for _ in range(5)])
    success_scores = [collapse_progress(c.progress) for c in successes]
    failure_scores = [collapse_progress(c.progress) for c in failures]
    assert min(success_scores) > max(failure_scores)
    assert all(
        c.spread is not None and c.spread.shape == c.progress.shape and (c.spread >= 0).all()
        for c in successes
    )


def test_push_groups_takes_anchor_trajectories_and_skips_unknown_outcomes() -> None:
    rng = np.random.default_rng(2)

    def traj(success: bool) -> Trajectory:
        observations = tuple(_trajectory(success, rng))
        return Trajectory("lift", 0, 0, True, observations, (), (), (), (), success)

    anchor = ScoredGroup(
        0,
        anchor=True,
        predicted=(0.1, 0.2, 0.3),
        real=(1.0, 0.0, None),
        trajectories=(traj(True), traj(False), traj(True)),
    )
    not_anchor = ScoredGroup(1, anchor=False, predicted=(0.1,), trajectories=(traj(True),))
    scorer = LearnedProgressScorer(FAST)
    assert scorer.push_groups([anchor, not_anchor]) == 2
    assert scorer.n_trajectories == 2


def test_push_rejects_a_trajectory_without_states_or_of_another_layout() -> None:
    scorer = LearnedProgressScorer(FAST)
    with pytest.raises(ConfigError, match="reads states"):
        scorer.push([{"instruction": "x", "agentview_image": np.zeros((4, 4, 3), np.uint8)}], success=True)
    scorer.push([{"instruction": "x", "proprio": np.zeros(9, np.float32)}], success=True)
    with pytest.raises(ConfigError, match="state width"):
        scorer.push([{"instruction": "x", "proprio": np.zeros(5, np.float32)}], success=False)


@pytest.mark.parametrize("kwargs", [{"members": 1}, {"epochs": 0}, {"learning_rate": -1.0}, {"hidden": True}])
def test_config_rejects_invalid_values(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        LearnedProgressConfig(**kwargs)


def test_a_saved_scorer_restores_as_plain_data_and_refits_identically(tmp_path) -> None:
    from wmrl_adapters.train.run.state_io import load_state, save_state

    rng = np.random.default_rng(4)
    scorer = LearnedProgressScorer(FAST)
    for k in range(6):
        scorer.push(_trajectory(k % 2 == 0, rng), success=k % 2 == 0)
    scorer.refit()
    save_state(tmp_path / "scorer.pt", scorer.state_dict())
    restored = LearnedProgressScorer(FAST)
    restored.load_state_dict(load_state(tmp_path / "scorer.pt", if_older=""))
    probe = [progress_input(_trajectory(True, rng))]
    assert restored.progress(probe)[0].progress.tolist() == scorer.progress(probe)[0].progress.tolist()
    extra = _trajectory(False, rng)
    for model in (scorer, restored):
        model.push(extra, success=False)
        model.refit()  # the bootstrap draws continue from the saved generator
    assert restored.progress(probe)[0].progress.tolist() == scorer.progress(probe)[0].progress.tolist()


def test_a_scorer_state_of_another_config_is_refused() -> None:
    from wmrl_algos.errors import CheckpointError

    state = LearnedProgressScorer(FAST).state_dict()
    with pytest.raises(CheckpointError, match="build it with the saved config"):
        LearnedProgressScorer(LearnedProgressConfig(members=4)).load_state_dict(state)
