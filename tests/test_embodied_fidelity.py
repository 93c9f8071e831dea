"""The scorer fidelity report: AUROC and correlation measure ranking, unknowns are counted, not zeroed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from wmrl_algos.errors import ConfigError
from wmrl_envs.embodied.fidelity import (
    Episode,
    collect_episodes,
    fidelity_table,
    plot_progress_curves,
    scorer_fidelity,
    within_group_rank_correlation,
)
from wmrl_envs.embodied.progress import ProgressCurve, SimStateProgressScorer


def _episode(place_end: float, success: bool, length: int = 8) -> Episode:
    observations = []
    for place in np.linspace(0.0, place_end, length):
        features = np.zeros((4, 4), np.float32)
        features[0] = (1.0, 0.0, place, place)
        observations.append({"instruction": "lift", "goal_features": features})
    if success:
        observations[-1]["goal_features"][0, 1] = 1.0
    return Episode("test", tuple(observations), success)


class _Blind:
    name = "blind"

    def progress(self, batch):
        return [ProgressCurve(np.full(item.length, 0.5)) for item in batch]


class _Silent:
    name = "silent"

    def progress(self, batch):
        return [None for _ in batch]


def test_a_scorer_that_tracks_the_task_separates_outcomes_and_a_blind_one_does_not() -> None:
    episodes = [_episode(1.0, True), _episode(0.9, True), _episode(0.2, False), _episode(0.0, False)]
    results, curves = scorer_fidelity(episodes, [SimStateProgressScorer(), _Blind()], k=2)
    tracking, blind = results
    assert tracking.auroc == 1.0 and tracking.correlation > 0.9
    assert tracking.mean_success > tracking.mean_failure
    assert blind.auroc == 0.5 and blind.correlation is None  # constant scores: no correlation to speak of
    assert len(curves["sim-state"]) == 4


def test_unknown_scores_are_counted_and_left_out_not_scored_zero() -> None:
    episodes = [_episode(1.0, True), _episode(0.0, False)]
    [silent], _ = scorer_fidelity(episodes, [_Silent()])
    assert (silent.scored, silent.unknown, silent.auroc, silent.mean_success) == (0, 2, None, None)


def test_auroc_is_unknown_when_only_one_outcome_was_observed() -> None:
    [result], _ = scorer_fidelity([_episode(1.0, True), _episode(0.8, True)], [SimStateProgressScorer()])
    assert result.auroc is None and result.scored == 2


def test_table_and_plot_are_written(tmp_path: Path) -> None:
    episodes = [_episode(1.0, True), _episode(0.1, False)]
    results, curves = scorer_fidelity(episodes, [SimStateProgressScorer(), _Silent()])
    table = fidelity_table(results)
    assert table.count("\n") == 4 and "| sim-state | potential | 1.000 |" in table
    path = plot_progress_curves(episodes, curves, tmp_path / "curves.png")
    assert path.stat().st_size > 1000


class _CountingEnv:
    """A stand-in env with the embodied info layout whose outcomes are known in advance (succeeds at step 3
    on even seeds); the real envs go through collect_episodes in the fidelity benchmark's smoke test."""

    def reset(self, *, seed, options):
        self.seed, self.t = seed, 0
        return {"instruction": "x", "goal_features": np.zeros((4, 4), np.float32)}, {"success": False}

    def step(self, action):
        self.t += 1
        success = self.seed % 2 == 0 and self.t == 3
        obs = {"instruction": "x", "goal_features": np.zeros((4, 4), np.float32)}
        return obs, float(success), success, self.t >= 5, {"success": success}


class _Zero:
    def act(self, observations, infos):
        return [np.zeros(7) for _ in observations]


def test_collect_episodes_records_outcomes_and_every_observation() -> None:
    episodes = collect_episodes(_CountingEnv(), _Zero(), 4, label="zero", seed=10)
    assert [e.success for e in episodes] == [True, False, True, False]
    assert [len(e.observations) for e in episodes] == [4, 6, 4, 6]


@pytest.mark.parametrize("episodes", [0, -1, True])
def test_collect_episodes_rejects_a_non_positive_count(episodes: int) -> None:
    with pytest.raises(ConfigError):
        collect_episodes(_CountingEnv(), _Zero(), episodes, label="x")


def test_fidelity_needs_episodes() -> None:
    with pytest.raises(ConfigError):
        scorer_fidelity([], [SimStateProgressScorer()])


def test_the_within_group_rank_correlation_reads_each_group_apart_and_leaves_unknowns_out() -> None:
    # The first group's scores order its members right (+1), the second's the wrong way round (-1): what
    # GRPO reads of each group; the third has no episode with both a score and an outcome besides one.
    scores = [0.9, 0.8, 0.6, 0.7, None, 0.1]
    successes = [1.0, 0.0, 1.0, 0.0, 1.0, None]
    groups = [0, 0, 1, 1, 2, 2]
    correlation, used = within_group_rank_correlation(scores, successes, groups)
    assert used == 2 and correlation == pytest.approx(0.0)
    assert within_group_rank_correlation([0.5, 0.5], [1.0, 0.0], [0, 0]) == (None, 0)  # all tied
