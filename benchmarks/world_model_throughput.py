"""World-model throughput and latency per backend on this machine: batched against one by one.

Why: WMRL pays off only when a prediction is much cheaper than an execution (1-60 CPU-seconds for a
Kaggle-style solution here), and LLM predictions are cheap only in batches. This measures, for the
same model (SmolLM2-135M-Instruct, offline) and the same prompts (the Kaggle execution-simulator
template over a few synthetic solutions on two competitions):

* the transformers backend with batch size 1 and 8 (``--batch-sizes``);
* a local llama.cpp server (``llama_cpp.server``) through the OpenAI-compatible client with 1 and 4
  requests in flight (``--concurrencies``), plus one run with the report grammar enforced;
* score mode (one forward pass, expected leaderboard bucket) on both backends.

Queries are sent in waves of the batch size (or concurrency); a wave's wall time is the latency of
each of its predictions. Throughput is predictions (and generated tokens) per wall-clock second, and
per CPU-second (this process plus the llama.cpp server process), which a busy shared machine
distorts much less than wall-clock time.
SmolLM2-135M cannot judge code: the parsed fraction says how often it kept the format within the
budget, nothing about prediction quality. The machine is shared, so the load average is recorded.

Run ``python benchmarks/world_model_throughput.py`` (about 5-10 minutes on 2 busy cores) or
``--smoke`` (tiny budget). It writes ``results.md``, ``results.csv`` and ``world_model_throughput.png``
into ``--output-dir``.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from tqdm import tqdm  # noqa: E402
from wmrl_adapters.cli import parse_dataclass_args
from wmrl_adapters.models import smollm2_gguf_path  # noqa: E402
from wmrl_adapters.openai_backend import LlamaCppServer, OpenAIClientConfig, OpenAICompatibleBackend  # noqa: E402
from wmrl_adapters.transformers_backend import TransformersBackend, TransformersConfig  # noqa: E402

from wmrl_envs.kaggle.outcome import KaggleContext  # noqa: E402
from wmrl_envs.kaggle.world_models.llm import (  # noqa: E402
    KaggleExecutionTemplate,
    LLMScoreWorldModel,
    LLMWorldModel,
    LLMWorldModelConfig,
)
from wmrl_envs.world_model import Prediction, WorldModelQuery  # noqa: E402

__all__ = ["Args", "Row", "make_queries", "measure", "main"]


@dataclass
class Args:
    """Command-line options (one ``--option`` per field)."""

    output_dir: str = field(
        default="benchmarks/results/world_model_throughput", metadata={"help": "where the table and plot go"}
    )
    smoke: bool = field(
        default=False,
        metadata={"help": "tiny budget for tests: 2 queries, 2 tokens, batch/concurrency 2, no warm-up"},
    )
    n_queries: int = field(default=16, metadata={"help": "predictions per configuration"})
    max_new_tokens: int = field(default=64, metadata={"help": "generation budget per prediction"})
    batch_sizes: str = field(default="1,8", metadata={"help": "transformers batch sizes, comma-separated"})
    concurrencies: str = field(
        default="1,4", metadata={"help": "llama.cpp requests in flight, comma-separated"}
    )
    threads: int = field(
        default=1, metadata={"help": "CPU threads for torch and for the llama.cpp server (same for both)"}
    )
    backends: str = field(default="transformers,llama.cpp", metadata={"help": "backends to measure"})
    few_shot: bool = field(
        default=False, metadata={"help": "include the example reports (a ~4x longer prompt)"}
    )

    def __post_init__(self) -> None:
        if self.smoke:
            self.n_queries, self.max_new_tokens = 2, 2
            self.batch_sizes, self.concurrencies = "2", "2"
        unknown = set(self.backend_list) - {"transformers", "llama.cpp"}
        if unknown:
            raise SystemExit(
                f"--backends has unknown names {sorted(unknown)}; use transformers and/or llama.cpp"
            )
        if self.n_queries < 1 or self.max_new_tokens < 1 or self.threads < 1:
            raise SystemExit(
                f"--n-queries={self.n_queries}, --max-new-tokens={self.max_new_tokens} and "
                f"--threads={self.threads} "
                "must all be >= 1"
            )

    @property
    def backend_list(self) -> list[str]:
        return [name.strip() for name in self.backends.split(",") if name.strip()]

    @staticmethod
    def ints(text: str) -> list[int]:
        return [int(part) for part in text.split(",") if part.strip()]


@dataclass(frozen=True)
class Row:
    """One measured configuration."""

    backend: str
    mode: str
    batch_or_concurrency: int
    predictions: int
    wall_s: float
    predictions_per_s: float
    completion_tokens: int
    tokens_per_s: float
    latency_mean_s: float
    latency_p90_s: float
    cpu_s: float
    cpu_s_per_prediction: float
    tokens_per_cpu_s: float
    parsed: int
    unknown: int


SOLUTIONS = (
    "```python\nimport pandas as pd\nfrom sklearn.linear_model import LogisticRegression\n"
    "train = pd.read_csv('train.csv'); test = pd.read_csv('test.csv')\nfeatures = ['Age', 'Fare']\n"
    "model = LogisticRegression().fit(train[features].fillna(0), train['Survived'])\n"
    "pd.DataFrame({'PassengerId': test.PassengerId, 'Survived': model.predict(test[features].fillna(0))})"
    ".to_csv('submission.csv', index=False)\n```",
    "```python\nimport pandas as pd\ntrain = pd.read_csv('train.csv')\nprint(train['Agee'].mean())\n```",
    "```python\nimport lightgbm as lgb\nimport pandas as pd\ntrain = pd.read_csv('train.csv')\n"
    "model = lgb.LGBMClassifier(n_estimators=300).fit(train.drop(columns=['target']), train['target'])\n"
    "print('trained')\n```",
    "I will first look at the data before writing any code.",
)


def make_queries(count: int, tag: str) -> list[WorldModelQuery]:
    """``count`` queries over two competitions and four solutions, each ending in a unique ``tag`` comment.

    The tag keeps full prompts distinct across configurations, so a server's prompt cache can reuse
    the shared task prefix (as in training) but never a whole earlier prompt.
    """
    contexts = (
        KaggleContext(
            "titanic",
            "Predict which passengers survived the Titanic.",
            "train.csv: 891 rows x 12 columns (PassengerId, Survived, Pclass, Name, Sex, Age, Fare, ...)\n"
            "test.csv: 418 rows x 11 columns",
            "accuracy",
            True,
            "binary",
            "Survived",
            "PassengerId",
            ("Pclass", "Sex", "Age", "Fare"),
            leaderboard=(0.82, 0.8, 0.79, 0.78, 0.77, 0.75, 0.7, 0.62),
        ),
        KaggleContext(
            "house-prices",
            "Predict the sale price of houses in Ames, Iowa.",
            "train.csv: 1460 rows x 81 columns (Id, SalePrice, LotArea, OverallQual, ...)\n"
            "test.csv: 1459 rows",
            "rmse",
            False,
            "regression",
            "SalePrice",
            "Id",
            ("LotArea", "OverallQual"),
            leaderboard=(0.11, 0.12, 0.125, 0.13, 0.14, 0.16, 0.2),
        ),
    )
    return [
        WorldModelQuery(
            contexts[index % 2], f"{SOLUTIONS[index % len(SOLUTIONS)]}\n# {tag} {index}", key=f"{tag}/{index}"
        )
        for index in range(count)
    ]


def completion_tokens_of(model: LLMWorldModel) -> Callable[[], float]:
    """A reader of the world model's cumulative generated-token counter."""
    return lambda: model.metrics()["world_model/completion_tokens"]


