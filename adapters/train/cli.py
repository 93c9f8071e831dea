"""``wmrl train``: the command-line front end of :class:`~wmrl_adapters.train.trainer.Trainer`.

Why ``--key value`` for every config field: a run is reproduced from its ``config.json``; any field
can be overridden on the command line the same way (``--group-size 8 --algo od``), and an unknown
key is an error that lists the valid ones (exit 2, through ``wmrl``'s error handling).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path

from wmrl_adapters.train.config import EmbodiedConfig, TrainConfig, coerce, load_config

from wmrl_algos.errors import ConfigError

__all__ = ["main", "parse_overrides"]


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


def _config_help() -> str:
    lines = ["config keys (--key value; defaults are the CPU embedded default):"]
    for spec in dataclasses.fields(TrainConfig):
        lines.append(f"  --{spec.name.replace('_', '-'):<20} {spec.default!r:<18} {spec.metadata['help']}")
    lines += ["", "embodied runs (--env robosuite:TASK | libero:SUITE[/IDS]; see docs/embodied.md):"]
    for spec in dataclasses.fields(EmbodiedConfig):
        lines.append(f"  --{spec.name.replace('_', '-'):<20} {spec.default!r:<18} {spec.metadata['help']}")
    return "\n".join(lines)


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
    """Train a code agent on the Kaggle suite (docs/training.md), or an embodied policy with --env
    (docs/embodied.md), with GRPO / WMRL and its ablations."""
    from wmrl_adapters.train.embodied import EmbodiedTrainer
    from wmrl_adapters.train.trainer import Trainer

    parser = argparse.ArgumentParser(
        prog="wmrl train",
        description=main.__doc__,
        epilog=_config_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", type=Path, default=None, help="JSON file of config fields")
    parser.add_argument("--out", type=Path, default=None, help="run directory (default: runs/<name>)")
    parser.add_argument("--resume", type=Path, default=None, help="continue the run in this directory")
    parser.add_argument("--ray", default=None, help="run real executions on Ray: auto or a cluster address")
    args, extra = parser.parse_known_args(argv)
    embodied = _is_embodied(extra, args.resume, args.config)
    cls = EmbodiedConfig if embodied else TrainConfig
    overrides = parse_overrides(extra, cls)
    if args.resume is not None:
        saved_path = args.resume / "config.json"
        saved = json.loads(saved_path.read_text()) if saved_path.is_file() else {}
        if args.config is not None:
            config = load_config(args.config, overrides, cls)
        else:
            config = load_config(None, {**saved, **overrides}, cls)
        from wmrl_adapters.train.evaluate import refuse_unsafe_from_file

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
        trainer: Trainer | EmbodiedTrainer = EmbodiedTrainer(config, run_dir, resume=args.resume is not None)
        print(f"run directory: {run_dir}")
        try:
            summary = trainer.run()
        except KeyboardInterrupt:
            return 130
        _print_embodied(summary, run_dir)
        return 0
    trainer = Trainer(config, run_dir, resume=args.resume is not None, ray=args.ray)
    print(f"run directory: {run_dir}")
    try:
        summary = trainer.run()
    except KeyboardInterrupt:
        return 130
    final = summary["final"]
    print(
        f"done: {summary['steps']} steps, real executions {final.get('compute/real_executions', 0):.0f} "
        f"(cache hits {final.get('compute/cache_hits', 0):.0f}), compute charged "
        f"{final.get('compute/charged_total', 0):.1f} s, spent {final.get('compute/spent_total', 0):.1f} s"
    )
    if summary["eval"]:
        result = summary["eval"]
        print(
            f"held-out: position {result.get('eval/position', float('nan')):.3f}, valid "
            f"{result.get('eval/valid_rate', float('nan')):.2f}, above median "
            f"{result.get('eval/above_median_rate', float('nan')):.2f}, "
            f"medal {result.get('eval/medal_rate', float('nan')):.2f}"
        )
    print(f"metrics: {run_dir / 'metrics.jsonl'}")
    print(f"plots:   {', '.join(summary['plots'])}")
    print(f"summary: {run_dir / 'summary.json'}")
    return 0


def _print_embodied(summary: dict[str, object], run_dir: Path) -> None:
    final: dict[str, float] = summary["final"]  # type: ignore[assignment]
    success = final.get("eval/success_rate")
    print(
        f"done: {summary['steps']} steps, sim episodes {final.get('compute/sim_episodes', 0):.0f}, real "
        f"success labels used {final.get('compute/real_labels', 0):.0f}, compute charged "
        f"{final.get('compute/charged_total', 0):.1f} s"
    )
    if success is not None:
        print(f"evaluation: success rate {success:.3f} over {final.get('eval/episodes', 0):.0f} episodes")
    if (run_dir / "policy.pt").is_file():
        print(f"policy:  {run_dir / 'policy.pt'} (start RL from it with --init)")
    print(f"metrics: {run_dir / 'metrics.jsonl'}")
    print(f"plots:   {', '.join(summary['plots'])}")  # type: ignore[arg-type]
    print(f"summary: {run_dir / 'summary.json'}")
