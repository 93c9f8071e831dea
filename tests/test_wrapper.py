"""Tests of WorldModelWrapper (wmrl_envs/wrapper.py)."""

from __future__ import annotations

import json
import math
import re
import threading
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.error import InvalidAction, ResetNeeded
from gymnasium.utils.env_checker import check_env

from wmrl_algos.anchors import AnchorScheduler
from wmrl_algos.errors import ConfigError, WorldModelError
from wmrl_envs.ledger import CostLedger
from wmrl_envs.rollouts import GroupedRollout, RolloutConfig, RolloutTask
from wmrl_envs.toy import CachedWorldModel, CostlyToyEnv, ToyWorldModel, toy_score, toy_target
from wmrl_envs.world_model import Prediction, WorldModelQuery
from wmrl_envs.wrapper import WorldModelWrapper, predict_batch, read_vector_info

TASK = {"task_id": 3}
ACTION = np.array([0.25, -0.5])
TRUE = toy_score(toy_target(3, 2), ACTION)


class _RealStepForbidden(CostlyToyEnv):
    """The toy env, made to fail loudly if its real (expensive) step is ever called."""

    def step(self, action):
        raise AssertionError("the real env was stepped")


class _Counter(gym.Env[np.ndarray, int]):
    """A hookless env: the observation is the step count, the reward the action; no world-model hooks."""

    observation_space = spaces.Box(0.0, 100.0, shape=(1,), dtype=np.float64)
    action_space = spaces.Discrete(3)

    def __init__(self, info_extra: dict[str, Any] | None = None) -> None:
        self.info_extra = info_extra or {}
        self.count = 0
        self.options_seen: list[Any] = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.options_seen.append(options)
        self.count = 0
        return np.zeros(1), dict(self.info_extra)

    def step(self, action):
        self.count += 1
        return np.full(1, float(self.count)), float(action), False, False, dict(self.info_extra)


def _counter_oracle(query: WorldModelQuery) -> Prediction:
    return Prediction(float(query.action), observation=query.context + 1.0)


class _Fixed:
    """A world model that answers with whatever list it was built with (contract-breaking on purpose)."""

    def __init__(self, answer: Any, name: str = "fixed-wm") -> None:
        self.answer, self.name, self.calls = answer, name, 0

    def predict(self, queries):
        self.calls += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class _LockedWorldModel(ToyWorldModel):
    """The toy world model holding a lock, as a served model does: it cannot be deep-copied or pickled."""

    def __init__(self) -> None:
        super().__init__(bias=0.0, noise=0.0)
        self.lock = threading.Lock()
        self.calls = 0

    def predict(self, queries):
        with self.lock:
            self.calls += 1
            return super().predict(queries)


class _PendulumReward:
    """Pendulum's own reward computed from its observation: an exact world model for the score mode."""

    name = "pendulum-reward"

    def predict(self, queries):
        predictions = []
        for query in queries:
            cos_theta, sin_theta, velocity = np.asarray(query.context, dtype=float)
            theta = math.atan2(sin_theta, cos_theta)
            torque = float(np.asarray(query.action).reshape(-1)[0])
            predictions.append(Prediction(-(theta**2 + 0.1 * velocity**2 + 0.001 * torque**2)))
        return predictions


def _toy(**kwargs: Any) -> WorldModelWrapper:
    model = kwargs.pop("world_model", ToyWorldModel(bias=0.1, noise=0.0))
    env = kwargs.pop("env", CostlyToyEnv(dim=2))
    return WorldModelWrapper(env, model, **kwargs)


def test_simulate_mode_never_steps_the_real_env_on_non_anchor_episodes():
    env = _toy(env=_RealStepForbidden(dim=2, max_turns=4))
    env.reset(seed=0, options=TASK)
    steps = 0
    done = False
    while not done:
        obs, reward, terminated, truncated, info = env.step(ACTION)
        steps += 1
        done = terminated or truncated
        assert reward == pytest.approx(TRUE + 0.1)
        assert info["wmrl"]["source"] == "world_model" and info["wmrl"]["real"] is None
        assert info["wmrl"]["real_seconds"] == 0.0
    assert steps == 4 and truncated
    assert env.ledger.real_steps == 0 and env.ledger.world_model_queries == 4


