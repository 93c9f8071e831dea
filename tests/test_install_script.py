"""install.sh takes llama-cpp-python from the wheel cache, and builds into the cache only when it must;
embodied.sh and verl.sh keep their shared venvs free of any checkout's wmrl.

The interpreter the script drives is a stand-in (``PYTHON=<a recording shell script>``) on purpose: the
real one would install and uninstall packages in the environment the test suite itself runs in. The
stand-in records every command, reports ``llama_cpp`` as not importable, and makes ``pip wheel`` drop a
wheel file into the folder it was given, as the real build does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
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


@pytest.mark.parametrize(
    "script",
    ["install.sh", "test.sh", "embodied.sh", "embodied-python", "verl.sh", "verl-python", "checkout-python"],
)
def test_the_scripts_parse(script: str) -> None:
    assert subprocess.run(["bash", "-n", str(ROOT / "scripts" / script)], timeout=30).returncode == 0


# scripts/embodied.sh and scripts/verl.sh: each stack's venv is shared by every clone on the machine.
RECORDING_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$FAKE_LOG"
if [ "$1 $2 $3" = "-m pip show" ]; then [ -n "${FAKE_WMRL_INSTALLED:-}" ]; exit; fi
exit 0
"""
"""A stand-in for a stack's interpreter (the real ones take minutes and GBs to build): records every
command, every import check passes, and ``pip show wmrl`` says installed only with $FAKE_WMRL_INSTALLED."""

STACKS = {"embodied": "WMRL_EMBODIED", "verl": "WMRL_VERL"}
"""Each stack's script name and the prefix of its environment variables (``_HOME``, ``_BASE_PYTHON``)."""


def _stack(
    stack: str, home: Path, *args: str, **env: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    log = home / "commands.log"
    log.touch()
    prefix = STACKS[stack]
    environment = {
        **os.environ,
        f"{prefix}_HOME": str(home),
        f"{prefix}_BASE_PYTHON": str(home / "base-python"),
        "FAKE_LOG": str(log),
        **env,
    }
    start = len(log.read_text().splitlines())
    command = ["bash", str(ROOT / "scripts" / f"{stack}.sh"), *args]
    result = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=120)
    return result, log.read_text().splitlines()[start:]


def _recorded_stack(stack: str, tmp_path: Path, **env: str) -> tuple[Path, list[str]]:
    """A stack 'built' by its own script around the recording interpreter; returns home and commands."""
    home = tmp_path / "home"
    (home / "venv" / "bin").mkdir(parents=True)
    for path in (home / "venv" / "bin" / "python", home / "base-python"):
        path.write_text(RECORDING_PYTHON)
        path.chmod(0o755)
    result, commands = _stack(stack, home, **env)
    assert result.returncode == 0, result.stderr
    return home, commands


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size) for p in root.rglob("*")}


@pytest.mark.parametrize("stack", STACKS)
def test_printing_the_stack_interpreter_runs_nothing_and_changes_nothing_in_the_venv(
    stack: str, tmp_path: Path
) -> None:
    home, build = _recorded_stack(stack, tmp_path)
    assert any("pip install" in command for command in build) and not any("-e " in c for c in build)
    before = _tree(home / "venv")
    printed = []
    for _ in range(2):
        result, commands = _stack(stack, home, "python")
        assert result.returncode == 0, result.stderr
        assert commands == [], "printing the interpreter must not run it (no pip, no import check)"
        printed.append(result.stdout)
    assert printed[0] == printed[1] == f"{ROOT / 'scripts' / f'{stack}-python'}\n"
    assert _tree(home / "venv") == before


