"""Tests of wmrl_adapters.train.kaggle.execution: the execution cache charges hits at cost; real runs are
counted; the in-process compute (policy, world model) is measured in CPU-seconds, not wall seconds.

The cache must never change a grade: it keys on the competition's content, it sees only actions the
env accepts, and it replays only definite outcomes (real bubblewrap sandbox, built-in suite).
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from wmrl_adapters.train.kaggle.design_policy import design_action
from wmrl_adapters.train.kaggle.evaluate import evaluate_policy
from wmrl_adapters.train.kaggle.execution import (
    CachedKaggleEnv,
    ComputeMeter,
    CpuClock,
    CpuTimedPolicy,
    CpuTimedWorldModel,
    ExecutionCache,
)

from wmrl_algos.errors import SandboxError
from wmrl_envs.kaggle.competition import Competition, load_mlebench_competition
from wmrl_envs.kaggle.design import Design
from wmrl_envs.kaggle.env import MAX_TEXT_LENGTH, KaggleEnv
from wmrl_envs.kaggle.outcome import Outcome
from wmrl_envs.kaggle.suite import load_suite
from wmrl_envs.sandbox import BubblewrapSandbox, ExecutionRequest, ExecutionResult, Sandbox

COPY_LINES = ("import shutil", "shutil.copy('input/sample_submission.csv', 'submission.csv')")
COPY_SAMPLE = "```python\n" + "\n".join(COPY_LINES) + "\n```"


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


@pytest.mark.parametrize("status", ["sandbox_error", "timeout"])
def test_a_sandbox_failure_or_a_timeout_is_never_cached(status: str):
    cache = ExecutionCache()
    key = ExecutionCache.key("titanic-survival", "print(1)", ("local", 60.0))
    cache.put(key, Outcome(status=status), cpu_s=0.1)
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


@pytest.fixture(scope="module")
def concrete() -> Competition:
    """The built-in concrete-strength competition with its committed leaderboard."""
    return load_suite().get("concrete-strength")


def _mlebench_twin(competition: Competition, data_dir: Path) -> Competition:
    """An MLE-bench directory named like ``competition``, with the same public files and other answers."""
    directory = data_dir / competition.id
    shutil.copytree(competition.public_dir, directory / "prepared" / "public")
    answers = pd.read_csv(competition.answers_path)
    answers[competition.target] += 30.0
    (directory / "prepared" / "private").mkdir(parents=True)
    answers.to_csv(directory / "prepared" / "private" / "test.csv", index=False)
    (directory / "config.yaml").write_text(f"id: {competition.id}\ngrader:\n  name: {competition.metric}\n")
    assert competition.leaderboard is not None
    board = "".join(f"r{i},{score}\n" for i, score in enumerate(competition.leaderboard.scores))
    (directory / "leaderboard.csv").write_text("teamName,score\n" + board)
    return load_mlebench_competition(directory)


@pytest.mark.integration
def test_a_competition_named_like_a_cached_one_gets_its_own_grade_not_the_cached_one(
    concrete: Competition, strict_bubblewrap: BubblewrapSandbox, tmp_path: Path
) -> None:
    twin = _mlebench_twin(concrete, tmp_path)
    assert twin.id == concrete.id
    cached = CachedKaggleEnv(ComputeMeter(), ExecutionCache(), suite=load_suite(), sandbox=strict_bubblewrap)
    cached.reset(options={"competition": concrete})
    suite_grade = cached.step(COPY_SAMPLE)[4]
    cached.reset(options={"competition": twin})
    twin_grade = cached.step(COPY_SAMPLE)[4]
    plain = KaggleEnv(twin, sandbox=strict_bubblewrap)
    plain.reset(seed=0)
    truth = plain.step(COPY_SAMPLE)[4]
    assert suite_grade["score"] != truth["score"], "the twin's answers must grade differently"
    assert (twin_grade["score"], twin_grade["position"]) == (truth["score"], truth["position"])
    assert cached.meter.hits == 0


def _results(info: dict[str, Any], reward: float, observation: str) -> tuple[Any, ...]:
    return info["status"], reward, info["score"], info["position"], info["detail"], observation.split("\n")[0]


@pytest.fixture(scope="module")
def twin_envs(
    concrete: Competition, strict_bubblewrap: BubblewrapSandbox
) -> Iterator[tuple[KaggleEnv, KaggleEnv]]:
    """A plain env and a cached one whose cache already holds the valid outcome of ``COPY_SAMPLE``."""
    plain = KaggleEnv(concrete, sandbox=strict_bubblewrap, max_turns=1000, timeout_s=60)
    cached = CachedKaggleEnv(
        ComputeMeter(), ExecutionCache(), competition=concrete, sandbox=strict_bubblewrap, max_turns=1000,
        timeout_s=60,
    )
    plain.reset(seed=0)
    cached.reset(seed=0)
    assert cached.step(COPY_SAMPLE)[4]["status"] == "valid"
    yield plain, cached
    plain.close()
    cached.close()


_BARE = "\n".join(COPY_LINES)


@pytest.mark.integration
@pytest.mark.parametrize(
    "action",
    [
        COPY_SAMPLE,
        COPY_SAMPLE + "\nThanks! " + "x" * MAX_TEXT_LENGTH,
        COPY_SAMPLE + " " * MAX_TEXT_LENGTH,
        _BARE + "\n" * MAX_TEXT_LENGTH,
        _BARE + "  \n\t\n   ",
        "\n\n" + _BARE + "\r\n",
        COPY_SAMPLE.replace("\n", "\r\n"),
        COPY_SAMPLE.replace("\n", "\r"),
        COPY_SAMPLE.replace("```", "~~~"),
        COPY_SAMPLE.replace("import shutil", "import shutil  # \ud800"),
        "I would train a random forest.",
        "",
        "```python\n\n```",
        b"import shutil",
        12345,
    ],
    ids=[
        "the-cached-twin", "over-long-prose-after-the-fence", "over-long-trailing-spaces",
        "over-long-trailing-newlines", "trailing-whitespace", "leading-and-crlf-whitespace", "crlf",
        "lone-cr", "tilde-fence", "lone-surrogate", "no-code", "empty", "empty-fence", "bytes", "int",
    ],
)
def test_the_cached_env_grades_every_action_as_the_env_does(
    twin_envs: tuple[KaggleEnv, KaggleEnv], action: Any
) -> None:
    """The cache found an over-long twin of a cached solution and served its ``valid`` grade (0.588)
    where the env says ``malformed`` (0): the env's own checks now run before any lookup."""
    plain, cached = twin_envs
    observation, reward, _, _, info = plain.step(action)
    cached_observation, cached_reward, _, _, cached_info = cached.step(action)
    assert _results(cached_info, cached_reward, cached_observation) == _results(info, reward, observation)