def measure(
    label: str,
    mode: str,
    parallel: int,
    predict: Callable[[Sequence[WorldModelQuery]], list[Prediction]],
    count: int,
    tokens_of: Callable[[], float],
    cpu_of: Callable[[], float],
) -> Row:
    """Run ``predict`` over ``count`` fresh queries in waves of ``parallel``; one :class:`Row` of figures."""
    queries = make_queries(count, f"{label}-{mode}-x{parallel}")
    latencies: list[float] = []
    predictions: list[Prediction] = []
    tokens_before = tokens_of()
    cpu_before = cpu_of()
    started = time.perf_counter()
    for start in tqdm(range(0, len(queries), parallel), desc=f"{label} {mode} x{parallel}", leave=False):
        wave = queries[start : start + parallel]
        wave_started = time.perf_counter()
        predictions.extend(predict(wave))
        latencies.extend([time.perf_counter() - wave_started] * len(wave))
    wall = time.perf_counter() - started
    tokens = int(tokens_of() - tokens_before)
    cpu = cpu_of() - cpu_before
    parsed = sum(prediction.reward is not None for prediction in predictions)
    ordered = sorted(latencies)
    return Row(
        backend=label,
        mode=mode,
        batch_or_concurrency=parallel,
        predictions=len(predictions),
        wall_s=wall,
        predictions_per_s=len(predictions) / wall,
        completion_tokens=tokens,
        tokens_per_s=tokens / wall,
        latency_mean_s=statistics.fmean(latencies),
        latency_p90_s=ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
        cpu_s=cpu,
        cpu_s_per_prediction=cpu / len(predictions),
        tokens_per_cpu_s=tokens / cpu if cpu > 0 else 0.0,
        parsed=parsed,
        unknown=len(predictions) - parsed,
    )


