"""A run ends by itself when its trainer is SIGKILLed, without waiting for any later backend start-up.

bubblewrap: the trainer is killed 0-150 ms into a run of ``while True: pass``, the window in which the
sandbox's pid 1 (bubblewrap's init) has been cloned but has not yet armed its own parent-death
signal; before the lifeline about 1 try in 20 left it running with the solution under it, until some
later start-up swept its cgroup. Docker: a sleeping solution (which a CPU-time cap never ends) must
not outlive its container's own wall-clock limit. Both start real trainers as subprocesses; no
backend is started between the kill and the check (the sweep in the clean-up only tidies up after a
failure).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from wmrl_algos.errors import IsolationUnavailableError
from wmrl_envs.sandbox import BubblewrapSandbox
from wmrl_envs.sandbox.lifetime import owner_tag, sweep_stale
from wmrl_envs.sandbox.limits import sandbox_cgroup_parents

pytestmark = pytest.mark.integration

LIMIT_S = 2.0
TRIES = 20
SETTLE_S = 3.0
"""Seconds past the run's limit by which nothing of a killed trainer's run may be left."""

TRAINER = """
import sys
from wmrl_envs.sandbox import ExecutionRequest, make_sandbox
backend, token, code, limit = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
sandbox = make_sandbox(backend)
print("running", flush=True)
sandbox.run(ExecutionRequest(code=code, timeout_s=limit, env={"WMRL_TEST_TOKEN": token}))
"""


@pytest.fixture()
def trainer_tmp() -> Iterator[Path]:
    """A private TMPDIR for the trainers that the sandbox's unprivileged uid can traverse."""
    directory = Path(tempfile.mkdtemp(prefix="wmrl-orphan-test-"))
    directory.chmod(0o755)
    yield directory
    sweep_stale(directory)
    shutil.rmtree(directory, ignore_errors=True)


def _start_trainer(backend: str, code: str, tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    token = f"orphan-{os.getpid()}-{random.randrange(10**9)}"
    trainer = subprocess.Popen([sys.executable, "-c", TRAINER, backend, token, code, str(LIMIT_S)],
                               stdout=subprocess.PIPE, env={**os.environ, "TMPDIR": str(tmp)})
    assert trainer.stdout is not None and trainer.stdout.readline() == b"running\n"
    return trainer, token


def _run_processes(token: str, tag: str) -> list[int]:
    """Processes carrying the run's token, or members of any cgroup of the trainer's runs."""
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if f"WMRL_TEST_TOKEN={token}".encode() in (entry / "environ").read_bytes():
                    found.add(int(entry.name))
            except OSError:
                continue
    for parent in sandbox_cgroup_parents():
        for group in parent.glob(f"wmrl-run-{tag}-*"):
            try:
                found |= {int(pid) for pid in (group / "cgroup.procs").read_text().split()}
            except OSError:
                continue
    return sorted(found)


@pytest.mark.long
def test_a_trainer_killed_in_the_first_150_ms_of_a_run_leaves_no_process(trainer_tmp: Path) -> None:
    try:
        BubblewrapSandbox(strict=True).close()
    except IsolationUnavailableError as exc:
        pytest.skip(f"full bubblewrap isolation unavailable here: {exc}")
    survivors = {}
    for attempt in range(TRIES):
        offset = random.Random(f"orphan-{attempt}").uniform(0.0, 0.15)
        trainer, token = _start_trainer("local", "while True:\n    pass\n", trainer_tmp)
        tag = owner_tag(trainer.pid)
        time.sleep(offset)
        trainer.send_signal(signal.SIGKILL)
        trainer.wait()
        deadline = time.monotonic() + LIMIT_S + SETTLE_S
        while _run_processes(token, tag) and time.monotonic() < deadline:
            time.sleep(0.05)
        if left := _run_processes(token, tag):
            survivors[f"{offset * 1000:.0f} ms"] = left
    assert survivors == {}, f"{len(survivors)} of {TRIES} killed trainers left processes running: {survivors}"


@pytest.mark.docker
def test_a_sleeping_container_of_a_killed_trainer_ends_at_its_own_limit(trainer_tmp: Path) -> None:
    docker_adapter = pytest.importorskip("wmrl_adapters.docker")
    if not docker_adapter.engine_reachable():
        pytest.skip("no Docker engine reachable (run scripts/docker_engine.sh start)")
    trainer, _ = _start_trainer("docker", "import time\nwhile True:\n    time.sleep(1)\n", trainer_tmp)
    client = docker_adapter.docker_client()
    try:
        label = {"label": f"wmrl.owner={owner_tag(trainer.pid)}", "status": "running"}
        deadline = time.monotonic() + 30
        while not client.containers.list(filters=label, sparse=True) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.containers.list(filters=label, sparse=True), "the trainer's container never started"
        trainer.send_signal(signal.SIGKILL)
        trainer.wait()
        killed = time.monotonic()
        deadline = killed + LIMIT_S + docker_adapter.WALL_GRACE_S + SETTLE_S
        while client.containers.list(filters=label, sparse=True) and time.monotonic() < deadline:
            time.sleep(0.1)
        running = client.containers.list(filters=label, sparse=True)
        elapsed = time.monotonic() - killed
        assert running == [], f"the container still runs {elapsed:.1f} s after its trainer died"
    finally:
        for container in client.containers.list(all=True, filters={"label": label["label"]}, sparse=True):
            container.remove(force=True)
        client.close()