class _LoadedOnce:
    """The real sandbox on a host that is overloaded for the first run: that run gets a tenth of its time
    limit (as a solution does when other jobs take its CPU); later runs get the requested limit."""

    def __init__(self, inner: Sandbox) -> None:
        self.inner, self.name, self.runs = inner, inner.name, 0

    def run(self, request: ExecutionRequest) -> ExecutionResult:
        self.runs += 1
        if self.runs == 1:
            request = dataclasses.replace(request, timeout_s=request.timeout_s / 10)
        return self.inner.run(request)

    def close(self) -> None:
        """The inner sandbox is closed by its fixture."""


class _FailsOnce:
    """The real sandbox whose infrastructure fails on the first run (it cannot be made to fail on demand
    for real, so this raises the error a broken container runtime raises); later runs are real."""

    def __init__(self, inner: Sandbox) -> None:
        self.inner, self.name, self.runs = inner, inner.name, 0

    def run(self, request: ExecutionRequest) -> ExecutionResult:
        self.runs += 1
        if self.runs == 1:
            raise SandboxError("container runtime vanished")
        return self.inner.run(request)

    def close(self) -> None:
        """The inner sandbox is closed by its fixture."""


@pytest.mark.integration
def test_a_load_induced_timeout_is_executed_again_not_replayed_as_a_failure(
    concrete: Competition, strict_bubblewrap: BubblewrapSandbox
) -> None:
    sandbox = _LoadedOnce(strict_bubblewrap)
    meter, cache = ComputeMeter(), ExecutionCache()
    env = CachedKaggleEnv(meter, cache, competition=concrete, sandbox=sandbox, max_turns=3, timeout_s=5.0)
    env.reset(seed=0)
    slow = COPY_SAMPLE.replace("import shutil", "import shutil, time\ntime.sleep(1.0)")
    statuses = [env.step(slow)[4]["status"] for _ in range(3)]
    assert statuses == ["timeout", "valid", "valid"]
    assert sandbox.runs == 2 and meter.hits == 1 and len(cache) == 1


@pytest.mark.integration
def test_an_unknown_outcome_is_executed_again_not_cached(
    concrete: Competition, strict_bubblewrap: BubblewrapSandbox
) -> None:
    sandbox = _FailsOnce(strict_bubblewrap)
    meter, cache = ComputeMeter(), ExecutionCache()
    env = CachedKaggleEnv(meter, cache, competition=concrete, sandbox=sandbox, max_turns=2)
    env.reset(seed=0)
    first, second = (env.step(COPY_SAMPLE)[4] for _ in range(2))
    assert first["status"] == "sandbox_error" and first["reward_unknown"]
    assert second["status"] == "valid" and sandbox.runs == 2 and meter.hits == 0


