"""How faithfully does each world model predict real executions of the built-in Kaggle suite?

Why: WMRL's corrections assume the world model's error is a monotone bias plus bounded noise; this
benchmark measures that error for every world model we have, on real solutions run through the real
sandbox, and answers the open question of the articles on our data: does a world model that learns
from the anchor pairs shrink its bias faster than a frozen one corrected by Online Debiasing?

Method: the corpus is the reference population of each competition (14 real solutions per task, from
copying the sample submission to tuned LightGBM), executed for real through the sandbox (the runs
that build the leaderboards; cached, so a second run executes nothing). Each world model predicts
every solution; learning models are evaluated prequentially (every task predicted before its real
rewards are observed). Reported per world model: status accuracy, Spearman and Kendall correlation
within task, MAE and mean bias (raw and after cross-fitted isotonic calibration: fitted on half of the
tasks, applied to the other half), parse-failure rate, predictions/s and executions/s. Plots: a
reliability diagram, the before/after-calibration scatter, and the prequential running error over
the task sequence (frozen rubric + online isotonic map vs. the learned world models).

Run ``python benchmarks/fidelity.py`` (the first run executes ~220 solutions: 20-30 minutes on two
busy cores; later runs take seconds) or ``--smoke`` (one competition, four cheap references; point
``WMRL_DATA_DIR`` at a scratch directory so the subset leaderboard does not replace the real one).
Add ``--include-llm`` for the transformers LLM world model on a small subset (``--llm-max-cases``).
Writes ``fidelity.md``, ``fidelity.csv``, ``reliability.png``, ``calibration.png`` and
``prequential.png`` into ``--output-dir``.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from wmrl_adapters.cli import parse_dataclass_args
from wmrl_adapters.fidelity_cli import FidelityArgs, FidelityReport, run_fidelity

from wmrl_envs.fidelity import prequential_calibration
from wmrl_envs.kaggle.fidelity import FidelityResult

__all__ = ["Args", "main", "parse_args"]

SMOKE_REFERENCES = ("sample_submission", "prior", "linear_two_columns", "tree_stump")
MUTATED_REFERENCES = ("linear_numeric", "random_forest_small")
"""References the mutations are applied to (the first is cheap: most mutations make it fail fast)."""


def mutations(code: str, target: str) -> dict[str, str]:
    """Agent-like mistakes applied to one reference solution, by name.

    Some are visible to static analysis (a syntax error, a missing file, a literal unknown column, no
    write), some are not (a misspelt target held in a variable, a truncated submission, shuffled
    predictions): the rubric should get the first kind right and the second kind wrong.
    """
    write = next((line for line in code.splitlines() if '.to_csv("submission.csv"' in line), "")
    truncated = write.replace(".to_csv(", ".head(len(test) // 2).to_csv(")
    shuffle = "prediction = np.random.default_rng(0).permutation(np.asarray(prediction))"
    variants = {
        "syntax_error": code + "\nfor index in range(3)\n    print(index)\n",
        "missing_file": code.replace("input/test.csv", "input/testing.csv"),
        "visible_unknown_column": code.replace("y = train[TARGET]", f"y = train[{target + '_value'!r}]"),
        "hidden_unknown_column": code.replace(f"TARGET = {target!r}", f"TARGET = {target + '_value'!r}"),
    }
    if write:
        variants["no_write"] = code.replace(write, "print(prediction[:5])")
        variants["truncated_submission"] = code.replace(write, truncated)
        variants["shuffled_predictions"] = code.replace(write, shuffle + "\n" + write)
    return {name: variant for name, variant in variants.items() if variant != code}


def write_mutation_rollouts(competition_ids: Sequence[str], path: Path) -> Path:
    """A rollouts JSONL of the mutations of :data:`MUTATED_REFERENCES` for every competition."""
    import json

    from wmrl_envs.kaggle.references import reference_solutions
    from wmrl_envs.kaggle.suite import load_suite

    suite = load_suite()
    lines = []
    for competition_id in competition_ids or suite.ids():
        competition = suite.get(competition_id, with_leaderboard=False)
        for solution in reference_solutions(competition):
            if solution.name not in MUTATED_REFERENCES:
                continue
            chosen = mutations(solution.code, competition.target)
            if solution.name != MUTATED_REFERENCES[0]:
                chosen = {
                    name: code
                    for name, code in chosen.items()
                    if name in ("truncated_submission", "shuffled_predictions")
                }
            elif len(MUTATED_REFERENCES) > 1:
                chosen = {
                    name: code
                    for name, code in chosen.items()
                    if name not in ("truncated_submission", "shuffled_predictions")
                }
            for name, code in chosen.items():
                message = f"Here is my solution ({solution.name}, {name}).\n```python\n{code}```\n"
                lines.append(
                    json.dumps(
                        {
                            "competition": competition_id,
                            "solution": message,
                            "label": f"{solution.name}/{name}",
                        }
                    )
                )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@dataclass
class Args:
    """Command-line settings (``--name value``; booleans as ``--flag``)."""

    world_models: str = field(
        default="rubric,learned,learned+rubric", metadata={"help": "Comma-separated world model names."}
    )
    include_llm: bool = field(
        default=False, metadata={"help": "Also evaluate llm-transformers (SmolLM2-135M, CPU) on a subset."}
    )
    llm_max_cases: int = field(default=28, metadata={"help": "Cases the LLM world model sees (whole tasks)."})
    llm_max_new_tokens: int = field(
        default=96, metadata={"help": "Generation budget of the LLM world model."}
    )
    competitions: str = field(default="", metadata={"help": "Comma-separated competition ids (empty: all)."})
    split: str = field(default="all", metadata={"help": "Suite split when --competitions is empty."})
    sandbox: str = field(default="local", metadata={"help": "Sandbox backend for real executions."})
    embeddings: str = field(
        default="none", metadata={"help": "'minilm' adds MiniLM code embeddings to the learned models."}
    )
    cache: str = field(default="", metadata={"help": "Execution cache JSONL (empty: the default cache)."})
    seed: int = field(default=0, metadata={"help": "Seed of the calibration split and subsets."})
    output_dir: str = field(default="benchmarks/results/fidelity", metadata={"help": "Where outputs go."})
    mutations: bool = field(
        default=False,
        metadata={
            "help": "Add agent-like broken variants of the references (crashes, typos, no submission)."
        },
    )
    smoke: bool = field(default=False, metadata={"help": "One competition, four cheap references."})

    def __post_init__(self) -> None:
        if self.embeddings not in ("none", "minilm"):
            raise SystemExit(f"--embeddings={self.embeddings!r}; use 'none' or 'minilm'")
        if self.llm_max_cases < 1:
            raise SystemExit(f"--llm-max-cases={self.llm_max_cases!r}; pass 1 or more")
        if self.split not in ("train", "heldout", "all"):
            raise SystemExit(f"--split={self.split!r}; use 'train', 'heldout' or 'all'")


def parse_args(argv: Sequence[str] | None = None) -> Args:
    """Build :class:`Args` from the command line, one ``--option`` per field with its help."""
    return parse_dataclass_args(Args, argv, __doc__.split("\n\n")[0])


def fidelity_args(args: Args) -> FidelityArgs:
    """The harness settings for these benchmark settings."""
    names = tuple(name for name in args.world_models.split(",") if name)
    if args.include_llm:
        names += ("llm-transformers",)
    competitions = tuple(name for name in args.competitions.split(",") if name)
    if args.smoke and not competitions:
        competitions = ("titanic-survival",)
    rollouts = None
    if args.mutations:
        rollouts = write_mutation_rollouts(competitions, Path(args.output_dir) / "mutation_rollouts.jsonl")
    return FidelityArgs(
        world_models=names,
        competitions=competitions,
        split=args.split,  # type: ignore[arg-type]
        reference_names=SMOKE_REFERENCES if args.smoke else (),
        rollouts=rollouts,
        sandbox=args.sandbox,
        timeout_s=120.0 if args.smoke else 300.0,
        cache=Path(args.cache) if args.cache else None,
        output_dir=Path(args.output_dir),
        embeddings=args.embeddings,  # type: ignore[arg-type]
        llm_max_cases=args.llm_max_cases,
        llm_max_new_tokens=args.llm_max_new_tokens,
        seed=args.seed,
    )


def running_errors(result: FidelityResult, competition_ids: Sequence[str]) -> dict[str, np.ndarray]:
    """Per-task mean absolute error along the task sequence: raw, and (frozen models) with online OD."""
    series: dict[str, tuple[Sequence[float | None], Sequence[float | None]]] = {
        "raw": (result.predicted, result.real)
    }
    if not result.name.startswith("learned"):
        series["online OD"] = (
            prequential_calibration(competition_ids, result.predicted, result.real),
            result.real,
        )
    curves: dict[str, np.ndarray] = {}
    tasks = list(dict.fromkeys(competition_ids))
    for label, (predicted, real) in series.items():
        per_task = []
        for task in tasks:
            errors = [
                abs(p - r)
                for task_id, p, r in zip(competition_ids, predicted, real, strict=True)
                if task_id == task and p is not None and r is not None
            ]
            per_task.append(np.mean(errors) if errors else np.nan)
        curves[label] = np.asarray(per_task)
    return curves


def plot_prequential(report: FidelityReport, competition_ids: dict[str, list[str]], path: Path) -> Path:
    """Per-task MAE (cumulative mean) along the task sequence for every world model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    figure, axes = pyplot.subplots(figsize=(7, 4.5))
    for result in report.results:
        for label, curve in running_errors(result, competition_ids[result.name]).items():
            known = np.where(np.isnan(curve), 0.0, curve)
            counts = np.cumsum(~np.isnan(curve))
            cumulative = np.where(counts > 0, np.cumsum(known) / np.maximum(counts, 1), np.nan)
            axes.plot(np.arange(1, len(curve) + 1), cumulative, marker=".", label=f"{result.name} ({label})")
    axes.set_xlabel("tasks seen (prequential order)")
    axes.set_ylabel("cumulative mean |predicted − real| reward")
    axes.set_title("Does the bias shrink as real executions arrive?")
    axes.legend(fontsize=7)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    pyplot.close(figure)
    return path


