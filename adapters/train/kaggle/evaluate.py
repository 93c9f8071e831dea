"""Held-out evaluation of a trained policy, executed for real: ``wmrl eval RUN_DIR``.

Why its own loop (not :class:`~wmrl_envs.rollouts.GroupedRollout`): evaluation never consults a world
model and needs each execution's full grade (position, medal, above-median), which the env's ``info``
holds. Every episode is run for real with up to ``max_turns`` executions; an episode counts its best
execution, as a Kaggle entry counts its best submission. Its compute goes into its own
:class:`~wmrl_adapters.train.execution.ComputeMeter`, never into training compute.

Why per-episode positions: a held-out mean over 8 episodes has a standard error of about 0.05, as large
as the effects in question, so every mean is reported with its s.e., and "did training help" is the
*paired* change between two evaluations of the same episodes (the same competitions and reset seeds:
:func:`paired_change`), whose s.e. removes the tasks' own spread. An episode whose executions all failed
for the infrastructure's reasons (``sandbox_error``) has an unknown position (``None``): it is excluded
from the means and counted, never scored 0. A solution that fails (an error, a timeout, no valid
submission) has failed: position 0.

Competitions: the suite's held-out split (default), suite ids, or any competition directory in the
suite's format, MLE-bench's (``prepared/public``; the metric, the hidden answers and the sample
submission from its ``config.yaml``, see :func:`wmrl_envs.kaggle.competition.load_mlebench_competition`)
or MLE-Dojo's. A real MLE-bench or MLE-Dojo install keeps its registry (config, description,
leaderboards) apart from the prepared data: ``--registry`` names it. The policy has never seen such a
competition: the design agent chooses from the task features it computes from the competition's public
data and metric, the LLM agent reads the description; neither needs the id.

Isolation: the sandbox comes from the command line or the run's settings, but never the unsafe backend
from a file: a run directory's ``config.json`` is data anyone can edit, and ``"sandbox": "unsafe"`` there
would run the policy's solutions with this user's rights. That takes ``--sandbox unsafe`` typed on the
command line (:func:`refuse_unsafe_from_file`), and the result then says the solutions ran unisolated.
"""

from __future__ import annotations

import concurrent.futures
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wmrl_adapters.train.kaggle.execution import CachedKaggleEnv, ComputeMeter, ExecutionCache
from wmrl_adapters.train.run.measure import (
    HeldOutScore,
    PairedChange,
    describe_held_out,
    mean_se,
    paired_change,
)

from wmrl_algos.errors import ConfigError
from wmrl_envs.kaggle.competition import Competition, load_competition
from wmrl_envs.kaggle.metrics import METRICS
from wmrl_envs.kaggle.suite import KaggleSuite, load_suite
from wmrl_envs.rollouts import TurnContext
from wmrl_envs.sandbox.base import Sandbox

__all__ = [
    "EvalResult",
    "HeldOutScore",
    "PairedChange",
    "describe_held_out",
    "evaluate_policy",
    "main",
    "mean_se",
    "paired_change",
    "refuse_unsafe_from_file",
    "resolve_competitions",
]

SANDBOXES: tuple[str, ...] = ("local", "docker", "unsafe")
"""The backends ``wmrl eval --sandbox`` accepts (``unsafe``: no isolation)."""