@pytest.mark.integration
def test_a_cache_written_with_the_old_key_format_is_not_served(
    concrete: Competition, strict_bubblewrap: BubblewrapSandbox
) -> None:
    meter, cache = ComputeMeter(), ExecutionCache()
    env = CachedKaggleEnv(meter, cache, competition=concrete, sandbox=strict_bubblewrap, max_turns=1)
    code = "\n".join(COPY_LINES) + "\n"
    old_key = hashlib.sha256(repr((concrete.id, code, env._settings)).encode()).hexdigest()  # format 1
    forged = Outcome(status="valid", score=0.0, position=1.0, extra={"cpu_s": 1.0})
    with pytest.warns(RuntimeWarning, match="1 of 1 cached executions"):
        cache.load_state_dict({old_key: (forged, 1.0)})
    assert len(cache) == 0
    env.reset(seed=0)
    info = env.step(COPY_SAMPLE)[4]
    assert info["status"] == "valid" and info["score"] != 0.0 and meter.hits == 0


def test_a_checkpointed_cache_of_the_current_format_is_restored_whole() -> None:
    cache = ExecutionCache()
    cache.put(ExecutionCache.key("f" * 64, "print(1)", ("local", 60.0)), Outcome(status="valid"), cpu_s=2.0)
    restored = ExecutionCache()
    restored.load_state_dict(cache.state_dict())
    assert restored.state_dict() == cache.state_dict() and len(restored) == 1


def test_a_cpu_clock_charges_this_process_cpu_not_the_time_spent_waiting() -> None:
    clock = CpuClock()
    with clock.measure():
        time.sleep(0.3)
    assert clock.wall_s >= 0.3
    assert clock.cpu_s < 0.1, "sleeping burns no CPU: a loaded machine's waiting is not charged"


def _burn(cpu_s: float) -> None:
    """Spin until the calling thread has used ``cpu_s`` CPU-seconds of its own."""
    end = time.thread_time() + cpu_s
    while time.thread_time() < end:
        pass


def test_a_cpu_clock_charges_the_work_of_every_thread_of_this_process() -> None:
    clock = CpuClock()
    with clock.measure():
        worker = threading.Thread(target=_burn, args=(0.2,))
        worker.start()
        worker.join()
    assert clock.cpu_s >= 0.2, "torch's intra-op threads are charged like the calling thread"


class _BurningPolicy:
    """A policy whose sampling costs 0.05 CPU-seconds; it echoes the contexts it was given."""

    def act(self, observations: Any, infos: Any, contexts: Any = None) -> list[Any]:
        _burn(0.05)
        return list(contexts) if contexts is not None else list(observations)


class _BurningWorldModel:
    """A world model whose prediction costs 0.05 CPU-seconds and fails on its second batch."""

    name = "burner"

    def __init__(self) -> None:
        self.calls = 0
        self.observed: list[Any] = []

    def predict(self, queries: Any) -> list[None]:
        self.calls += 1
        _burn(0.05)
        if self.calls == 2:
            raise RuntimeError("the world model server went away")
        return [None] * len(queries)

    def observe(self, queries: Any, rewards: Any) -> None:
        self.observed.append((queries, rewards))


def test_policy_sampling_and_world_model_predictions_are_charged_even_when_they_fail() -> None:
    sample, predict = CpuClock(), CpuClock()
    policy = CpuTimedPolicy(_BurningPolicy(), sample)
    assert policy.act(["o1", "o2"], [{}, {}], contexts=["c1", "c2"]) == ["c1", "c2"]
    assert sample.cpu_s >= 0.05
    inner = _BurningWorldModel()
    world_model = CpuTimedWorldModel(inner, predict)
    assert world_model.name == "burner" and world_model.predict(["q"]) == [None]
    with pytest.raises(RuntimeError, match="went away"):
        world_model.predict(["q"])
    assert predict.cpu_s >= 0.1, "a failed batch cost CPU too"
    world_model.observe(["q"], [0.5])  # everything but predict is the model's own
    assert inner.observed == [(["q"], [0.5])]
    restored = CpuClock()
    restored.load_state_dict(predict.state_dict())
    assert restored == predict


class _WritesOneDesign:
    """The design agent's default design on every episode (a real, cheap solution)."""

    def __init__(self, competition: Competition) -> None:
        self.action = design_action(Design(model="linear"), competition)

    def act(self, observations: Any, infos: Any, contexts: Any = None) -> list[str]:
        return [self.action] * len(observations)


@pytest.mark.integration
def test_an_evaluation_episode_lost_to_the_infrastructure_is_excluded_and_counted_never_zero(
    concrete: Competition, strict_bubblewrap: BubblewrapSandbox
) -> None:
    result = evaluate_policy(
        _WritesOneDesign(concrete),
        [concrete],
        samples=2,
        max_turns=1,
        sandbox=_FailsOnce(strict_bubblewrap),  # the first episode's only execution fails
        timeout_s=60.0,
        memory_mb=1024,
        workers=1,
    )
    first, second = result.positions
    assert first is None and second is not None and second > 0
    assert result.unknown == 1 and result.episodes == 2
    assert result.position == second, "the unknown episode is excluded from the mean, not scored 0"
    assert result.valid == 1.0 and result.position_se is None
    metrics = result.metrics()
    assert metrics["eval/unknown"] == 1.0 and metrics["eval/position"] == second
    assert "(2 episodes, 1 unknown: excluded)" in result.held_out(0).text()
