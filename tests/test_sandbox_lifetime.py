"""Nothing outlives its run: kill a sandbox's owner at random points; nothing survives the next start.

Each case starts a real owner process (a Python subprocess holding a real bubblewrap sandbox, warm or
cold), SIGKILLs it at a random moment of one phase (start-up, mid-run, warm-pool refill), starts a
new backend (its start-up sweep), and checks that no process of the run, no tmpfs mount, no cgroup
and no file of the dead owner is left. The solution sleeps for ten minutes, so a survivor is seen.
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
from wmrl_envs.sandbox import BubblewrapSandbox, ExecutionRequest, WarmSandbox
from wmrl_envs.sandbox.lifetime import owner_alive, owner_tag, parse_owner, sweep_stale
from wmrl_envs.sandbox.limits import sandbox_cgroup_parents
from wmrl_envs.sandbox.process import ManagedProcess

pytestmark = pytest.mark.integration

OWNER = """
import sys
from wmrl_envs.sandbox import BubblewrapSandbox, ExecutionRequest, WarmSandbox
phase, token = sys.argv[1], sys.argv[2]
request = ExecutionRequest(code="import time\\nopen('submission.csv', 'w').write('x')\\ntime.sleep(600)\\n",
                           timeout_s=900, env={"WMRL_TEST_TOKEN": token})
if phase == "refill":
    sandbox = WarmSandbox(BubblewrapSandbox(), pool_size=2, preload=("json",))
    sandbox.warm_up(request, wait=True)
    print("phase", flush=True)
    sandbox.run(ExecutionRequest(code="pass", timeout_s=60, env={"WMRL_TEST_TOKEN": token}))
    sandbox.run(request)
else:
    print("phase", flush=True)
    sandbox = BubblewrapSandbox()
    if phase == "mid-run":
        print("running", flush=True)
    sandbox.run(request)
"""

WINDOWS = {"start-up": (0.0, 0.4), "mid-run": (0.3, 1.5), "refill": (0.0, 0.6)}
"""Phase -> (earliest, latest) kill delay in seconds after the phase begins."""


@pytest.fixture(scope="module", autouse=True)
def _full_isolation() -> None:
    try:
        BubblewrapSandbox(strict=True).close()
    except IsolationUnavailableError as exc:
        pytest.skip(f"full bubblewrap isolation unavailable here: {exc}")


@pytest.fixture()
def owner_tmp() -> Iterator[Path]:
    """A private TMPDIR for the owner that the sandbox's unprivileged uid can traverse (pytest's is 0700)."""
    directory = Path(tempfile.mkdtemp(prefix="wmrl-lifetime-test-"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def _processes_with(token: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"WMRL_TEST_TOKEN={token}".encode() in environ:
            found.append(int(entry.name))
    return found


def _left_behind(tag: str, tmp: Path) -> list[str]:
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
              if f"wmrl-run-{tag}-" in line]
    groups = [str(child) for parent in sandbox_cgroup_parents() for child in parent.glob(f"wmrl-run-{tag}-*")]
    files = [str(path) for path in tmp.iterdir() if tag in path.name]
    return mounts + groups + files


def _kill_owner_during(phase: str, delay_s: float, tmp: Path) -> tuple[str, str]:
    token = f"{phase}-{os.getpid()}-{random.randrange(10**9)}"
    env = {**os.environ, "TMPDIR": str(tmp)}
    owner = subprocess.Popen([sys.executable, "-c", OWNER, phase, token], stdout=subprocess.PIPE, env=env)
    tag = owner_tag(owner.pid)
    assert owner.stdout is not None
    assert owner.stdout.readline() == b"phase\n"
    if phase == "mid-run":
        assert owner.stdout.readline() == b"running\n"
    time.sleep(delay_s)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    return token, tag


@pytest.mark.parametrize("phase", sorted(WINDOWS))
@pytest.mark.parametrize("draw", range(2))
def test_nothing_survives_a_killed_owner(phase: str, draw: int, owner_tmp: Path) -> None:
    low, high = WINDOWS[phase]
    delay = random.Random(f"{phase}-{draw}").uniform(low, high)
    token, tag = _kill_owner_during(phase, delay, owner_tmp)
    BubblewrapSandbox().close()  # the next start-up: its sweep
    sweep_stale(owner_tmp)  # the owner created its dirs under its own TMPDIR
    deadline = time.monotonic() + 10.0
    while _processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_with(token) == [], f"a process of the run survived (killed after {delay:.2f} s)"
    assert _left_behind(tag, owner_tmp) == [], f"killed after {delay:.2f} s of {phase}"


def test_an_orphan_dies_with_its_owner_even_before_any_sweep(owner_tmp: Path) -> None:
    """Mid-run, the death signal alone ends the solution: no new start-up is needed for that."""
    token, _ = _kill_owner_during("mid-run", 1.0, owner_tmp)
    deadline = time.monotonic() + 10.0
    while _processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_with(token) == []
    sweep_stale(owner_tmp)


def test_a_child_whose_owner_is_gone_before_the_signal_is_armed_never_starts() -> None:
    guard = ["/bin/sh", "-c", 'test "$PPID" = "$0" || exit 97; exec "$@"', "1", "/bin/echo", "ran"]
    process = ManagedProcess(guard, env={}, cwd="/", max_output_bytes=100)
    outcome = process.wait(10.0)
    assert (outcome.returncode, outcome.stdout) == (97, "")


def test_sweep_leaves_the_resources_of_live_owners_alone(tmp_path: Path) -> None:
    mine = tmp_path / f"wmrl-run-{owner_tag()}-keep"
    mine.mkdir()
    dead = tmp_path / "wmrl-outputs-999999999_1-gone"
    dead.mkdir()
    report = sweep_stale(tmp_path)
    assert mine.exists() and not dead.exists() and str(dead) in report.paths
    assert parse_owner(mine.name) is not None and owner_alive(*parse_owner(mine.name))  # type: ignore[misc]


def test_closing_a_warm_pool_during_its_refill_leaks_nothing(tmp_path: Path) -> None:
    before = {path.name for path in Path("/tmp").glob(f"wmrl-run-{owner_tag()}-*")}
    sandbox = WarmSandbox(BubblewrapSandbox(), pool_size=3, preload=("json",))
    request = ExecutionRequest(code="pass", timeout_s=30)
    sandbox.warm_up(request)  # three workers starting in the background
    sandbox.close()
    after = {path.name for path in Path("/tmp").glob(f"wmrl-run-{owner_tag()}-*")}
    pattern = f"wmrl-run-{owner_tag()}-*"
    groups = [child for parent in sandbox_cgroup_parents() for child in parent.glob(pattern)]
    assert after - before == set() and groups == []