@dataclass(frozen=True)
class EvalResult:
    """Held-out metrics of one evaluation.

    Attributes:
        position: mean over the known episodes of the best execution's private leaderboard position
            score (0 for an episode without a valid submission); ``None`` when no episode is known.
        above_median: share of the known episodes whose best submission is above the leaderboard median.
        medal: share of the known episodes with a medal.
        valid: share of the known episodes with at least one valid submission.
        episodes: episodes evaluated (known and unknown).
        per_competition: mean position per competition (over its known episodes).
        compute: the evaluation's own compute meter totals.
        backends: the sandbox backends that ran the executions (sorted).
        isolated: ``False`` when any execution ran unisolated (the ``unsafe`` backend).
        positions: each episode's position, in episode order (``None``: unknown, every execution failed
            for the infrastructure's reasons).
        episode_keys: each episode's ``"<competition id>#<reset seed>"``: what pairs two evaluations.
    """

    position: float | None
    above_median: float
    medal: float
    valid: float
    episodes: int
    per_competition: dict[str, float]
    compute: dict[str, float]
    backends: tuple[str, ...]
    isolated: bool
    positions: tuple[float | None, ...] = ()
    episode_keys: tuple[str, ...] = ()

    @property
    def unknown(self) -> int:
        """Episodes with an unknown position (excluded from every mean)."""
        return sum(position is None for position in self.positions)

    @property
    def position_se(self) -> float | None:
        """The standard error of :attr:`position` over the known episodes (``None`` with fewer than 2)."""
        return mean_se(self.positions)[1]

    def metrics(self, prefix: str = "eval") -> dict[str, float]:
        """Namespaced scalars (``eval/position``, ``eval/position_se``, ``eval/unknown``, ...; NaN where
        a value is unknown, ``eval/unknown`` says how many episodes were; ``eval/isolated`` is 0 when any
        execution ran unisolated)."""
        se = self.position_se
        out = {
            f"{prefix}/position": math.nan if self.position is None else self.position,
            f"{prefix}/position_se": math.nan if se is None else se,
            f"{prefix}/isolated": float(self.isolated),
            f"{prefix}/above_median_rate": self.above_median,
            f"{prefix}/medal_rate": self.medal,
            f"{prefix}/valid_rate": self.valid,
            f"{prefix}/episodes": float(self.episodes),
            f"{prefix}/unknown": float(self.unknown),
            f"{prefix}/sandbox_cpu_charged": self.compute["charged_cpu_s"],
            f"{prefix}/sandbox_cpu_spent": self.compute["spent_cpu_s"],
        }
        out.update({f"{prefix}/position/{key}": value for key, value in self.per_competition.items()})
        return out

    def held_out(self, step: int) -> HeldOutScore:
        """This evaluation as the :class:`HeldOutScore` of step ``step``."""
        mean, se, _ = mean_se(self.positions)
        return HeldOutScore(
            step=step,
            mean=mean,
            se=se,
            episodes=self.episodes,
            unknown=self.unknown,
            positions=self.positions,
            episode_keys=self.episode_keys,
        )


def resolve_competitions(
    specs: Sequence[str | Competition],
    suite: KaggleSuite,
    *,
    registry: Path | None = None,
    metric: str | None = None,
) -> list[Competition]:
    """Splits (``heldout`` / ``train`` / ``all``), suite ids, competition directories and loaded
    competitions, in order.

    Args:
        specs: splits, suite ids, directories (any layout of
            :func:`~wmrl_envs.kaggle.competition.load_competition`), or :class:`Competition` objects.
        suite: the suite the splits and ids refer to.
        registry: MLE-bench's ``mlebench/competitions/`` or MLE-Dojo's ``mledojo/competitions/``, for
            directories whose registry lives apart from the prepared data.
        metric: the metric of directories whose layout names none (MLE-Dojo's; overrides an MLE-bench
            ``config.yaml``'s grader).

    Raises:
        ConfigError: an entry that is neither a split, a suite id nor a competition directory (the
            message lists the suite's ids); a competition without a leaderboard; a directory whose id is
            a suite id or another directory's (evaluation, its execution cache and the policy tell
            competitions apart by id).
        DataError: a directory of no known layout (the message says what was expected).
    """
    out: list[Competition] = []
    outside: dict[str, Path] = {}
    for spec in specs:
        if isinstance(spec, Competition):
            competition = spec
        elif spec in ("heldout", "train", "all"):
            out += [suite.get(cid) for cid in suite.ids(spec)]  # type: ignore[arg-type]
            continue
        elif spec in suite:
            out.append(suite.get(spec))
            continue
        elif Path(spec).exists():
            competition = load_competition(Path(spec), registry=registry, metric=metric)
        else:
            raise ConfigError(
                f"unknown competition {spec!r}: not a split (heldout, train, all), not one of the suite's "
                f"{suite.ids()} and not a competition directory"
            )
        if not _is_suite_own(competition, suite):
            public = Path(competition.public_dir).resolve()
            first = outside.setdefault(competition.id, public)
            if competition.id in suite or first != public:
                other = "a built-in suite competition" if competition.id in suite else str(first)
                raise ConfigError(
                    f"competition {public} has the id {competition.id!r} of {other}; competitions are told "
                    "apart by id (execution cache, policy), so rename its directory"
                )
        out.append(competition)
    missing = [c.id for c in out if c.leaderboard is None]
    if missing:
        raise ConfigError(
            f"competitions {missing} have no leaderboard, so a position cannot be computed; build one with "
            "`wmrl leaderboards --ids ...` or add a leaderboard.csv (MLE-bench layout; with --registry, in "
            "the registry folder)"
        )
    return out


