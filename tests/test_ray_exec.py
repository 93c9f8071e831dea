"""Ray scale-out on a REAL local Ray cluster: a head node and two worker nodes, each its own raylet.

The cluster is started by ``ray.cluster_utils.Cluster`` (the same ``gcs_server`` / ``raylet``
processes ``ray start`` runs, one raylet per node with its own CPU count), chosen over ``ray start``
shell commands because a test can then kill exactly one node with SIGKILL and add a fresh one, and
nothing outside the test (ports, ``.ci/run`` steps) has to be prepared. The head holds no CPUs, so
every execution and actor runs on a worker node. Object stores are the minimum size (80 MB).
A killed *driver* is not tested here: the run resumes from its checkpoint with ``wmrl train --resume``
(tested with the trainer).
"""

from __future__ import annotations

import functools
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from wmrl_algos.errors import ConfigError, SandboxError
from wmrl_envs.ledger import CostLedger
from wmrl_envs.rollouts import GroupedRollout, RolloutConfig, RolloutTask
from wmrl_envs.toy import CostlyToyEnv, ToyContext, ToyWorldModel
from wmrl_envs.world_model import Prediction, WorldModelQuery
from wmrl_envs.wrapper import WorldModelWrapper, predict_batch

ray = pytest.importorskip("ray")
ray_exec = pytest.importorskip("wmrl_adapters.ray_exec")
RayExecutor, RayWorldModelPool = ray_exec.RayExecutor, ray_exec.RayWorldModelPool

# Classes and functions of this module travel to the workers by value (the workers cannot import tests/).
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

ROOT = Path(__file__).resolve().parents[1]
OBJECT_STORE_MB = 80
WORKERS = 2


class LocalCluster:
    """A head without CPUs plus worker nodes of one CPU each; keeps ``WORKERS`` of them alive."""

    def __init__(self) -> None:
        self.cluster = ray_exec.start_local_cluster(WORKERS, object_store_mb=OBJECT_STORE_MB)
        self.workers: list[Any] = list(self.cluster.worker_nodes)
        ray.init(address=self.cluster.address)

    def ensure_workers(self) -> None:
        while len(self.workers) < WORKERS:
            self.workers.append(
                self.cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE_MB * 1024 * 1024)
            )
        self.cluster.wait_for_nodes()

    def kill_node_running(self, worker_pid: int) -> str:
        """Kill the node whose worker process ``worker_pid`` is, as a dying machine would: all at once.

        SIGKILL the worker itself and the node's raylet and object store; returns the node id. (Killing
        only the raylet lets a worker that is mid-task finish and report before it notices.)
        """
        stat = Path(f"/proc/{worker_pid}/stat").read_text()
        raylet_pid = int(stat.rsplit(")", 1)[1].split()[1])  # the raylet starts its workers
        node = next(n for n in self.workers if n.all_processes["raylet"][0].process.pid == raylet_pid)
        self.workers.remove(node)
        os.kill(worker_pid, signal.SIGKILL)
        self.cluster.remove_node(node, allow_graceful=False)
        return str(node.node_id)

    def worker_ids(self) -> set[str]:
        return {str(node.node_id) for node in self.workers}

    def shutdown(self) -> None:
        ray.shutdown()
        self.cluster.shutdown()


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    local = LocalCluster()
    try:
        yield local
    finally:
        local.shutdown()


@pytest.fixture
def live(cluster: LocalCluster) -> LocalCluster:
    """The cluster, with a fresh worker node added for any killed by an earlier test."""
    cluster.ensure_workers()
    return cluster


