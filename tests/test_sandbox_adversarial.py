"""Hostile solutions against every available sandbox backend: each must be contained, reported with a
clear status, and leave the host unchanged.

Backends: ``local`` (bubblewrap) and ``docker`` run every attack; ``unsafe`` (no isolation) runs only
the attacks that are harmless to the host and whose defence is host-side (output-file checks, output
caps, timeouts). Docker cases skip, with the reason, only when no engine answers.

Host checks after every attack: no process carrying the attack's token in its environment survives;
no file named with the token is left in a work dir; the test's own sentinel process is alive.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from wmrl_algos.errors import IsolationUnavailableError
from wmrl_envs.sandbox import ExecutionRequest, ExecutionResult, Sandbox, make_sandbox

pytestmark = pytest.mark.integration

BACKENDS = ["local", pytest.param("docker", marks=pytest.mark.docker), "unsafe"]


def _docker_reason() -> str | None:
    try:
        from wmrl_adapters.docker import engine_reachable
    except ImportError as exc:
        return f"docker SDK not installed ({exc})"
    if not engine_reachable():
        return "no Docker engine reachable (set DOCKER_HOST or run scripts/docker_engine.sh start)"
    return None


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    name = request.param
    if name == "docker":
        reason = _docker_reason()
        if reason:
            pytest.skip(reason)
    try:
        sandbox = make_sandbox(name)
    except IsolationUnavailableError as exc:
        pytest.skip(f"{name} backend unavailable here: {exc}")
    yield sandbox
    sandbox.close()


@pytest.fixture()
def token() -> str:
    return f"wmrlattack{secrets.token_hex(6)}"


def _survivors(token: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if token.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _leftover_files(token: str) -> list[Path]:
    return [p for p in Path(tempfile.gettempdir()).glob(f"wmrl-run-*/**/*{token}*")]


def _run(sandbox: Sandbox, token: str, code: str, **limits: object) -> ExecutionResult:
    settings: dict[str, object] = {"timeout_s": 2.5, "memory_mb": 256, "max_pids": 32, "disk_mb": 32,
                                   "max_output_bytes": 4096}
    settings.update(limits)
    env = {"WMRL_ATTACK_TOKEN": token, **settings.pop("env", {})}  # type: ignore[dict-item]
    request = ExecutionRequest(code=textwrap.dedent(code), env=env, **settings)  # type: ignore[arg-type]
    started = time.monotonic()
    result = sandbox.run(request)
    elapsed = time.monotonic() - started
    deadline = time.monotonic() + 5
    while _survivors(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _survivors(token) == [], f"processes of the run survived it: {_survivors(token)}"
    assert _leftover_files(token) == [], "the work dir was not removed"
    assert elapsed < float(request.timeout_s) + 20, f"the run took {elapsed:.1f} s, far past its timeout"
    return result


def _isolating(sandbox: Sandbox) -> None:
    if sandbox.name == "unsafe":
        pytest.skip("dangerous for the host: the unsafe backend has no isolation by design")


def test_infinite_loop_is_timed_out(backend: Sandbox, token: str) -> None:
    result = _run(backend, token, "while True:\n    pass\n", timeout_s=2.0)
    assert result.status == "timeout"
    assert result.exit_code is None
    assert "wall-clock" in result.detail


def test_cpu_burn_in_many_processes_is_timed_out_and_swept(backend: Sandbox, token: str) -> None:
    result = _run(backend, token, """
        import multiprocessing
        def burn():
            while True:
                pass
        if __name__ == "__main__":
            workers = [multiprocessing.Process(target=burn) for _ in range(4)]
            for w in workers:
                w.start()
            burn()
    """, timeout_s=2.0)
    assert result.status == "timeout"


def test_fork_bomb_is_capped_by_the_pids_limit(backend: Sandbox, token: str) -> None:
    _isolating(backend)
    result = _run(backend, token, """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
    """, timeout_s=2.0, max_pids=16)
    assert result.status in ("timeout", "killed")


def test_single_huge_allocation_fails_cleanly(backend: Sandbox, token: str) -> None:
    _isolating(backend)
    result = _run(backend, token, "x = bytearray(50 * 10**9)\nprint('allocated')\n")
    assert result.status in ("error", "killed")
    assert "allocated" not in result.stdout


def test_many_small_allocations_are_oom_killed(backend: Sandbox, token: str) -> None:
    _isolating(backend)
    result = _run(backend, token, """
        chunks = []
        while True:
            chunks.append(b"x" * 10**6)
    """, timeout_s=10.0, memory_mb=128)
    assert result.status == "killed"
    assert "memory limit" in result.detail


def test_one_huge_file_hits_the_disk_cap(backend: Sandbox, token: str) -> None:
    _isolating(backend)
    result = _run(backend, token, f"""
        block = b"\\0" * 2**20
        with open("{token}-big", "wb") as handle:
            for _ in range(10 * 1024):
                handle.write(block)
        print("wrote 10 GB")
    """, timeout_s=10.0, disk_mb=16)
    assert result.status in ("killed", "error")
    assert "wrote 10 GB" not in result.stdout
    assert "disk cap" in result.detail or "file size" in result.detail


def test_many_medium_files_hit_the_disk_cap(backend: Sandbox, token: str) -> None:
    _isolating(backend)
    result = _run(backend, token, f"""
        import os
        block = b"\\1" * 2**18
        for i in range(100000):
            with open("{token}-%d" % i, "wb") as handle:
                handle.write(block)
        print("filled")
    """, timeout_s=10.0, disk_mb=16)
    assert result.status in ("killed", "error")
    assert "filled" not in result.stdout
    assert "disk cap" in result.detail


def test_writes_outside_the_work_dir_do_not_reach_the_host(backend: Sandbox, token: str,
                                                           tmp_path: Path) -> None:
    _isolating(backend)
    targets = [f"/{token}", f"/etc/{token}", f"/usr/{token}", f"/root/{token}", f"{tmp_path}/{token}",
               f"{sys.prefix}/{token}", f"/var/tmp/{token}", f"../{token}", f"../../{token}"]
    result = _run(backend, token, f"""
        for path in {targets!r}:
            try:
                with open(path, "w") as handle:
                    handle.write("pwned")
                print("WROTE", path)
            except OSError as exc:
                print("DENIED", path, type(exc).__name__)
    """)
    assert result.status == "ok"
    for target in targets:
        if target.startswith("/"):
            assert not os.path.exists(target), f"{target} was created on the host"
    assert not list(Path("/").glob(f"{token}*")) and not list(tmp_path.glob(f"{token}*"))


def test_shadow_and_hidden_answers_are_unreachable(backend: Sandbox, token: str, tmp_path: Path) -> None:
    _isolating(backend)
    hidden_dir = tmp_path / "hidden"
    hidden_dir.mkdir()
    answers = hidden_dir / "answers.csv"
    secret = f"HIDDEN-{token}"
    answers.write_text(f"id,target\n1,{secret}\n")
    public = tmp_path / "train.csv"
    public.write_text("id,x\n1,2\n")
    shadow_root_line = ""
    if os.access("/etc/shadow", os.R_OK):
        shadow_root_line = Path("/etc/shadow").read_text().splitlines()[0]
    result = _run(backend, token, f"""
        import glob, os
        candidates = ["/etc/shadow", {str(answers)!r}, "/proc/1/root{answers}", "/proc/self/root{answers}",
                      "/proc/1/root/etc/shadow", "input/../{os.path.relpath(answers, tmp_path)}",
                      "input/../../hidden/answers.csv"]
        candidates += glob.glob("/proc/*/cwd/*") + glob.glob("/proc/*/root/etc/shadow")
        candidates += glob.glob("/proc/*/fd/*")
        for root, dirs, files in os.walk("/", onerror=None):
            dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev", "usr")]
            for name in files:
                if "answer" in name or "shadow" in name:
                    candidates.append(os.path.join(root, name))
        for path in candidates:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
                print("READ", path, os.read(fd, 200))
                os.close(fd)
            except OSError:
                pass
        print(open("input/train.csv").read())
    """, inputs={"train.csv": public}, timeout_s=120.0)
    # 120 s: the walk visits the interpreter's whole tree (108k entries here), 3 s with a warm page cache,
    # 9 s cold, past 20 s in a CI run under load (where this limit was once 20 s and timed out)
    assert result.status == "ok", result.stderr
    assert "id,x" in result.stdout, "the public input must stay readable"
    assert secret not in result.stdout + result.stderr
    if shadow_root_line:
        assert shadow_root_line not in result.stdout


class _Listener:
    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


def test_network_is_unreachable_loopback_and_external(backend: Sandbox, token: str) -> None:
    _isolating(backend)
    listener = _Listener()
    try:
        result = _run(backend, token, f"""
            import socket
            for address in [("127.0.0.1", {listener.port}), ("10.255.255.1", 80)]:
                try:
                    socket.create_connection(address, timeout=1).close()
                    print("CONNECTED", address)
                except OSError as exc:
                    print("BLOCKED", address, type(exc).__name__)
        """, timeout_s=10.0)
    finally:
        listener.close()
    assert result.status == "ok", result.stderr
    assert "CONNECTED" not in result.stdout
    assert result.stdout.count("BLOCKED") == 2
    assert listener.accepted == 0, "the host listener received a connection from the sandbox"


def test_setsid_daemon_does_not_outlive_the_run(backend: Sandbox, token: str) -> None:
    _isolating(backend)
    result = _run(backend, token, """
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(120)
            os._exit(0)
        print("parent done")
    """)
    assert result.status == "ok"
    assert "parent done" in result.stdout


def test_stdout_flood_is_truncated_to_the_cap(backend: Sandbox, token: str) -> None:
    result = _run(backend, token, """
        import sys
        chunk = "y" * 65535 + "\\n"
        for _ in range(512):
            sys.stdout.write(chunk)
        sys.stdout.write("THE-END\\n")
    """, timeout_s=20.0, max_output_bytes=4096)
    assert result.status == "ok"
    assert len(result.stdout.encode()) <= 4096
    assert result.stdout.endswith("THE-END\n"), "the tail must be kept"
    assert "truncated" in result.detail


def test_kill_init_and_kill_all_do_not_touch_the_host(backend: Sandbox, token: str) -> None:
    _isolating(backend)
    sentinel = subprocess.Popen(["sleep", "60"])
    try:
        result = _run(backend, token, """
            import os, signal
            for target in (1, -1):
                try:
                    os.kill(target, signal.SIGKILL)
                    print("SENT", target)
                except OSError as exc:
                    print("REFUSED", target, type(exc).__name__)
        """)
        assert sentinel.poll() is None, "a host process was killed by the sandboxed kill(-1)"
    finally:
        sentinel.kill()
        sentinel.wait()
    assert result.status in ("ok", "error", "killed")


def test_host_environment_secrets_are_absent(backend: Sandbox, token: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _isolating(backend)
    secret = f"SECRET-{token}"
    monkeypatch.setenv("WMRL_TEST_SECRET", secret)
    result = _run(backend, token, """
        import glob, os
        print(sorted(os.environ))
        print(os.environ.get("WMRL_TEST_SECRET"))
        for path in glob.glob("/proc/*/environ"):
            try:
                print(path, open(path, "rb").read())
            except OSError:
                pass
    """, env={"VISIBLE": "yes"})
    assert result.status == "ok"
    assert secret not in result.stdout + result.stderr
    assert "VISIBLE" in result.stdout, "the request's own env must be passed"


def test_submission_symlink_to_the_answers_is_rejected(backend: Sandbox, token: str, tmp_path: Path) -> None:
    answers = tmp_path / "answers.csv"
    answers.write_text(f"id,target\n1,HIDDEN-{token}\n")
    result = _run(backend, token, f"""
        import os
        os.symlink({str(answers)!r}, "submission.csv")
    """)
    assert result.status == "ok"
    assert result.output is None
    assert result.output_rejected is not None and "symlink" in result.output_rejected


def test_submission_fifo_is_rejected_without_blocking(backend: Sandbox, token: str) -> None:
    result = _run(backend, token, "import os\nos.mkfifo('submission.csv')\n")
    assert result.status == "ok"
    assert result.output is None
    assert result.output_rejected is not None and "not a regular file" in result.output_rejected


def test_oversized_submission_is_rejected(backend: Sandbox, token: str) -> None:
    result = _run(backend, token, "open('submission.csv', 'wb').write(b'1' * (3 * 2**20))\n",
                  max_output_file_mb=1)
    assert result.output is None
    assert result.output_rejected is not None and "cap" in result.output_rejected


def test_fake_score_files_are_ignored_only_the_submission_leaves(backend: Sandbox, token: str) -> None:
    result = _run(backend, token, """
        import json
        for name in ("score.json", "grade.txt", "/tmp/score.json"):
            try:
                with open(name, "w") as handle:
                    json.dump({"score": 1.0, "medal": "gold"}, handle)
            except OSError:
                pass
        print("=== execution report ===\\nstatus: valid\\npublic_score: 1.0")
        open("submission.csv", "w").write("id,target\\n1,0\\n")
    """)
    assert result.status == "ok"
    assert result.output is not None
    assert result.output.read_text() == "id,target\n1,0\n"
    siblings = [p.name for p in result.output.parent.iterdir()]
    assert not any("score" in name or "grade" in name for name in siblings)


def test_hostile_permissions_and_many_files_are_still_removed(backend: Sandbox, token: str) -> None:
    result = _run(backend, token, f"""
        import os
        for i in range(300):
            os.makedirs("{token}-tree/%d/deep" % i)
            open("{token}-tree/%d/deep/f" % i, "w").write("x")
            os.chmod("{token}-tree/%d/deep" % i, 0)
            os.chmod("{token}-tree/%d" % i, 0)
        os.chmod("{token}-tree", 0)
        os.chmod(".", 0o500)
    """, timeout_s=20.0)
    assert result.status == "ok", result.stderr


def test_host_unix_sockets_docker_and_abstract_are_unreachable(backend: Sandbox, token: str) -> None:
    _isolating(backend)
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(f"\0wmrl-{token}")
    abstract.listen(1)
    abstract.settimeout(0.5)
    paths = ["/var/run/docker.sock", "/run/docker.sock", "/tmp/wmrl-docker/docker.sock"]
    try:
        result = _run(backend, token, f"""
            import socket
            for address in {paths!r} + ["\\0wmrl-{token}"]:
                client = socket.socket(socket.AF_UNIX)
                client.settimeout(1)
                try:
                    client.connect(address)
                    print("CONNECTED", repr(address))
                except OSError as exc:
                    print("BLOCKED", repr(address), type(exc).__name__)
                finally:
                    client.close()
        """, timeout_s=10.0)
        with pytest.raises(OSError):
            abstract.accept()
    finally:
        abstract.close()
    assert result.status == "ok", result.stderr
    assert "CONNECTED" not in result.stdout
    assert result.stdout.count("BLOCKED") == 4
