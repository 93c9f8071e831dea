"""The ``wmrl`` command line: one entry point, subcommands that each live in their own module.

Why a dispatch table of module paths: each subcommand pulls heavy, optional dependencies (a sandbox,
torch, transformers, the Docker SDK); importing them only when their subcommand runs keeps
``wmrl --help`` instant and lets a user without ``wmrl[llm]`` still build the suite or run the sandbox.
Each target is a ``main(argv) -> int | object`` function that parses its own arguments.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import sys
from collections.abc import Sequence
from typing import Any, TypeVar

__all__ = ["SUBCOMMANDS", "main", "parse_dataclass_args"]

ArgsT = TypeVar("ArgsT")

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "suite": ("wmrl_envs.kaggle.suite", "Build or list the built-in offline Kaggle suite."),
    "leaderboards": ("wmrl_envs.kaggle.references", "Run the reference population and build leaderboards."),
    "fidelity": ("wmrl_adapters.fidelity_cli", "Measure how well a world model predicts real executions."),
    "docker": ("wmrl_adapters.docker", "Build the Docker sandbox image / check the engine."),
    "doctor": ("wmrl_adapters.doctor", "Report which sandboxes, engines and offline models work here."),
}
"""Subcommand -> (module with a ``main(argv)`` function, one-line help)."""


def parse_dataclass_args(cls: type[ArgsT], argv: Sequence[str] | None, description: str) -> ArgsT:
    """Build a CleanRL-style ``Args`` dataclass from the command line: one ``--option`` per field.

    Fields are ``bool`` (a flag), ``int``, ``float`` or ``str``, each with ``metadata["help"]``; the
    dataclass's own ``__post_init__`` validates the values.

    Example:
        >>> @dataclasses.dataclass(frozen=True)
        ... class Args:
        ...     seeds: int = dataclasses.field(default=5, metadata={"help": "seeds"})
        ...     smoke: bool = dataclasses.field(default=False, metadata={"help": "tiny budget"})
        >>> parse_dataclass_args(Args, ["--seeds", "2", "--smoke"], "demo")
        Args(seeds=2, smoke=True)
    """
    parser = argparse.ArgumentParser(description=description)
    kinds: dict[str, Any] = {"int": int, "float": float, "str": str}
    for spec in dataclasses.fields(cls):  # type: ignore[arg-type]
        flag = "--" + spec.name.replace("_", "-")
        help_text = spec.metadata["help"].replace("%", "%%")  # argparse treats % as a format
        if spec.type in ("bool", bool):
            parser.add_argument(flag, action="store_true", help=help_text)
        else:
            kind = kinds[spec.type if isinstance(spec.type, str) else spec.type.__name__]
            parser.add_argument(flag, type=kind, default=spec.default, help=help_text)
    return cls(**vars(parser.parse_args(argv)))


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
