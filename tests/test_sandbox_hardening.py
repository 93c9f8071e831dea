"""Defence in depth on the local backend: seccomp filter, read-only root and /dev, capped /dev/shm, CPU quota.

Each was a measured gap (issue 8, section 4): nested user namespaces and mounts worked inside the
sandbox, ``/`` ``/dev`` and ``/dev/shm`` were uncapped tmpfs, and one run could take every core.
"""

from __future__ import annotations

import struct

import pytest

from wmrl_algos.errors import ConfigError, IsolationUnavailableError
from wmrl_envs.sandbox import BubblewrapSandbox, ExecutionRequest
from wmrl_envs.sandbox.lifetime import owner_tag
from wmrl_envs.sandbox.limits import RunCgroups, cgroup_version, sandbox_cgroup_parents
from wmrl_envs.sandbox.local import SHM_MB
from wmrl_envs.sandbox.seccomp import DENIED_SYSCALLS, seccomp_program

pytestmark = pytest.mark.integration


def _run(sandbox: BubblewrapSandbox, code: str, **kwargs: object) -> list[str]:
    result = sandbox.run(ExecutionRequest(code=code, timeout_s=60, **kwargs))  # type: ignore[arg-type]
    assert result.status == "ok", result.stderr + result.detail
    return result.stdout.splitlines()


SYSCALL_PROBE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def report(name, value):
    print(name, value, os.strerror(ctypes.get_errno()) if value == -1 else "")
report("unshare-user", libc.unshare(0x10000000))
report("unshare-mount", libc.unshare(0x00020000))
report("mount", libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
report("ptrace", libc.ptrace(16, 1, 0, 0))
report("io_uring_setup", libc.syscall(425, 1, 0))
report("bpf", libc.syscall(321, 0, 0, 0))
report("keyctl", libc.syscall(250, 0, 0, 0, 0, 0))
report("clone-newuser", libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0))
"""


def test_seccomp_refuses_namespaces_mounts_and_kernel_attack_surface(
    strict_bubblewrap: BubblewrapSandbox,
) -> None:
    if seccomp_program() is None:
        pytest.skip("the seccomp filter covers x86-64 only")
    lines = _run(strict_bubblewrap, SYSCALL_PROBE)
    assert lines and all(line.endswith("-1 Operation not permitted") for line in lines), lines


def test_ordinary_python_and_the_ml_stack_still_work_under_the_filter(
    strict_bubblewrap: BubblewrapSandbox,
) -> None:
    code = (
        "import os, threading, multiprocessing as mp, subprocess, sys\n"
        "import numpy, pandas, sklearn.ensemble\n"
        "threading.Thread(target=print, args=('thread',)).start()\n"
        "with mp.get_context('fork').Pool(2) as pool: print(sum(pool.map(abs, [-1, -2])))\n"
        "child = subprocess.run([sys.executable, '-c', 'print(7)'], capture_output=True, text=True)\n"
        "print(child.stdout.strip())\n"
        "forest = sklearn.ensemble.RandomForestClassifier(n_estimators=4, n_jobs=2)\n"
        "model = forest.fit([[0], [1]] * 5, [0, 1] * 5)\n"
        "print(model.predict([[1]])[0])\n"
    )
    lines = _run(strict_bubblewrap, code, memory_mb=2048)
    assert lines == ["thread", "3", "7", "1"]


def test_root_and_dev_are_read_only_and_dev_shm_is_capped(strict_bubblewrap: BubblewrapSandbox) -> None:
    code = f"""
for path in ("/x", "/dev/x", "/usr/x"):
    try:
        open(path, "w")
        print(path, "writable")
    except OSError as exc:
        print(path, exc.strerror)
written = 0
try:
    with open("/dev/shm/fill", "wb") as handle:
        while written < {2 * SHM_MB} * 2**20:
            handle.write(b"0" * 2**20)
            handle.flush()
            written += 2**20
except OSError as exc:
    print("shm", exc.strerror, written // 2**20 <= {SHM_MB})
open("/dev/null", "w").write("fine")
print("devnull ok")
"""
    lines = _run(strict_bubblewrap, code, memory_mb=1024)
    assert lines == ["/x Read-only file system", "/dev/x Read-only file system",
                     "/usr/x Read-only file system", "shm No space left on device True", "devnull ok"]


def test_a_cpu_quota_keeps_one_run_to_its_share() -> None:
    try:
        box = BubblewrapSandbox(strict=True, cpus=0.5)
    except IsolationUnavailableError as exc:
        pytest.skip(f"full bubblewrap isolation unavailable here: {exc}")
    try:
        code = (
            "import threading, time\nend = time.monotonic() + 2.0\n"
            "def burn():\n    while time.monotonic() < end:\n        pass\n"
            "threads = [threading.Thread(target=burn) for _ in range(2)]\n"
            "[t.start() for t in threads]; [t.join() for t in threads]\n"
        )
        result = box.run(ExecutionRequest(code=code, timeout_s=60))
        assert result.status == "ok" and result.cpu_s is not None and "no CPU quota" not in result.detail
        assert result.cpu_s < 0.5 * 2.0 * 1.3, f"two busy threads used {result.cpu_s:.2f} CPU-s in 2 s"
    finally:
        box.close()


def test_run_cgroups_write_the_cfs_quota() -> None:
    version = cgroup_version()
    if version is None:
        pytest.skip("no writable cgroups (v1 or v2) here")
    groups = RunCgroups(memory_mb=256, max_pids=16, cpus=0.5, version=version)
    try:
        if not groups.cpu_quota:
            pytest.skip("the cgroup cpu controller is not available here")
        pattern = f"wmrl-run-{owner_tag()}-*"
        quota_file = "cpu.max" if version == 2 else "cpu.cfs_quota_us"
        directory = next(path for parent in sandbox_cgroup_parents() for path in parent.glob(pattern)
                         if (path / quota_file).exists())
        if version == 2:
            quota, period = map(int, (directory / "cpu.max").read_text().split())
        else:
            quota = int((directory / "cpu.cfs_quota_us").read_text())
            period = int((directory / "cpu.cfs_period_us").read_text())
        assert quota / period == pytest.approx(0.5)
    finally:
        groups.remove()


def test_invalid_cpu_quota_is_refused() -> None:
    with pytest.raises(ConfigError, match="cpus"):
        BubblewrapSandbox(strict=False, cpus=0)


def test_the_filter_is_a_well_formed_classic_bpf_program() -> None:
    program = seccomp_program()
    if program is None:
        pytest.skip("the seccomp filter covers x86-64 only")
    instructions = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    assert len(instructions) == 7 + len(DENIED_SYSCALLS) + 6
    for index, (code, jt, jf, _) in enumerate(instructions):
        if code & 0x07 == 0x05:  # a jump: both targets inside the program
            assert index + 1 + max(jt, jf) < len(instructions)
    assert instructions[-1] == (0x06, 0, 0, 0x00050000 | 38), "clone3 gets ENOSYS (the C library falls back)"