def test_anchor_episode_yields_a_pair_and_returns_the_real_reward():
    env = _toy()
    env.reset(seed=0, options={**TASK, "anchor": True})
    obs, reward, _, _, info = env.step(ACTION)
    block = info["wmrl"]
    assert block["anchor"] and block["source"] == "real"
    assert reward == pytest.approx(TRUE) and block["real"] == pytest.approx(TRUE)
    assert block["predicted"] == pytest.approx(TRUE + 0.1)
    assert obs[2] == pytest.approx(TRUE) and obs[3] == 1.0
    assert env.ledger.real_steps == 1 and env.ledger.anchor_episodes == 1


def test_anchor_decision_lasts_one_episode():
    env = _toy()
    env.reset(seed=0, options={**TASK, "anchor": True})
    assert env.is_anchor
    env.reset(seed=0, options=TASK)
    assert not env.is_anchor
    assert env.step(ACTION)[4]["wmrl"]["real"] is None


def test_score_mode_steps_the_real_env_but_withholds_its_reward():
    env = _toy(mode="score")
    env.reset(seed=0, options=TASK)
    obs, reward, _, _, info = env.step(ACTION)
    assert reward == pytest.approx(TRUE + 0.1)
    assert info["wmrl"]["real"] is None and info["wmrl"]["predicted"] == reward
    assert obs[2] == pytest.approx(TRUE)
    assert env.ledger.real_steps == 1 and env.ledger.rewards_world_model == 1


def test_episode_scoring_gives_zero_until_the_last_step_then_the_trajectory_score():
    model = ToyWorldModel(bias=0.1, noise=0.0)
    seen: list[WorldModelQuery] = []

    class Spy:
        name = "spy"

        def predict(self, queries):
            seen.extend(queries)
            return model.predict(queries)

    env = _toy(world_model=Spy(), mode="score", scoring="episode", env=CostlyToyEnv(dim=2, max_turns=3))
    env.reset(seed=0, options=TASK)
    rewards = [env.step(ACTION)[1] for _ in range(2)]
    _, last, _, truncated, info = env.step(ACTION)
    assert rewards == [0.0, 0.0] and truncated
    assert last == pytest.approx(3 * TRUE + 0.1) and info["wmrl"]["predicted"] == last
    [query] = seen
    assert len(query.context) == 4 and len(query.action) == 3
    assert all(np.array_equal(a, ACTION) for a in query.action)


def test_episode_scoring_anchor_returns_real_rewards_and_the_trajectory_prediction_at_the_end():
    env = _toy(mode="score", scoring="episode", env=CostlyToyEnv(dim=2, max_turns=2))
    env.reset(seed=0, options={**TASK, "anchor": True})
    first = env.step(ACTION)
    second = env.step(ACTION)
    assert first[1] == pytest.approx(TRUE) and second[1] == pytest.approx(TRUE)
    assert first[4]["wmrl"]["predicted"] is None
    assert second[4]["wmrl"]["predicted"] == pytest.approx(2 * TRUE + 0.1)
    assert [s[4]["wmrl"]["real"] for s in (first, second)] == pytest.approx([TRUE, TRUE])


def test_unknown_prediction_is_nan_not_zero_under_on_unknown_nan():
    env = _toy(world_model=ToyWorldModel(unknown_rate=1.0), on_unknown="nan")
    env.reset(seed=0, options=TASK)
    obs, reward, terminated, _, info = env.step(ACTION)
    assert math.isnan(reward) and info["wmrl"]["predicted"] is None and not terminated
    assert obs[3] == 0.0
    assert env.ledger.unknown_predictions == 1 and env.ledger.world_model_errors == 0


