"""Time the LeRobot policy swap on a GPU: a random-weight ACT behind ``LeRobotGaussianPolicy``.

Why this script: ``wmrl train --policy lerobot:<dir>`` runs on a CPU here (tests/test_embodied_lerobot.py),
but its cost on a GPU decides how a LIBERO run is sized there, and a borrowed GPU machine may have no
LeRobot, no simulator and no network. So this builds ACT offline (LeRobot's default size: ResNet-18 per
camera, a 512-wide transformer; random weights, no pretrained backbone), wraps it exactly as the trainer
does (``adapters/train/embodied_policy.py``, loaded by path, so neither wmrl's install nor its other
dependencies are needed), feeds synthetic observations of LIBERO's shapes (proprio 9, object state 70,
two 128 x 128 cameras, an instruction) and times what a training step spends in the policy: one
observation's forward (a rollout step) and, for a batch, forward + log-prob + backward + Adam (a GRPO
epoch; batches above ``--micro-batch`` run in checkpointed micro-batches, as in training, so the peak
memory it reports is that of one micro-batch). It prints one JSON line (and writes it to ``--out``).

On a machine without LeRobot, ``bash scripts/gpu_pack.sh`` first copies LeRobot and the pure-Python
packages its policy code imports into ``.gpu/``; then::

    PYTHONPATH=.gpu python3 scripts/gpu_lerobot_check.py --device cuda --out $OUT/lerobot_gpu.json

On a CPU (the embodied venv): ``$(bash scripts/embodied.sh python) scripts/gpu_lerobot_check.py --device cpu
--batches 4 --repeats 2``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent


def load_embodied_policy() -> ModuleType:
    """``adapters/train/embodied_policy.py`` as a module, without importing the rest of wmrl_adapters."""
    sys.path.insert(0, str(REPO))  # wmrl_algos (its errors module: numpy and torch only)
    path = REPO / "adapters/train/embodied_policy.py"
    spec = importlib.util.spec_from_file_location("wmrl_embodied_policy", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def observations(count: int, cameras: Sequence[str], image_size: int, seed: int) -> list[dict[str, Any]]:
    """Synthetic observations with LIBERO's keys and shapes (uint8 images, float32 states)."""
    rng = np.random.default_rng(seed)
    keys = {"agentview": "agentview_image", "robot0_eye_in_hand": "wrist_image"}
    batch = []
    for _ in range(count):
        obs: dict[str, Any] = {
            "instruction": "put both the alphabet soup and the tomato sauce in the basket",
            "proprio": rng.normal(size=9).astype(np.float32),
            "object_state": rng.normal(size=70).astype(np.float32),
        }
        for camera in cameras:
            obs[keys[camera]] = rng.integers(0, 256, (image_size, image_size, 3), dtype=np.uint8)
        batch.append(obs)
    return batch


def timed(run: Callable[[], Any], device: str, repeats: int) -> float:
    """Mean seconds of ``run`` over ``repeats`` calls, after one warm-up call."""
    run()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(repeats):
        run()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return (time.perf_counter() - started) / repeats


def update_cost(
    policy: Any, optimiser: torch.optim.Optimizer, size: int, cameras: Sequence[str], args: argparse.Namespace
) -> dict[str, Any]:
    """Time forward + log-prob + backward + Adam on a batch of ``size``; check that ACT's weights moved."""
    batch = observations(size, cameras, args.image_size, seed=size)
    with torch.no_grad():
        actions = policy.distribution(batch).sample()
    before = [p.detach().clone() for p in policy.policy.parameters()]
    log_probs: list[torch.Tensor] = []

    def update() -> None:
        optimiser.zero_grad()
        log_prob = policy.distribution(batch).log_prob(actions)
        (-log_prob.mean()).backward()  # raise the likelihood of the batch's own actions
        # As the trainer's update: one norm over the model's (GPU) and the log std's (CPU) gradients.
        torch.nn.utils.clip_grad_norm_(list(policy.parameters()), 1.0)
        optimiser.step()
        log_probs.append(log_prob.detach())

    result: dict[str, Any] = {"batch": size}
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    result["update_ms"] = 1000 * timed(update, args.device, args.repeats)
    if args.device.startswith("cuda"):
        result["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    result["log_probs_finite"] = bool(all(torch.isfinite(lp).all() for lp in log_probs))
    result["log_prob_first_last"] = [float(log_probs[0].mean()), float(log_probs[-1].mean())]
    parameters = list(policy.policy.parameters())
    moved = [float((p.detach() - b).abs().sum()) for p, b in zip(parameters, before, strict=True)]
    result["act_tensors_moved"] = f"{sum(m > 0 for m in moved)}/{len(moved)}"
    with torch.no_grad():
        alone = policy.distribution(batch[:1]).base_dist.mean
        batched = policy.distribution(batch).base_dist.mean[:1]
    result["alone_vs_batched"] = float((alone - batched).abs().max())
    return result


def check(args: argparse.Namespace) -> dict[str, Any]:
    """Build the policy, check its gradients and time it; the JSON report."""
    module = load_embodied_policy()
    cameras = [camera for camera in args.cameras.split(",") if camera]
    report: dict[str, Any] = {
        "torch": torch.__version__,
        "device": args.device,
        "device_name": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu",
        "cameras": cameras,
        "image_size": args.image_size,
        "act_size": "tiny" if args.tiny else "default",
        "learning_rate": args.learning_rate,
        "micro_batch": args.micro_batch,
    }
    import lerobot

    report["lerobot"] = lerobot.__version__
    with tempfile.TemporaryDirectory() as directory:
        module.make_random_act(directory, cameras=cameras, image_size=args.image_size, tiny=args.tiny, seed=0)
        started = time.perf_counter()
        policy = module.LeRobotGaussianPolicy(
            directory, init_std=0.1, device=args.device, micro_batch=args.micro_batch
        )
        report["load_seconds"] = time.perf_counter() - started
    report["parameters"] = sum(p.numel() for p in policy.parameters())
    optimiser = torch.optim.Adam(list(policy.parameters()), lr=args.learning_rate)

    one = observations(1, cameras, args.image_size, seed=1)
    with torch.no_grad():
        report["rollout_forward_b1_ms"] = 1000 * timed(lambda: policy.distribution(one), args.device, 10)

    report["updates"] = [update_cost(policy, optimiser, size, cameras, args) for size in args.batches]
    report["steps_per_second_per_episode_rollout"] = 1000 / report["rollout_forward_b1_ms"]
    return report


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the options, run :func:`check`, print (and write) the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument(
        "--batches", default="32,256", help="comma-separated batch sizes (observations per GRPO update)"
    )
    parser.add_argument("--repeats", type=int, default=10, help="timed updates (after one warm-up)")
    parser.add_argument("--cameras", default="agentview,robot0_eye_in_hand", help="'' for state only")
    parser.add_argument("--image-size", type=int, default=128)
    parser.add_argument(
        "--learning-rate", type=float, default=1e-6, help="Adam's (1e-5 overshoots at std 0.1)"
    )
    parser.add_argument(
        "--micro-batch", type=int, default=64, help="observations per checkpointed forward in an update"
    )
    parser.add_argument("--tiny", action="store_true", help="a 64-wide one-layer ACT instead of the default")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    args.batches = [int(size) for size in args.batches.split(",") if size]
    report = check(args)
    line = json.dumps(report)
    print(line)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(line + "\n")


if __name__ == "__main__":
    main()