def _transformers_rows(args: Args, template: KaggleExecutionTemplate) -> list[Row]:
    torch.set_num_threads(args.threads)
    loaded = TransformersBackend(TransformersConfig(num_threads=args.threads))
    config = LLMWorldModelConfig(max_new_tokens=args.max_new_tokens, structured=False)
    if not args.smoke:
        LLMWorldModel(loaded, template, config).predict(make_queries(1, "warm-up"))
    rows = []
    for batch in Args.ints(args.batch_sizes):
        backend = TransformersBackend(
            TransformersConfig(batch_size=batch), model=loaded._model, tokenizer=loaded._tokenizer
        )
        model = LLMWorldModel(backend, template, config)
        rows.append(
            measure(
                "transformers",
                "simulate",
                batch,
                model.predict,
                args.n_queries,
                completion_tokens_of(model),
                time.process_time,
            )
        )
    batch = max(Args.ints(args.batch_sizes))
    scorer = LLMScoreWorldModel(
        TransformersBackend(
            TransformersConfig(batch_size=batch), model=loaded._model, tokenizer=loaded._tokenizer
        ),
        template,
    )
    rows.append(
        measure(
            "transformers", "score", batch, scorer.predict, args.n_queries, lambda: 0.0, time.process_time
        )
    )
    return rows


def _llama_rows(args: Args, template: KaggleExecutionTemplate) -> list[Row]:
    rows = []
    with LlamaCppServer(smollm2_gguf_path(), n_ctx=4096, n_threads=args.threads) as server:

        def cpu_of() -> float:
            return server.cpu_seconds() + time.process_time()

        if not args.smoke:
            warm_up = OpenAICompatibleBackend(
                OpenAIClientConfig(base_url=server.base_url, context_window=4096, timeout_s=600)
            )
            LLMWorldModel(warm_up, template, LLMWorldModelConfig(max_new_tokens=args.max_new_tokens)).predict(
                make_queries(1, "warm-up")
            )
        concurrencies = Args.ints(args.concurrencies)
        runs = [(parallel, False) for parallel in concurrencies] + [(min(concurrencies), True)]
        for parallel, structured in runs:
            backend = OpenAICompatibleBackend(
                OpenAIClientConfig(
                    base_url=server.base_url, concurrency=parallel, context_window=4096, timeout_s=600
                )
            )
            model = LLMWorldModel(
                backend,
                template,
                LLMWorldModelConfig(max_new_tokens=args.max_new_tokens, structured=structured),
            )
            rows.append(
                measure(
                    "llama.cpp",
                    "simulate+grammar" if structured else "simulate",
                    parallel,
                    model.predict,
                    args.n_queries,
                    completion_tokens_of(model),
                    cpu_of,
                )
            )
        parallel = max(Args.ints(args.concurrencies))
        backend = OpenAICompatibleBackend(
            OpenAIClientConfig(
                base_url=server.base_url, concurrency=parallel, context_window=4096, timeout_s=600
            )
        )
        rows.append(
            measure(
                "llama.cpp",
                "score",
                parallel,
                LLMScoreWorldModel(backend, template).predict,
                args.n_queries,
                lambda: 0.0,
                cpu_of,
            )
        )
    return rows


