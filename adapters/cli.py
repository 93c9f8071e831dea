"""The ``wmrl`` command line: one entry point, subcommands that each live in their own module.

Why a dispatch table of module paths: each subcommand pulls heavy, optional dependencies (a sandbox,
torch, transformers, the Docker SDK); importing them only when their subcommand runs keeps
``wmrl --help`` instant and lets a user without ``wmrl[llm]`` still build the suite or run the sandbox.
Each target is a ``main(argv) -> int | object`` function that parses its own arguments.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

__all__ = ["SUBCOMMANDS", "main"]

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "suite": ("wmrl_envs.kaggle.suite", "Build or list the built-in offline Kaggle suite."),
    "leaderboards": ("wmrl_envs.kaggle.references", "Run the reference population and build leaderboards."),
    "fidelity": ("wmrl_adapters.fidelity_cli", "Measure how well a world model predicts real executions."),
    "docker": ("wmrl_adapters.docker", "Build the Docker sandbox image / check the engine."),
    "doctor": ("wmrl_adapters.doctor", "Report which sandboxes, engines and offline models work here."),
}
"""Subcommand -> (module with a ``main(argv)`` function, one-line help)."""


def _usage() -> str:
    width = max(len(name) for name in SUBCOMMANDS)
    lines = ["usage: wmrl <command> [options]", "", "commands:"]
    lines += [f"  {name.ljust(width)}  {help_text}" for name, (_, help_text) in SUBCOMMANDS.items()]
    lines += ["", "Run 'wmrl <command> --help' for a command's options."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``wmrl`` subcommand; returns the process exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    command, rest = args[0], args[1:]
    if command not in SUBCOMMANDS:
        print(f"wmrl: unknown command {command!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(SUBCOMMANDS[command][0])
    result = module.main(rest)
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    raise SystemExit(main())
