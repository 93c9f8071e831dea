"""Tests of grouped rollouts (wmrl_envs/rollouts.py)."""

from __future__ import annotations

import concurrent.futures
import math
import re
import time

import numpy as np
import pytest
from gymnasium.error import InvalidAction

from wmrl_algos.anchors import AnchorScheduler
from wmrl_algos.errors import ConfigError, WorldModelError
from wmrl_algos.loop import CorrectionConfig, CorrectionLoop
from wmrl_envs.rollouts import (
    GroupedRollout,
    RolloutConfig,
    RolloutTask,
    TurnContext,
    best_return,
    episode_return,
)
from wmrl_envs.toy import CostlyToyEnv, ToyWorldModel, toy_score, toy_target
from wmrl_envs.world_model import Prediction


class _Recording:
    """Records every batch a real world model is asked (a probe around the real ToyWorldModel)."""

    def __init__(self, inner: ToyWorldModel) -> None:
        self.inner, self.name, self.batches = inner, inner.name, []

    def predict(self, queries):
        self.batches.append(list(queries))
        return self.inner.predict(queries)


class _SeededPolicy:
    """A batched random policy: uniform points in [-1, 1]^2 from its own seeded generator."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.calls: list[int] = []

    def act(self, observations, infos):
        self.calls.append(len(observations))
        return [self.rng.uniform(-1.0, 1.0, 2) for _ in observations]


def _tasks(n: int) -> list[RolloutTask]:
    return [RolloutTask(f"task{k}", {"task_id": k}) for k in range(n)]


def _env(max_turns: int = 3, step_seconds: float = 0.0):
    return lambda: CostlyToyEnv(dim=2, max_turns=max_turns, step_seconds=step_seconds)


def test_world_model_called_once_per_turn_for_the_whole_step():
    model = _Recording(ToyWorldModel())
    policy = _SeededPolicy()
    with GroupedRollout(_env(max_turns=3), model, RolloutConfig(group_size=4)) as rollout:
        groups = rollout.run(_tasks(3), policy, anchors=[False, True, False])
    assert len(model.batches) == len(policy.calls) == 3
    assert [len(batch) for batch in model.batches] == policy.calls
    assert len(model.batches[0]) == 12
    assert {q.key.split("/")[0] for q in model.batches[0]} == {"group0", "group1", "group2"}
    assert [g.size for g in groups] == [4, 4, 4]


def test_anchor_groups_are_executed_with_pairs_and_the_others_never_touch_the_real_env():
    model = ToyWorldModel(bias=0.1, noise=0.0)
    with GroupedRollout(_env(max_turns=2), model, RolloutConfig(group_size=3)) as rollout:
        groups = rollout.run(_tasks(4), _SeededPolicy(1), anchors=[False, False, True, False])
        ledger = rollout.ledger
    anchor = groups[2]
    assert anchor.anchor and all(g.real is None for k, g in enumerate(groups) if k != 2)
    for trajectory, predicted, real in zip(anchor.trajectories, anchor.predicted, anchor.real, strict=True):
        truth = [toy_score(toy_target(2, 2), action) for action in trajectory.actions]
        assert real == pytest.approx(sum(truth))
        assert predicted == pytest.approx(sum(truth) + 0.1 * len(truth))
        assert trajectory.rewards == pytest.approx(tuple(truth))
    assert ledger.real_steps == sum(len(t.actions) for t in anchor.trajectories)
    assert ledger.anchor_episodes == 3 and ledger.episodes == 12


def test_anchor_executions_run_concurrently_on_the_executor():
    step_seconds, anchors = 0.2, [True, True]
    with GroupedRollout(
        _env(max_turns=2, step_seconds=step_seconds), ToyWorldModel(), RolloutConfig(group_size=4)
    ) as rollout:
        start = time.perf_counter()
        rollout.run(_tasks(2), _SeededPolicy(), anchors=anchors)
        elapsed = time.perf_counter() - start
        serial = rollout.ledger.real_seconds
    assert serial >= 16 * step_seconds
    assert elapsed < 0.5 * serial


def test_a_given_executor_is_used_and_left_running():
    class CountingPool(concurrent.futures.ThreadPoolExecutor):
        submitted = 0

        def submit(self, fn, /, *args, **kwargs):
            CountingPool.submitted += 1
            return super().submit(fn, *args, **kwargs)

    pool = CountingPool(max_workers=2)
    config = RolloutConfig(group_size=2)
    with GroupedRollout(_env(max_turns=2), ToyWorldModel(), config, executor=pool) as rollout:
        rollout.run(_tasks(2), _SeededPolicy(), anchors=[True, False])
    assert CountingPool.submitted == 4
    assert pool.submit(lambda: 7).result() == 7
    pool.shutdown()


def test_unknown_predictions_make_the_trajectory_score_none_not_zero():
    model = ToyWorldModel(unknown_rate=0.3, seed=5)
    with GroupedRollout(_env(max_turns=2), model, RolloutConfig(group_size=4)) as rollout:
        groups = rollout.run(_tasks(4), _SeededPolicy(2))
    flat = [(s, t) for g in groups for s, t in zip(g.predicted, g.trajectories, strict=True)]
    unknown = [t for s, t in flat if s is None]
    assert 0 < len(unknown) < len(flat)
    assert all(any(p is None for p in t.predicted) for t in unknown)
    assert all(any(math.isnan(r) for r in t.rewards) for t in unknown)
    assert all(s > 0.0 for s, _ in flat if s is not None)


def test_score_mode_with_episode_scoring_predicts_each_trajectory_once():
    model = _Recording(ToyWorldModel(bias=0.1, noise=0.0))
    config = RolloutConfig(group_size=2, mode="score", scoring="episode")
    with GroupedRollout(_env(max_turns=3), model, config) as rollout:
        groups = rollout.run(_tasks(2), _SeededPolicy(3), anchors=[True, False])
        assert rollout.ledger.real_steps == 12
    assert [len(batch) for batch in model.batches] == [4]
    for predicted, real in zip(groups[0].predicted, groups[0].real, strict=True):
        assert predicted == pytest.approx(real + 0.1)
    assert all(p is not None for p in groups[1].predicted)


def test_scored_groups_feed_the_correction_loop():
    loop = CorrectionLoop(CorrectionConfig(anchor_fraction=0.25, min_pairs=2, refit_every=2, seed=0))
    with GroupedRollout(_env(max_turns=2), ToyWorldModel(), RolloutConfig(group_size=4)) as rollout:
        for _ in range(2):
            mask = loop.plan(4)
            groups = rollout.run(_tasks(4), _SeededPolicy(4), anchors=mask)
            result = loop.correct(groups)
            values, valid = result.flat()
            assert values.shape == (16,) and valid.all()
            assert [g.anchor for g in groups] == mask.tolist()


def _anchor_history(scheduler: AnchorScheduler, rollout: GroupedRollout, steps: int) -> list[list[bool]]:
    return [
        [g.anchor for g in rollout.run(_tasks(5), _SeededPolicy(), scheduler=scheduler)] for _ in range(steps)
    ]


def test_anchoring_is_reproducible_and_resumable_from_a_seed():
    config = RolloutConfig(group_size=2, max_turns=1)
    with GroupedRollout(_env(), ToyWorldModel(), config) as rollout:
        straight = _anchor_history(AnchorScheduler(fraction=0.3, seed=7), rollout, 4)
        first = AnchorScheduler(fraction=0.3, seed=7)
        before = _anchor_history(first, rollout, 2)
        resumed = AnchorScheduler(fraction=0.9, seed=0)
        resumed.load_state_dict(first.state_dict())
        after = _anchor_history(resumed, rollout, 2)
        other = _anchor_history(AnchorScheduler(fraction=0.3, seed=8), rollout, 4)
    assert before + after == straight
    assert other != straight
    assert all(sum(mask) >= 1 for mask in straight)


def test_scheduler_slots_are_released_after_the_step():
    scheduler = AnchorScheduler(fraction=0.2, max_in_flight=1, seed=0)
    with GroupedRollout(_env(), ToyWorldModel(), RolloutConfig(group_size=2, max_turns=1)) as rollout:
        history = _anchor_history(scheduler, rollout, 3)
    assert [sum(mask) for mask in history] == [1, 1, 1]
    assert scheduler.in_flight == 0


def test_same_seed_same_step():
    def run() -> list[tuple]:
        with GroupedRollout(_env(), ToyWorldModel(), RolloutConfig(group_size=3)) as rollout:
            groups = rollout.run(_tasks(3), _SeededPolicy(9), anchors=[True, False, False])
            return [g.predicted for g in groups]

    assert run() == run()


def test_registered_id_works_as_env_fn_and_max_turns_truncates():
    config = RolloutConfig(group_size=2, max_turns=2)
    with GroupedRollout("wmrl/CostlyToy-v0", ToyWorldModel(), config) as rollout:
        groups = rollout.run(_tasks(1), _SeededPolicy())
    assert [len(t.actions) for t in groups[0].trajectories] == [2, 2]


def test_world_model_failure_propagates_as_world_model_error():
    class Broken:
        name = "broken-wm"

        def predict(self, queries):
            raise RuntimeError("no")

    with (
        GroupedRollout(_env(), Broken(), RolloutConfig(group_size=2)) as rollout,
        pytest.raises(WorldModelError, match="broken-wm"),
    ):
        rollout.run(_tasks(2), _SeededPolicy(), anchors=[True, False])


def test_episode_return_is_none_when_any_step_is_unknown():
    assert episode_return([0.5, 0.25]) == 0.75
    assert episode_return([0.5, None]) is None
    assert episode_return([]) is None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"anchors": [True]}, "must be 2 bools"),
        ({"anchors": [1, 0]}, "must be 2 bools"),
        ({"anchors": [True, False], "scheduler": AnchorScheduler()}, "not both"),
    ],
)
def test_invalid_anchor_arguments_raise_config_error(kwargs, match):
    with (
        GroupedRollout(_env(), ToyWorldModel(), RolloutConfig(group_size=2)) as rollout,
        pytest.raises(ConfigError, match=match),
    ):
        rollout.run(_tasks(2), _SeededPolicy(), **kwargs)


def test_policy_returning_the_wrong_number_of_actions_raises_config_error():
    class Lazy:
        def act(self, observations, infos):
            return [np.zeros(2)]

    with (
        GroupedRollout(_env(), ToyWorldModel(), RolloutConfig(group_size=2)) as rollout,
        pytest.raises(ConfigError, match="1 actions for 4 observations"),
    ):
        rollout.run(_tasks(2), Lazy())


def test_task_options_may_not_decide_anchors():
    with (
        GroupedRollout(_env(), ToyWorldModel(), RolloutConfig(group_size=2)) as rollout,
        pytest.raises(ConfigError, match="anchor"),
    ):
        rollout.run([RolloutTask("t", {"anchor": True})], _SeededPolicy())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"group_size": 1}, "group_size=1"),
        ({"mode": "dream"}, "mode='dream'"),
        ({"scoring": "episode"}, "needs mode='score'"),
        ({"max_turns": 0}, "max_turns=0"),
        ({"max_workers": 0}, "max_workers=0"),
        ({"max_envs": 0}, "max_envs=0"),
        ({"max_envs": True}, "max_envs=True"),
        ({"max_envs": 2.5}, "max_envs=2.5"),
    ],
)
def test_invalid_config_raises_config_error_naming_the_value(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        RolloutConfig(**kwargs)


def test_docstring_examples_run():
    import doctest

    import wmrl_envs.rollouts

    assert doctest.testmod(wmrl_envs.rollouts).failed == 0


@pytest.mark.integration
def test_grouped_rollout_on_the_kaggle_env_pairs_real_and_predicted_scores_on_anchors(tmp_path):
    from dataclasses import replace

    from wmrl_envs.kaggle.env import KaggleEnv
    from wmrl_envs.kaggle.leaderboard import Leaderboard
    from wmrl_envs.kaggle.suite import KaggleSuite, build_suite
    from wmrl_envs.kaggle.world_models.rubric import RubricWorldModel
    from wmrl_envs.sandbox.unsafe import UnsafeSandbox

    suite = KaggleSuite(build_suite(tmp_path, ids=["concrete-strength"], progress=False))
    board = Leaderboard((5.0, 8.0, 12.0, 16.0), higher_is_better=False)
    competition = replace(
        suite.get("concrete-strength", with_leaderboard=False), leaderboard=board, public_leaderboard=board
    )
    code = "```python\nimport shutil\nshutil.copy('input/sample_submission.csv', 'submission.csv')\n```"

    class CopySample:
        def act(self, observations, infos):
            return [code for _ in observations]

    sandbox = UnsafeSandbox()
    try:
        config = RolloutConfig(group_size=2, max_turns=1)
        env_fn = lambda: KaggleEnv(competition, sandbox=sandbox)  # noqa: E731
        with GroupedRollout(env_fn, RubricWorldModel(), config) as rollout:
            groups = rollout.run(
                [RolloutTask("concrete-a"), RolloutTask("concrete-b")], CopySample(), anchors=[True, False]
            )
            ledger = rollout.ledger
    finally:
        sandbox.close()
    assert groups[0].real is not None and all(r is not None and r >= 0.5 for r in groups[0].real)
    assert all(p is not None for g in groups for p in g.predicted)
    assert groups[1].real is None
    assert ledger.real_steps == 2 and ledger.world_model_calls == 1 and ledger.world_model_queries == 4


class _ZeroTorque:
    """Pendulum's reward read off its observation (an exact world model), for the score mode."""

    name = "pendulum-reward"

    def predict(self, queries):
        return [Prediction(-float(np.arctan2(q.context[1], q.context[0]) ** 2)) for q in queries]


