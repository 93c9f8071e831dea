"""Tests of the correction loop: the order of OD and IVD, scorers, metrics, ablations, resume.

The scorers here are tiny classes over synthetic trajectories whose true score is known: they are the
real :class:`Scorer` interface, with a world model whose bias and noise the test controls.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest

from wmrl_algos.advantages import group_advantages
from wmrl_algos.errors import CheckpointError, ConfigError, WorldModelError
from wmrl_algos.loop import CorrectionConfig, CorrectionLoop, Scorer
from wmrl_algos.types import Score, ScoredGroup


@dataclass(frozen=True)
class Trajectory:
    quality: float
    crashes: bool = False


class Execution:
    """Trusted scorer: the true score, ``None`` when the run crashes."""

    trusted = True

    def __init__(self) -> None:
        self.calls: list[int] = []

    def score(self, trajectories: Sequence[Trajectory]) -> Sequence[Score]:
        self.calls.append(len(trajectories))
        return [None if t.crashes else t.quality for t in trajectories]


class CubedWorldModel:
    """Cheap scorer with a monotone non-affine bias (predicts quality**3) plus optional noise."""

    trusted = False

    def __init__(self, noise: float = 0.0, seed: int = 0, useless: bool = False) -> None:
        self.rng = np.random.default_rng(seed)
        self.noise, self.useless = noise, useless
        self.calls: list[int] = []

    def score(self, trajectories: Sequence[Trajectory]) -> Sequence[Score]:
        self.calls.append(len(trajectories))
        if self.useless:
            return self.rng.uniform(0, 1, len(trajectories)).tolist()
        return [
            t.quality**3 + self.rng.normal(0, self.noise) if self.noise else t.quality**3
            for t in trajectories
        ]


def make_groups(rng: np.random.Generator, n_groups: int = 8, size: int = 8) -> list[list[Trajectory]]:
    return [[Trajectory(float(q)) for q in rng.uniform(0, 1, size)] for _ in range(n_groups)]


def test_scorers_satisfy_the_protocol() -> None:
    assert isinstance(Execution(), Scorer) and isinstance(CubedWorldModel(), Scorer)


def test_scorers_swapped_raises() -> None:
    with pytest.raises(ConfigError, match="swapped"):
        CorrectionLoop(CorrectionConfig(), cheap=Execution(), trusted=CubedWorldModel())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="swapped"):
        CorrectionLoop(CorrectionConfig(), trusted=CubedWorldModel())


def test_step_needs_both_scorers() -> None:
    with pytest.raises(ConfigError, match="needs both scorers"):
        CorrectionLoop(CorrectionConfig(), cheap=CubedWorldModel()).step(
            make_groups(np.random.default_rng(0))
        )


def test_step_scores_all_trajectories_in_one_batched_call_and_executes_only_anchors() -> None:
    cheap, trusted = CubedWorldModel(), Execution()
    loop = CorrectionLoop(CorrectionConfig(anchor_fraction=0.25), cheap=cheap, trusted=trusted)
    result = loop.step(make_groups(np.random.default_rng(0)))
    assert cheap.calls == [64]
    assert trusted.calls == [16]
    assert [g.anchor for g in result.groups].count(True) == 2
    assert all(len(g.trajectories) == 8 for g in result.groups)
    assert loop.scheduler.in_flight == 0


def test_anchor_groups_train_on_real_scores() -> None:
    loop = CorrectionLoop(
        CorrectionConfig(anchor_fraction=0.25, denoise=False), CubedWorldModel(), Execution()
    )
    result = loop.step(make_groups(np.random.default_rng(1)))
    for group, advantages in zip(result.groups, result.advantages, strict=True):
        if group.anchor:
            (expected,) = group_advantages([list(group.real or ())], [True])
            np.testing.assert_allclose(advantages.values, expected.values)


def test_train_anchor_on_calibrated_uses_the_world_models_calibrated_scores() -> None:
    rng = np.random.default_rng(12)
    config = CorrectionConfig(anchor_fraction=0.25, denoise=False, train_anchor_on="calibrated")
    loop = CorrectionLoop(config, CubedWorldModel(), Execution())
    for _ in range(4):
        result = loop.step(make_groups(rng))
    anchors = [(g, a) for g, a in zip(result.groups, result.advantages, strict=True) if g.anchor]
    assert anchors and loop.debiaser.is_fitted
    for group, advantages in anchors:
        (expected,) = group_advantages([loop.debiaser.apply(list(group.predicted))], [True])
        np.testing.assert_allclose(advantages.values, expected.values)


def test_crashed_anchor_executions_are_left_out_of_training_and_calibration() -> None:
    loop = CorrectionLoop(CorrectionConfig(anchor_fraction=1.0), CubedWorldModel(), Execution())
    groups = [[Trajectory(0.2), Trajectory(0.9, crashes=True), Trajectory(0.5)]]
    result = loop.step(groups)
    assert result.groups[0].real == (0.2, None, 0.5)
    assert result.advantages[0].mask.tolist() == [True, False, True]
    assert loop.debiaser.n_pairs == 2


def test_world_model_groups_are_calibrated_towards_real_advantages() -> None:
    rng = np.random.default_rng(2)
    loop = CorrectionLoop(CorrectionConfig(anchor_fraction=0.25), CubedWorldModel(), Execution())
    for _ in range(10):
        loop.step(make_groups(rng))
    assert loop.debiaser.is_fitted
    result = loop.step(make_groups(rng))
    errors_calibrated, errors_raw = [], []
    for group, advantages in zip(result.groups, result.advantages, strict=True):
        if group.anchor:
            continue
        true_rewards = [t.quality for t in group.trajectories]
        (target,) = group_advantages([true_rewards], [False])
        (raw,) = group_advantages([list(group.predicted)], [False])
        errors_calibrated.append(np.abs(advantages.values / advantages.weight - target.values).mean())
        errors_raw.append(np.abs(raw.values - target.values).mean())
    assert np.mean(errors_calibrated) < 0.3 * np.mean(errors_raw)
    assert result.metrics["wmrl/bias_reduction"] > 0.8


def test_disagreement_is_measured_on_calibrated_scores() -> None:
    rng = np.random.default_rng(3)
    loop = CorrectionLoop(CorrectionConfig(anchor_fraction=0.25), CubedWorldModel(), Execution())
    for _ in range(6):
        result = loop.step(make_groups(rng))
    anchors = [g for g in result.groups if g.anchor]
    from wmrl_algos.denoise import centred_residual

    raw = np.mean([centred_residual(list(g.predicted), list(g.real or ())) for g in anchors])
    assert result.metrics["wmrl/disagreement"] < 0.2 * raw


def test_debias_false_keeps_the_identity_map() -> None:
    rng = np.random.default_rng(4)
    loop = CorrectionLoop(CorrectionConfig(debias=False, denoise=False), CubedWorldModel(), Execution())
    for _ in range(5):
        result = loop.step(make_groups(rng))
    assert not loop.debiaser.is_fitted and result.metrics["wmrl/pairs"] == 0.0
    assert result.metrics["wmrl/calibrated"] == 0.0
    for group, advantages in zip(result.groups, result.advantages, strict=True):
        if not group.anchor:
            (expected,) = group_advantages([list(group.predicted)], [False])
            np.testing.assert_allclose(advantages.values, expected.values)


def test_denoise_false_keeps_weight_one_but_still_measures() -> None:
    rng = np.random.default_rng(5)
    loop = CorrectionLoop(
        CorrectionConfig(denoise=False, warmup_groups=2), CubedWorldModel(noise=0.1), Execution()
    )
    for _ in range(8):
        result = loop.step(make_groups(rng))
    assert result.metrics["wmrl/anchor_weight"] == 1.0 and result.metrics["wmrl/world_model_weight"] == 1.0
    assert all(a.weight == 1.0 for a in result.advantages)
    assert "wmrl/eta2_cal" in result.metrics and result.metrics["wmrl/agreement"] > 0.5


class DriftingWorldModel(CubedWorldModel):
    """Accurate for ``good_calls`` batches, then useless (the policy left the region it can predict)."""

    def __init__(self, good_calls: int | None) -> None:
        super().__init__(noise=0.02)
        self.good_calls = good_calls

    def score(self, trajectories: Sequence[Trajectory]) -> Sequence[Score]:
        self.useless = self.good_calls is not None and len(self.calls) >= self.good_calls
        return super().score(trajectories)


def _weights(
    world_model: CubedWorldModel, config: CorrectionConfig, steps: int = 40
) -> list[dict[str, float]]:
    rng = np.random.default_rng(6)
    loop = CorrectionLoop(config, world_model, Execution())
    return [dict(loop.step(make_groups(rng)).metrics) for _ in range(steps)]


def test_a_world_model_that_turns_useless_loses_its_weight_and_an_accurate_one_keeps_it() -> None:
    config = CorrectionConfig(anchor_fraction=0.25, half_life_groups=8)
    stays_accurate = _weights(DriftingWorldModel(good_calls=None), config)
    turns_useless = _weights(DriftingWorldModel(good_calls=10), config)
    assert stays_accurate[9]["wmrl/world_model_weight"] == turns_useless[9]["wmrl/world_model_weight"] > 0.8
    assert min(m["wmrl/world_model_weight"] for m in stays_accurate[5:]) > 0.8
    assert turns_useless[-1]["wmrl/world_model_weight"] < 0.1
    assert all(m["wmrl/anchor_weight"] == 1.0 for m in stays_accurate + turns_useless)


def test_a_useless_world_model_never_earns_weight_so_training_is_grpo_on_the_anchors() -> None:
    rng = np.random.default_rng(13)
    loop = CorrectionLoop(CorrectionConfig(anchor_fraction=0.25), CubedWorldModel(useless=True), Execution())
    for _ in range(30):
        result = loop.step(make_groups(rng))
        assert result.metrics["wmrl/world_model_weight"] < 0.1
    anchors = [i for i, group in enumerate(result.groups) if group.anchor]
    alone = group_advantages([list(result.groups[i].real or ()) for i in anchors], [True] * len(anchors))
    # Normalised weights: 2 anchor groups carry all of the weight of 8 groups, i.e. 4x each.
    weight = result.metrics["wmrl/world_model_weight"]
    scale = 8 / (len(anchors) + weight * (8 - len(anchors)))
    for index, expected in zip(anchors, alone, strict=True):
        np.testing.assert_allclose(result.advantages[index].values, scale * expected.values, atol=1e-12)


def test_the_paper_rule_raises_the_anchor_weight_for_a_world_model_that_turns_useless() -> None:
    config = CorrectionConfig(anchor_fraction=0.25, weighting="paper", warmup_groups=10, half_life_groups=8)
    stays_accurate = _weights(DriftingWorldModel(good_calls=None), config)
    turns_useless = _weights(DriftingWorldModel(good_calls=10), config)
    assert [m["wmrl/anchor_weight"] for m in stays_accurate[:4]] == [1.0] * 4, "1.0 during warm-up"
    assert turns_useless[-1]["wmrl/anchor_weight"] == config.w_max == 4.0
    assert max(m["wmrl/anchor_weight"] for m in stays_accurate) < turns_useless[-1]["wmrl/anchor_weight"]
    assert all(m["wmrl/world_model_weight"] == 1.0 for m in turns_useless)


def test_the_world_model_is_measured_out_of_sample_before_its_pairs_refit_the_map() -> None:
    loop = CorrectionLoop(CorrectionConfig(min_pairs=2, refit_every=1))
    predicted, real = (0.1, 0.3, 0.2, 0.9), (0.0, 1.0, 0.5, 0.6)
    result = loop.correct([ScoredGroup(0, anchor=True, predicted=predicted, real=real)])
    from wmrl_algos.denoise import centred_residual

    # The identity map (fitted on nothing) scored this group, not the map its own pairs produced.
    assert result.metrics["wmrl/disagreement"] == pytest.approx(
        centred_residual(list(predicted), list(real), normalise=False)
    )
    assert loop.debiaser.is_fitted


def test_ungraded_rollouts_are_excluded_not_zeroed() -> None:
    loop = CorrectionLoop(
        CorrectionConfig(min_pairs=2, refit_every=2, advantage_scale="none", normalise_weights=False)
    )
    groups = [
        ScoredGroup(0, anchor=True, predicted=(0.1, 0.2, 0.3), real=(1.0, None, 0.0)),
        ScoredGroup(1, anchor=False, predicted=(0.5, None, 0.1)),
    ]
    result = loop.correct(groups)
    assert result.advantages[0].mask.tolist() == [True, False, True]
    assert result.advantages[0].values.tolist() == [0.5, 0.0, -0.5]
    assert result.advantages[1].mask.tolist() == [True, False, True]
    assert loop.debiaser.n_pairs == 2
    assert result.metrics["wmrl/ungraded_fraction"] == pytest.approx(2 / 6)


def test_metrics_are_namespaced_finite_floats() -> None:
    rng = np.random.default_rng(8)
    loop = CorrectionLoop(CorrectionConfig(anchor_fraction=0.25), CubedWorldModel(noise=0.05), Execution())
    loop.weighter.warmup_groups = 4
    metrics_per_step = [loop.step(make_groups(rng)).metrics for _ in range(7)]
    first, last = metrics_per_step[0], metrics_per_step[-1]
    assert "wmrl/eta2_cal" not in first
    expected = {
        "wmrl/anchor_fraction", "wmrl/anchor_fraction_cumulative", "wmrl/anchor_groups", "wmrl/calibrated",
        "wmrl/pairs", "wmrl/residual_raw", "wmrl/residual_calibrated", "wmrl/bias_reduction",
        "wmrl/disagreement", "wmrl/eta2", "wmrl/eta2_cal", "wmrl/anchor_weight", "wmrl/ungraded_fraction",
        "wmrl/world_model_weight", "wmrl/measured_groups", "wmrl/agreement", "wmrl/agreement_slope",
    }  # fmt: skip
    assert set(last) == expected
    for metrics in metrics_per_step:
        assert all(type(value) is float and math.isfinite(value) for value in metrics.values())
    assert last["wmrl/anchor_fraction"] == 0.25 and last["wmrl/anchor_groups"] == 2.0


def test_world_model_only_configuration_never_executes() -> None:
    trusted = Execution()
    loop = CorrectionLoop(
        CorrectionConfig(anchor_fraction=0.0, min_anchor_groups=0, denoise=False), CubedWorldModel(), trusted
    )
    result = loop.step(make_groups(np.random.default_rng(9)))
    assert trusted.calls == [] and result.metrics["wmrl/anchor_groups"] == 0.0
    assert result.metrics["wmrl/anchor_weight"] == 1.0
    assert all(advantages.weight == 1.0 for advantages in result.advantages)


def test_world_model_only_with_agreement_weights_is_refused_because_it_would_never_train() -> None:
    with pytest.raises(ConfigError, match="denoise=False"):
        CorrectionConfig(anchor_fraction=0.0, min_anchor_groups=0)


def test_in_flight_cap_limits_anchors_across_steps() -> None:
    loop = CorrectionLoop(CorrectionConfig(anchor_fraction=0.5, max_anchors_in_flight=2))
    assert int(loop.plan(8).sum()) == 2
    assert int(loop.plan(8).sum()) == 0
    loop.correct(
        [
            ScoredGroup(0, anchor=True, predicted=(0.1, 0.2), real=(0.1, 0.3)),
            ScoredGroup(1, False, (0.1, 0.2)),
        ]
    )
    assert loop.scheduler.in_flight == 1
    assert int(loop.plan(8).sum()) == 1


class MiscountingWorldModel:
    trusted = False

    def score(self, trajectories: Sequence[Trajectory]) -> Sequence[Score]:
        return [0.5] * (len(trajectories) - 1)


def test_scorer_returning_the_wrong_count_raises_and_frees_anchor_slots() -> None:
    loop = CorrectionLoop(CorrectionConfig(max_anchors_in_flight=1), MiscountingWorldModel(), Execution())
    with pytest.raises(WorldModelError, match="63 scores for 64"):
        loop.step(make_groups(np.random.default_rng(10)))
    assert loop.scheduler.in_flight == 0


def test_nan_scores_raise_config_error() -> None:
    loop = CorrectionLoop()
    with pytest.raises(ConfigError, match="use None"):
        loop.correct([ScoredGroup(0, anchor=True, predicted=(0.1, float("nan")), real=(0.1, 0.2))])


def test_empty_step_raises() -> None:
    with pytest.raises(ConfigError, match="no groups"):
        CorrectionLoop().correct([])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"anchor_fraction": 1.2}, "anchor_fraction=1.2"),
        ({"min_anchor_groups": -1}, "min_anchor_groups=-1"),
        ({"max_anchors_in_flight": 0}, "max_anchors_in_flight=0"),
        ({"min_pairs": 0}, "min_pairs=0"),
        ({"min_pairs": 100, "capacity": 10}, "min_pairs=100"),
        ({"w_max": 0.9}, "w_max=0.9"),
        ({"half_life_groups": 0.0}, "half_life_groups=0.0"),
        ({"warmup_groups": 0}, "warmup_groups=0"),
        ({"confidence": -1.0}, "confidence=-1.0"),
        ({"weighting": "magic"}, "weighting='magic'"),
        ({"anchor_selection": "greedy"}, "anchor_selection='greedy'"),
        ({"random_share": 1.5}, "random_share=1.5"),
        ({"advantage_scale": "rank"}, "advantage_scale='rank'"),
        ({"train_anchor_on": "predicted"}, "train_anchor_on='predicted'"),
    ],
)
def test_invalid_config_raises_config_error_naming_the_value(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        CorrectionConfig(**kwargs)


def test_every_config_field_has_help_text() -> None:
    from dataclasses import fields

    assert all(f.metadata.get("help") for f in fields(CorrectionConfig))


def test_resumed_loop_matches_uninterrupted() -> None:
    config = CorrectionConfig(anchor_fraction=0.2, max_anchors_in_flight=3, warmup_groups=3, seed=5)
    trajectories = make_groups(np.random.default_rng(11), n_groups=8 * 20)
    steps = [trajectories[i : i + 8] for i in range(0, len(trajectories), 8)]

    uninterrupted = CorrectionLoop(config, CubedWorldModel(noise=0.05, seed=1), Execution())
    reference = [uninterrupted.step(groups) for groups in steps]

    first = CorrectionLoop(config, CubedWorldModel(noise=0.05, seed=1), Execution())
    for groups in steps[:9]:
        first.step(groups)
    state = pickle.loads(pickle.dumps(first.state_dict()))
    world_model = first.cheap
    resumed = CorrectionLoop(config, world_model, Execution())
    resumed.load_state_dict(state)
    for groups, expected in zip(steps[9:], reference[9:], strict=True):
        result = resumed.step(groups)
        assert [g.anchor for g in result.groups] == [g.anchor for g in expected.groups]
        assert result.metrics == expected.metrics
        for got, want in zip(result.advantages, expected.advantages, strict=True):
            np.testing.assert_array_equal(got.values, want.values)


def test_loading_a_state_saved_with_another_config_raises() -> None:
    state = CorrectionLoop(CorrectionConfig(anchor_fraction=0.2)).state_dict()
    with pytest.raises(CheckpointError, match="anchor_fraction: saved 0.2 vs now 0.1"):
        CorrectionLoop(CorrectionConfig()).load_state_dict(state)


def test_per_execution_pairs_feed_the_calibration_instead_of_trajectory_pairs() -> None:
    loop = CorrectionLoop(CorrectionConfig(min_pairs=4, refit_every=1))
    # Trajectory level: the best of each trajectory's executions; the pairs are the executions themselves.
    pairs = ((0.1, 0.0), (0.2, 0.1), (0.4, 0.5), (0.8, 0.9), (0.9, 1.0))
    loop.correct([ScoredGroup(0, anchor=True, predicted=(0.4, 0.9), real=(0.5, 1.0), pairs=pairs)])
    assert loop.debiaser.n_pairs == len(pairs)
    assert loop.debiaser.apply(0.2) == pytest.approx(0.1)


def _assert_finite(result: object) -> None:
    values, mask = result.flat()  # type: ignore[attr-defined]
    assert np.isfinite(values).all() and mask.dtype == bool
    assert all(math.isfinite(value) for value in result.metrics.values())  # type: ignore[attr-defined]


def _warm_loop(seed: int = 14, steps: int = 12) -> CorrectionLoop:
    loop = CorrectionLoop(CorrectionConfig(anchor_fraction=0.25), CubedWorldModel(noise=0.02), Execution())
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        loop.step(make_groups(rng))
    assert loop.weighter.world_model_weight > 0.5
    return loop


def test_a_step_where_the_world_model_knows_nothing_trains_on_its_anchors_alone() -> None:
    loop = _warm_loop()
    groups = [
        ScoredGroup(0, anchor=True, predicted=(None, None, None), real=(0.1, 0.9, 0.5)),
        *[ScoredGroup(i, anchor=False, predicted=(None,) * 4) for i in range(1, 8)],
    ]
    result = loop.correct(groups)
    _assert_finite(result)
    assert result.advantages[0].mask.all() and not any(a.mask.any() for a in result.advantages[1:])
    (alone,) = group_advantages([[0.1, 0.9, 0.5]], [True], normalise_weights=True)
    np.testing.assert_allclose(result.advantages[0].values, alone.values)
    assert result.metrics["wmrl/ungraded_fraction"] == pytest.approx(28 / 31)


def test_a_step_without_anchor_groups_uses_the_current_weights_and_measures_nothing() -> None:
    loop = _warm_loop()
    measured = loop.weighter.measured_groups
    result = loop.correct([ScoredGroup(i, anchor=False, predicted=(0.1, 0.5, 0.9)) for i in range(4)])
    _assert_finite(result)
    assert loop.weighter.measured_groups == measured
    assert all(a.mask.all() and abs(a.values).sum() > 0 for a in result.advantages)
    untrusted = CorrectionLoop().correct([ScoredGroup(0, anchor=False, predicted=(0.1, 0.5, 0.9))])
    _assert_finite(untrusted)
    assert untrusted.advantages[0].values.tolist() == [0.0, 0.0, 0.0], "no evidence yet: zero gradient"


def test_single_trajectory_groups_are_masked_out_and_measure_nothing() -> None:
    loop = CorrectionLoop()
    result = loop.correct(
        [
            ScoredGroup(0, anchor=True, predicted=(0.3,), real=(0.7,)),
            ScoredGroup(1, anchor=False, predicted=(0.2,)),
        ]
    )
    _assert_finite(result)
    assert [a.mask.tolist() for a in result.advantages] == [[False], [False]]
    assert loop.weighter.measured_groups == 0 and loop.debiaser.n_pairs == 1


def test_ties_everywhere_give_zero_advantages_and_no_nan() -> None:
    loop = CorrectionLoop(CorrectionConfig(min_pairs=2, refit_every=1))
    for _ in range(5):
        result = loop.correct(
            [
                ScoredGroup(0, anchor=True, predicted=(0.5, 0.5, 0.5), real=(0.2, 0.2, 0.2)),
                ScoredGroup(1, anchor=False, predicted=(0.5, 0.5, 0.5)),
            ]
        )
        _assert_finite(result)
        assert all(np.abs(a.values).max() < 1e-9 for a in result.advantages)
    assert loop.weighter.world_model_weight == 0.0 and loop.weighter.slope is None
