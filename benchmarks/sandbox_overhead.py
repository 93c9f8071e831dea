"""Sandbox overhead: what each backend adds per execution, cold and warm, and executions per minute.

Why: execution is the cost World Model RL exists to avoid, so the sandbox's own share of it must be
known. Three measurements:

1. *Latency overhead* of each backend against a plain ``subprocess`` running the same script, for a
   trivial script and for one that imports pandas + scikit-learn (median wall seconds over repeats).
   ``local-warm`` is the bubblewrap backend with a pre-warmed pool (measured with a ready worker).
2. *Throughput*: executions per minute with ``--concurrency`` runs in flight, for three realistic ML
   solutions (logistic regression, random forest, gradient boosting with 5-fold CV) on a generated
   tabular dataset, written here. For ``local-warm`` the pool starts empty inside the clock, so the
   workers' imports are counted, not pre-paid.

Usage: ``python benchmarks/sandbox_overhead.py [--smoke] [--out-dir DIR] [--backends local docker ...]``.
Writes ``overhead.csv``, ``throughput.csv``, ``results.md`` and ``sandbox_overhead.png`` to the output dir.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from wmrl_algos.errors import IsolationUnavailableError
from wmrl_envs.sandbox import ExecutionRequest, Sandbox, WarmSandbox, make_sandbox


@dataclass
class Args:
    """Benchmark settings (every field is a command-line flag)."""

    out_dir: str = "benchmarks/results/sandbox_overhead"
    """where the tables and the plot are written"""
    backends: list[str] = field(default_factory=lambda: ["unsafe", "local", "local-warm", "docker"])
    """backends to measure (docker is skipped with a note when no engine answers)"""
    repeats: int = 5
    """runs per (backend, script) for the latency medians"""
    throughput_runs: int = 6
    """executions per (backend, solution) for the throughput figure"""
    concurrency: int = 2
    """executions in flight at once (this machine has 2 cores)"""
    rows: int = 4000
    """rows of the generated training set"""
    smoke: bool = False
    """tiny budget: 1 repeat, trivial script only, unsafe + local; throughput of one solution on local"""
    seed: int = 0
    """dataset seed"""


def parse_args() -> Args:
    """Parse the command line into :class:`Args` (``--smoke`` shrinks every budget)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    defaults = Args()
    for spec in fields(Args):
        value = getattr(defaults, spec.name)
        flag = "--" + spec.name.replace("_", "-")
        if isinstance(value, bool):
            parser.add_argument(flag, action="store_true")
        elif isinstance(value, list):
            parser.add_argument(flag, nargs="+", default=value)
        else:
            parser.add_argument(flag, type=type(value), default=value)
    args = Args(**vars(parser.parse_args()))
    if args.smoke:
        args.repeats, args.throughput_runs, args.rows = 1, 2, 500
        args.backends = [b for b in args.backends if b in ("unsafe", "local")]
    return args


SCRIPTS = {
    "trivial": "print('ok')\n",
    "pandas+sklearn import": "import pandas, sklearn.linear_model, sklearn.ensemble\nprint('ok')\n",
}

SOLUTIONS = {
    "logistic regression": """
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
train, test = pd.read_csv("input/train.csv"), pd.read_csv("input/test.csv")
features = [c for c in train.columns if c.startswith("f")]
scaler = StandardScaler().fit(train[features])
model = LogisticRegression(max_iter=500).fit(scaler.transform(train[features]), train["target"])
proba = model.predict_proba(scaler.transform(test[features]))[:, 1]
pd.DataFrame({"id": test["id"], "target": proba}).to_csv("submission.csv", index=False)
""",
    "random forest": """
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
train, test = pd.read_csv("input/train.csv"), pd.read_csv("input/test.csv")
features = [c for c in train.columns if c.startswith("f")]
model = RandomForestClassifier(n_estimators=100, n_jobs=1, random_state=0)
model.fit(train[features], train["target"])
pd.DataFrame({"id": test["id"], "target": model.predict_proba(test[features])[:, 1]}).to_csv(
    "submission.csv", index=False)
""",
    "gradient boosting 5-fold CV": """
import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.model_selection import cross_val_score
train, test = pd.read_csv("input/train.csv"), pd.read_csv("input/test.csv")
features = [c for c in train.columns if c.startswith("f")]
model = HistGradientBoostingClassifier(max_iter=100, random_state=0)
print("cv auc", cross_val_score(model, train[features], train["target"], cv=5, scoring="roc_auc").mean())
model.fit(train[features], train["target"])
pd.DataFrame({"id": test["id"], "target": model.predict_proba(test[features])[:, 1]}).to_csv(
    "submission.csv", index=False)
""",
}

THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def write_dataset(directory: Path, rows: int, seed: int) -> dict[str, Path]:
    """A generated binary-classification task: 20 numeric features, a nonlinear target."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows + rows // 4, 20))
    logits = x[:, 0] - 2 * x[:, 1] * x[:, 2] + np.sin(3 * x[:, 3]) + 0.5 * rng.normal(size=len(x))
    target = (logits > 0).astype(int)
    paths = {}
    for name, part in (("train.csv", slice(0, rows)), ("test.csv", slice(rows, None))):
        path = directory / name
        with path.open("w", newline="") as handle:
            writer = csv.writer(handle)
            labelled = name == "train.csv"
            writer.writerow(["id", *(f"f{i}" for i in range(20)), *(["target"] if labelled else [])])
            for index in range(len(x))[part]:
                row = [index, *np.round(x[index], 5)]
                writer.writerow(row + ([target[index]] if labelled else []))
        paths[name] = path
    return paths


def plain_subprocess_wall(code: str) -> float:
    """The baseline: the same interpreter on the same script, no sandbox, no work dir."""
    with tempfile.TemporaryDirectory() as directory:
        script = Path(directory) / "solution.py"
        script.write_text(code)
        started = time.monotonic()
        subprocess.run([sys.executable, "-s", "-B", str(script)], cwd=directory, capture_output=True,
                       check=True, env={"PATH": os.defpath, **THREAD_ENV})
        return time.monotonic() - started


def make_backend(name: str, pool_size: int) -> Sandbox:
    """A backend by name; ``local-warm`` is ``local`` with a pre-warmed pool of ``pool_size``."""
    if name == "local-warm":
        return make_sandbox("local", warm=pool_size)
    return make_sandbox(name)


def run_once(sandbox: Sandbox, request: ExecutionRequest) -> float:
    """Wall seconds of one execution (on a ready worker for a warm backend); raises unless ``ok``."""
    if isinstance(sandbox, WarmSandbox):
        sandbox.warm_up(request, wait=True)
    started = time.monotonic()
    result = sandbox.run(request)
    elapsed = time.monotonic() - started
    if result.status != "ok":
        raise RuntimeError(f"{sandbox.name}: {result.status} {result.detail} {result.stderr[-500:]}")
    return elapsed


def main(args: Args) -> None:
    """Measure every backend and write the results."""
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    backends: dict[str, Sandbox] = {}
    for name in args.backends:
        try:
            backends[name] = make_backend(name, args.concurrency)
        except (IsolationUnavailableError, ImportError) as exc:
            notes.append(f"{name}: skipped ({exc})")
    scripts = {"trivial": SCRIPTS["trivial"]} if args.smoke else SCRIPTS
    overhead_rows = []
    total = len(scripts) * (len(backends) + 1) * args.repeats
    with tqdm(total=total, desc="latency") as progress:
        for script_name, code in scripts.items():
            plain_subprocess_wall(code)
            baseline = []
            for _ in range(args.repeats):
                baseline.append(plain_subprocess_wall(code))
                progress.update()
            base = statistics.median(baseline)
            overhead_rows.append({"backend": "plain subprocess", "script": script_name,
                                  "median_wall_s": base, "overhead_s": 0.0})
            for name, sandbox in backends.items():
                request = ExecutionRequest(code=code, timeout_s=300, env=THREAD_ENV)
                if not isinstance(sandbox, WarmSandbox):
                    run_once(sandbox, request)
                walls = []
                for _ in range(args.repeats):
                    walls.append(run_once(sandbox, request))
                    progress.update()
                median = statistics.median(walls)
                overhead_rows.append({"backend": name, "script": script_name, "median_wall_s": median,
                                      "overhead_s": median - base})
    solutions = dict(list(SOLUTIONS.items())[:1]) if args.smoke else SOLUTIONS
    throughput_backends = {k: v for k, v in backends.items() if not args.smoke or k == "local"}
    throughput_rows = []
    with tempfile.TemporaryDirectory(prefix="wmrl-bench-data-") as data_dir:
        os.chmod(data_dir, 0o755)
        inputs = write_dataset(Path(data_dir), args.rows, args.seed)
        total = len(solutions) * len(throughput_backends) * args.throughput_runs
        with tqdm(total=total, desc="throughput") as progress:
            for solution_name, code in solutions.items():
                for name, sandbox in throughput_backends.items():
                    request = ExecutionRequest(code=code, inputs=inputs, timeout_s=600, env=THREAD_ENV)
                    def one(_: int, sandbox: Sandbox = sandbox, request: ExecutionRequest = request) -> float:
                        result = sandbox.run(request)
                        progress.update()
                        if result.status != "ok" or result.output is None:
                            raise RuntimeError(f"{sandbox.name}: {result.status} {result.stderr[-500:]}")
                        return result.cpu_s or 0.0

                    started = time.monotonic()
                    if isinstance(sandbox, WarmSandbox):
                        # Inside the clock: the pool's own imports are paid for, not pre-paid.
                        sandbox.warm_up(request)
                    with ThreadPoolExecutor(args.concurrency) as pool:
                        cpu = list(pool.map(one, range(args.throughput_runs)))
                    elapsed = time.monotonic() - started
                    throughput_rows.append({
                        "backend": name, "solution": solution_name, "runs": args.throughput_runs,
                        "wall_s": elapsed, "executions_per_min": 60 * args.throughput_runs / elapsed,
                        "mean_cpu_s": statistics.mean(cpu) if any(cpu) else float("nan"),
                    })
    for sandbox in backends.values():
        sandbox.close()
    write_outputs(out_dir, overhead_rows, throughput_rows, notes, args)


def write_outputs(out_dir: Path, overhead: list[dict[str, Any]], throughput: list[dict[str, Any]],
                  notes: list[str], args: Args) -> None:
    """Write the CSV tables, the markdown summary and the plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for name, rows in (("overhead.csv", overhead), ("throughput.csv", throughput)):
        with (out_dir / name).open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    load = os.getloadavg()
    lines = [f"# Sandbox overhead ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
             f"Machine: {os.cpu_count()} CPUs, load average at the end "
             f"{load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} "
             "(a shared machine: treat the figures as orders of magnitude). "
             f"repeats={args.repeats}, throughput_runs={args.throughput_runs}, "
             f"concurrency={args.concurrency}, rows={args.rows}, smoke={args.smoke}.", "",
             "## Latency per execution (median wall s) and overhead over a plain subprocess", "",
             "| backend | script | median wall s | overhead s |", "|---|---|---|---|"]
    lines += [f"| {r['backend']} | {r['script']} | {r['median_wall_s']:.3f} | {r['overhead_s']:+.3f} |"
              for r in overhead]
    lines += ["", "## Throughput", "", "| backend | solution | runs | wall s | executions/min | mean CPU s |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {r['backend']} | {r['solution']} | {r['runs']} | {r['wall_s']:.1f} | "
              f"{r['executions_per_min']:.1f} | {r['mean_cpu_s']:.2f} |" for r in throughput]
    if notes:
        lines += ["", "## Notes", "", *(f"- {n}" for n in notes)]
    (out_dir / "results.md").write_text("\n".join(lines) + "\n")

    figure, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    scripts = sorted({r["script"] for r in overhead})
    names = list(dict.fromkeys(r["backend"] for r in overhead))
    width = 0.8 / max(len(scripts), 1)
    for offset, script in enumerate(scripts):
        values = [next((r["median_wall_s"] for r in overhead if r["backend"] == n and r["script"] == script),
                       0.0) for n in names]
        axes[0].bar(np.arange(len(names)) + offset * width, values, width, label=script)
    axes[0].set_xticks(np.arange(len(names)) + width * (len(scripts) - 1) / 2, names, rotation=20)
    axes[0].set_ylabel("median wall s per execution")
    axes[0].set_title("latency (lower is better)")
    axes[0].legend()
    solutions = list(dict.fromkeys(r["solution"] for r in throughput))
    tnames = list(dict.fromkeys(r["backend"] for r in throughput))
    width = 0.8 / max(len(tnames), 1)
    for offset, name in enumerate(tnames):
        values = [next((r["executions_per_min"] for r in throughput if r["backend"] == name
                        and r["solution"] == s), 0.0) for s in solutions]
        axes[1].bar(np.arange(len(solutions)) + offset * width, values, width, label=name)
    axes[1].set_xticks(np.arange(len(solutions)) + width * (len(tnames) - 1) / 2, solutions, rotation=10)
    axes[1].set_ylabel(f"executions / min ({args.concurrency} in flight)")
    axes[1].set_title("throughput (higher is better)")
    axes[1].legend()
    figure.tight_layout()
    figure.savefig(out_dir / "sandbox_overhead.png", dpi=120)
    print((out_dir / "results.md").read_text())


if __name__ == "__main__":
    main(parse_args())
