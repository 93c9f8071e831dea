"""Tests of the shipped toy env and toy world models (wmrl_envs/toy.py)."""

from __future__ import annotations

import subprocess
import sys
import time

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from wmrl_algos.errors import ConfigError, WorldModelError
from wmrl_envs.toy import (
    CachedWorldModel,
    CostlyToyEnv,
    ToyContext,
    ToyWorldModel,
    stable_key,
    toy_oracle,
    toy_score,
    toy_target,
)
from wmrl_envs.world_model import Prediction, WorldModelQuery


def _queries(n: int, dim: int = 2, seed: int = 0) -> list[WorldModelQuery]:
    rng = np.random.default_rng(seed)
    return [
        WorldModelQuery(ToyContext(int(k % 7), dim, 0, 4, 0.95), rng.uniform(-1, 1, dim)) for k in range(n)
    ]


class _Recording:
    """Records the batch sizes a real world model is called with (a probe, not a replacement)."""

    def __init__(self, inner: ToyWorldModel) -> None:
        self.inner, self.name, self.batches = inner, inner.name, []

    def predict(self, queries):
        self.batches.append(len(queries))
        return self.inner.predict(queries)


def test_check_env_passes_on_the_bare_toy_env():
    check_env(gym.make("wmrl/CostlyToy-v0", dim=3).unwrapped)


def test_reward_is_the_true_score_of_the_hidden_target_and_hitting_it_terminates():
    env = CostlyToyEnv(dim=2)
    env.reset(seed=0, options={"task_id": 5})
    action = np.array([0.3, -0.2])
    _, reward, terminated, truncated, info = env.step(action)
    assert reward == pytest.approx(toy_score(toy_target(5, 2), action))
    assert reward < 0.95 and not terminated and not truncated and info == {"task_id": 5, "turn": 1}
    _, reward, terminated, _, _ = env.step(toy_target(5, 2))
    assert reward == pytest.approx(1.0) and terminated


def test_episode_is_truncated_after_max_turns():
    env = CostlyToyEnv(dim=2, max_turns=3)
    env.reset(seed=0, options={"task_id": 1})
    flags = [env.step(np.full(2, -1.0))[3] for _ in range(3)]
    assert flags == [False, False, True]


@pytest.mark.parametrize("how", ["sleep", "cpu"])
def test_each_step_costs_the_configured_wall_time_and_only_cpu_mode_spins(how):
    env = CostlyToyEnv(step_seconds=0.2, burn_mode=how)
    env.reset(seed=0)
    wall, cpu = time.perf_counter(), time.process_time()
    env.step(np.zeros(2))
    assert time.perf_counter() - wall >= 0.2
    spent = time.process_time() - cpu
    assert spent > 0.01 if how == "cpu" else spent < 0.01


def test_unseeded_task_comes_from_the_seeded_generator():
    first, second = CostlyToyEnv(), CostlyToyEnv()
    first.reset(seed=11)
    second.reset(seed=11)
    assert first.task_id == second.task_id
    second.reset(seed=12)
    assert first.task_id != second.task_id


def test_apply_prediction_advances_the_turn_without_the_real_score():
    env = CostlyToyEnv(dim=2)
    env.reset(seed=0, options={"task_id": 2})
    obs, reward, terminated, truncated, info = env.apply_prediction(np.zeros(2), Prediction(reward=0.97))
    assert reward == 0.97 and terminated and not truncated and info["turn"] == 1
    assert obs[2] == pytest.approx(0.97) and obs[3] == 1.0 and obs in env.observation_space
    assert env.world_model_context().turn == 1


def test_unknown_prediction_is_marked_unknown_in_the_observation_not_scored_zero():
    env = CostlyToyEnv(dim=2)
    env.reset(seed=0, options={"task_id": 2})
    obs, reward, terminated, _, _ = env.apply_prediction(np.zeros(2), Prediction(reward=None))
    assert reward is None and not terminated
    assert obs[3] == 0.0 and obs in env.observation_space


def test_world_model_error_has_the_configured_bias_and_noise():
    queries = _queries(4000)
    model = ToyWorldModel(bias=0.2, noise=0.1, seed=3)
    errors = np.array(
        [p.reward - toy_oracle(q).reward for p, q in zip(model.predict(queries), queries, strict=True)]
    )
    assert errors.mean() == pytest.approx(0.2, abs=0.01)
    assert errors.std() == pytest.approx(0.1, abs=0.01)


def test_world_model_is_deterministic_per_query_and_the_seed_changes_the_noise():
    queries = _queries(50)
    first = [p.reward for p in ToyWorldModel(seed=1).predict(queries)]
    again = [p.reward for p in ToyWorldModel(seed=1).predict(list(reversed(queries)))][::-1]
    other = [p.reward for p in ToyWorldModel(seed=2).predict(queries)]
    assert first == again
    assert first != other


