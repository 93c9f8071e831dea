"""The ``wmrl`` command line: one entry point, subcommands that each live in their own module.

Why a dispatch table of module paths: each subcommand pulls heavy, optional dependencies (a sandbox,
torch, transformers, the Docker SDK); importing them only when their subcommand runs keeps
``wmrl --help`` instant and lets a user without ``wmrl[llm]`` still build the suite or run the sandbox.
Each target is a ``main(argv) -> int | object`` function that parses its own arguments.

Why the entry point catches :class:`~wmrl_algos.errors.WMRLError`: every error of the library already
says what was wrong and how to fix it; a traceback in front of that message only hides it. So a bad
input prints one ``wmrl <command>: error: ...`` line and exits 2, like an argparse usage error
(``WMRL_TRACEBACK=1`` shows the traceback for a bug report). Any other exception is a bug and keeps
its traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.metadata
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, TypeVar

from wmrl_algos.errors import WMRLError

__all__ = ["SUBCOMMANDS", "main", "parse_dataclass_args", "plain_help"]

ArgsT = TypeVar("ArgsT")

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "suite": ("wmrl_envs.kaggle.suite", "Build or list the built-in offline Kaggle suite."),
    "leaderboards": ("wmrl_envs.kaggle.references", "Run the reference population and build leaderboards."),
    "fidelity": ("wmrl_adapters.fidelity_cli", "Measure how well a world model predicts real executions."),
    "docker": ("wmrl_adapters.docker", "Build the Docker sandbox image / check the engine."),
    "doctor": ("wmrl_adapters.doctor", "Report which sandboxes, engines and offline models work here."),
    "train": ("wmrl_adapters.train.cli", "Train a code agent, or a robot policy (--env), with GRPO or WMRL."),
    "eval": (
        "wmrl_adapters.train.kaggle.evaluate", "Evaluate a trained run for real on held-out or any tasks."
    ),
    "compare": (
        "wmrl_adapters.train.kaggle.compare", "Train every method x seeds on the Kaggle suite; one table."
    ),
    "record": (
        "wmrl_adapters.train.kaggle.record", "Execute designs on the suite once, for real: a replay table."
    ),
}
"""Subcommand -> (module with a ``main(argv)`` function, one-line help)."""


_RST_ROLE = re.compile(r":[a-z]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`")
_RST_LITERAL = re.compile(r"``([^`]*)``")


def plain_help(text: str | None) -> str:
    """Docstring text as a terminal shows it: reST roles and literals become plain words.

    ``--help`` descriptions often come from docstrings; argparse prints them verbatim, so
    ``:class:`~wmrl_envs.kaggle.env.KaggleEnv``` would reach the user as markup.

    Example:
        >>> plain_help("``wmrl suite``: build :class:`~wmrl_envs.kaggle.suite.KaggleSuite` files.")
        'wmrl suite: build KaggleSuite files.'
    """
    if not text:
        return ""
    text = _RST_ROLE.sub(lambda match: match.group(1).rsplit(".", 1)[-1], text)
    return _RST_LITERAL.sub(r"\1", text).strip()


def parse_dataclass_args(
    cls: type[ArgsT], argv: Sequence[str] | None, description: str, *, prog: str | None = None
) -> ArgsT:
    """Build a CleanRL-style ``Args`` dataclass from the command line: one ``--option`` per field.

    Fields are ``bool`` (a flag, off by default), ``int``, ``float`` or ``str``, each with
    ``metadata["help"]``; ``--help`` shows every other field's default. The dataclass's own
    ``__post_init__`` validates the values.

    Example:
        >>> @dataclasses.dataclass(frozen=True)
        ... class Args:
        ...     seeds: int = dataclasses.field(default=5, metadata={"help": "seeds"})
        ...     smoke: bool = dataclasses.field(default=False, metadata={"help": "tiny budget"})
        >>> parse_dataclass_args(Args, ["--seeds", "2", "--smoke"], "demo")
        Args(seeds=2, smoke=True)
    """
    parser = argparse.ArgumentParser(prog=prog, description=plain_help(description))
    kinds: dict[str, Any] = {"int": int, "float": float, "str": str}
    for spec in dataclasses.fields(cls):  # type: ignore[arg-type]
        flag = "--" + spec.name.replace("_", "-")
        help_text = spec.metadata["help"].replace("%", "%%")  # argparse treats % as a format
        if spec.type in ("bool", bool):
            parser.add_argument(flag, action="store_true", help=help_text)
        else:
            kind = kinds[spec.type if isinstance(spec.type, str) else spec.type.__name__]
            if "(default" not in help_text:
                help_text += " (default: %(default)s)"
            parser.add_argument(flag, type=kind, default=spec.default, help=help_text)
    return cls(**vars(parser.parse_args(argv)))


def _usage() -> str:
    width = max(len(name) for name in SUBCOMMANDS)
    lines = ["usage: wmrl [--version] <command> [options]", "", "commands:"]
    lines += [f"  {name.ljust(width)}  {help_text}" for name, (_, help_text) in SUBCOMMANDS.items()]
    lines += ["", "Run 'wmrl <command> --help' for a command's options."]
    return "\n".join(lines)


def _version() -> str:
    try:
        return importlib.metadata.version("wmrl")
    except importlib.metadata.PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``wmrl`` subcommand; returns the process exit status.

    Exit status: the subcommand's own (0 on success); 2 for a usage error (no command, an unknown
    one) and for any :class:`~wmrl_algos.errors.WMRLError`, printed as one line without a traceback.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(_usage(), file=sys.stderr)
        return 2
    if args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    if args[0] in ("-V", "--version"):
        print(f"wmrl {_version()}")
        return 0
    command, rest = args[0], args[1:]
    if command not in SUBCOMMANDS:
        print(f"wmrl: unknown command {command!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(SUBCOMMANDS[command][0])
        result = module.main(rest)
    except WMRLError as exc:
        if os.environ.get("WMRL_TRACEBACK"):
            raise
        message = " ".join(str(exc).split())
        print(f"wmrl {command}: error: {message}", file=sys.stderr)
        return 2
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    raise SystemExit(main())
