"""The LeRobot policy swap, for real: a random-weight ACT behind ``--policy lerobot:<dir>`` on LIBERO.

LeRobot needs Python >= 3.12, so this module runs itself inside the embodied stack's venv (``bash
scripts/embodied.sh`` builds it; its launcher adds this checkout's wmrl) as a script: :func:`_inside_stack`
writes two random ACT directories offline (:func:`make_random_act`; one on proprio + object state, one
with the agentview camera), checks log-probs and gradients on a batch (synthetic observations of the
env's shapes and the camera path), runs ``wmrl train --env libero:libero_object/0 --policy lerobot:<dir>``
(the real LIBERO simulator, the real trainer and CLI), interrupts it after its first checkpoint, resumes
it with ``--resume``, and prints a JSON report; the tests below assert on it. Nothing is mocked; the ACT
is random because the hub (a pretrained SmolVLA's weights) is unreachable here. Skipped, with the
reason, where the venv is not built.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
STACK_PYTHON = (
    Path(os.environ.get("WMRL_EMBODIED_HOME", Path.home() / ".cache/wmrl/embodied")) / "venv/bin/python"
)
TRAIN_ARGS = [
    "--env", "libero:libero_object/0", "--algo", "wm", "--steps", "4", "--groups", "2", "--group-size", "2",
    "--horizon", "6", "--eval-samples", "0", "--workers", "1", "--progress", "false", "--init-std", "0.1",
    "--learning-rate", "1e-5",
]  # fmt: skip

pytestmark = [
    pytest.mark.embodied,
    pytest.mark.slow,
    pytest.mark.long,  # ~85 s: after the default suite (scripts/test.sh), to keep that well under 20 min
    pytest.mark.skipif(
        not STACK_PYTHON.is_file(),
        reason=f"the embodied stack is not built ({STACK_PYTHON} missing): run bash scripts/embodied.sh",
    ),
]


@pytest.fixture(scope="module")
def report(
    tmp_path_factory: pytest.TempPathFactory, report_from: Callable[..., dict[str, Any]]
) -> dict[str, Any]:
    # Checks the stack (seconds when built); this checkout's wmrl comes from its launcher, not the venv.
    subprocess.run(["bash", str(REPO / "scripts/embodied.sh")], check=True, timeout=1800)
    out = tmp_path_factory.mktemp("lerobot")
    return report_from(REPO / "scripts" / "embodied-python", [str(Path(__file__).resolve()), str(out)])


def test_log_probs_are_finite_and_their_gradient_reaches_acts_weights(report: dict[str, Any]) -> None:
    batch = report["batch"]
    assert batch["log_prob_shape"] == [8] and batch["log_probs_finite"]
    # The image path: the ResNet backbone, the transformer and the action head all get a gradient.
    assert batch["backbone_params_with_grad"] > 0
    assert batch["transformer_params_with_grad"] > 0 and batch["action_head_grad"] > 0
    assert batch["log_std_grad"] > 0


def test_the_mean_of_one_observation_is_the_same_alone_and_in_a_batch(report: dict[str, Any]) -> None:
    """The trainer samples one observation at a time and re-scores whole batches: the means must agree."""
    assert report["batch"]["alone_vs_batched"] < 1e-4


def test_micro_batched_rescoring_gives_the_same_log_probs_and_gradients(report: dict[str, Any]) -> None:
    """A step's whole batch never sits in memory at once, and the update does not notice."""
    batch = report["batch"]
    assert batch["micro_batched_grads"] == batch["grads"] > 0
    assert batch["micro_batched_log_prob_gap"] < 1e-3  # log-probs are ~-100: float32 rounding
    assert batch["micro_batched_grad_gap"] < 1e-4


def test_an_observation_without_the_checkpoints_camera_is_an_error_naming_it(report: dict[str, Any]) -> None:
    assert "agentview_image" in report["missing_camera_error"]


def test_wmrl_train_with_a_lerobot_policy_updates_it_checkpoints_and_resumes(report: dict[str, Any]) -> None:
    train = report["train"]
    # Stopped after its first checkpoint (SIGTERM: saved, exit 130); 4 steps leave room for the signal.
    assert train["first_returncode"] == 130, train["first_output"]
    saved = train["checkpoint_step_before_resume"]
    assert 1 <= saved < 4 and train["lines_before_resume"] == saved
    assert train["resume_returncode"] == 0, train["resume_stderr"]
    assert train["lines_after_resume"] == 4 and train["checkpoint_step_after_resume"] == 4
    first = train["metrics"][0]
    assert first["compute/sim_episodes"] == 4 and first["compute/sim_steps"] <= 24
    assert all(isinstance(line["losses/loss"], float) for line in train["metrics"])
    # GRPO moved ACT's own weights (not only the Gaussian's log std), before and after the resume.
    assert train["act_change_step1"] > 0 and train["act_change_after_resume"] > 0
    assert train["log_std_change"] > 0


# ------------------------------------------------------------------------ inside the embodied venv
def _run_interrupted(command: list[str], run_dir: Path) -> tuple[int, str]:
    """Run ``command``; once its first checkpoint and metrics line exist, send one SIGTERM. Its return
    code and the tail of its output. One signal: a second one during the shutdown is a forced quit
    (the default action), which is not what this checks. SIGTERM, not SIGINT: a job started in the
    background by a non-interactive shell (as CI may run the suite) inherits an ignored SIGINT."""
    log_path = run_dir.parent / "interrupted.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 300
        while process.poll() is None and time.monotonic() < deadline:
            metrics = run_dir / "metrics.jsonl"
            if (run_dir / "checkpoint.pt").is_file() and metrics.is_file() and metrics.read_text():
                os.kill(process.pid, signal.SIGTERM)
                break
            time.sleep(0.02)
        process.wait(timeout=300)
    return process.returncode, log_path.read_text()[-3000:]


