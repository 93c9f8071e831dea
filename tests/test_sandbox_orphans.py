"""A run ends by itself when its trainer is SIGKILLed, without waiting for any later backend start-up.

bubblewrap: the trainer is killed 0-150 ms into a run of ``while True: pass``, the window in which the
sandbox's pid 1 (bubblewrap's init) has been cloned but has not yet armed its own parent-death
signal; before the lifeline about 1 try in 20 left it running with the solution under it, until some
later start-up swept its cgroup (and CI once saw 1 in 20 survive the lifeline too, at 29 ms, so a cold
run now also carries its own wall clock: nothing may be left ``LIMIT_S + WALL_GRACE_S + SETTLE_S``
after the kill). Docker: a sleeping solution (which a CPU-time cap never ends) must
not outlive its container's own wall-clock limit. Both start real trainers as subprocesses; no
backend is started between the kill and the check (the sweep in the clean-up only tidies up after a
failure).
"""

from __future__ import annotations

import ast
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
from wmrl_envs.sandbox.lifetime import WALL_GRACE_S, owner_tag, sweep_stale
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
        deadline = time.monotonic() + LIMIT_S + WALL_GRACE_S + SETTLE_S
        while _run_processes(token, tag) and time.monotonic() < deadline:
            time.sleep(0.05)
        if left := _run_processes(token, tag):
            survivors[f"{offset * 1000:.0f} ms"] = left
    assert survivors == {}, f"{len(survivors)} of {TRIES} killed trainers left processes running: {survivors}"


OWNER = """
import subprocess, sys
from wmrl_envs.sandbox.lifetime import lifeline_fd
from wmrl_envs.sandbox.limits import RunCgroups, cgroup_version
lifeline_fd()  # the first lifeline starts the reaper
groups = RunCgroups(256, 16, version=cgroup_version() or 1)
join = "".join(f"echo $$ > {path}; " for path in groups.procs_files)
# Stands in for bubblewrap's init stuck before its death signal: in the run's cgroup, nothing tying it
# to the owner.
stuck = subprocess.Popen(["/bin/sh", "-c", join + "exec sleep 1000"], start_new_session=True)
while str(stuck.pid) not in groups.procs_files[0].read_text().split():
    pass
print("stuck", flush=True)
sys.stdin.read()
"""


def test_a_killed_owners_reaper_kills_what_its_runs_left_in_their_cgroups(trainer_tmp: Path) -> None:
    if os.geteuid() != 0 or not sandbox_cgroup_parents():
        pytest.skip("per-run cgroups need root and a cgroup hierarchy")
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             env={**os.environ, "TMPDIR": str(trainer_tmp)})
    assert owner.stdout is not None and owner.stdout.readline() == b"stuck\n"
    tag = owner_tag(owner.pid)
    assert _run_processes("-", tag), "the stand-in never joined the run's cgroup"
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    deadline = time.monotonic() + SETTLE_S
    while _run_processes("-", tag) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _run_processes("-", tag) == []


def test_a_bubblewrap_solution_runs_under_its_own_wall_clock(trainer_tmp: Path) -> None:
    """The last resort behind the death signals and the lifeline: the solution's parent inside the
    sandbox is ``timeout --signal=KILL`` at the run's limit plus the grace, so an orphaned solution ends
    by itself."""
    from wmrl_envs.sandbox import ExecutionRequest

    try:
        sandbox = BubblewrapSandbox(strict=True)
    except IsolationUnavailableError as exc:
        pytest.skip(f"full bubblewrap isolation unavailable here: {exc}")
    code = "import os\nprint(open(f'/proc/{os.getppid()}/cmdline').read().split(chr(0))[:3])\n"
    try:
        result = sandbox.run(ExecutionRequest(code=code, timeout_s=7.5))
    finally:
        sandbox.close()
    assert result.status == "ok", result
    clock = ast.literal_eval(result.stdout.strip())
    assert [Path(clock[0]).name, *clock[1:]] == ["timeout", "--signal=KILL", f"{7.5 + WALL_GRACE_S}s"]


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
