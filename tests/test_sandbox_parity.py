"""Same code, same grade on every backend: cold bubblewrap, warm workers, Docker; hostile text is a result.

A warm worker emulates a fresh interpreter. Each case below was graded differently warm before
(``runtime_error`` with exit 120 warm for a ``None`` or closed ``sys.stdout``, a branch on a preloaded
module in ``sys.modules``, ``SIGINT`` versus exit 1, ...); the cold bubblewrap run is the reference.
Code holding a lone surrogate raised ``UnicodeEncodeError`` out of every backend's ``run``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from wmrl_envs.sandbox import (
    BubblewrapSandbox,
    ExecutionRequest,
    ExecutionResult,
    Sandbox,
    UnsafeSandbox,
    WarmSandbox,
)
from wmrl_envs.sandbox.warm import DEFAULT_PRELOAD

pytestmark = pytest.mark.integration

# Small preloads keep the parity cases fast; the sklearn case below uses the default preload.
PRELOAD = ("json", "csv", "decimal")

_FAILING_FLUSH = (
    "class Sink:\n    def write(self, text):\n        pass\n"
    "    def flush(self):\n        raise ValueError('no')\n"
)
PARITY_CASES = {
    "stdout left on a closed devnull file": (
        "import os, sys\nsys.stdout = open(os.devnull, 'w')\nsys.stdout.close()\n"
        "open('submission.csv', 'w').write('id,y\\n1,0\\n')\n"
    ),
    "stdout set to None after printing": "import sys\nprint('hi')\nsys.stdout = None\n",
    "stdout and stderr set to None": "import sys\nsys.stdout = sys.stderr = None\n",
    "stdout deleted": "import sys\nprint('hi')\ndel sys.stdout\n",
    "the real stdout closed": "import sys\nprint('hi')\nsys.stdout.close()\n",
    "stdout redirected to the submission": (
        "import sys\nsys.stdout = open('submission.csv', 'w')\nprint('id,y')\n"
    ),
    "stdout flush fails at exit": f"import sys\n{_FAILING_FLUSH}sys.stdout = Sink()\n",
    "stderr flush fails at exit": f"import sys\n{_FAILING_FLUSH}sys.stderr = Sink()\n",
    "stdout flush fails after sys.exit(3)": f"import sys\n{_FAILING_FLUSH}sys.stdout = Sink()\nsys.exit(3)\n",
    "stdout file descriptor closed with output pending": "import os\nprint('hi')\nos.close(1)\n",
    "branch on a preloaded module": (
        "import sys\nif 'json' in sys.modules or 'decimal' in sys.modules:\n    raise SystemExit(4)\n"
        "print('fresh interpreter')\n"
    ),
    "modules after importing a preloaded one": "import sys, json\nprint(sorted(sys.modules))\n",
    "warnings filters and environment at start": (
        "import os, sys, warnings\n"
        "print(len(warnings.filters), sorted(os.environ), sorted(sys.path_importer_cache))\n"
    ),
    "__main__ globals at start": "print(sorted(globals()), __doc__, type(__loader__).__name__, __spec__)\n",
    "atexit handler reads __file__": (
        "import atexit\natexit.register(lambda: print('__file__' in globals()))\n"
    ),
    "finaliser reads a global": (
        "class Note:\n    def __del__(self):\n        print('finalised with', helper)\n"
        "helper = 5\nnote = Note()\n"
    ),
    "uncaught KeyboardInterrupt": "raise KeyboardInterrupt\n",
    "excepthook raises": (
        "import sys\ndef hook(*args):\n    raise RuntimeError('hook')\n"
        "sys.excepthook = hook\nraise KeyError('x')\n"
    ),
    "exit message with stderr None": "import sys\nsys.stderr = None\nsys.exit('bye')\n",
    "exit code beyond a C long": "raise SystemExit(2**70)\n",
    "NUL byte in the source": "x = 1\x00\n",
    "latin-1 coding declaration": "# -*- coding: latin-1 -*-\nprint('caf\u00e9')\n",
    "unknown coding declaration": "# coding: nonsense\nprint(1)\n",
}
_ADDRESS = re.compile(r"0x[0-9a-f]+")


def _comparable(result: ExecutionResult) -> tuple[object, ...]:
    output = result.output.read_bytes() if result.output is not None else None
    return (result.status, result.exit_code, result.stdout, _ADDRESS.sub("0x", result.stderr), output)


@pytest.fixture(scope="module")
def cold(strict_bubblewrap: BubblewrapSandbox) -> BubblewrapSandbox:
    """The reference backend: a cold strict bubblewrap run."""
    return strict_bubblewrap


@pytest.fixture(scope="module")
def warm(cold: BubblewrapSandbox) -> Iterator[WarmSandbox]:
    sandbox = WarmSandbox(BubblewrapSandbox(strict=True), pool_size=1, preload=PRELOAD)
    yield sandbox
    sandbox.close()


def _warm_run(warm: WarmSandbox, request: ExecutionRequest) -> ExecutionResult:
    warm.warm_up(request, wait=True)
    hits = warm.warm_hits
    result = warm.run(request)
    assert warm.warm_hits == hits + 1 or "cold run" in result.detail, result.detail
    return result


@pytest.mark.parametrize("case", sorted(PARITY_CASES))
def test_warm_run_grades_like_a_cold_run(case: str, cold: BubblewrapSandbox, warm: WarmSandbox) -> None:
    request = ExecutionRequest(code=PARITY_CASES[case], timeout_s=30)
    reference = cold.run(request)
    assert _comparable(_warm_run(warm, request)) == _comparable(reference), case


def test_decoding_differences_run_cold_not_warm(warm: WarmSandbox) -> None:
    for code in (PARITY_CASES["NUL byte in the source"], PARITY_CASES["unknown coding declaration"]):
        result = _warm_run(warm, ExecutionRequest(code=code, timeout_s=30))
        assert "cold run (the code has" in result.detail


@pytest.mark.slow
def test_branching_on_preloaded_sklearn_grades_the_same_warm_and_cold(cold: BubblewrapSandbox) -> None:
    """The default preload (numpy, pandas, scikit-learn) is invisible; importing it loads what cold does."""
    warm = WarmSandbox(BubblewrapSandbox(strict=True), pool_size=1, preload=DEFAULT_PRELOAD)
    try:
        for code in (
            "import sys\nif 'sklearn' in sys.modules:\n    raise SystemExit(4)\nprint(len(sys.modules))\n",
            "import sys, warnings, os\nfrom sklearn.linear_model import LogisticRegression\n"
            "print(sorted(sys.modules), warnings.filters, sorted(os.environ))\n",
        ):
            request = ExecutionRequest(code=code, timeout_s=120)
            reference = cold.run(request)
            hot = _warm_run(warm, request)
            assert reference.status == "ok", reference.stderr
            assert _comparable(hot) == _comparable(reference)
            assert "warm worker" in hot.detail
    finally:
        warm.close()


def _docker() -> Sandbox:
    pytest.importorskip("docker")
    from wmrl_adapters.docker import DockerSandbox, engine_reachable

    if not engine_reachable():
        pytest.skip("no Docker engine reachable (set DOCKER_HOST)")
    return DockerSandbox(strict=True)


_DOCKER_CASES = ("stdout left on a closed devnull file", "stdout flush fails after sys.exit(3)",
                 "uncaught KeyboardInterrupt", "exit message with stderr None", "finaliser reads a global")


@pytest.mark.docker
def test_docker_grades_like_the_cold_local_sandbox(cold: BubblewrapSandbox) -> None:
    docker = _docker()
    try:
        for case in _DOCKER_CASES:
            request = ExecutionRequest(code=PARITY_CASES[case], timeout_s=60)
            assert _comparable(docker.run(request))[:4] == _comparable(cold.run(request))[:4], case
    finally:
        docker.close()


SURROGATE_CODES = ["x = '\ud800'\n", "# a comment \udcff\nprint(1)\n", "\udfff"]


def _assert_refused(result: ExecutionResult, code: str, backend: str) -> None:
    assert (result.status, result.exit_code, result.output) == ("error", None, None)
    assert result.backend == backend
    position = next(index for index, character in enumerate(code) if 0xD800 <= ord(character) <= 0xDFFF)
    assert f"lone surrogate {ascii(code[position])} at character {position}" in result.detail


@pytest.mark.parametrize("code", SURROGATE_CODES)
def test_lone_surrogate_is_a_result_not_an_exception_on_local_backends(
    code: str, cold: BubblewrapSandbox, warm: WarmSandbox, tmp_path: Path
) -> None:
    request = ExecutionRequest(code=code, timeout_s=30)
    warm.warm_up(request, wait=True)
    unsafe = UnsafeSandbox(output_dir=tmp_path)
    try:
        for backend in (cold, warm, unsafe):
            _assert_refused(backend.run(request), code, backend.name)
    finally:
        unsafe.close()
    assert warm.run(ExecutionRequest(code="print('still fine')", timeout_s=30)).stdout == "still fine\n"


@pytest.mark.docker
def test_lone_surrogate_is_a_result_not_an_exception_on_docker() -> None:
    docker = _docker()
    try:
        for code in SURROGATE_CODES:
            _assert_refused(docker.run(ExecutionRequest(code=code, timeout_s=30)), code, "docker")
    finally:
        docker.close()

