"""Tests of wmrl_adapters.train.execution: the execution cache charges hits at cost; real runs are counted."""

from __future__ import annotations

import pytest
from wmrl_adapters.train.design_policy import design_action
from wmrl_adapters.train.execution import CachedKaggleEnv, ComputeMeter, ExecutionCache

from wmrl_envs.kaggle.design import Design
from wmrl_envs.kaggle.outcome import Outcome
from wmrl_envs.kaggle.suite import load_suite


def test_a_cache_hit_is_charged_at_the_original_cost_but_not_spent():
    meter = ComputeMeter()
    meter.record(3.0, hit=False, wall_s=5.0)
    meter.record(3.0, hit=True)
    assert meter.state_dict() == {
        "executions": 2,
        "hits": 1,
        "charged_cpu_s": 6.0,
        "spent_cpu_s": 3.0,
        "wall_s": 5.0,
    }


def test_a_sandbox_failure_is_never_cached():
    cache = ExecutionCache()
    key = ExecutionCache.key("titanic-survival", "print(1)", ("local", 60.0))
    cache.put(key, Outcome(status="sandbox_error"), cpu_s=0.1)
    assert cache.get(key) is None
    cache.put(key, Outcome(status="runtime_error"), cpu_s=0.1)
    assert cache.get(key)[0].status == "runtime_error"


def test_the_key_depends_on_competition_code_and_sandbox_settings():
    keys = {
        ExecutionCache.key(c, code, settings)
        for c in ("a", "b")
        for code in ("x", "y")
        for settings in (("local", 60.0), ("local", 30.0))
    }
    assert len(keys) == 8


@pytest.mark.integration
def test_a_repeated_solution_replays_its_outcome_and_is_charged_again():
    suite = load_suite()
    meter, cache = ComputeMeter(), ExecutionCache()
    env = CachedKaggleEnv(meter, cache, suite=suite, sandbox="local", max_turns=2, timeout_s=120)
    env.reset(options={"competition": "titanic-survival"})
    action = design_action(Design(model="linear"), suite.get("titanic-survival"))
    _, first_reward, _, _, first = env.step(action)
    _, second_reward, _, _, second = env.step(action)
    env.close()
    assert first["status"] == second["status"] == "valid" and first_reward == second_reward
    totals = meter.state_dict()
    assert totals["executions"] == 2 and totals["hits"] == 1
    assert totals["charged_cpu_s"] == pytest.approx(2 * totals["spent_cpu_s"]) and totals["spent_cpu_s"] > 0


def test_an_action_without_code_runs_nothing_and_costs_nothing():
    suite = load_suite()
    meter = ComputeMeter()
    env = CachedKaggleEnv(meter, ExecutionCache(), suite=suite, sandbox="unsafe", max_turns=1)
    env.reset(options={"competition": "titanic-survival"})
    _, _, _, _, info = env.step("I would train a random forest.")
    env.close()
    assert info["status"] == "malformed" and meter.executions == 0