@pytest.mark.parametrize("answer", [[], [Prediction(0.5), Prediction(0.5)]])
class _UnknownEvery:
    """The toy world model, but every ``period``-th query (counted across calls) is unknown."""

    def __init__(self, period: int) -> None:
        self.inner, self.period, self.queries, self.name = (
            ToyWorldModel(bias=0.1, noise=0.0),
            period,
            0,
            "gappy",
        )

    def predict(self, queries):
        answers = []
        for prediction in self.inner.predict(queries):
            self.queries += 1
            answers.append(Prediction(None) if self.queries % self.period == 0 else prediction)
        return answers


@pytest.mark.parametrize(("mode", "scoring"), [("simulate", "step"), ("score", "step"), ("score", "episode")])
def test_an_unknown_prediction_takes_the_real_step_by_default_marked_real_in_info_and_ledger(mode, scoring):
    env = _toy(
        world_model=_Fixed([Prediction(None)], name="unsure"),
        mode=mode,
        scoring=scoring,
        env=CostlyToyEnv(dim=2, max_turns=1),
    )
    assert env.on_unknown == "real_step"
    env.reset(seed=0, options=TASK)
    obs, reward, terminated, truncated, info = env.step(ACTION)
    assert reward == pytest.approx(TRUE) and math.isfinite(reward)
    block = info["wmrl"]
    assert block["source"] == "real" and not block["anchor"] and block["predicted"] is None
    assert block["real"] == pytest.approx(TRUE)
    assert obs[-3] == pytest.approx(TRUE) and obs[-2] == 1.0  # the real score, known, in the observation
    assert env.ledger.real_steps == 1 and env.ledger.rewards_real == 1 and env.ledger.rewards_world_model == 0
    assert env.ledger.unknown_predictions == 1 and truncated and not terminated


def test_episode_scoring_falls_back_to_the_real_return_on_the_last_step():
    env = _toy(
        world_model=_Fixed([Prediction(None)]),
        mode="score",
        scoring="episode",
        env=CostlyToyEnv(dim=2, max_turns=3),
    )
    env.reset(seed=0, options=TASK)
    rewards = [env.step(ACTION)[1] for _ in range(3)]
    assert rewards[:2] == [0.0, 0.0] and rewards[2] == pytest.approx(3 * TRUE)
    assert env.ledger.rewards_real == 1 and env.ledger.rewards_world_model == 2