def test_members_of_a_group_share_their_start_state_and_groups_differ():
    import gymnasium as gym

    class Still:
        def act(self, observations, infos):
            return [np.zeros(1, dtype=np.float32) for _ in observations]

    config = RolloutConfig(group_size=4, mode="score", max_turns=2)
    with GroupedRollout(lambda: gym.make("Pendulum-v1"), _ZeroTorque(), config) as rollout:
        groups = rollout.run([RolloutTask("swing-up"), RolloutTask("swing-up-2")], Still(), seed=11)
    starts = [[t.observations[0] for t in group.trajectories] for group in groups]
    for members in starts:
        assert all(np.array_equal(members[0], other) for other in members[1:])
    assert not np.array_equal(starts[0][0], starts[1][0])


def test_a_task_seed_fixes_its_groups_start_state_whatever_the_run_seed():
    import gymnasium as gym

    class Still:
        def act(self, observations, infos):
            return [np.zeros(1, dtype=np.float32) for _ in observations]

    config = RolloutConfig(group_size=2, mode="score", max_turns=1)
    starts = []
    with GroupedRollout(lambda: gym.make("Pendulum-v1"), _ZeroTorque(), config) as rollout:
        for run_seed in (0, 99):
            groups = rollout.run([RolloutTask("own", seed=5), RolloutTask("run's")], Still(), seed=run_seed)
            starts.append([group.trajectories[0].observations[0] for group in groups])
        [reference] = rollout.run([RolloutTask("seed 5")], Still(), seed=5)
    assert np.array_equal(starts[0][0], starts[1][0]), "the task's seed, not the run's"
    assert np.array_equal(starts[0][0], reference.trajectories[0].observations[0])
    assert not np.array_equal(starts[0][1], starts[1][1]), "a task without one takes the run's seed + g"