@pytest.mark.parametrize("stack", STACKS)
def test_printing_the_interpreter_of_an_unbuilt_stack_fails_without_building(
    stack: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    result, commands = _stack(stack, home, "python")
    assert (
        result.returncode == 1
        and "not built" in result.stderr
        and f"bash scripts/{stack}.sh" in result.stderr
    )
    assert commands == [] and not (home / "venv").exists() and result.stdout == ""


@pytest.mark.parametrize("stack", STACKS)
def test_a_build_installs_no_wmrl_and_removes_one_an_older_script_installed(
    stack: str, tmp_path: Path
) -> None:
    _, commands = _recorded_stack(stack, tmp_path, FAKE_WMRL_INSTALLED="1")
    assert "-m pip uninstall -y -q wmrl" in commands
    assert not any(
        "pip install" in command and ("-e" in command or "wmrl" in command) for command in commands
    )


def _clone(tmp_path: Path) -> Path:
    """A second checkout of this repository's code, as another engineer's clone on the same machine."""
    clone = tmp_path / "clone"
    ignore = shutil.ignore_patterns("__pycache__")
    for part in ("wmrl_envs", "wmrl_algos", "adapters"):
        shutil.copytree(ROOT / part, clone / part, ignore=ignore)
    (clone / "scripts").mkdir()
    for launcher in ("checkout-python", "embodied-python", "verl-python"):
        shutil.copy2(ROOT / "scripts" / launcher, clone / "scripts" / launcher)
    return clone


WHERE = (
    "import json, wmrl_algos, wmrl_adapters.cli, wmrl_envs.embodied.stack as stack; "
    "print(json.dumps([wmrl_algos.__file__, wmrl_adapters.cli.__file__, str(stack._WORKER_FILE)]))"
)
"""What the trainer (wmrl_algos, the CLI) and the simulator worker (its file) resolve to."""


def _where(launcher: Path, home: Path) -> list[str]:
    environment = {
        **os.environ,
        "WMRL_EMBODIED_HOME": str(home),
        "WMRL_VERL_HOME": str(home),
        "PYTHONPATH": "",
    }
    done = subprocess.run(
        [str(launcher), "-c", WHERE], capture_output=True, text=True, env=environment, timeout=300, cwd="/"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [str(Path(p).resolve()) for p in json.loads(done.stdout.splitlines()[-1])]


@pytest.mark.parametrize("stack", STACKS)
def test_each_checkouts_launcher_imports_its_own_wmrl_on_one_shared_interpreter(
    stack: str, tmp_path: Path
) -> None:
    """The shared venv's interpreter here is this machine's Python (where wmrl is installed editable from
    the main checkout, which must not win): only the checkout that launches decides."""
    home = tmp_path / "home"
    (home / "venv" / "bin").mkdir(parents=True)
    (home / "venv" / "bin" / "python").symlink_to(sys.executable)
    clone = _clone(tmp_path)
    for checkout in (clone, ROOT, clone):
        paths = _where(checkout / "scripts" / f"{stack}-python", home)
        assert all(path.startswith(f"{checkout.resolve()}/") for path in paths), (checkout, paths)
    assert not list((home / "venv").rglob("*.pth")), "nothing may be installed into the shared venv"


STACK_HOME = Path(os.environ.get("WMRL_EMBODIED_HOME", Path.home() / ".cache/wmrl/embodied"))


@pytest.mark.embodied
@pytest.mark.skipif(
    not (STACK_HOME / "venv" / ".wmrl-embodied-stamp").is_file(),
    reason=f"the embodied stack is not built in {STACK_HOME}: run bash scripts/embodied.sh",
)
def test_on_the_real_stack_printing_changes_nothing_and_a_clone_runs_its_own_wmrl(tmp_path: Path) -> None:
    site = next((STACK_HOME / "venv" / "lib").glob("python3*/site-packages"))
    before = {p.name: p.stat().st_mtime_ns for p in site.iterdir()}
    environment = {**os.environ, "WMRL_EMBODIED_HOME": str(STACK_HOME)}
    for _ in range(2):
        done = subprocess.run(
            ["bash", str(ROOT / "scripts" / "embodied.sh"), "python"],
            capture_output=True, text=True, env=environment, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0 and done.stdout.strip() == str(ROOT / "scripts" / "embodied-python")
    assert {p.name: p.stat().st_mtime_ns for p in site.iterdir()} == before
    clone = _clone(tmp_path)
    paths = _where(clone / "scripts" / "embodied-python", STACK_HOME)
    assert all(path.startswith(f"{clone.resolve()}/") for path in paths), paths