def _ratio_lines(rows: Sequence[Row]) -> list[str]:
    """The 2x target: transformers against llama.cpp, per wall-clock second and per CPU-second."""

    def pick(backend: str, parallel: int | None) -> Row | None:
        found = [r for r in rows if r.backend == backend and r.mode == "simulate"]
        if parallel is not None:
            found = [r for r in found if r.batch_or_concurrency == parallel]
        return max(found, key=lambda r: r.tokens_per_s, default=None)

    lines = []
    for title, ours, theirs in (
        ("one by one", pick("transformers", 1), pick("llama.cpp", 1)),
        ("best configuration", pick("transformers", None), pick("llama.cpp", None)),
    ):
        if ours is None or theirs is None or theirs.tokens_per_s <= 0 or theirs.tokens_per_cpu_s <= 0:
            continue
        wall_ratio = ours.tokens_per_s / theirs.tokens_per_s
        cpu_ratio = ours.tokens_per_cpu_s / theirs.tokens_per_cpu_s
        lines.append(
            f"- {title}: transformers x{ours.batch_or_concurrency} {ours.tokens_per_s:.2f} gen tok/s "
            f"({ours.tokens_per_cpu_s:.2f} per CPU-s) vs llama.cpp x{theirs.batch_or_concurrency} "
            f"{theirs.tokens_per_s:.2f} gen tok/s ({theirs.tokens_per_cpu_s:.2f} per CPU-s): ratio "
            f"{wall_ratio:.2f} wall-clock ({'within' if wall_ratio >= 0.5 else 'NOT within'} 2x), "
            f"{cpu_ratio:.2f} per CPU-second ({'within' if cpu_ratio >= 0.5 else 'NOT within'} 2x)"
        )
    return lines


def write_outputs(args: Args, rows: Sequence[Row]) -> str:
    """Write ``results.csv``, ``results.md`` and the plot; return the markdown."""
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = [spec.name for spec in dataclasses.fields(Row)]
    with open(out / "results.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=names)
        writer.writeheader()
        for row in rows:
            writer.writerow(dataclasses.asdict(row))
    columns = (
        "backend",
        "mode",
        "batch/concurrency",
        "predictions",
        "wall s",
        "pred/s",
        "gen tok/s",
        "latency mean s",
        "latency p90 s",
        "CPU s/pred",
        "gen tok/CPU-s",
        "parsed",
        "unknown",
    )
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        lines.append(
            f"| {r.backend} | {r.mode} | {r.batch_or_concurrency} | {r.predictions} | {r.wall_s:.2f} | "
            f"{r.predictions_per_s:.3f} | {r.tokens_per_s:.1f} | {r.latency_mean_s:.2f} | "
            f"{r.latency_p90_s:.2f} | {r.cpu_s_per_prediction:.2f} | {r.tokens_per_cpu_s:.2f} | "
            f"{r.parsed} | {r.unknown} |"
        )
    load = os.getloadavg()
    notes = [
        f"SmolLM2-135M-Instruct, {args.n_queries} queries, max_new_tokens={args.max_new_tokens}, "
        f"threads={args.threads}, "
        f"few_shot={args.few_shot}; load average at the end {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} on "
        f"{os.cpu_count()} CPUs (shared machine: wall-clock figures depend on the other jobs; CPU-seconds "
        "(this process, plus the llama.cpp server process) much less).",
        *_ratio_lines(rows),
    ]
    markdown = "# World-model throughput\n\n" + "\n".join(lines) + "\n\n" + "\n".join(notes) + "\n"
    (out / "results.md").write_text(markdown)
    figure, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    labels = [f"{r.backend}\n{r.mode} x{r.batch_or_concurrency}" for r in rows]
    axes[0].bar(labels, [r.predictions_per_s for r in rows], color="tab:blue")
    axes[0].set_ylabel("predictions / s")
    axes[1].bar(labels, [r.latency_mean_s for r in rows], color="tab:orange")
    axes[1].set_ylabel("mean latency per prediction (s)")
    axes[2].bar(labels, [r.cpu_s_per_prediction for r in rows], color="tab:green")
    axes[2].set_ylabel("CPU seconds per prediction")
    for axis in axes:
        axis.tick_params(axis="x", labelsize=7, rotation=45)
    figure.suptitle("World-model throughput and latency (SmolLM2-135M, CPU)")
    figure.tight_layout()
    figure.savefig(out / "world_model_throughput.png", dpi=110)
    plt.close(figure)
    return markdown


def parse_args(argv: Sequence[str] | None = None) -> Args:
    """Build :class:`Args` from the command line, one ``--option`` per field with its help."""
    return parse_dataclass_args(Args, argv, __doc__.split("\n\n")[0])


def main(argv: Sequence[str] | None = None) -> list[Row]:
    """Measure every requested backend and configuration; print and write the table."""
    args = parse_args(argv)
    template = KaggleExecutionTemplate(few_shot=args.few_shot)
    rows: list[Row] = []
    if "transformers" in args.backend_list:
        rows.extend(_transformers_rows(args, template))
    if "llama.cpp" in args.backend_list:
        rows.extend(_llama_rows(args, template))
    print(write_outputs(args, rows))
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