@pytest.mark.parametrize("seed", [True, 1.5, "3"])
def test_a_task_seed_that_is_not_an_int_is_refused_naming_it(seed):
    with pytest.raises(ConfigError, match=re.escape(f"seed={seed!r}")):
        RolloutTask("task", seed=seed)


def test_trajectories_keep_every_info_the_reset_one_first():
    with GroupedRollout(_env(max_turns=3), ToyWorldModel(), RolloutConfig(group_size=2)) as rollout:
        [group] = rollout.run(_tasks(1), _SeededPolicy(), anchors=[True])
    for trajectory in group.trajectories:
        assert len(trajectory.infos) == len(trajectory.observations) == 4
        assert trajectory.infos[0]["wmrl"]["predicted"] is None  # the reset's
        assert [info["wmrl"]["real"] for info in trajectory.infos[1:]] == list(trajectory.real)


def test_an_env_that_clips_its_actions_itself_gets_them_unchecked_when_asked():
    far = [np.full(2, 5.0)]  # outside the toy env's Box(-1, 1)

    class Far:
        def act(self, observations, infos):
            return far * len(observations)

    config = {"group_size": 2, "mode": "score", "max_turns": 1}
    checked = GroupedRollout(_env(), ToyWorldModel(), RolloutConfig(**config))
    with checked, pytest.raises(InvalidAction, match="outside the action space"):
        checked.run(_tasks(1), Far(), anchors=[True])
    with GroupedRollout(_env(), ToyWorldModel(), RolloutConfig(**config, check_actions=False)) as rollout:
        [group] = rollout.run(_tasks(1), Far(), anchors=[True])
    assert [t.actions[0].tolist() for t in group.trajectories] == [[5.0, 5.0]] * 2
    assert group.real is not None and all(r is not None for r in group.real)


