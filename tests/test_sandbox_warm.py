"""Warm execution: pre-warmed single-use sandboxes hide import latency without sharing anything."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from wmrl_algos.errors import ConfigError, IsolationUnavailableError
from wmrl_envs.sandbox import BubblewrapSandbox, ExecutionRequest, WarmSandbox

pytestmark = pytest.mark.integration

# json/csv instead of pandas keeps these tests fast; the benchmark measures the pandas+sklearn case.
PRELOAD = ("json", "csv")


@pytest.fixture()
def warm() -> Iterator[WarmSandbox]:
    try:
        backend = BubblewrapSandbox(strict=True)
    except IsolationUnavailableError as exc:
        pytest.skip(f"full bubblewrap isolation unavailable here: {exc}")
    sandbox = WarmSandbox(backend, pool_size=1, preload=PRELOAD)
    yield sandbox
    sandbox.close()


def _request(code: str, **kwargs: object) -> ExecutionRequest:
    return ExecutionRequest(code=code, timeout_s=30, **kwargs)  # type: ignore[arg-type]


def test_preloaded_modules_are_hidden_until_imported_and_the_solution_runs_as_main(warm: WarmSandbox) -> None:
    code = ("import sys\nbefore = 'json' in sys.modules\nimport json\n"
            "print(before, 'json' in sys.modules, 'json.decoder' in sys.modules, __name__, sys.argv)\n")
    request = _request(code)
    warm.warm_up(request, wait=True)
    result = warm.run(request)
    assert result.status == "ok", result.stderr
    assert result.stdout == "False True True __main__ ['solution.py']\n"
    assert warm.warm_hits == 1 and "warm worker" in result.detail


@pytest.mark.parametrize("preload", [("json", "not a module"), ("json,csv",), ("",)])
def test_preload_entries_that_are_not_module_names_are_refused(preload: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError, match="dotted module name"):
        WarmSandbox(BubblewrapSandbox(strict=False), preload=preload)


def test_consecutive_warm_runs_share_no_files_and_no_uid(warm: WarmSandbox) -> None:
    code = "import os; print(os.getuid(), os.path.exists('left.txt')); open('left.txt', 'w').write('x')"
    request = _request(code)
    outputs = []
    for _ in range(2):
        warm.warm_up(request, wait=True)
        outputs.append(warm.run(request).stdout.split())
    assert warm.warm_hits == 2
    assert outputs[0][1] == outputs[1][1] == "False", "a file from the previous run was visible"
    assert outputs[0][0] != outputs[1][0], "two runs shared a uid"


def test_exit_codes_exceptions_and_atexit_behave_like_a_cold_run(warm: WarmSandbox) -> None:
    cases = {
        "import sys; sys.exit(3)": ("error", 3),
        "raise KeyError('boom')": ("error", 1),
        "import atexit; atexit.register(print, 'bye')": ("ok", 0),
    }
    for code, expected in cases.items():
        request = _request(code)
        warm.warm_up(request, wait=True)
        result = warm.run(request)
        assert (result.status, result.exit_code) == expected, code
    assert warm.warm_hits == 3
    assert result.stdout == "bye\n"


def test_wall_clock_limit_applies_from_the_handover(warm: WarmSandbox) -> None:
    request = ExecutionRequest(code="while True: pass", timeout_s=1.0)
    warm.warm_up(request, wait=True)
    result = warm.run(request)
    assert result.status == "timeout" and warm.warm_hits == 1


def test_request_with_an_unwarmed_configuration_runs_cold(warm: WarmSandbox, tmp_path: Path) -> None:
    warm.warm_up(_request("pass"), wait=True)
    result = warm.run(_request("print('cold')", memory_mb=512))
    assert result.stdout == "cold\n" and warm.cold_runs == 1 and "cold start" in result.detail


def test_close_destroys_idle_workers(warm: WarmSandbox) -> None:
    request = _request("pass")
    warm.warm_up(request, wait=True)
    workers = [w for queue in warm._idle.values() for w in queue]
    assert workers
    warm.close()
    assert all(w.process.finished for w in workers)
    assert all(not w.work.root.exists() for w in workers)


@pytest.mark.parametrize(("pool_size", "max_configs"), [(0, 4), (2, 0)])
def test_invalid_pool_settings_are_refused(pool_size: int, max_configs: int) -> None:
    with pytest.raises(ConfigError):
        WarmSandbox(BubblewrapSandbox(strict=False), pool_size=pool_size, max_configs=max_configs)


_WRITE = "open('submission.csv', 'w').write('id,y\\n1,0\\n')"
SAME_WARM_AND_COLD = {
    "non-daemon thread writes the submission late": (
        "import threading, time\n"
        f"def late():\n    time.sleep(0.3)\n    {_WRITE}\n"
        "threading.Thread(target=late).start()\n"
    ),
    "file left open at module level": (
        "handle = open('submission.csv', 'w')\nhandle.write('id,y\\n1,0\\n')\n"
    ),
    "executor never shut down": (
        "import time\nfrom concurrent.futures import ThreadPoolExecutor\n"
        f"pool = ThreadPoolExecutor(1)\npool.submit(lambda: (time.sleep(0.3), {_WRITE}))\n"
    ),
    "uncaught exception": "def f():\n    raise KeyError('boom')\nf()\n",
    "finaliser of a module-level object": (
        "class Note:\n    def __del__(self):\n        print('finalised')\nnote = Note()\nprint('end')\n"
    ),
    "syntax error": "def broken(:\n    pass\n",
    "compile-time MemoryError": "x = " + "-" * 6000 + "1\n",
    "compile-time RecursionError": "x = 1" + "+1" * 3000 + "\n",
    "names of the bootstrap are not visible": "print(sys.argv)\n",
    "exit with a message": "raise SystemExit('bye')\n",
}


@pytest.mark.parametrize("case", sorted(SAME_WARM_AND_COLD))
def test_same_code_gets_the_same_result_warm_and_cold(case: str) -> None:
    try:
        cold_backend = BubblewrapSandbox(strict=True)
    except IsolationUnavailableError as exc:
        pytest.skip(f"full bubblewrap isolation unavailable here: {exc}")
    warm = WarmSandbox(BubblewrapSandbox(strict=True), pool_size=1, preload=PRELOAD)
    try:
        request = _request(SAME_WARM_AND_COLD[case])
        cold = cold_backend.run(request)
        warm.warm_up(request, wait=True)
        hot = warm.run(request)
        assert warm.warm_hits == 1
        assert (hot.status, hot.exit_code, hot.stdout, hot.stderr) == (
            cold.status, cold.exit_code, cold.stdout, cold.stderr), case
        assert (hot.output is None) == (cold.output is None), case
        if cold.output is not None and hot.output is not None:
            assert hot.output.read_bytes() == cold.output.read_bytes() == b"id,y\n1,0\n"
    finally:
        warm.close()
        cold_backend.close()


def test_preloaded_modules_do_not_count_against_the_solutions_memory() -> None:
    """A solution that fits its memory limit cold must fit it warm, with pandas already loaded."""
    try:
        cold_backend = BubblewrapSandbox(strict=True)
    except IsolationUnavailableError as exc:
        pytest.skip(f"full bubblewrap isolation unavailable here: {exc}")
    warm = WarmSandbox(BubblewrapSandbox(strict=True), pool_size=1, preload=("numpy", "pandas"))
    try:
        code = "block = bytearray(215 * 2**20)\nprint(len(block) // 2**20)\n"
        request = ExecutionRequest(code=code, timeout_s=60, memory_mb=256)
        cold = cold_backend.run(request)
        warm.warm_up(request, wait=True)
        hot = warm.run(request)
        assert cold.status == "ok", cold.detail
        assert warm.warm_hits == 1 and (hot.status, hot.stdout) == (cold.status, cold.stdout), hot.detail
        over = ExecutionRequest(code="block = bytearray(400 * 2**20)\n", timeout_s=60, memory_mb=256)
        warm.warm_up(over, wait=True)
        assert warm.run(over).status == cold_backend.run(over).status == "killed", "the limit still holds"
    finally:
        warm.close()
        cold_backend.close()