class _BreaksOnLastStep(CostlyToyEnv):
    """The toy env whose last step's reward is NaN: its dynamics failed there (a simulator instability)."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, (math.nan if self._turn >= self.max_turns else reward), terminated, truncated, info


@pytest.mark.parametrize("anchor", [False, True])
def test_episode_scoring_leaves_a_trajectory_whose_real_dynamics_failed_unscored(anchor):
    model = _Fixed([Prediction(0.5)], name="progress")
    env = _toy(
        world_model=model,
        mode="score",
        scoring="episode",
        on_unknown="nan",
        env=_BreaksOnLastStep(dim=2, max_turns=2),
    )
    env.reset(seed=0, options={**TASK, "anchor": anchor})
    env.step(ACTION)
    _, reward, _, truncated, info = env.step(ACTION)
    assert truncated and math.isnan(reward) and model.calls == 0, "no score for dynamics that broke"
    block = info["wmrl"]
    assert block["predicted"] is None and block["real"] is None
    assert "non-finite reward" in block["world_model_error"]
    assert env.ledger.world_model_queries == 0


@pytest.mark.parametrize("mode", ["simulate", "score"])
def test_on_unknown_raise_stops_the_episode_naming_the_world_model_and_the_fix(mode):
    env = _toy(world_model=_Fixed([Prediction(None)], name="unsure"), mode=mode, on_unknown="raise")
    env.reset(seed=0, options=TASK)
    with pytest.raises(WorldModelError, match=r"'unsure' could not predict .*on_unknown='real_step'"):
        env.step(ACTION)
    with pytest.raises(ResetNeeded):
        env.step(ACTION)


def test_a_tolerated_error_takes_the_real_step_and_keeps_the_error_in_info():
    env = _toy(world_model=_Fixed(RuntimeError("server down"), name="flaky"), tolerate_errors=True)
    env.reset(seed=0, options=TASK)
    _, reward, _, _, info = env.step(ACTION)
    assert reward == pytest.approx(TRUE) and "server down" in info["wmrl"]["world_model_error"]
    assert env.ledger.world_model_errors == 1 and env.ledger.real_steps == 1


def test_real_step_without_the_hook_in_simulate_mode_is_a_clear_error_not_a_stale_step():
    env = WorldModelWrapper(_Counter(), _Fixed([Prediction(None, observation=np.ones(1))], name="unsure"))
    env.reset(seed=0)
    with pytest.raises(WorldModelError, match="no apply_prediction hook.*mode='score'"):
        env.step(1)
    assert env.unwrapped.count == 0  # the real env was not stepped from a state it is not in


def test_known_predictions_between_unknown_ones_are_unchanged_under_real_step():
    gappy = _toy(world_model=_UnknownEvery(3), env=CostlyToyEnv(dim=2, max_turns=6))
    plain = _toy(env=CostlyToyEnv(dim=2, max_turns=6))
    for env in (gappy, plain):
        env.reset(seed=0, options=TASK)
    for turn in range(6):
        _, reward, _, _, info = gappy.step(ACTION)
        _, expected, _, _, _ = plain.step(ACTION)
        if (turn + 1) % 3 == 0:
            assert info["wmrl"]["source"] == "real" and reward == pytest.approx(TRUE)
        else:
            assert info["wmrl"]["source"] == "world_model" and reward == pytest.approx(expected)
    assert gappy.ledger.real_steps == 2 and gappy.ledger.rewards_world_model == 4


@pytest.mark.parametrize("policy", ["skip", "", None, 0])
def test_an_unknown_on_unknown_policy_is_rejected_naming_the_choices(policy):
    with pytest.raises(ConfigError, match=r"on_unknown=.*'real_step'.*'raise'.*'nan'"):
        _toy(on_unknown=policy)


@pytest.mark.parametrize("answer", [[], [Prediction(0.5), Prediction(0.5)]])
def test_wrong_prediction_count_raises_naming_the_world_model(answer):
    env = _toy(world_model=_Fixed(answer, name="miscount-wm"))
    env.reset(seed=0, options=TASK)
    with pytest.raises(WorldModelError, match=r"'miscount-wm' returned \d predictions for 1 queries"):
        env.step(ACTION)


def test_a_raising_world_model_is_reported_naming_it_and_ends_the_episode():
    env = _toy(world_model=_Fixed(RuntimeError("server down"), name="flaky-wm"))
    env.reset(seed=0, options=TASK)
    with pytest.raises(WorldModelError, match="'flaky-wm' raised RuntimeError") as caught:
        env.step(ACTION)
    assert isinstance(caught.value.__cause__, RuntimeError)
    with pytest.raises(ResetNeeded):
        env.step(ACTION)


@pytest.mark.parametrize("reward", [float("nan"), float("inf"), "0.5", True])
def test_a_non_finite_or_non_numeric_predicted_reward_breaks_the_contract(reward):
    env = _toy(world_model=_Fixed([Prediction(reward)], name="nan-wm"))
    env.reset(seed=0, options=TASK)
    with pytest.raises(WorldModelError, match="nan-wm"):
        env.step(ACTION)


@pytest.mark.parametrize("answer", [RuntimeError("boom"), [], [Prediction(float("nan"))], ["0.3"]])
def test_tolerated_errors_give_none_rewards_counted_in_info_and_ledger(answer):
    env = _toy(world_model=_Fixed(answer, name="bad-wm"), tolerate_errors=True, on_unknown="nan")
    env.reset(seed=0, options=TASK)
    obs, reward, _, _, info = env.step(ACTION)
    assert math.isnan(reward) and info["wmrl"]["predicted"] is None
    assert "bad-wm" in info["wmrl"]["world_model_error"]
    assert env.ledger.world_model_errors == 1 and env.ledger.unknown_predictions == 1


def test_tolerated_error_without_the_hook_truncates_the_simulated_episode_under_on_unknown_nan():
    env = WorldModelWrapper(_Counter(), _Fixed(RuntimeError("x")), tolerate_errors=True, on_unknown="nan")
    obs, _ = env.reset(seed=0)
    next_obs, reward, terminated, truncated, _ = env.step(1)
    assert math.isnan(reward) and truncated and not terminated
    assert np.array_equal(next_obs, obs) and next_obs is not obs


def test_simulate_without_hooks_uses_the_predicted_observation_and_the_step_limit():
    inner = _Counter()
    model = ToyWorldModel(bias=0.0, noise=0.0, oracle=_counter_oracle)
    env = WorldModelWrapper(inner, model, max_episode_steps=3)
    env.reset(seed=0)
    results = [env.step(2) for _ in range(3)]
    assert [float(r[0][0]) for r in results] == [1.0, 2.0, 3.0]
    assert [r[1] for r in results] == [2.0, 2.0, 2.0]
    assert [r[3] for r in results] == [False, False, True]
    assert inner.count == 0
    with pytest.raises(ResetNeeded):
        env.step(0)


def test_step_limit_comes_from_the_env_spec_when_not_given():
    gym.register(id="wmrl-test/Counter-v0", entry_point=_Counter, max_episode_steps=2)
    try:
        made = gym.make("wmrl-test/Counter-v0")
        env = WorldModelWrapper(made, ToyWorldModel(bias=0.0, noise=0.0, oracle=_counter_oracle))
        env.reset(seed=0)
        assert [env.step(1)[3] for _ in range(2)] == [False, True]
    finally:
        del gym.registry["wmrl-test/Counter-v0"]


def test_simulate_without_hook_and_without_observation_raises_naming_the_world_model():
    env = WorldModelWrapper(_Counter(), _Fixed([Prediction(0.5)], name="blind-wm"))
    env.reset(seed=0)
    with pytest.raises(WorldModelError, match="'blind-wm' returned no observation"):
        env.step(1)


@pytest.mark.parametrize("value", [1, "yes", None, 0.0])
def test_non_bool_anchor_option_raises_quoting_the_value(value):
    env = _toy()
    with pytest.raises(ConfigError, match=re.escape(f"options['anchor']={value!r}")):
        env.reset(options={"anchor": value})


def test_numpy_bool_anchor_option_is_accepted():
    env = _toy()
    env.reset(options={**TASK, "anchor": np.bool_(True)})
    assert env.is_anchor


def test_attached_scheduler_decides_anchors_per_group():
    env = _toy(scheduler=AnchorScheduler(fraction=0.5, min_per_step=1, seed=4))
    mask = env.plan_groups(6)
    assert mask.sum() == 3
    for group in range(6):
        env.reset(seed=0, options={**TASK, "group_id": group})
        assert env.is_anchor == bool(mask[group]) and env.group_id == group
        assert env.step(ACTION)[4]["wmrl"]["group_id"] == group
    with pytest.raises(ConfigError, match="plan_groups"):
        env.reset(options={"group_id": 6})


def test_plan_groups_without_a_scheduler_raises_config_error():
    with pytest.raises(ConfigError, match="scheduler"):
        _toy().plan_groups(4)


def test_wrapper_options_are_consumed_and_the_rest_reach_the_env():
    inner = _Counter()
    env = WorldModelWrapper(inner, ToyWorldModel(oracle=_counter_oracle))
    env.reset(options={"anchor": False, "group_id": 2, "level": 7})
    env.reset()
    assert inner.options_seen == [{"level": 7}, None]


def test_info_key_collision_raises_at_first_collision_and_another_key_works():
    with pytest.raises(ConfigError, match="already writes info\\['wmrl'\\]"):
        WorldModelWrapper(_Counter({"wmrl": 1}), ToyWorldModel(oracle=_counter_oracle)).reset()
    env = WorldModelWrapper(_Counter({"wmrl": 1}), ToyWorldModel(oracle=_counter_oracle), info_key="wm")
    _, info = env.reset()
    assert info["wmrl"] == 1 and info["wm"]["source"] == "world_model"
    env.reset(options={"anchor": True})
    _, _, _, _, info = env.step(1)
    assert info["wmrl"] == 1 and info["wm"]["source"] == "real"


@pytest.mark.filterwarnings("ignore:.*Casting input x to numpy array")
@pytest.mark.parametrize(
    "action",
    [
        np.array([2.0, 0.0]),
        np.array([0.0, -1.5]),
        np.zeros(3),
        np.zeros((1, 2)),
        np.zeros(2, dtype=complex),
        [0.0, 0.0, 0.0],
        "up",
    ],
)
def test_action_outside_the_action_space_raises_invalid_action(action):
    env = _toy()
    env.reset(seed=0)
    assert not env.action_space.contains(action)
    with pytest.raises(InvalidAction, match="outside the action space"):
        env.step(action)


@pytest.mark.filterwarnings("ignore:.*Casting input x to numpy array")
@pytest.mark.parametrize("action", [np.zeros(2, dtype=np.float32), np.array([1.0, -1.0]), [0.5, 0.5]])
def test_actions_inside_the_action_space_are_accepted(action):
    env = _toy()
    env.reset(seed=0)
    assert env.action_space.contains(action)
    assert env.step(action)[4]["wmrl"]["predicted"] is not None


def test_step_before_reset_and_after_the_end_raise_reset_needed():
    env = _toy(env=CostlyToyEnv(dim=2, max_turns=1))
    with pytest.raises(ResetNeeded):
        env.step(ACTION)
    env.reset(seed=0)
    assert env.step(ACTION)[3]
    with pytest.raises(ResetNeeded):
        env.step(ACTION)


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version:UserWarning")
@pytest.mark.parametrize(("mode", "scoring"), [("simulate", "step"), ("score", "step"), ("score", "episode")])
@pytest.mark.parametrize("anchor", [False, True])
def test_check_env_passes_wrapped_and_bare(mode, scoring, anchor):
    check_env(gym.make("wmrl/CostlyToy-v0").unwrapped)
    model = CachedWorldModel(ToyWorldModel(bias=0.1, noise=0.05))
    real = gym.make("wmrl/CostlyToy-v0").unwrapped
    env = WorldModelWrapper(real, model, mode=mode, scoring=scoring, info_timings=False)
    if anchor:
        original_reset = env.reset
        env.reset = lambda *, seed=None, options=None: original_reset(  # type: ignore[method-assign]
            seed=seed, options={**(options or {}), "anchor": True}
        )
    check_env(env)


def test_info_records_seconds_in_the_real_env_and_the_world_model():
    model = ToyWorldModel(seconds_per_query=0.02)
    env = _toy(world_model=model, env=CostlyToyEnv(dim=2, step_seconds=0.03), info_timings=True)
    env.reset(seed=0, options={"anchor": True})
    block = env.step(ACTION)[4]["wmrl"]
    assert block["real_seconds"] >= 0.03 and block["world_model_seconds"] >= 0.02
    assert env.ledger.real_seconds >= 0.03 and env.ledger.world_model_seconds >= 0.02


def test_shared_ledger_collects_from_several_wrappers():
    ledger = CostLedger()
    envs = [_toy(ledger=ledger) for _ in range(3)]
    for env in envs:
        env.reset(seed=0, options={"anchor": True})
        env.step(ACTION)
    assert ledger.real_steps == 3 and ledger.world_model_calls == 3 and ledger.episodes == 3


def test_vector_info_reads_missing_entries_as_nan_not_zero():
    vector = gym.vector.SyncVectorEnv([lambda: _toy(), lambda: CostlyToyEnv(dim=2)])
    vector.reset(seed=0)
    _, _, _, _, info = vector.step(np.stack([ACTION, ACTION]))
    raw = info["wmrl"]["predicted"]
    assert raw[1] == 0.0 and not info["wmrl"]["_predicted"][1]
    predicted = read_vector_info(info, "predicted")
    assert predicted[0] == pytest.approx(raw[0]) and math.isnan(predicted[1])
    assert np.isnan(read_vector_info(info, "real")).all()
    with pytest.raises(ConfigError, match="not numeric"):
        read_vector_info(info, "source")
    assert read_vector_info({"other": 1}, "predicted").shape == (0,)


def test_predict_batch_aligns_predictions_and_splits_the_seconds():
    queries = [WorldModelQuery(None, np.full(1, float(k))) for k in range(4)]
    model = ToyWorldModel(bias=0.0, noise=0.0, oracle=lambda q: Prediction(float(q.action[0])))
    batch = predict_batch(model, queries)
    assert [p.reward for p in batch.predictions] == [0.0, 1.0, 2.0, 3.0]
    assert batch.errors == (None,) * 4 and batch.seconds_per_query >= 0.0
    assert predict_batch(model, []).predictions == ()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "dream"}, "mode='dream'"),
        ({"scoring": "turn"}, "scoring='turn'"),
        ({"scoring": "episode"}, "scoring='episode' with mode='simulate'"),
        ({"info_key": ""}, "info_key=''"),
        ({"max_episode_steps": 0}, "max_episode_steps=0"),
        ({"scheduler": object()}, "select"),
        ({"world_model": object()}, "not a WorldModel"),
        ({"anchor_fraction": 1.5}, "anchor_fraction=1.5"),
        ({"anchor_fraction": True}, "anchor_fraction=True"),
        ({"world_model": "wmrl-live-object:Gone#999999"}, "another process"),
    ],
)
def test_invalid_arguments_raise_config_error_naming_the_value(kwargs, match):
    with pytest.raises(ConfigError, match=re.escape(match)):
        _toy(**kwargs)


def test_docstring_examples_run():
    import doctest

    import wmrl_envs.wrapper

    assert doctest.testmod(wmrl_envs.wrapper).failed == 0


def test_a_world_model_that_cannot_be_copied_is_held_by_reference():
    model = _LockedWorldModel()
    env = WorldModelWrapper(CostlyToyEnv(dim=2), model)
    assert env.world_model is model
    env.reset(seed=0, options=TASK)
    env.step(ACTION)
    assert model.calls == 1


def test_one_world_model_instance_serves_every_wrapper_of_a_grouped_rollout():
    model = _LockedWorldModel()

    class Zeros:
        def act(self, observations, infos):
            return [np.zeros(2) for _ in observations]

    make = lambda: CostlyToyEnv(dim=2, max_turns=2)  # noqa: E731
    with GroupedRollout(make, model, RolloutConfig(group_size=3)) as rollout:
        rollout.run([RolloutTask("a", {"task_id": 1}), RolloutTask("b", {"task_id": 2})], Zeros())
        assert len(rollout.envs) == 6 and all(env.world_model is model for env in rollout.envs)
    assert model.calls == 2  # one batched call per turn, through the one shared instance


def test_spec_is_json_and_remaking_it_rewraps_with_the_same_world_model():
    model = _LockedWorldModel()
    scheduler = AnchorScheduler(fraction=0.5, seed=1)
    env = WorldModelWrapper(gym.make("wmrl/CostlyToy-v0"), model, mode="score", scheduler=scheduler)
    recorded = json.loads(env.spec.to_json())["additional_wrappers"][-1]["kwargs"]
    assert recorded["mode"] == "score" and isinstance(recorded["world_model"], str)
    remade = gym.make(env.spec)
    assert isinstance(remade, WorldModelWrapper) and remade.world_model is model and remade.mode == "score"
    remade.plan_groups(2)
    assert scheduler.in_flight == 1  # the re-made wrapper drives the very same scheduler


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version:UserWarning")
@pytest.mark.parametrize("mode", ["simulate", "score"])
def test_check_env_passes_with_default_settings_on_a_made_env(mode):
    check_env(WorldModelWrapper(gym.make("wmrl/CostlyToy-v0"), ToyWorldModel(noise=0.05), mode=mode))


def test_a_loop_without_reset_options_anchors_about_a_tenth_of_its_episodes_reproducibly():
    def anchored(seed: int) -> list[bool]:
        env = _toy(env=CostlyToyEnv(dim=2, max_turns=2))
        decisions = []
        env.reset(seed=seed)  # what Stable-Baselines3 does: one seeded reset, then plain reset()s
        for _ in range(400):
            decisions.append(env.is_anchor)
            done = False
            while not done:
                _, _, terminated, truncated, _ = env.step(ACTION)
                done = terminated or truncated
            env.reset()
        assert env.ledger.anchor_episodes == sum(decisions) + env.is_anchor
        return decisions

    first = anchored(seed=3)
    assert 0.05 < np.mean(first) < 0.15
    assert anchored(seed=3) == first and anchored(seed=4) != first


def test_the_same_reset_seed_gives_the_same_anchor_decision_and_fraction_zero_never_anchors():
    env = _toy()
    decisions = {seed: [] for seed in range(60)}
    for _ in range(2):
        for seed in decisions:
            env.reset(seed=seed)
            decisions[seed].append(env.is_anchor)
    assert all(a == b for a, b in decisions.values()) and any(a for a, _ in decisions.values())
    never = _toy(anchor_fraction=0.0)
    for seed in range(60):
        never.reset(seed=seed)
        assert not never.is_anchor


def test_anchor_draws_do_not_select_start_states():
    env = WorldModelWrapper(gym.make("Pendulum-v1"), _PendulumReward(), mode="score")
    starts = {True: [], False: []}
    for seed in range(600):
        obs, _ = env.reset(seed=seed)
        starts[env.is_anchor].append(math.atan2(obs[1], obs[0]))
    assert 30 < len(starts[True]) < 90
    assert abs(np.mean(starts[True]) - np.mean(starts[False])) < 0.6  # both spread over [-pi, pi]


def test_an_attached_scheduler_decides_episodes_reset_without_options_and_gets_its_slots_back():
    scheduler = AnchorScheduler(fraction=0.5, min_per_step=0, max_in_flight=1, seed=0)
    env = _toy(scheduler=scheduler)
    decisions = []
    for _ in range(20):
        env.reset()
        decisions.append(env.is_anchor)
        assert scheduler.in_flight == int(env.is_anchor)
    env.close()
    assert scheduler.in_flight == 0 and sum(decisions) == 10


def test_a_float64_action_for_a_float32_box_is_accepted_as_by_the_plain_env():
    plain = gym.make("Pendulum-v1")
    plain.reset(seed=0)
    action = np.array([0.5])  # float64, the default dtype of a numpy policy
    plain.step(action)
    env = WorldModelWrapper(gym.make("Pendulum-v1"), _PendulumReward(), mode="score")
    env.reset(seed=0)
    assert env.action_space.dtype == np.float32
    _, reward, _, _, info = env.step(action)
    assert info["wmrl"]["predicted"] == reward
    with pytest.raises(InvalidAction):
        env.step(np.array([2.5]))