def _is_suite_own(competition: Competition, suite: KaggleSuite) -> bool:
    """Whether ``competition`` is the suite's competition of that id (the same public files)."""
    if competition.id not in suite:
        return False
    own = suite.get(competition.id, with_leaderboard=False)
    return Path(competition.public_dir).resolve() == Path(own.public_dir).resolve()


def refuse_unsafe_from_file(file_sandbox: str | None, command_line_sandbox: str | None, source: Path) -> None:
    """Refuse the unisolated backend when only a file asks for it.

    Args:
        file_sandbox: the backend the file (a run's ``config.json``) names, if any.
        command_line_sandbox: the backend typed on the command line (``--sandbox``), if any.
        source: the file, for the message.

    Raises:
        ConfigError: ``file_sandbox`` is ``"unsafe"`` and the command line chose no backend.
    """
    if file_sandbox == "unsafe" and command_line_sandbox is None:
        raise ConfigError(
            f"{source} asks for the unsafe sandbox, which runs the policy's solutions unisolated with this "
            "user's rights; isolation is never taken from a file: pass --sandbox unsafe on the command line "
            "to run them unisolated anyway, or --sandbox local (bubblewrap) or --sandbox docker"
        )


def evaluate_policy(
    policy: Any,
    competitions: Sequence[Competition],
    *,
    samples: int,
    max_turns: int,
    sandbox: Sandbox,
    timeout_s: float,
    memory_mb: int,
    cache: ExecutionCache | None = None,
    workers: int = 2,
    progress: Callable[[int], None] | None = None,
) -> EvalResult:
    """Run ``samples`` real episodes per competition with ``policy`` and grade them.

    Args:
        policy: a :class:`~wmrl_adapters.train.policy.TrainablePolicy` (sampling, not greedy: the
            policy's distribution is what was trained).
        competitions: the tasks (each with a leaderboard).
        samples: episodes per competition (>= 1).
        max_turns: executions per episode.
        sandbox: shared sandbox (the caller closes it).
        timeout_s: per-execution limit.
        memory_mb: per-execution memory limit.
        cache: execution cache (hits charged at cost, in the returned compute).
        workers: executions run concurrently.
        progress: called with the number of executions finished after each turn.

    Raises:
        ConfigError: ``samples`` < 1 or no competitions.
    """
    if samples < 1 or not competitions:
        raise ConfigError(f"samples={samples}, {len(competitions)} competitions; need >= 1 of each")
    meter = ComputeMeter()
    episodes = [(c, k) for c in competitions for k in range(samples)]
    backends: set[str] = set()
    isolated = True
    envs = [
        CachedKaggleEnv(
            meter,
            cache,
            competition=c,
            suite=None,
            sandbox=sandbox,
            max_turns=max_turns,
            timeout_s=timeout_s,
            memory_mb=memory_mb,
        )
        for c, _ in episodes
    ]
    histories: list[dict[str, list[Any]]] = []
    for env, (_, k) in zip(envs, episodes, strict=True):
        observation, info = env.reset(seed=k)
        histories.append({"observations": [observation], "actions": [], "infos": [info]})
    best: list[dict[str, Any] | None] = [None] * len(envs)
    with concurrent.futures.ThreadPoolExecutor(max(1, workers)) as executor:
        for _turn in range(max_turns):
            live = list(range(len(envs)))
            contexts = [
                TurnContext(
                    i,
                    episodes[i][0].id,
                    i,
                    0,
                    tuple(histories[i]["observations"]),
                    tuple(histories[i]["actions"]),
                    tuple(histories[i]["infos"]),
                )
                for i in live
            ]
            actions = policy.act(
                [h["observations"][-1] for h in histories],
                [h["infos"][-1] for h in histories],
                contexts=contexts,
            )
            results = list(
                executor.map(lambda pair: envs[pair[0]].step(pair[1]), zip(live, actions, strict=True))
            )
            for i, action, (observation, _reward, _terminated, _truncated, info) in zip(
                live, actions, results, strict=True
            ):
                histories[i]["observations"].append(observation)
                histories[i]["actions"].append(action)
                histories[i]["infos"].append(info)
                if info.get("backend"):
                    backends.add(str(info["backend"]))
                isolated = isolated and info.get("isolated") is not False
                value = info.get("ladder_value")
                if value is not None and (best[i] is None or value > best[i]["ladder_value"]):
                    best[i] = info
            if progress is not None:
                progress(len(live))
    for env in envs:
        env.close()
    positions: list[float | None] = []
    graded: list[dict[str, Any]] = []  # the best valid submission of each known episode that has one
    failed = 0  # known episodes without a valid submission
    for info, history in zip(best, histories, strict=True):
        if info is not None and info.get("status") == "valid" and info.get("position") is not None:
            positions.append(float(info["position"]))
            graded.append(info)
        elif any(step.get("status") == "sandbox_error" for step in history["infos"][1:]):
            positions.append(None)  # the infrastructure may have hidden a valid submission: unknown
        else:
            positions.append(0.0)  # every execution failed on its own account: a failure
            failed += 1
    known = len(graded) + failed
    per_competition: dict[str, list[float | None]] = {}
    for (competition, _), position in zip(episodes, positions, strict=True):
        per_competition.setdefault(competition.id, []).append(position)
    return EvalResult(
        position=mean_se(positions)[0],
        above_median=_share(sum(bool(info.get("above_median")) for info in graded), known),
        medal=_share(sum(bool(info.get("medal")) for info in graded), known),
        valid=_share(len(graded), known),
        episodes=len(episodes),
        per_competition={
            key: mean for key, values in per_competition.items() if (mean := mean_se(values)[0]) is not None
        },
        compute=meter.state_dict(),
        backends=tuple(sorted(backends)),
        isolated=isolated,
        positions=tuple(positions),
        episode_keys=tuple(f"{competition.id}#{k}" for competition, k in episodes),
    )


