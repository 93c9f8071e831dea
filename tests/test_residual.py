"""Tests of the residual correction: it fixes strategy-specific bias a monotone map cannot, and knows
where it has not looked."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from wmrl_algos.debias import fit_isotonic
from wmrl_algos.errors import CheckpointError, ConfigError
from wmrl_algos.loop import CorrectionConfig, CorrectionLoop
from wmrl_algos.residual import ResidualCorrection, RidgeResidual
from wmrl_algos.types import ScoredGroup

ONE_HOT = np.eye(3)


def one_hot(strategy: int) -> np.ndarray:
    return ONE_HOT[strategy]


def biased_batch(rng: np.random.Generator, n: int = 8) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Strategy 0 is over-rated by 0.3, strategy 1 under-rated by 0.3; strategy 2 is never sampled."""
    strategies = rng.integers(0, 2, n).tolist()
    real = rng.uniform(0.2, 0.8, n)
    predicted = real + np.where(np.array(strategies) == 0, 0.3, -0.3)
    return strategies, predicted, real


def test_ridge_residual_satisfies_the_protocol() -> None:
    assert isinstance(RidgeResidual(one_hot, 3), ResidualCorrection)


def test_it_learns_strategy_specific_bias_that_no_monotone_map_removes() -> None:
    rng = np.random.default_rng(0)
    residual = RidgeResidual(one_hot, 3)
    pairs = [biased_batch(rng) for _ in range(40)]
    for strategies, predicted, real in pairs:
        residual.update(strategies, predicted, real)
    strategies, predicted, real = biased_batch(rng, 200)
    isotonic = fit_isotonic(
        np.concatenate([p for _, p, _ in pairs]), np.concatenate([r for _, _, r in pairs])
    )
    error_isotonic = np.abs(isotonic(predicted) - real).mean()
    mean, _ = residual.predict(strategies)
    error_residual = np.abs(predicted + mean - real).mean()
    assert error_residual < 0.25 * error_isotonic


def test_uncertainty_is_largest_where_no_anchor_went() -> None:
    rng = np.random.default_rng(1)
    residual = RidgeResidual(one_hot, 3)
    _, prior_std = residual.predict([0])
    for _ in range(10):
        residual.update(*biased_batch(rng))
    _, std = residual.predict([0, 1, 2])
    assert std[2] > 3 * max(std[0], std[1])
    assert std[0] < prior_std[0]


def test_unknown_scores_are_skipped() -> None:
    residual = RidgeResidual(one_hot, 3)
    residual.update([0, 1], np.array([0.5, np.nan]), np.array([0.9, 0.1]))
    mean, _ = residual.predict([0, 1])
    assert mean[0] > 0.1 and mean[1] == 0.0


def test_state_round_trip_predicts_the_same() -> None:
    rng = np.random.default_rng(2)
    original = RidgeResidual(one_hot, 3)
    for _ in range(5):
        original.update(*biased_batch(rng))
    restored = RidgeResidual(one_hot, 3)
    restored.load_state_dict(pickle.loads(pickle.dumps(original.state_dict())))
    for got, want in zip(restored.predict([0, 1, 2]), original.predict([0, 1, 2]), strict=True):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(CheckpointError, match="another dimension"):
        RidgeResidual(lambda s: np.eye(4)[s], 4).load_state_dict(original.state_dict())


@pytest.mark.parametrize(("kwargs", "match"), [({"dim": 0}, "dim=0"), ({"l2": 0.0}, "l2=0.0")])
def test_invalid_arguments_raise_config_error(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        RidgeResidual(one_hot, **{"dim": 3, **kwargs})


def test_a_featurizer_of_the_wrong_length_raises() -> None:
    with pytest.raises(ConfigError, match="must return 3 finite numbers"):
        RidgeResidual(lambda s: np.zeros(2), 3).predict([0])


def _agreement_after_training(residual: RidgeResidual | None) -> tuple[float, float]:
    """Correlation of a world-model group's advantages with the real ones, after 30 anchor steps."""
    rng = np.random.default_rng(3)
    loop = CorrectionLoop(CorrectionConfig(min_pairs=8, refit_every=8), residual=residual)
    for _ in range(31):
        strategies, predicted, real = biased_batch(rng)
        result = loop.correct(
            [
                ScoredGroup(0, True, tuple(predicted.tolist()), tuple(real.tolist()), tuple(strategies)),
                ScoredGroup(1, False, tuple(predicted.tolist()), trajectories=tuple(strategies)),
            ]
        )
    anchor, world_model = result.advantages
    return float(np.corrcoef(anchor.values, world_model.values)[0, 1]), result.metrics[
        "wmrl/world_model_weight"
    ]


def test_the_loop_applies_the_residual_to_world_model_groups() -> None:
    with_residual, weight_with = _agreement_after_training(RidgeResidual(one_hot, 3))
    without, weight_without = _agreement_after_training(None)
    assert with_residual > 0.8 and with_residual > without + 0.2
    assert weight_with > weight_without


def test_the_loop_needs_trajectories_for_a_residual() -> None:
    loop = CorrectionLoop(residual=RidgeResidual(one_hot, 3))
    with pytest.raises(ConfigError, match="carries no trajectories"):
        loop.correct([ScoredGroup(0, anchor=True, predicted=(0.1, 0.2), real=(0.3, 0.4))])


def test_uncertainty_selection_needs_an_uncertainty() -> None:
    loop = CorrectionLoop(CorrectionConfig(anchor_selection="uncertainty"))
    with pytest.raises(ConfigError, match="uncertainty="):
        loop.plan(8)
    assert loop.plan(8, uncertainty=np.arange(8.0)).sum() == 1


def test_auto_selection_is_uniform_without_an_uncertainty_and_uncertainty_driven_with_one() -> None:
    uniform = CorrectionLoop(CorrectionConfig(seed=3))
    reference = CorrectionLoop(CorrectionConfig(seed=3, anchor_selection="random"))
    assert [uniform.plan(8).tolist() for _ in range(5)] == [reference.plan(8).tolist() for _ in range(5)]
    driven = CorrectionLoop(CorrectionConfig(seed=3, random_share=0.0))
    assert np.flatnonzero(driven.plan(8, uncertainty=[0, 0, 0, 5, 0, 0, 0, 0])).tolist() == [3]


class _Executed:
    trusted = True

    def score(self, trajectories: list[int]) -> list[float]:
        return [0.5 + 0.1 * (strategy == 1) for strategy in trajectories]


class _Predicted:
    trusted = False

    def score(self, trajectories: list[int]) -> list[float]:
        return [0.5 + 0.3 * (strategy == 0) for strategy in trajectories]


def test_step_anchors_the_strategy_no_anchor_has_seen_when_a_residual_is_given() -> None:
    loop = CorrectionLoop(
        CorrectionConfig(anchor_fraction=0.125, random_share=0.0),
        _Predicted(),
        _Executed(),
        residual=RidgeResidual(one_hot, 3),
    )
    groups = [[0, 1] * 4 for _ in range(7)] + [[2] * 8]
    loop.step(groups)  # nothing learned yet: every group is equally uncertain
    result = loop.step(groups)  # strategies 0 and 1 were anchored, strategy 2 never
    (anchored,) = [group.trajectories for group in result.groups if group.anchor]
    assert anchored == (2,) * 8