def test_unknown_rate_answers_none_never_zero():
    predictions = ToyWorldModel(unknown_rate=0.3, noise=0.0, bias=0.0).predict(_queries(2000))
    unknown = [p for p in predictions if p.reward is None]
    assert 0.25 < len(unknown) / len(predictions) < 0.35
    assert all(p.reward > 0.0 for p in predictions if p.reward is not None)


def test_episode_query_is_scored_as_the_return_read_from_the_observations():
    env = CostlyToyEnv(dim=2)
    observations = [env.reset(seed=0, options={"task_id": 4})[0]]
    rewards = []
    for action in (np.zeros(2), np.ones(2)):
        obs, reward, *_ = env.step(action)
        observations.append(obs)
        rewards.append(reward)
    truth = toy_oracle(WorldModelQuery(observations, [np.zeros(2), np.ones(2)]))
    assert truth.reward == pytest.approx(sum(rewards))


def test_toy_oracle_rejects_a_context_it_cannot_read():
    with pytest.raises(ConfigError, match="str"):
        toy_oracle(WorldModelQuery("a task description", np.zeros(2)))


def test_custom_oracle_passes_its_observation_through():
    model = ToyWorldModel(bias=0.0, noise=0.0, oracle=lambda q: Prediction(1.0, observation=q.action * 2))
    [prediction] = model.predict([WorldModelQuery(None, np.ones(2))])
    assert prediction.reward == 1.0 and np.array_equal(prediction.observation, np.full(2, 2.0))


def test_cached_world_model_calls_the_inner_model_once_per_distinct_query_in_one_batch():
    inner = _Recording(ToyWorldModel())
    cached = CachedWorldModel(inner)
    queries = _queries(6)
    first = cached.predict(queries + queries[:2])
    second = cached.predict(queries[3:])
    assert inner.batches == [6]
    assert [p.reward for p in second] == [p.reward for p in first[3:6]]
    assert (cached.hits, cached.misses) == (5, 6)
    assert cached.name == "cached(toy)"


def test_cached_world_model_returns_copies_of_observations():
    model = ToyWorldModel(oracle=lambda q: Prediction(0.5, observation=np.zeros(2)))
    cached = CachedWorldModel(model)
    query = WorldModelQuery(None, np.ones(2))
    cached.predict([query])[0].observation[:] = 9.0
    assert np.array_equal(cached.predict([query])[0].observation, np.zeros(2))


def test_cached_world_model_evicts_the_least_recently_used_entry():
    inner = _Recording(ToyWorldModel())
    cached = CachedWorldModel(inner, max_entries=2)
    a, b, c = _queries(3)
    cached.predict([a, b, c])
    cached.predict([c])
    cached.predict([a])
    assert inner.batches == [3, 1]


def test_cached_world_model_names_the_inner_model_when_it_returns_the_wrong_count():
    class Short:
        name = "short-model"

        def predict(self, queries):
            return []

    with pytest.raises(WorldModelError, match="short-model"):
        CachedWorldModel(Short()).predict(_queries(2))


def test_stable_key_is_the_same_in_another_process():
    parts = (ToyContext(1, 2, 0, 4, 0.95), np.arange(3.0), {"b": [1, 2], "a": None})
    code = (
        "import numpy as np; from wmrl_envs.toy import ToyContext, stable_key; "
        "print(stable_key(ToyContext(1, 2, 0, 4, 0.95), np.arange(3.0), {'a': None, 'b': [1, 2]}).hex())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == stable_key(*parts).hex()
    assert stable_key(np.arange(3.0)) != stable_key(np.arange(3.0).astype(np.float32))


@pytest.mark.parametrize(
    "kwargs",
    [{"dim": 0}, {"max_turns": 0}, {"step_seconds": -1.0}, {"burn_mode": "gpu"}, {"success_threshold": 0.0},
     {"render_mode": "human"}],
)
def test_invalid_env_arguments_raise_config_error_naming_the_value(kwargs):
    name, value = next(iter(kwargs.items()))
    with pytest.raises(ConfigError, match=name):
        CostlyToyEnv(**kwargs)


@pytest.mark.parametrize(
    "kwargs", [{"noise": -0.1}, {"unknown_rate": 1.5}, {"seconds_per_query": -1.0}, {"burn_mode": "x"}]
)
def test_invalid_world_model_arguments_raise_config_error_naming_the_value(kwargs):
    name = next(iter(kwargs))
    with pytest.raises(ConfigError, match=name):
        ToyWorldModel(**kwargs)


@pytest.mark.parametrize("task_id", [-1, 1.5, True, "3"])
def test_invalid_task_option_raises_config_error(task_id):
    with pytest.raises(ConfigError, match="task_id"):
        CostlyToyEnv().reset(options={"task_id": task_id})


def test_cached_world_model_rejects_a_non_world_model():
    with pytest.raises(ConfigError, match="not a WorldModel"):
        CachedWorldModel(object())


def test_docstring_examples_run():
    import doctest

    import wmrl_envs.toy

    assert doctest.testmod(wmrl_envs.toy).failed == 0
