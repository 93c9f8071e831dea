"""The scripts in examples/ run as a user runs them (subprocesses, small budgets) and say what they did."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _run(command: list[str], timeout: int = 900) -> str:
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=EXAMPLES.parent,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    return result.stdout


@pytest.mark.slow
def test_own_env_and_world_model_example_corrects_and_anchors_sb3_episodes() -> None:
    pytest.importorskip("stable_baselines3", reason="the example's part 2 needs stable-baselines3 (dev)")
    script = EXAMPLES / "own_env_world_model.py"
    out = _run([sys.executable, str(script), "--steps", "2", "--sb3-steps", "1024"])
    steps = re.findall(r"step (\d): anchor groups (\d)/8, calibration pairs (\d+)", out)
    assert [step for step, _, _ in steps] == ["0", "1"]
    assert all(int(anchors) >= 1 for _, anchors, _ in steps) and int(steps[-1][2]) > int(steps[0][2])
    episodes, anchored = map(int, re.search(r"SB3 PPO: (\d+) episodes, (\d+) anchored", out).groups())
    assert episodes >= 40 and 1 <= anchored < episodes / 4


@pytest.mark.long  # moved out of the default suite (its slowest; CI's long pass runs it)
@pytest.mark.slow
@pytest.mark.llm
@pytest.mark.integration
def test_kaggle_llm_agent_example_runs_an_anchor_group_for_real() -> None:
    pytest.importorskip("transformers", reason="the example needs the [llm] extra")
    out = _run(
        [sys.executable, str(EXAMPLES / "kaggle_llm_agent.py"), "--max-new-tokens", "32", "--max-turns", "1"]
    )
    assert re.search(r"group \d \(anchor\): predicted .*, real .*calibration pairs", out)
    assert re.search(r"group \d \(world model\): predicted .*, not executed", out)
    assert int(re.search(r"real executions: (\d+)", out).group(1)) >= 2


@pytest.mark.long  # moved out of the default suite (its slowest; CI's long pass runs it)
@pytest.mark.slow
@pytest.mark.integration
def test_command_line_example_runs_a_short_session(tmp_path: Path) -> None:
    if shutil.which("wmrl") is None:
        pytest.skip("the wmrl console script is not installed (pip install -e .)")
    out = _run(["bash", str(EXAMPLES / "command_line.sh"), str(tmp_path)])
    assert re.search(r"^wmrl \d", out, flags=re.MULTILINE)
    assert "titanic-survival" in out
    assert "a bad --split exits with status 2" in out
    assert any(tmp_path.iterdir()), "wmrl fidelity wrote its table and plots"