def _share(count: int, known: int) -> float:
    """``count / known`` (NaN without a known episode)."""
    return count / known if known else math.nan


def main(argv: Sequence[str] | None = None) -> int:
    """Evaluate a trained run's policy for real on held-out or any competitions (MLE-bench and MLE-Dojo
    directories too, with their registry given by --registry)."""
    import argparse
    import json

    from wmrl_adapters.train.kaggle.config import TrainConfig
    from wmrl_adapters.train.kaggle.trainer import CHECKPOINT, Trainer
    from wmrl_adapters.train.run.checks import load_config
    from wmrl_adapters.train.run.settings import settings_before

    parser = argparse.ArgumentParser(prog="wmrl eval", description=main.__doc__)
    parser.add_argument("run_dir", type=Path, help="a run directory made by wmrl train")
    parser.add_argument(
        "--competitions",
        nargs="*",
        default=None,
        help="suite ids, 'heldout' (default), or competition directories (the suite's layout, MLE-bench's "
        "<data>/<id> with prepared/public/, or MLE-Dojo's prepared <competition> with data/public/)",
    )
    parser.add_argument(
        "--registry",
        type=Path,
        default=None,
        help="MLE-bench's mlebench/competitions/ (per competition config.yaml, description.md, "
        "leaderboard.csv) or MLE-Dojo's mledojo/competitions/ (per competition info/), when it lives apart "
        "from the prepared data (default: the registry files inside each competition directory)",
    )
    parser.add_argument(
        "--metric",
        default=None,
        help="metric of the competition directories: needed for MLE-Dojo's (their metrics are code); "
        f"overrides an MLE-bench config.yaml's grader; one of {', '.join(sorted(METRICS))} or an alias "
        "(auc, logloss, macro-f1...)",
    )
    parser.add_argument(
        "--sandbox",
        choices=SANDBOXES,
        default=None,
        help="sandbox backend for the executions (default: the run's, but never 'unsafe' from its "
        "config.json: running solutions unisolated takes --sandbox unsafe here)",
    )
    parser.add_argument(
        "--samples", type=int, default=None, help="episodes per competition (default: the run's)"
    )
    parser.add_argument("--out", type=Path, default=None, help="write the result as JSON here too")
    args = parser.parse_args(argv)
    config_path = args.run_dir / "config.json"
    if not config_path.is_file() or not (args.run_dir / CHECKPOINT).is_file():
        raise ConfigError(f"{args.run_dir} is not a trained run (no config.json and {CHECKPOINT})")
    config = load_config(None, settings_before(json.loads(config_path.read_text())), TrainConfig)
    refuse_unsafe_from_file(config.sandbox, args.sandbox, config_path)
    if args.samples is not None and args.samples < 1:
        raise ConfigError(f"--samples {args.samples}; pass >= 1")
    if (args.registry is not None or args.metric is not None) and not args.competitions:
        raise ConfigError(
            "--registry and --metric apply to competition directories; pass those with --competitions"
        )
    if args.registry is not None and not args.registry.is_dir():
        raise ConfigError(
            f"--registry {str(args.registry)!r} is not a directory; pass MLE-bench's mlebench/competitions/ "
            "or MLE-Dojo's mledojo/competitions/"
        )
    suite = load_suite()
    competitions = (
        resolve_competitions(args.competitions, suite, registry=args.registry, metric=args.metric)
        if args.competitions
        else None
    )
    trainer = Trainer(config, args.run_dir, resume=True, suite=suite, sandbox=args.sandbox)
    try:
        if competitions is not None:
            trainer.set_eval_competitions(competitions)
        result = trainer.evaluate(samples=args.samples or max(1, config.eval_samples))
    finally:
        trainer.close()
    metrics = result.metrics()
    print(f"evaluated {result.episodes} episodes on {', '.join(result.per_competition)} (executed for real)")
    if result.isolated:
        print(f"  sandbox: {', '.join(result.backends) or 'none'} (isolated)")
    else:
        print(
            f"  sandbox: {', '.join(result.backends)}: the solutions ran UNISOLATED, with this user's rights "
            "(--sandbox unsafe)"
        )
    print(
        f"  {result.held_out(trainer.step).text()}   above median {result.above_median:.2f}   "
        f"medal {result.medal:.2f}   valid {result.valid:.2f}"
    )
    for competition, position in result.per_competition.items():
        print(f"  {competition:<28} position {position:.4f}")
    print(
        f"  evaluation compute (not training): sandbox CPU charged {result.compute['charged_cpu_s']:.1f} s, "
        f"spent {result.compute['spent_cpu_s']:.1f} s"
    )
    if args.out is not None:
        args.out.write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    return 0
