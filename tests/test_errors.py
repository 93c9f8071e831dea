"""The exception family: one base class, ValueError compatibility, install hints for optional deps."""

from __future__ import annotations

import pytest

from wmrl_algos.errors import (
    BackendUnavailableError,
    ConfigError,
    IsolationUnavailableError,
    MissingDependencyError,
    SandboxError,
    WMRLError,
    WorldModelError,
    require,
)


@pytest.mark.parametrize(
    "cls", [ConfigError, WorldModelError, BackendUnavailableError, SandboxError, IsolationUnavailableError]
)
def test_every_error_is_caught_by_the_family_base(cls: type[Exception]) -> None:
    with pytest.raises(WMRLError):
        raise cls("boom")


def test_config_error_is_a_value_error_for_callers_that_expect_one() -> None:
    assert issubclass(ConfigError, ValueError)


def test_require_returns_an_installed_module() -> None:
    assert require("json", "dev").dumps([1]) == "[1]"


def test_require_names_the_pip_extra_when_missing() -> None:
    with pytest.raises(MissingDependencyError, match=r"pip install 'wmrl\[ray\]'"):
        require("surely_not_an_installed_module_xyz", "ray")
    assert issubclass(MissingDependencyError, ImportError)
