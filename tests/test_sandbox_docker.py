"""The Docker backend against a real engine: lock-down settings, layout, image built from this host.

Skips, with the reason, only when no engine answers (CI starts one with scripts/docker_engine.sh).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from wmrl_algos.errors import ConfigError
from wmrl_envs.sandbox import ExecutionRequest
from wmrl_envs.sandbox.lifetime import owner_tag

pytestmark = [pytest.mark.docker, pytest.mark.integration]

docker_adapter = pytest.importorskip("wmrl_adapters.docker", reason="docker SDK not installed")

if not docker_adapter.engine_reachable():
    pytest.skip("no Docker engine reachable (set DOCKER_HOST or run scripts/docker_engine.sh start)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[docker_adapter.DockerSandbox]:
    backend = docker_adapter.DockerSandbox(strict=True)
    yield backend
    backend.close()


def test_layout_and_submission_match_the_other_backends(sandbox: docker_adapter.DockerSandbox,
                                                        tmp_path: Path) -> None:
    data = tmp_path / "train.csv"
    data.write_text("a\n1\n")
    code = ("import os; print(os.getcwd(), sorted(os.listdir('.')), open('input/train.csv').read().strip())\n"
            "open('submission.csv', 'w').write('id\\n1\\n')")
    result = sandbox.run(ExecutionRequest(code=code, inputs={"train.csv": data}, timeout_s=60))
    assert result.status == "ok", result.stderr
    assert result.stdout.startswith("/sandbox ['input', 'solution.py'] a\n1\n")
    assert result.output is not None and result.output.read_text() == "id\n1\n"
    assert result.backend == "docker"


def test_container_is_locked_down(sandbox: docker_adapter.DockerSandbox) -> None:
    code = """
import os
lines = open('/proc/self/status').read().splitlines()
status = dict(line.split(':\\t', 1) for line in lines if ':\\t' in line)
print(os.getuid() >= 1000, status['CapEff'].strip(), status['NoNewPrivs'].strip())
try:
    open('/usr/x', 'w')
except OSError as exc:
    print('rootfs', type(exc).__name__)
print(sorted(os.listdir('/sys/class/net')) if os.path.exists('/sys/class/net') else ['lo'])
"""
    result = sandbox.run(ExecutionRequest(code=code, timeout_s=60))
    assert result.status == "ok", result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "True 0000000000000000 1"
    assert lines[1] == "rootfs OSError"
    assert lines[2] == "['lo']"


def test_ml_stack_from_the_host_is_in_the_image(sandbox: docker_adapter.DockerSandbox) -> None:
    code = "import pandas, sklearn.linear_model, lightgbm; print(pandas.DataFrame({'a': [1, 2]}).a.sum())"
    result = sandbox.run(ExecutionRequest(code=code, timeout_s=120))
    assert (result.status, result.stdout) == ("ok", "3\n"), result.stderr


def test_non_positive_cpu_quota_is_refused() -> None:
    with pytest.raises(ConfigError, match="cpus"):
        docker_adapter.DockerSandbox(cpus=0)


OWNER = """
import sys
from wmrl_adapters.docker import DockerSandbox
from wmrl_envs.sandbox import ExecutionRequest
sandbox = DockerSandbox(strict=True)
print("running", flush=True)
sandbox.run(ExecutionRequest(code="import time\\ntime.sleep(600)\\n", timeout_s=900))
"""


def _containers_of(tag: str) -> list[str]:
    client = docker_adapter.docker_client()
    try:
        # sparse: no per-container inspect, which races with the owner removing its finished containers
        listed = client.containers.list(all=True, filters={"label": f"wmrl.owner={tag}"}, sparse=True)
        return [str(c.id) for c in listed]
    finally:
        client.close()


def test_a_killed_owners_container_is_removed_by_the_next_start_up() -> None:
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, env=dict(os.environ))
    tag = owner_tag(owner.pid)
    assert owner.stdout is not None and owner.stdout.readline() == b"running\n"
    deadline = time.monotonic() + 30
    while not _containers_of(tag) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _containers_of(tag), "the owner's container never started"
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    time.sleep(1.0)
    assert _containers_of(tag), "the engine keeps the container after its owner died (the engine owns it)"
    docker_adapter.DockerSandbox(strict=True).close()  # the next start-up sweeps it
    assert _containers_of(tag) == []


def test_containers_carry_their_owner_and_an_entry_that_ends_them_at_their_limit(
    sandbox: docker_adapter.DockerSandbox,
) -> None:
    code = "print(open('/proc/1/cmdline', 'rb').read().split(b'\\0')[1:3], __import__('os').getppid())"
    result = sandbox.run(ExecutionRequest(code=code, timeout_s=20))
    limit = f"{20 + docker_adapter.WALL_GRACE_S}s".encode()
    expected = f"{[b'--signal=KILL', limit]} 1"
    assert result.stdout.strip() == expected, "timeout is pid 1, the solution its child"
    assert _containers_of(owner_tag()) == [], "a finished run's container is removed"


def test_seccomp_refuses_nested_namespaces_as_the_local_backend_does(
    sandbox: docker_adapter.DockerSandbox,
) -> None:
    code = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "print(libc.unshare(0x10000000), os.strerror(ctypes.get_errno()))")
    result = sandbox.run(ExecutionRequest(code=code, timeout_s=30))
    assert result.stdout.strip() == "-1 Operation not permitted", result.stderr