def main(argv: Sequence[str] | None = None) -> FidelityReport:
    """Run the harness, write the table and the three plots, print the table."""
    args = parse_args(argv)
    started = time.perf_counter()
    harness = fidelity_args(args)
    report = run_fidelity(harness)
    output = Path(args.output_dir)
    ids_by_model = {result.name: list(result.competition_ids) for result in report.results}
    plot_prequential(report, ids_by_model, output / "prequential.png")
    final_errors = []
    for result in report.results:
        for label, curve in running_errors(result, ids_by_model[result.name]).items():
            final_errors.append(
                f"| {result.name} | {label} | {_mean(curve)} | {_mean(curve[len(curve) // 2 :])} |"
            )
    execution = report.execution
    notes = (
        f"Corpus: {report.cases_by_source} over {report.results[0].metrics.n_tasks} competitions; real "
        f"executions this run: {execution.n_executed} fresh "
        f"({execution.execution_s:.0f} s sandbox wall time), "
        f"{execution.n_cached} from the cache. Sandbox: {harness.sandbox}. Learned models: prequential "
        f"(each task predicted before its real rewards are observed); embeddings: {harness.embeddings}. "
        "Calibration: isotonic (OnlineDebiaser), cross-fitted over two halves of the tasks "
        f"(seed {args.seed}). "
        f"Python {platform.python_version()}, {time.perf_counter() - started:.0f} s in total."
    )
    text = (
        "# World-model fidelity on the built-in Kaggle suite\n\n"
        + notes
        + "\n\n"
        + report.table
        + "\n## Prequential error along the task sequence\n\n"
        + "| world model | correction | mean per-task MAE | second half of the tasks |\n|---|---|---|---|\n"
        + "\n".join(final_errors)
        + "\n"
    )
    (output / "fidelity.md").write_text(text, encoding="utf-8")
    print(text)
    return report


def _mean(values: np.ndarray) -> str:
    known = values[~np.isnan(values)]
    return f"{known.mean():.3f}" if known.size else "–"


if __name__ == "__main__":
    main()
