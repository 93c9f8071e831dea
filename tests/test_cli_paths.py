"""Every path a ``wmrl`` flag takes is checked before anything loads: one error line, exit 2.

The cases run in one fresh interpreter (one import of the library instead of one per case), each through
``wmrl``'s own entry point with its stderr captured, so the test also sees what was imported: a bad
path must fail before a language model library, a trainer, a simulator or a sandbox is touched, and
before a run directory is written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

_RUN_CASES = r"""
import contextlib, io, json, sys
from wmrl_adapters.cli import main

HEAVY = ("transformers", "lerobot", "robosuite", "sentence_transformers",
         "wmrl_adapters.train.kaggle.trainer", "wmrl_adapters.train.embodied.trainer")
results = {}
for name, argv in json.loads(sys.argv[1]).items():
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except BaseException as error:  # a traceback is what the test must not see
            import traceback
            traceback.print_exc(file=stderr)
            code = f"raised {type(error).__name__}"
    results[name] = {"code": code, "stderr": stderr.getvalue(),
                     "loaded": [module for module in HEAVY if module in sys.modules]}
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("paths")
    (root / "empty").mkdir()
    (root / "a_file").write_text("not a directory\n")
    return {
        "missing": root / "missing",
        "empty": root / "empty",
        "file": root / "a_file",
        "out": root / "run",
    }


def _cases(p: dict[str, Path]) -> dict[str, tuple[list[str], str]]:
    """Case name -> (``wmrl`` argv, the flag its error must name)."""
    missing, empty, file, out = (str(p[key]) for key in ("missing", "empty", "file", "out"))
    train = ["train", "--out", out, "--progress", "false"]
    embodied = [*train, "--env", "robosuite:Lift"]
    return {
        "world model dir missing": (
            [*train, "--world-model", f"llm:transformers={missing}"],
            "--world-model",
        ),
        "world model dir without config.json": (
            [*train, "--world-model", f"llm:transformers={empty}"],
            "--world-model",
        ),
        "world model hub id offline and uncached": (
            [*train, "--world-model", "llm:transformers=no-such-org/no-such-model"],
            "--world-model",
        ),
        "llm policy model missing": ([*train, "--policy", "llm", "--llm-model", missing], "--llm-model"),
        "llm policy spelled llm:DIR": ([*train, "--policy", f"llm:{missing}"], "--policy"),
        "config file missing": ([*train, "--config", missing], "--config"),
        "config file is a directory": ([*train, "--config", empty], "--config"),
        "out is a file": (["train", "--out", file, "--progress", "false"], "--out"),
        "eval competition dir missing": ([*train, "--eval-competitions", missing], "--eval-competitions"),
        "eval competition dir of no layout": ([*train, "--eval-competitions", empty], "--eval-competitions"),
        "eval competition id unknown": (
            [*train, "--eval-competitions", "no-such-task"],
            "--eval-competitions",
        ),
        "lerobot policy dir missing": ([*embodied, "--policy", f"lerobot:{missing}"], "--policy"),
        "lerobot policy dir without config.json": ([*embodied, "--policy", f"lerobot:{empty}"], "--policy"),
        "init checkpoint missing": ([*embodied, "--init", missing], "--init"),
        "init checkpoint is a directory": ([*embodied, "--init", empty], "--init"),
        "fidelity rollouts missing": (["fidelity", "--rollouts", missing, "--quiet"], "--rollouts"),
        "fidelity cache is a directory": (["fidelity", "--cache", empty, "--quiet"], "--cache"),
        "fidelity output dir is a file": (["fidelity", "--output-dir", file, "--quiet"], "--output-dir"),
        "fidelity llm model missing": (["fidelity", "--llm-model", missing, "--quiet"], "--llm-model"),
        "fidelity world model dir missing": (
            ["fidelity", "--world-models", f"llm:transformers={missing}", "--quiet"],
            "--world-models",
        ),
        "compare world model dir missing": (
            ["compare", "--world-model", f"llm:transformers={missing}", "--out", out],
            "--world-model",
        ),
    }


@pytest.fixture(scope="module")
def results(paths: dict[str, Path]) -> dict[str, dict[str, Any]]:
    argvs = {name: argv for name, (argv, _) in _cases(paths).items()}
    done = subprocess.run(
        [sys.executable, "-c", _RUN_CASES, json.dumps(argvs)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "case", list(_cases({key: Path(key) for key in ("missing", "empty", "file", "out")}))
)
def test_a_bad_path_is_one_error_line_naming_the_flag_and_loads_nothing(
    case: str, paths: dict[str, Path], results: dict[str, dict[str, Any]]
) -> None:
    argv, flag = _cases(paths)[case]
    result = results[case]
    lines = result["stderr"].strip().splitlines()
    assert result["code"] == 2, result["stderr"][-2000:]
    assert "Traceback" not in result["stderr"]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"wmrl {argv[0]}: error: {flag} "), lines[0]
    assert result["loaded"] == [], f"{case} loaded {result['loaded']} before refusing the path"
    assert not paths["out"].exists(), "a run directory was written for a refused configuration"


def test_the_error_says_what_was_expected(paths: dict[str, Path], results: dict[str, dict[str, Any]]) -> None:
    assert (
        "does not exist; pass a model directory holding config.json"
        in results["world model dir missing"]["stderr"]
    )
    assert f"{paths['empty']}' has no config.json" in results["world model dir without config.json"]["stderr"]
    assert "HF_HUB_OFFLINE" in results["world model hub id offline and uncached"]["stderr"]
    assert "--policy llm --llm-model" in results["llm policy spelled llm:DIR"]["stderr"]
    assert (
        "is a directory; pass the policy.pt of an sft run"
        in results["init checkpoint is a directory"]["stderr"]
    )


def test_a_model_directory_with_config_json_and_an_online_hub_id_are_accepted(tmp_path: Path) -> None:
    from wmrl_adapters.train.embodied.config import EmbodiedConfig
    from wmrl_adapters.train.kaggle.config import TrainConfig
    from wmrl_adapters.train.run.checks import check_model_dir

    (tmp_path / "config.json").write_text("{}")
    assert TrainConfig(world_model=f"llm:transformers={tmp_path}").world_model.endswith(str(tmp_path))
    assert EmbodiedConfig(policy=f"lerobot:{tmp_path}").policy == f"lerobot:{tmp_path}"
    online = subprocess.run(
        [
            sys.executable,
            "-c",
            "from wmrl_adapters.train.run.checks import check_model_dir as c; c('--x', 'org/m')",
        ],
        env={k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert online.returncode == 0, online.stderr[-2000:]  # downloaded by from_pretrained when reachable
    check_model_dir("--x", str(tmp_path))
