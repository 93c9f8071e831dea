"""install.sh takes llama-cpp-python from the wheel cache, and builds into the cache only when it must.

The interpreter the script drives is a stand-in (``PYTHON=<a recording shell script>``) on purpose: the
real one would install and uninstall packages in the environment the test suite itself runs in. The
stand-in records every command, reports ``llama_cpp`` as not importable, and makes ``pip wheel`` drop a
wheel file into the folder it was given, as the real build does.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$FAKE_LOG"
if [ "$1" = "-c" ]; then exit 1; fi
if [ "$1 $2 $3" = "-m pip wheel" ]; then
    while [ "$#" -gt 0 ]; do
        if [ "$1" = "-w" ]; then touch "$2/llama_cpp_python-0.3.99-py3-none-linux_x86_64.whl"; fi
        shift
    done
fi
exit 0
"""


def _install(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    log = tmp_path / "commands.log"
    log.touch()
    cache = str(tmp_path / "wheels")
    env = {**os.environ, "PYTHON": str(fake), "FAKE_LOG": str(log), "WMRL_WHEEL_CACHE": cache}
    command = ["bash", str(ROOT / "scripts" / "install.sh"), *args]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    return result, log.read_text().splitlines()


def test_a_cached_wheel_is_installed_without_building(tmp_path: Path) -> None:
    cache = tmp_path / "wheels"
    cache.mkdir()
    wheel = cache / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"
    wheel.touch()
    result, commands = _install(tmp_path, "llama-server")
    assert result.returncode == 0, result.stderr
    assert not any("pip wheel" in command for command in commands)
    assert any(f"llama-cpp-python[server] @ file://{wheel}" in command for command in commands)


def test_without_a_cached_wheel_it_is_built_into_the_cache_then_installed_from_there(tmp_path: Path) -> None:
    result, commands = _install(tmp_path, "llama-server")
    assert result.returncode == 0, result.stderr
    built = [command for command in commands if "pip wheel" in command]
    assert len(built) == 1 and f"-w {tmp_path / 'wheels'}" in built[0] and "--no-deps" in built[0]
    wheel = tmp_path / "wheels" / "llama_cpp_python-0.3.99-py3-none-linux_x86_64.whl"
    assert commands.index(built[0]) < next(i for i, c in enumerate(commands) if f"file://{wheel}" in c)


def test_an_install_waits_for_a_build_that_holds_the_lock(tmp_path: Path) -> None:
    cache = tmp_path / "wheels"
    cache.mkdir()
    lock = cache / ".llama-cpp-python.lock"
    wheel = cache / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"
    holder = subprocess.Popen(["flock", str(lock), "bash", "-c", f"sleep 2; touch {wheel}"])
    try:
        time.sleep(0.5)
        started = time.monotonic()
        result, commands = _install(tmp_path, "llama-server")
        waited = time.monotonic() - started
    finally:
        holder.wait(timeout=30)
    assert result.returncode == 0, result.stderr
    assert waited >= 1.0 and not any("pip wheel" in command for command in commands)


def test_an_unknown_profile_is_refused() -> None:
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "install.sh"), "tset"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and "unknown profile 'tset'" in result.stderr


@pytest.mark.parametrize("script", ["install.sh", "test.sh"])
def test_the_scripts_parse(script: str) -> None:
    assert subprocess.run(["bash", "-n", str(ROOT / "scripts" / script)], timeout=30).returncode == 0