class _HistoryPolicy:
    """A multi-turn policy that keeps its own state per trajectory id and checks what it is told."""

    def __init__(self) -> None:
        self.seen: list[list[TurnContext]] = []

    def act(self, observations, infos, contexts=None):
        assert contexts is not None and len(contexts) == len(observations)
        for observation, info, context in zip(observations, infos, contexts, strict=True):
            assert context.observations[-1] is observation and context.infos[-1] is info
            assert len(context.observations) == len(context.actions) + 1 == len(context.infos)
        self.seen.append(list(contexts))
        return [np.full(2, 0.1 * len(c.actions)) for c in contexts]


def test_a_multi_turn_policy_gets_each_trajectory_id_and_its_whole_history():
    policy = _HistoryPolicy()
    with GroupedRollout(_env(max_turns=3), ToyWorldModel(), RolloutConfig(group_size=2)) as rollout:
        groups = rollout.run(_tasks(2), policy, anchors=[False, True])
    first = policy.seen[0]
    assert [c.trajectory_id for c in first] == [0, 1, 2, 3]
    assert [(c.task_id, c.group_id, c.index) for c in first] == [
        ("task0", 0, 0),
        ("task0", 0, 1),
        ("task1", 1, 0),
        ("task1", 1, 1),
    ]
    latest = {c.trajectory_id: c for turn in policy.seen for c in turn}
    for group in groups:
        for trajectory in group.trajectories:
            context = latest[group.group_id * 2 + trajectory.index]
            assert len(context.actions) == len(trajectory.actions) - 1
            assert all(a is b for a, b in zip(context.observations, trajectory.observations, strict=False))
            assert all(a is b for a, b in zip(context.actions, trajectory.actions, strict=False))
    assert max(len(c.actions) for c in latest.values()) >= 1


