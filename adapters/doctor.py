"""``wmrl doctor``: say which sandboxes, engines and offline models work on this machine.

Why: a user's first failure is usually environmental (bubblewrap missing, no Docker engine, a model
wheel not installed). One command that probes each piece *for real* (a sandboxed ``print``, a
Docker ping, a file lookup) and prints what to install saves reading a traceback per component.
"""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from wmrl_adapters.cli import plain_help

__all__ = ["Check", "run_checks", "main"]


@dataclass(frozen=True)
class Check:
    """The result of probing one component.

    Attributes:
        name: the component.
        ok: whether it works here.
        detail: what was found, or what to install.
    """

    name: str
    ok: bool
    detail: str


def _sandbox(name: str) -> Check:
    from wmrl_envs.sandbox import ExecutionRequest, make_sandbox

    try:
        sandbox = make_sandbox(name, strict=True)
    except Exception as exc:  # every failure is the answer here, not a crash of the doctor
        return Check(f"sandbox:{name}", False, str(exc).splitlines()[0])
    try:
        result = sandbox.run(ExecutionRequest(code="print('ok')", timeout_s=60))
    finally:
        sandbox.close()
    ok = result.status == "ok" and "ok" in result.stdout
    return Check(
        f"sandbox:{name}", ok, f"status={result.status} wall={result.wall_s:.2f}s {result.detail}".strip()
    )


def _module(name: str, extra: str) -> Check:
    found = importlib.util.find_spec(name) is not None
    return Check(f"python:{name}", found, "installed" if found else f"pip install 'wmrl[{extra}]'")


def _smollm2() -> Check:
    from wmrl_adapters.models import smollm2_gguf_path

    try:
        return Check("model:SmolLM2-135M-Instruct", True, str(smollm2_gguf_path()))
    except Exception as exc:
        return Check("model:SmolLM2-135M-Instruct", False, str(exc).splitlines()[0])


def _checks() -> list[Callable[[], Check]]:
    return [
        lambda: _sandbox("local"),
        lambda: _sandbox("docker"),
        lambda: _module("transformers", "llm"),
        lambda: _module("llama_cpp", "server"),
        lambda: _module("lightgbm", "kaggle"),
        _smollm2,
    ]


def run_checks() -> list[Check]:
    """Probe every component; never raises."""
    return [check() for check in _checks()]


def main(argv: Sequence[str] | None = None) -> int:
    """Print one line per component; exit status 0 when the default sandbox works."""
    parser = argparse.ArgumentParser(prog="wmrl doctor", description=plain_help(main.__doc__))
    parser.parse_args(argv)
    checks = run_checks()
    for check in checks:
        print(f"{'ok ' if check.ok else 'NO '} {check.name:<32} {check.detail}")
    return 0 if checks[0].ok else 1
