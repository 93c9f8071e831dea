"""The managed process: output tails, the deadline that kills the whole session, resource accounting."""

from __future__ import annotations

import sys
import time

from wmrl_envs.sandbox.process import ManagedProcess


def _python(code: str, max_output_bytes: int = 1000) -> ManagedProcess:
    return ManagedProcess([sys.executable, "-c", code], env={}, cwd="/", max_output_bytes=max_output_bytes)


def test_exit_code_and_both_streams_are_captured() -> None:
    outcome = _python("import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)").wait(30)
    assert (outcome.returncode, outcome.stdout, outcome.stderr) == (3, "out\n", "err\n")
    assert not outcome.timed_out


def test_deadline_kills_the_process_group_including_children() -> None:
    started = time.monotonic()
    outcome = _python("import subprocess, time; subprocess.Popen(['sleep', '30']); time.sleep(30)").wait(1.0)
    assert outcome.timed_out and outcome.returncode == -9
    assert time.monotonic() - started < 10, "the child holding the pipes must die with the group"


def test_output_beyond_the_cap_keeps_only_the_tail() -> None:
    outcome = _python("print('a' * 5000 + 'TAIL')", max_output_bytes=100).wait(30)
    assert outcome.stdout.endswith("TAIL\n") and len(outcome.stdout) == 100
    assert outcome.stdout_truncated and not outcome.stderr_truncated


def test_cpu_time_of_the_child_is_measured() -> None:
    outcome = _python("x = 0\nfor i in range(3_000_000): x += i").wait(60)
    assert outcome.cpu_s > 0.05


def test_clock_restart_excludes_time_spent_waiting_for_the_go() -> None:
    process = _python("import sys; sys.stdin.read(); print('ran')")
    time.sleep(1.0)
    process.start_clock()
    process.send(b"go")
    outcome = process.wait(30)
    assert outcome.stdout == "ran\n" and outcome.wall_s < 1.0