def test_a_policy_taking_any_keyword_gets_contexts_and_a_two_argument_one_does_not():
    class Keywords:
        got: list[object] = []

        def act(self, observations, infos, **kwargs):
            Keywords.got.append(kwargs.get("contexts"))
            return [np.zeros(2) for _ in observations]

    with GroupedRollout(_env(max_turns=1), ToyWorldModel(), RolloutConfig(group_size=2)) as rollout:
        rollout.run(_tasks(1), Keywords())
        rollout.run(_tasks(1), _SeededPolicy())  # act(observations, infos) keeps working
    assert isinstance(Keywords.got[0][0], TurnContext)


def test_best_return_is_the_best_known_step_and_none_only_when_nothing_is_known():
    assert best_return([0.1, 0.75, 0.5]) == 0.75
    assert best_return([None, 0.2, None]) == 0.2
    assert best_return([None, None]) is None and best_return([]) is None


def test_with_best_return_anchor_groups_carry_one_pair_per_known_step():
    model = ToyWorldModel(bias=0.1, noise=0.0, unknown_rate=0.2, seed=3)
    config = RolloutConfig(group_size=3)
    with GroupedRollout(_env(max_turns=3), model, config, reducer=best_return) as rollout:
        groups = rollout.run(_tasks(3), _SeededPolicy(4), anchors=[True, False, True])
    assert groups[1].pairs is None
    for group in (groups[0], groups[2]):
        steps = [(p, r) for t in group.trajectories for p, r in zip(t.predicted, t.real, strict=True)]
        known = [(p, r) for p, r in steps if p is not None]
        assert 0 < len(known) < len(steps) == 9
        assert group.pairs == tuple(known)
        assert all(p == pytest.approx(r + 0.1) for p, r in group.pairs)
        for trajectory, real in zip(group.trajectories, group.real, strict=True):
            assert real == max(trajectory.real)


