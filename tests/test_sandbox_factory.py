"""The backend registry and factory: by-name construction, strictness, lazy adapter import."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

import wmrl_envs.sandbox as sandbox_module
from wmrl_algos.errors import ConfigError, IsolationUnavailableError
from wmrl_envs.sandbox import (
    ExecutionRequest,
    ExecutionResult,
    Sandbox,
    UnsafeSandbox,
    available_backends,
    make_sandbox,
    register_backend,
)


class _EchoSandbox:
    """A toy backend used to exercise the registry (a real class, not a mock)."""

    name = "echo"

    def __init__(self, *, strict: bool = True, prefix: str = "") -> None:
        self.strict = strict
        self.prefix = prefix

    def run(self, request: ExecutionRequest) -> ExecutionResult:
        return ExecutionResult(status="ok", exit_code=0, stdout=self.prefix + request.code, stderr="",
                               wall_s=0.0, backend=self.name)

    def close(self) -> None:
        return None


@pytest.fixture()
def echo_registered() -> Iterator[None]:
    register_backend("echo", _EchoSandbox)
    yield
    sandbox_module._REGISTRY.pop("echo")
    sandbox_module._AVAILABILITY.pop("echo")


def test_unknown_backend_name_is_a_config_error_listing_the_choices() -> None:
    with pytest.raises(ConfigError, match="'local'"):
        make_sandbox("chroot")


def test_unsafe_backend_is_returned_only_when_named() -> None:
    sandbox = make_sandbox("unsafe")
    assert isinstance(sandbox, UnsafeSandbox) and isinstance(sandbox, Sandbox)
    sandbox.close()


def test_registered_backend_receives_strict_and_kwargs(echo_registered: None) -> None:
    sandbox = make_sandbox("echo", strict=False, prefix=">")
    assert isinstance(sandbox, _EchoSandbox) and sandbox.strict is False
    assert sandbox.run(ExecutionRequest(code="hi")).stdout == ">hi"
    assert "echo" in available_backends()


def test_available_backends_always_offers_unsafe_and_prefers_local() -> None:
    names = available_backends()
    assert "unsafe" in names
    if "local" in names:
        assert names.index("local") < names.index("unsafe")


def test_without_bubblewrap_only_an_explicit_opt_in_falls_back_to_unsafe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Simulates a host without bwrap by hiding it from the PATH lookup (we cannot uninstall it here).
    real_which = sandbox_module.shutil.which
    monkeypatch.setattr(sandbox_module.shutil, "which",
                        lambda cmd, path=None: None if cmd == "bwrap" else real_which(cmd, path=path))
    import wmrl_envs.sandbox.local as local_module

    monkeypatch.setattr(local_module.shutil, "which",
                        lambda cmd, path=None: None if cmd == "bwrap" else real_which(cmd, path=path))
    with pytest.raises(IsolationUnavailableError, match="bubblewrap"):
        make_sandbox("local", strict=True)
    with pytest.raises(IsolationUnavailableError, match="bubblewrap"):
        make_sandbox("local", strict=False)  # lenient, but never silently unisolated
    with pytest.warns(RuntimeWarning, match="UNSAFE"):
        sandbox = make_sandbox("local", strict=False, allow_unsafe=True)
    assert isinstance(sandbox, UnsafeSandbox)
    result = sandbox.run(ExecutionRequest(code="print(1)", timeout_s=30))
    assert result.backend == "unsafe" and "no isolation" in result.detail, "the run records the fallback"
    sandbox.close()


def test_core_import_does_not_import_the_docker_adapter() -> None:
    code = "import sys, wmrl_envs.sandbox; print('wmrl_adapters' in ' '.join(sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_docker_backend_is_imported_lazily_by_name() -> None:
    code = ("import sys, wmrl_envs.sandbox as s\n"
            "try:\n    s.make_sandbox('docker', strict=True)\nexcept Exception as exc:\n"
            "    print(type(exc).__name__)\n"
            "print('wmrl_adapters.docker' in sys.modules, 'docker' in s._REGISTRY)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip().splitlines()[-1] == "True True"
