"""Tests of the cost ledger (wmrl_envs/ledger.py)."""

from __future__ import annotations

import threading

import pytest

from wmrl_algos.errors import CheckpointError, ConfigError
from wmrl_envs.ledger import CostLedger


def _busy_ledger() -> CostLedger:
    ledger = CostLedger()
    ledger.record_real(1.5, steps=3)
    ledger.record_world_model(0.5, queries=8, unknown=2, errors=1)
    ledger.record_reward("real")
    ledger.record_reward("world_model")
    ledger.record_reward("world_model")
    ledger.record_episode(anchor=True)
    ledger.record_episode(anchor=False)
    return ledger


def test_records_accumulate_and_metrics_are_namespaced():
    metrics = _busy_ledger().as_metrics()
    assert metrics["cost/real_seconds"] == 1.5 and metrics["cost/real_steps"] == 3.0
    assert metrics["cost/world_model_seconds"] == 0.5 and metrics["cost/world_model_calls"] == 1.0
    assert metrics["cost/world_model_queries"] == 8.0 and metrics["cost/unknown_predictions"] == 2.0
    assert metrics["cost/world_model_errors"] == 1.0
    assert metrics["cost/rewards_real"] == 1.0 and metrics["cost/rewards_world_model"] == 2.0
    assert metrics["cost/episodes"] == 2.0 and metrics["cost/anchor_episodes"] == 1.0
    assert metrics["cost/total_seconds"] == 2.0 and metrics["cost/real_seconds_share"] == 0.75
    assert all(key.startswith("cost/") and isinstance(v, float) for key, v in metrics.items())


def test_an_empty_ledger_reports_a_zero_share_not_a_division_error():
    metrics = CostLedger().as_metrics(prefix="bench/cost")
    assert metrics["bench/cost/real_seconds_share"] == 0.0 and metrics["bench/cost/total_seconds"] == 0.0


def test_merge_sums_every_total_and_leaves_both_inputs_unchanged():
    first, second = _busy_ledger(), _busy_ledger()
    second.record_real(0.5)
    merged = first + second
    assert merged.real_seconds == 3.5 and merged.real_steps == 7 and merged.world_model_queries == 16
    assert merged.anchor_episodes == 2 and merged.rewards_world_model == 4
    assert first.real_seconds == 1.5 and second.real_seconds == 2.0


def test_state_dict_round_trip_resumes_exactly():
    ledger = _busy_ledger()
    resumed = CostLedger.from_state_dict(ledger.state_dict())
    assert resumed == ledger
    resumed.record_real(1.0)
    assert resumed != ledger and resumed.real_steps == 4


@pytest.mark.parametrize(
    "change",
    [
        lambda s: s.pop("real_seconds"),
        lambda s: s.update(bogus=1),
        lambda s: s.update(real_steps=-1),
        lambda s: s.update(real_steps="3"),
        lambda s: s.update(episodes=True),
    ],
)
def test_corrupt_state_raises_checkpoint_error_and_leaves_the_ledger_unchanged(change):
    state = _busy_ledger().state_dict()
    change(state)
    ledger = _busy_ledger()
    with pytest.raises(CheckpointError, match="cost ledger state"):
        ledger.load_state_dict(state)
    assert ledger == _busy_ledger()


def test_concurrent_records_from_threads_are_not_lost():
    ledger = CostLedger()

    def work() -> None:
        for _ in range(2000):
            ledger.record_real(0.001)
            ledger.record_world_model(0.0, queries=2)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert ledger.real_steps == 16000 and ledger.world_model_queries == 32000
    assert ledger.real_seconds == pytest.approx(16.0)


@pytest.mark.parametrize("prefix", ["", "/cost", "cost/"])
def test_a_bad_metric_prefix_raises_config_error(prefix):
    with pytest.raises(ConfigError, match="prefix"):
        CostLedger().as_metrics(prefix=prefix)


def test_docstring_examples_run():
    import doctest

    import wmrl_envs.ledger

    assert doctest.testmod(wmrl_envs.ledger).failed == 0