def test_a_summed_return_keeps_trajectory_pairs_and_episode_scoring_has_no_step_pairs():
    with GroupedRollout(_env(max_turns=2), ToyWorldModel(), RolloutConfig(group_size=2)) as rollout:
        assert rollout.run(_tasks(1), _SeededPolicy(), anchors=[True])[0].pairs is None
    episode = RolloutConfig(group_size=2, mode="score", scoring="episode")
    with pytest.raises(ConfigError, match="step_pairs=True with scoring='episode'"):
        GroupedRollout(_env(), ToyWorldModel(), episode, step_pairs=True)
    with GroupedRollout(_env(max_turns=2), ToyWorldModel(), episode, reducer=best_return) as rollout:
        assert rollout.run(_tasks(1), _SeededPolicy(), anchors=[True])[0].pairs is None


class _CountingFactory:
    """Makes real toy envs and counts them (what a heavy simulator's constructor would cost)."""

    def __init__(self, max_turns: int = 3) -> None:
        self.max_turns, self.created = max_turns, 0

    def __call__(self) -> CostlyToyEnv:
        self.created += 1
        return CostlyToyEnv(dim=2, max_turns=self.max_turns)


class _PerTrajectoryPolicy:
    """A deterministic random policy: each action drawn from a generator seeded by (trajectory, turn),
    so a trajectory's actions do not depend on which others share its batch."""

    def act(self, observations, infos, contexts):
        return [
            np.random.default_rng([c.trajectory_id, len(c.actions)]).uniform(-1.0, 1.0, 2) for c in contexts
        ]


def _outcome(groups):
    """Everything a step produced, NaN rewards as None so that equal outcomes compare equal."""

    def rewards(values):
        return tuple(None if math.isnan(value) else value for value in values)

    return [
        (
            g.anchor,
            g.predicted,
            g.real,
            [
                ([a.tolist() for a in t.actions], rewards(t.rewards), t.predicted, t.real)
                for t in g.trajectories
            ],
        )
        for g in groups
    ]


@pytest.mark.parametrize("mode", ["simulate", "score"])
def test_max_envs_bounds_the_envs_created_and_leaves_seeded_results_unchanged(mode):
    anchors = [True, False, False, True, False, False, False, False]
    config = {"group_size": 4, "mode": mode, "max_turns": 3}
    outcomes, created, ledgers = [], [], []
    for max_envs in (None, 5):
        factory = _CountingFactory(max_turns=3)
        model = ToyWorldModel(bias=0.1, noise=0.05, unknown_rate=0.1)
        with GroupedRollout(factory, model, RolloutConfig(**config, max_envs=max_envs)) as rollout:
            groups = rollout.run(_tasks(8), _PerTrajectoryPolicy(), anchors=anchors, seed=7)
            again = rollout.run(_tasks(8), _PerTrajectoryPolicy(), anchors=anchors, seed=7)
            outcomes.append(_outcome(groups))
            assert _outcome(again) == outcomes[-1]
            created.append(factory.created)
            ledgers.append(rollout.ledger.state_dict())
    assert created == [32, 5]
    assert outcomes[0] == outcomes[1]
    for counts in ledgers:
        counts.pop("real_seconds"), counts.pop("world_model_seconds")
    calls = ledgers[0].pop("world_model_calls"), ledgers[1].pop("world_model_calls")
    assert ledgers[0] == ledgers[1] and calls[1] > calls[0]  # same work, in smaller batches


def test_with_max_envs_at_most_that_many_trajectories_are_live_per_turn():
    policy = _SeededPolicy()
    with GroupedRollout(
        _CountingFactory(max_turns=3), ToyWorldModel(), RolloutConfig(group_size=4, max_envs=3)
    ) as rollout:
        groups = rollout.run(_tasks(2), policy, anchors=[False, True])
    assert max(policy.calls) == 3 and sum(policy.calls) == 2 * 4 * 3
    assert [len(t.actions) for g in groups for t in g.trajectories] == [3] * 8