class MarkingToyEnv(CostlyToyEnv):
    """CostlyToyEnv that drops a file when a real step starts, so a test can kill a node mid-step."""

    def __init__(self, marks: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.marks = marks

    def step(self, action: np.ndarray) -> Any:
        Path(self.marks, f"{os.getpid()}-{time.monotonic_ns()}").touch()
        return super().step(action)


class Drift:
    """A deterministic policy that moves every trajectory a little each turn."""

    def act(self, observations: Sequence[np.ndarray], infos: Sequence[Mapping[str, Any]]) -> list[np.ndarray]:
        return [np.clip(obs[:2] + 0.25, -1.0, 1.0) for obs in observations]


def _interval(seconds: float) -> tuple[float, float]:
    start = time.time()
    time.sleep(seconds)
    return start, time.time()


def _mark_and_sleep(marks: str, seconds: float) -> int:
    Path(marks, f"{os.getpid()}-{time.monotonic_ns()}").touch()
    time.sleep(seconds)
    return os.getpid()


def _fail() -> None:
    raise ValueError("raised on the worker")


def _queries(n: int) -> list[WorldModelQuery]:
    return [WorldModelQuery(ToyContext(k, 2, 0, 4, 0.95), np.full(2, k / n)) for k in range(n)]


def _rollout(executor: Any, env_fn: Any, anchors: list[bool]) -> tuple[list[Any], CostLedger]:
    tasks = [RolloutTask(f"task{k}", {"task_id": k}) for k in range(len(anchors))]
    config = RolloutConfig(group_size=2, mode="simulate", max_turns=3)
    with GroupedRollout(env_fn, ToyWorldModel(), config, executor=executor) as rollout:
        groups = rollout.run(tasks, Drift(), anchors=anchors, seed=0)
        return groups, rollout.ledger


def _run_in_thread(fn: Any) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # the test thread re-raises it
            box["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    return thread, box


def _wait_for_marks(marks: Path, count: int, timeout_s: float = 60.0) -> int:
    """Wait until ``count`` real steps have started; returns the pid of the worker that started last.

    The last one is surely still running (a cold worker on a fresh node can start so late that the
    first execution has already finished).
    """
    deadline = time.monotonic() + timeout_s
    while len(list(marks.iterdir())) < count:
        assert time.monotonic() < deadline, f"fewer than {count} executions started within {timeout_s} s"
        time.sleep(0.05)
    latest = max(marks.iterdir(), key=lambda mark: int(mark.name.split("-")[1]))  # system-wide clock
    return int(latest.name.split("-")[0])


def test_bad_resources_are_refused_naming_the_value_before_any_cluster_is_contacted() -> None:
    with pytest.raises(ConfigError, match="num_cpus=0"):
        RayExecutor("nowhere:1", num_cpus=0)
    with pytest.raises(ConfigError, match="max_in_flight=0"):
        RayExecutor("nowhere:1", max_in_flight=0)
    with pytest.raises(ConfigError, match="num_actors=0"):
        RayWorldModelPool(ToyWorldModel, num_actors=0, address="nowhere:1")


def test_without_ray_the_module_names_the_extra_and_nothing_else_imports_ray() -> None:
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "import wmrl_envs, wmrl_algos, wmrl_adapters, wmrl_envs.rollouts\n"
        "try:\n    import wmrl_adapters.ray_exec\nexcept ImportError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "pip install 'wmrl[ray]'" in out.stdout


@pytest.mark.integration
@pytest.mark.slow
def test_anchor_executions_run_on_worker_nodes_and_match_a_local_run_step_for_step(
    live: LocalCluster,
) -> None:
    # Through gymnasium.make: a chain of Gymnasium wrappers whose state must come back too.
    env_fn = functools.partial(gym.make, "wmrl/CostlyToy-v0", step_seconds=0.05)
    local_groups, local_ledger = _rollout(None, env_fn, [True, False])
    with RayExecutor(num_cpus=1, memory_mb=64) as executor:
        assert executor.max_in_flight == WORKERS  # the cluster's CPUs / the request
        ray_groups, ray_ledger = _rollout(executor, env_fn, [True, False])
        stats = executor.stats
    # Three turns each: the stepped env state (turn counter) came back to the driver every time.
    for ours, theirs in zip(ray_groups, local_groups, strict=True):
        assert ours.real == theirs.real and ours.predicted == theirs.predicted
        for a, b in zip(ours.trajectories, theirs.trajectories, strict=True):
            assert len(a.actions) == len(b.actions) == 3
            np.testing.assert_allclose(np.stack(a.observations), np.stack(b.observations))
    assert ray_groups[0].real is not None and all(r is not None for r in ray_groups[0].real)
    assert ray_ledger.real_steps == local_ledger.real_steps == stats.completed == 6
    assert stats.lost == 0 and set(stats.nodes) <= live.worker_ids()
    assert stats.remote_seconds >= 6 * 0.05 and stats.overhead_seconds_per_task is not None


class Unknowing:
    """A world model that never knows: the anchor step's reward must be the real one regardless."""

    name = "unknowing"

    def predict(self, queries: Sequence[WorldModelQuery]) -> list[Prediction]:
        return [Prediction(reward=None) for _ in queries]


SAMPLE_SUBMISSION = (
    "```python\nimport shutil\nshutil.copy('input/sample_submission.csv', 'submission.csv')\n```"
)


def _kaggle_anchor_step(env: WorldModelWrapper[Any, Any], executor: Any) -> tuple[float, dict[str, Any]]:
    env.reset(seed=0, options={"anchor": True})
    pending = env.prepare_step(SAMPLE_SUBMISSION)
    executor.submit(env.execute, pending).result()
    _, reward, _, _, info = env.finish_step(pending, None)
    return float(reward), info


@pytest.mark.integration
@pytest.mark.slow
def test_a_real_kaggle_execution_is_sandboxed_and_graded_on_a_worker_and_the_driver_env_advances(
    live: LocalCluster,
) -> None:
    from wmrl_envs.kaggle.env import KaggleEnv

    env = WorldModelWrapper(KaggleEnv("concrete-strength", sandbox="local"), Unknowing())
    with RayExecutor(memory_mb=256) as executor:
        reward, info = _kaggle_anchor_step(env, executor)
        stats = executor.stats
    assert info["status"] == "valid" and 0 < reward == info["wmrl"]["real"] == info["ladder_value"] <= 1
    assert env.unwrapped.world_model_context().turn == 1  # the stepped state came back
    assert set(stats.nodes) <= live.worker_ids() and env.ledger.real_steps == 1
    env.close()


@pytest.mark.integration
@pytest.mark.slow
def test_with_a_ray_sandbox_only_the_sandbox_run_travels_and_an_unpicklable_env_stays_home(
    live: LocalCluster,
) -> None:
    from wmrl_envs.kaggle.env import KaggleEnv

    sandbox = ray_exec.RaySandbox("local")
    env = WorldModelWrapper(KaggleEnv("concrete-strength", sandbox=sandbox), Unknowing())
    env.unwrapped.shared_meter_lock = threading.Lock()  # like a trainer's meter: cannot be pickled
    with RayExecutor() as executor:
        reward, info = _kaggle_anchor_step(env, executor)
        assert executor.stats.submitted == 1 and executor.stats.completed == 0  # no env was shipped
    assert info["status"] == "valid" and 0 < reward == info["ladder_value"] <= 1
    assert sandbox.stats.completed == 1 and set(sandbox.stats.nodes) <= live.worker_ids()
    sandbox.close()
    plain = WorldModelWrapper(KaggleEnv("concrete-strength", sandbox="local"), Unknowing())
    plain.unwrapped.shared_meter_lock = threading.Lock()
    with RayExecutor() as executor, pytest.raises(ConfigError, match="RaySandbox"):
        _kaggle_anchor_step(plain, executor)
    plain.close()


@pytest.mark.integration
@pytest.mark.slow
def test_back_pressure_never_runs_more_than_max_in_flight_at_once(live: LocalCluster) -> None:
    with RayExecutor(max_in_flight=1) as executor:
        intervals = sorted(f.result() for f in [executor.submit(_interval, 0.3) for _ in range(3)])
    assert all(prev[1] <= nxt[0] for prev, nxt in zip(intervals, intervals[1:], strict=False))  # serial
    with RayExecutor(max_in_flight=2) as executor:
        start = time.perf_counter()
        futures = [executor.submit(_interval, 1.0) for _ in range(2)]
        submitted = time.perf_counter() - start
        third = executor.submit(_interval, 0.0)
        blocked = time.perf_counter() - start
        assert third.result() and any(f.done() for f in futures)  # a slot freed first
    assert submitted < 0.5 <= 1.0 <= blocked  # two slots: only the third submission waited


@pytest.mark.integration
@pytest.mark.slow
def test_any_callable_runs_on_a_worker_and_its_own_exception_reaches_the_driver(live: LocalCluster) -> None:
    with RayExecutor() as executor:
        assert executor.submit(os.getpid).result() != os.getpid()
        error = executor.submit(_fail).exception()
    assert isinstance(error, ValueError) and "raised on the worker" in str(error)
    assert executor.stats.lost == 0


@pytest.mark.integration
@pytest.mark.slow
def test_worker_node_killed_mid_execution_is_retried_elsewhere_and_counted_once(
    live: LocalCluster, tmp_path: Path
) -> None:
    env_fn = functools.partial(MarkingToyEnv, str(tmp_path), step_seconds=2.0, max_turns=1)
    with RayExecutor(max_retries=1) as executor:
        thread, box = _run_in_thread(lambda: _rollout(executor, env_fn, [True]))
        worker_pid = _wait_for_marks(tmp_path, WORKERS)  # both executions run, one per worker node
        killed = live.kill_node_running(worker_pid)
        thread.join(timeout=120)
        stats = executor.stats
    assert "error" not in box, box.get("error")
    groups, ledger = box["result"]
    assert groups[0].real is not None and all(math.isfinite(r) for r in groups[0].real)
    assert len(list(tmp_path.iterdir())) == WORKERS + 1  # the killed execution ran again
    assert stats.completed == 2 and stats.lost == 0 and killed not in stats.nodes
    assert ledger.real_steps == 2 and ledger.anchor_episodes == 2  # the retry is not a second step


@pytest.mark.integration
@pytest.mark.slow
def test_worker_node_killed_without_retries_gives_an_unknown_counted_step_and_the_driver_goes_on(
    live: LocalCluster, tmp_path: Path
) -> None:
    env_fn = functools.partial(MarkingToyEnv, str(tmp_path), step_seconds=2.0, max_turns=1)
    with RayExecutor(max_retries=0) as executor:
        thread, box = _run_in_thread(lambda: _rollout(executor, env_fn, [True]))
        killed = live.kill_node_running(_wait_for_marks(tmp_path, WORKERS))
        thread.join(timeout=120)
        assert "error" not in box, box.get("error")
        groups, ledger = box["result"]
        assert executor.stats.lost == 1 and executor.stats.completed == 1
        assert killed not in executor.stats.nodes
        assert executor.submit(os.getpid).result() > 0  # the executor still works on the survivor
    reals = [t.real[0] for t in groups[0].trajectories]
    assert sorted(r is None for r in reals) == [False, True]  # unknown, never 0
    lost = next(t for t in groups[0].trajectories if t.real[0] is None)
    assert math.isnan(lost.rewards[0]) and len(lost.actions) == 1
    assert ledger.real_steps == 2


@pytest.mark.integration
@pytest.mark.slow
def test_a_lost_plain_callable_raises_sandbox_error_and_is_counted(
    live: LocalCluster, tmp_path: Path
) -> None:
    with RayExecutor(max_retries=0) as executor:
        future = executor.submit(_mark_and_sleep, str(tmp_path), 3.0)
        live.kill_node_running(_wait_for_marks(tmp_path, 1))
        error = future.exception(timeout=120)
        assert isinstance(error, SandboxError) and "result is unknown" in str(error)
        assert executor.stats.lost == 1 and executor.stats.completed == 0


@pytest.mark.integration
@pytest.mark.slow
def test_world_model_pool_splits_a_batch_across_actors_and_predicts_like_the_local_model(
    live: LocalCluster,
) -> None:
    factory = functools.partial(ToyWorldModel, bias=0.1, noise=0.05, seconds_per_query=0.2)
    queries = _queries(8)
    with RayWorldModelPool(factory, num_actors=2, num_cpus=0.5) as pool:
        assert pool.name == "toy"
        pool.predict(queries[:2])  # warm
        start = time.perf_counter()
        predictions = pool.predict(queries)
        seconds = time.perf_counter() - start
    assert [p.reward for p in predictions] == [p.reward for p in factory().predict(queries)]
    assert seconds < 0.75 * 8 * 0.2  # two actors worked on halves at once


@pytest.mark.integration
@pytest.mark.slow
def test_killed_world_model_actor_is_restarted_and_its_chunk_retried(live: LocalCluster) -> None:
    factory = functools.partial(ToyWorldModel, seconds_per_query=0.5)
    queries = _queries(4)
    with RayWorldModelPool(factory, num_actors=2, num_cpus=0.5, max_restarts=1) as pool:
        thread, box = _run_in_thread(lambda: pool.predict(queries))
        time.sleep(0.3)
        ray.kill(pool.actors[0], no_restart=False)
        thread.join(timeout=120)
        assert "error" not in box, box.get("error")
        assert [p.reward for p in box["result"]] == [p.reward for p in factory().predict(queries)]
        assert pool.lost_queries == 0
        assert len(pool.predict(queries)) == 4  # the restarted actor serves the next step


@pytest.mark.integration
@pytest.mark.slow
def test_killed_actor_without_restarts_gives_unknown_predictions_for_its_chunk_only(
    live: LocalCluster,
) -> None:
    factory = functools.partial(ToyWorldModel, seconds_per_query=0.5)
    queries = _queries(4)
    ledger = CostLedger()
    with RayWorldModelPool(factory, num_actors=2, num_cpus=0.5, max_restarts=0) as pool:
        thread, box = _run_in_thread(lambda: predict_batch(pool, queries, ledger=ledger))
        time.sleep(0.3)
        ray.kill(pool.actors[0], no_restart=True)
        thread.join(timeout=120)
        assert "error" not in box, box.get("error")
        rewards = [p.reward for p in box["result"].predictions]
        assert rewards[:2] == [None, None] and all(r is not None for r in rewards[2:])
        assert pool.lost_queries == 2 and ledger.unknown_predictions == 2


@pytest.mark.integration
@pytest.mark.slow
def test_a_factory_that_builds_no_world_model_is_refused(live: LocalCluster) -> None:
    with pytest.raises(ConfigError, match="not a WorldModel"):
        RayWorldModelPool(object, num_cpus=0.5)


@pytest.mark.integration
@pytest.mark.slow
def test_wmrl_train_with_ray_runs_its_anchor_executions_on_the_worker_nodes(
    live: LocalCluster, tmp_path: Path
) -> None:
    from wmrl_adapters.train.kaggle.config import TrainConfig
    from wmrl_adapters.train.kaggle.trainer import Trainer

    config = TrainConfig(
        algo="wmrl", world_model="rubric", steps=1, groups=2, group_size=2, max_turns=1,
        anchor_fraction=0.5, competitions="titanic-survival", eval_samples=0, warm=0, progress=False,
        cache=False,  # every anchor trajectory really runs, so the count below is exact
    )
    trainer = Trainer(config, tmp_path / "run", ray=live.cluster.address)
    assert isinstance(trainer.sandbox, ray_exec.RaySandbox)
    summary = trainer.run()
    assert summary["final"]["compute/real_executions"] == 2  # the one anchor group of 2, for real
    stats = trainer.sandbox.stats
    assert stats.completed == 2 and stats.lost == 0
    assert set(stats.nodes) <= live.worker_ids()  # never on the head (it offers no CPUs)
