"""Per-run cgroups (v1) and the tail-keeping output buffer."""

from __future__ import annotations

import subprocess
import time

import pytest

from wmrl_envs.sandbox.limits import RunCgroups, TailBuffer, cgroup_v1_available

needs_cgroups = pytest.mark.skipif(not cgroup_v1_available(),
                                   reason="cgroup v1 memory+pids not writable here")


def test_tail_buffer_keeps_the_last_bytes_and_counts_all() -> None:
    buffer = TailBuffer(5)
    for chunk in (b"hello ", b"wor", b"ld!"):
        buffer.write(chunk)
    assert buffer.text() == "orld!"
    assert buffer.total == 12 and buffer.truncated


def test_tail_buffer_under_its_limit_is_not_truncated() -> None:
    buffer = TailBuffer(100)
    buffer.write(b"short")
    assert buffer.text() == "short" and not buffer.truncated


def test_tail_buffer_decodes_invalid_utf8_with_replacement() -> None:
    buffer = TailBuffer(10)
    buffer.write(b"ok\xff")
    assert buffer.text() == "ok\ufffd"


@needs_cgroups
def test_cgroup_sweep_kills_a_detached_member_and_counts_refused_forks() -> None:
    groups = RunCgroups(memory_mb=128, max_pids=4)
    try:
        joins = "".join(f"echo $$ > {path}; " for path in groups.procs_files)
        script = joins + "setsid sleep 60 & for i in 1 2 3 4 5 6; do sleep 60 & done; wait"
        shell = subprocess.Popen(["/bin/sh", "-c", script], start_new_session=True)
        deadline = time.monotonic() + 5
        while groups.usage().pids_limit_hits == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert groups.usage().pids_limit_hits > 0, "forks past the pids limit must be refused"
        assert 1 <= len(groups.members()) <= 4
        assert groups.kill_all()
        shell.wait(timeout=5)
        assert groups.members() == []
    finally:
        groups.remove()


@needs_cgroups
def test_memory_cgroup_counts_an_oom_kill() -> None:
    groups = RunCgroups(memory_mb=64, max_pids=8)
    try:
        joins = "".join(f"echo $$ > {path}; " for path in groups.procs_files)
        code = "x = [b'x' * 2**20 for _ in range(512)]"
        result = subprocess.run(["/bin/sh", "-c", joins + f'exec python3 -c "{code}"'], capture_output=True)
        assert result.returncode == -9 or result.returncode == 137
        assert groups.usage().oom_kills >= 1
    finally:
        groups.remove()
