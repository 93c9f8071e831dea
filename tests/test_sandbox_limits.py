"""Per-run cgroups (v1 or v2, whichever this host has) and the tail-keeping output buffer.

The cgroup tests run on the real hierarchy: v1 on the CI machine, v2 on a cgroup-v2-only GPU machine
(where they were run with the sandbox tests; docs/threat-model.md). One test checks the v2 file formats
against a directory standing in for the kernel's cgroup files, because no v2 hierarchy with
controllers exists on the CI machine; it says so.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from wmrl_envs.sandbox import limits
from wmrl_envs.sandbox.limits import RunCgroups, TailBuffer, cgroup_version

VERSION = cgroup_version()
needs_cgroups = pytest.mark.skipif(VERSION is None, reason="no writable memory+pids cgroups (v1 or v2) here")


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
    groups = RunCgroups(memory_mb=128, max_pids=4, version=VERSION or 1)
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
    groups = RunCgroups(memory_mb=64, max_pids=8, version=VERSION or 1)
    try:
        joins = "".join(f"echo $$ > {path}; " for path in groups.procs_files)
        code = "x = [b'x' * 2**20 for _ in range(512)]"
        result = subprocess.run(["/bin/sh", "-c", joins + f'exec python3 -c "{code}"'], capture_output=True)
        assert result.returncode == -9 or result.returncode == 137
        assert groups.usage().oom_kills >= 1
    finally:
        groups.remove()


def test_v2_groups_write_the_unified_limits_and_read_its_counters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain directory stands in for a delegated v2 group (this CI machine has no v2 controllers)."""
    (tmp_path / "cgroup.subtree_control").write_text("cpu memory pids\n")
    monkeypatch.setattr(limits, "cgroup_v2_parent", lambda: tmp_path)
    groups = RunCgroups(memory_mb=64, max_pids=8, cpus=0.5, version=2)
    [directory] = [path for path in tmp_path.iterdir() if path.is_dir()]
    assert groups.procs_files == (directory / "cgroup.procs",) and groups.cpu_quota
    assert (directory / "memory.max").read_text() == str(64 * 2**20)
    assert (directory / "pids.max").read_text() == "8"
    assert (directory / "cpu.max").read_text() == "50000 100000"
    (directory / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    (directory / "pids.events").write_text("max 5\n")
    (directory / "memory.peak").write_text(str(48 * 2**20))
    (directory / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
    (directory / "memory.current").write_text(str(10 * 2**20))
    usage = groups.usage()
    assert (usage.oom_kills, usage.pids_limit_hits, usage.peak_memory_mb, usage.cpu_s) == (1, 5, 48.0, 2.5)
    assert groups.grant_current_usage(64) == 10.0
    assert (directory / "memory.max").read_text() == str(74 * 2**20)
    for name in ("memory.max", "pids.max", "cpu.max", "memory.events", "pids.events", "memory.peak",
                 "cpu.stat", "memory.current"):
        (directory / name).unlink()
    groups.remove()
    assert not directory.exists()