def _inside_stack(out: Path) -> dict[str, Any]:
    import numpy as np
    import safetensors.torch
    import torch
    from wmrl_adapters.train import embodied_policy
    from wmrl_adapters.train.embodied.policy import LeRobotGaussianPolicy, make_random_act
    from wmrl_adapters.train.run.state_io import load_state

    from wmrl_algos.errors import ConfigError

    rng = np.random.default_rng(0)

    def observation(camera: bool) -> dict[str, Any]:
        obs: dict[str, Any] = {
            "instruction": "pick up the alphabet soup and place it in the basket",
            "proprio": rng.normal(size=9).astype(np.float32),
            "object_state": rng.normal(size=70).astype(np.float32),
        }
        if camera:
            obs["agentview_image"] = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
        return obs

    # Log-probs and gradients through the image path.
    camera_dir = make_random_act(out / "act-camera", cameras=("agentview",), image_size=64, tiny=True)
    policy = LeRobotGaussianPolicy(str(camera_dir), init_std=0.1)
    observations = [observation(camera=True) for _ in range(8)]
    distribution = policy.distribution(observations)
    log_probs = distribution.log_prob(torch.zeros(8, 7))
    log_probs.sum().backward()
    grads = {name: param.grad for name, param in policy.named_parameters()}

    def with_grad(prefix: str) -> int:
        return sum(
            g is not None and float(g.abs().sum()) > 0 for n, g in grads.items() if n.startswith(prefix)
        )

    alone = policy.distribution(observations[:1]).base_dist.mean
    # The same batch in micro-batches of 3 under activation checkpointing: same log-probs and gradients.
    chunked = LeRobotGaussianPolicy(str(camera_dir), init_std=0.1, micro_batch=3)
    chunked_log_probs = chunked.distribution(observations).log_prob(torch.zeros(8, 7))
    chunked_log_probs.sum().backward()
    chunked_grads = {name: param.grad for name, param in chunked.named_parameters()}
    grad_gap = max(
        float((grads[name] - chunked_grads[name]).abs().max() / grads[name].abs().max().clamp(min=1e-12))
        for name in grads
        if grads[name] is not None
    )
    try:
        policy.distribution([observation(camera=False)])
        missing_camera_error = ""
    except ConfigError as error:
        missing_camera_error = str(error)
    batch = {
        "log_prob_shape": list(log_probs.shape),
        "log_probs_finite": bool(torch.isfinite(log_probs).all()),
        "backbone_params_with_grad": with_grad("policy.model.backbone."),
        "transformer_params_with_grad": with_grad("policy.model.encoder.")
        + with_grad("policy.model.decoder."),
        "action_head_grad": float(grads["policy.model.action_head.weight"].abs().sum()),
        "log_std_grad": float(grads["log_std"].abs().sum()),
        "micro_batched_log_prob_gap": float((chunked_log_probs - log_probs).detach().abs().max()),
        "micro_batched_grad_gap": grad_gap,
        "micro_batched_grads": sum(g is not None for g in chunked_grads.values()),
        "grads": sum(g is not None for g in grads.values()),
        "alone_vs_batched": float((alone - distribution.base_dist.mean[:1]).detach().abs().max()),
    }

    # The state-only ACT of the training run, written by the module's command line (make-act).
    state_dir = out / "act"
    embodied_policy.main(["make-act", str(state_dir), "--tiny"])

    # wmrl train --policy lerobot:<dir>, interrupted after its first checkpoint, then --resume to step 4.
    run_dir = out / "run"
    cli = [sys.executable, "-m", "wmrl_adapters.cli", "train"]
    started = time.perf_counter()
    first, first_output = _run_interrupted(
        [*cli, *TRAIN_ARGS, "--policy", f"lerobot:{state_dir}", "--out", str(run_dir)], run_dir
    )
    first_seconds = time.perf_counter() - started
    before = load_state(run_dir / "checkpoint.pt", if_older="")
    lines_before = len((run_dir / "metrics.jsonl").read_text().splitlines())
    started = time.perf_counter()
    resumed = subprocess.run([*cli, "--resume", str(run_dir)], cwd=REPO, capture_output=True, text=True)
    resume_seconds = time.perf_counter() - started
    after = load_state(run_dir / "checkpoint.pt", if_older="")
    initial = safetensors.torch.load_file(str(state_dir / "model.safetensors"))

    def change(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
        return sum(float((a[f"policy.{key}"] - b[f"policy.{key}"]).abs().sum()) for key in initial)

    initial_state = {f"policy.{key}": value for key, value in initial.items()}
    train = {
        "first_returncode": first,
        "first_output": first_output,
        "first_seconds": first_seconds,
        "lines_before_resume": lines_before,
        "checkpoint_step_before_resume": int(before["step"]),
        "resume_returncode": resumed.returncode,
        "resume_stderr": resumed.stderr[-2000:],
        "resume_seconds": resume_seconds,
        "lines_after_resume": len((run_dir / "metrics.jsonl").read_text().splitlines()),
        "checkpoint_step_after_resume": int(after["step"]),
        "metrics": [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()],
        "act_change_step1": change(before["policy"], initial_state),
        "act_change_after_resume": change(after["policy"], before["policy"]),
        "log_std_change": float((after["policy"]["log_std"] - np.log(0.1)).abs().sum()),
    }
    return {"batch": batch, "missing_camera_error": missing_camera_error, "train": train}


if __name__ == "__main__":
    print(json.dumps(_inside_stack(Path(sys.argv[1]))))
