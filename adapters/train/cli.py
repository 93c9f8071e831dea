"""``wmrl train``: the command-line front end of :class:`~wmrl_adapters.train.trainer.Trainer`.

Why ``--key value`` for every config field: a run is reproduced from its ``config.json``; any field
can be overridden on the command line the same way (``--group-size 8 --algo od``), and an unknown
key is an error that lists the valid ones (exit 2, through ``wmrl``'s error handling).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wmrl_adapters.train.embodied.config import EmbodiedConfig
from wmrl_adapters.train.kaggle.config import TrainConfig
from wmrl_adapters.train.run.checks import check_path, coerce, load_config
from wmrl_adapters.train.run.settings import settings_before

from wmrl_algos.errors import ConfigError, DataError

if TYPE_CHECKING:
    from wmrl_adapters.train.embodied.trainer import EmbodiedTrainer
    from wmrl_adapters.train.kaggle.trainer import Trainer

__all__ = ["main", "parse_overrides"]

_DESCRIPTION = """\
Train a code agent on the built-in Kaggle suite, or a robot policy in simulation with --env, with GRPO,
WMRL or one of WMRL's ablations. A run lives in its own directory (config.json, metrics.jsonl,
checkpoint.pt, plots/, summary.json); --resume continues an interrupted one. Guides: docs/training.md
(Kaggle) and docs/embodied.md (robots)."""


def parse_overrides(extra: Sequence[str], cls: type = TrainConfig) -> dict[str, object]:
    """``["--group-size", "8", "--algo=od"]`` -> ``{"group_size": 8, "algo": "od"}`` (fields of ``cls``).

    Raises:
        ConfigError: a token that is not ``--key value``, or an unknown key (the valid ones are listed).
    """
    out: dict[str, object] = {}
    tokens = list(extra)
    while tokens:
        token = tokens.pop(0)
        if not token.startswith("--"):
            raise ConfigError(f"unexpected argument {token!r}; pass config overrides as --key value")
        key, _, value = token[2:].partition("=")
        if not value:
            if not tokens:
                raise ConfigError(f"--{key} needs a value")
            value = tokens.pop(0)
        name = key.replace("-", "_")
        out[name] = coerce(name, value, cls)
    return out


def _shown(value: Any) -> str:
    """A default as the user would type it on the command line."""
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "unset"
    return str(value) if value != "" else "empty"


def _config_help() -> str:
    """The settings of both configs, one ``--key`` each with its help and default, wrapped like argparse."""
    width = max(60, shutil.get_terminal_size().columns - 2)
    sections = (
        ("settings of a Kaggle run (--key value, or keys of the --config JSON file; the defaults are sized "
         "for a 2-core CPU machine):", TrainConfig),
        ("settings of an embodied run (with --env robosuite:TASK or libero:SUITE[/IDS]):", EmbodiedConfig),
    )  # fmt: skip
    lines: list[str] = []
    for heading, cls in sections:
        lines += [*textwrap.wrap(heading, width), ""]
        for spec in dataclasses.fields(cls):
            flag = f"  --{spec.name.replace('_', '-')}"
            text = f"{spec.metadata['help']} (default: {_shown(spec.default)})"
            lines += textwrap.wrap(
                text, width, initial_indent=flag.ljust(24), subsequent_indent=" " * 24, break_on_hyphens=False
            )
        lines.append("")
    return "\n".join(lines).rstrip()


def _is_embodied(extra: Sequence[str], resume: Path | None, config_file: Path | None) -> bool:
    """An embodied run: ``--env`` given, or the resumed run / config file has an ``env`` key."""
    if any(token == "--env" or token.startswith("--env=") for token in extra):
        return True
    for path in (resume / "config.json" if resume is not None else None, config_file):
        if path is not None and path.is_file():
            try:
                return "env" in json.loads(path.read_text())
            except ValueError:
                return False
    return False


def main(argv: Sequence[str] | None = None) -> int:
    """``wmrl train``: validate every setting and path, then train in a new or resumed run directory.

    Nothing is loaded (no model, simulator or sandbox) until the whole configuration is valid.
    """
    parser = argparse.ArgumentParser(
        prog="wmrl train",
        description=_DESCRIPTION,
        epilog=_config_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--config", type=Path, default=None, help="JSON file of settings (any subset; flags override it)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="new run directory (default: runs/<algo>-<world model>-s<seed>-<time>)",
    )
    parser.add_argument(
        "--resume", type=Path, default=None, help="continue the interrupted run in this directory"
    )
    parser.add_argument(
        "--ray",
        default=None,
        help="run the real executions on a Ray cluster: auto, or the cluster's address (default: this "
        "machine's sandbox)",
    )
    args, extra = parser.parse_known_args(argv)
    if args.config is not None:
        check_path("--config", args.config, "a JSON file of settings", kind="file")
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise ConfigError(f"--out {str(args.out)!r} is a file; pass a directory for the new run")
    embodied = _is_embodied(extra, args.resume, args.config)
    cls = EmbodiedConfig if embodied else TrainConfig
    overrides = parse_overrides(extra, cls)
    if args.resume is not None:
        saved_path = args.resume / "config.json"
        saved = json.loads(saved_path.read_text()) if saved_path.is_file() else {}
        if args.config is not None:
            config = load_config(args.config, overrides, cls)
        else:
            config = load_config(None, {**settings_before(saved), **overrides}, cls)
        from wmrl_adapters.train.kaggle.evaluate import refuse_unsafe_from_file

        refuse_unsafe_from_file(getattr(config, "sandbox", None), overrides.get("sandbox"), saved_path)
        run_dir = args.resume
    else:
        config = load_config(args.config, overrides, cls)
        world_model = config.world_model.replace(":", "_").replace("/", "_")
        name = f"{config.algo}-{world_model}-s{config.seed}-{time.strftime('%Y%m%d-%H%M%S')}"
        run_dir = args.out if args.out is not None else Path("runs") / name
    if embodied:
        if args.ray is not None:
            raise ConfigError(
                "--ray runs Kaggle executions; an embodied run uses --workers simulator processes"
            )
        from wmrl_adapters.train.embodied.trainer import EmbodiedTrainer

        trainer: Trainer | EmbodiedTrainer = EmbodiedTrainer(config, run_dir, resume=args.resume is not None)
        print(f"run directory: {run_dir}")
        try:
            summary = trainer.run()
        except KeyboardInterrupt:
            return 130
        _print_embodied(summary, run_dir)
        return 0
    from wmrl_adapters.train.kaggle.evaluate import resolve_competitions
    from wmrl_adapters.train.run.measure import describe_held_out

    from wmrl_envs.kaggle.suite import load_suite

    suite = load_suite()
    evaluation = []
    if config.eval_samples:  # an unknown evaluation task fails now, not after the whole training
        specs = [item.strip() for item in config.eval_competitions.split(",") if item.strip()]
        try:
            evaluation = resolve_competitions(specs, suite)
        except (ConfigError, DataError) as error:
            raise ConfigError(f"--eval-competitions {config.eval_competitions!r}: {error}") from error
    from wmrl_adapters.train.kaggle.trainer import Trainer

    trainer = Trainer(config, run_dir, resume=args.resume is not None, ray=args.ray, suite=suite)
    if evaluation:
        trainer.set_eval_competitions(evaluation)
    print(f"run directory: {run_dir}")
    try:
        summary = trainer.run()
    except KeyboardInterrupt:
        return 130
    final = summary["final"]
    print(
        f"done: {summary['steps']} steps, real executions {final.get('compute/real_executions', 0):.0f} "
        f"(cache hits {final.get('compute/cache_hits', 0):.0f}), compute charged "
        f"{final.get('compute/charged_total', 0):.1f} CPU-s (sandbox "
        f"{final.get('compute/sandbox_cpu_charged', 0):.1f}, world model "
        f"{final.get('compute/world_model_cpu_s', 0):.1f}, policy sampling "
        f"{final.get('compute/policy_sample_cpu_s', 0):.1f} + update "
        f"{final.get('compute/policy_update_cpu_s', 0):.1f}), spent {final.get('compute/spent_total', 0):.1f}"
    )
    for line in describe_held_out(summary.get("held_out", {})):
        print(line)
    if summary["eval"]:
        result = summary["eval"]
        print(
            f"held-out rates at the end: valid {result.get('eval/valid_rate', float('nan')):.2f}, above "
            f"median {result.get('eval/above_median_rate', float('nan')):.2f}, "
            f"medal {result.get('eval/medal_rate', float('nan')):.2f}"
        )
    _print_run_files(summary, run_dir)
    return 0


def _print_embodied(summary: dict[str, object], run_dir: Path) -> None:
    from wmrl_adapters.train.run.measure import describe_held_out

    final: dict[str, float] = summary["final"]  # type: ignore[assignment]
    success = final.get("eval/success_rate")
    episodes, demos = final.get("compute/sim_episodes", 0.0), final.get("compute/demo_episodes", 0.0)
    print(
        f"done: {summary['steps']} steps, simulator episodes {episodes:.0f} ({demos:.0f} demonstrations, "
        f"{episodes - demos:.0f} training rollouts), real success labels used "
        f"{final.get('compute/real_labels', 0):.0f}, compute charged "
        f"{final.get('compute/charged_total', 0):.1f} CPU-s (simulator "
        f"{final.get('compute/sim_cpu_s', 0):.1f}, scorer {final.get('compute/world_model_cpu_s', 0):.1f}, "
        f"policy sampling {final.get('compute/policy_sample_cpu_s', 0):.1f} + update "
        f"{final.get('compute/policy_update_cpu_s', 0):.1f})"
    )
    for line in describe_held_out(summary.get("held_out", {}), label="success"):  # type: ignore[arg-type]
        print(line)
    if success is not None:
        print(
            f"evaluation: success rate {success:.3f} over {final.get('eval/episodes', 0):.0f} episodes "
            f"({final.get('time/eval_episodes', 0):.0f} simulator episodes in all evaluations, "
            f"{final.get('time/eval_sim_cpu_s', 0):.1f} simulator CPU-s, "
            f"{final.get('time/eval_seconds', 0):.1f} s, not charged)"
        )
    if (run_dir / "policy.pt").is_file():
        print(f"policy:  {run_dir / 'policy.pt'} (start RL from it with --init)")
    _print_run_files(summary, run_dir)


def _print_run_files(summary: dict[str, object], run_dir: Path) -> None:
    """Where a finished run of either track left its metrics, plots and summary."""
    print(f"metrics: {run_dir / 'metrics.jsonl'}")
    print(f"plots:   {', '.join(summary['plots'])}")  # type: ignore[arg-type]
    print(f"summary: {run_dir / 'summary.json'}")
