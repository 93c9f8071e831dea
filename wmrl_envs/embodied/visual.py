"""A learned visual progress scorer: a small image model on the agent-view camera, trained offline.

Why: Robometer reads the agent-view camera and says how far along the task each frame is, and its
real weights need the hub and a GPU. The closest thing that runs on a CPU is a small convolutional
network given the same input (the ``agentview_image`` frames) and the same output (per-frame progress in
[0, 1]), trained offline from rendered demonstrations: each successful demonstration's frames ramp
linearly from 0 at the reset frame to 1 at the last (the usual progress label of demonstration data),
and each failed or perturbed one (the scripted expert with noise on its actions, random actions) is 0
throughout. Like a VLM scorer it has seen the expert's trajectories, not the policy's: on the policy's own
rollouts it is off its training distribution, which is where its errors (a hovering gripper that looks
like a grasp, an unfamiliar arm pose) come from. Those errors are measured
(``benchmarks/embodied_fidelity.py``), not tuned away.

A checkpoint is plain data (tensors, numbers, strings), written with ``torch.save`` and read with
``torch.load(weights_only=True)``, so loading one runs no code from the file. It records the camera and
image size the model was trained on; a scorer asked to load a checkpoint of another camera or size, or
to score frames of another camera or size, refuses with both named.

Train one from the command line (the simulator renders through the embodied stack's worker)::

    python -m wmrl_envs.embodied.visual --episodes 4 --out visual_scorer.pt
    python -m wmrl_envs.embodied.visual --env libero:libero_spatial/0,1 --max-steps 0 \
        --frame-stride 20 --episodes 2 --out libero_scorer.pt

``--frame-stride N`` renders a frame every N steps and holds it in between (software rendering is most
of a LIBERO step's cost on a CPU); the checkpoint records N, and a run with the scorer renders its env
the same way.
"""

from __future__ import annotations

import argparse
import math
import pickle
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium.wrappers import TimeLimit
from torch import nn
from tqdm.auto import tqdm

from wmrl_algos.errors import CheckpointError, ConfigError
from wmrl_envs.embodied._worker import CAMERAS, IMAGE_KEYS
from wmrl_envs.embodied.envs import LIBERO_SUITES, ROBOSUITE_TASKS, LiberoEnv, RobosuiteEnv
from wmrl_envs.embodied.fidelity import collect_episodes
from wmrl_envs.embodied.policies import NoisyPolicy, RandomPolicy, scripted_expert
from wmrl_envs.embodied.progress import ProgressCurve, ProgressInput, progress_input

__all__ = [
    "VISUAL_CHECKPOINT_FORMAT",
    "VisualProgressConfig",
    "VisualProgressScorer",
    "main",
    "progress_targets",
    "render_training_episodes",
    "training_env",
]

VISUAL_CHECKPOINT_FORMAT = "wmrl-visual-progress-1"
"""The ``format`` entry of every checkpoint :meth:`VisualProgressScorer.save` writes."""

_ARCHITECTURE = ("camera", "image_size", "width", "hidden")
"""The config fields a checkpoint's weights depend on (the rest only say how it was trained)."""

_NOT_SAVED = ("device",)
"""Config fields that say where the scorer runs, not what it is: one trained on a GPU loads on a CPU."""


@dataclass(frozen=True)
class VisualProgressConfig:
    """How :class:`VisualProgressScorer` is built and trained.

    Raises:
        ConfigError: a value is out of range (the message names it and the fix).

    Example:
        >>> VisualProgressConfig(image_size=32).image_size
        32
    """

    camera: str = field(
        default="agentview_image",
        metadata={"help": "image observation the model reads (Robometer's input is the agent view)"},
    )
    image_size: int = field(default=64, metadata={"help": "side of the square frames it is trained on"})
    frame_stride: int = field(
        default=1,
        metadata={
            "help": "control steps between the camera's frames it is trained on (held in between); a run "
            "renders its env the same way"
        },
    )
    width: int = field(default=16, metadata={"help": "channels of the first conv layer (then 2x, 2x)"})
    hidden: int = field(default=64, metadata={"help": "width of the hidden layer of the progress head"})
    epochs: int = field(default=30, metadata={"help": "passes over the training frames"})
    learning_rate: float = field(default=1e-3, metadata={"help": "Adam learning rate"})
    batch_size: int = field(default=64, metadata={"help": "frames per gradient step"})
    seed: int = field(default=0, metadata={"help": "seeds initialisation and batching"})
    device: str = field(
        default="cpu",
        metadata={"help": "torch device it trains and scores on (cuda on a GPU); not saved in a checkpoint"},
    )

    def __post_init__(self) -> None:
        if self.camera not in IMAGE_KEYS:
            raise ConfigError(f"camera={self.camera!r}; pass one of {IMAGE_KEYS}")
        minimums = (
            ("image_size", 16),
            ("frame_stride", 1),
            ("width", 1),
            ("hidden", 1),
            ("epochs", 1),
            ("batch_size", 1),
        )
        for name, low in minimums:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{name}={value!r}; pass an int >= {low}")
        rate = self.learning_rate
        if not (isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0):
            raise ConfigError(f"learning_rate={rate!r}; pass a positive float (e.g. 1e-3)")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ConfigError(f"seed={self.seed!r}; pass an int")
        _check_device(self.device)

    def architecture(self) -> dict[str, Any]:
        """The fields the weights depend on: camera, image size, widths."""
        return {name: getattr(self, name) for name in _ARCHITECTURE}


def _check_device(device: object) -> None:
    """Refuse a device torch cannot name or this machine does not have, before any training starts."""
    try:
        parsed = torch.device(device)  # type: ignore[call-overload]
    except (RuntimeError, TypeError):
        raise ConfigError(f"device={device!r}; pass a torch device such as 'cpu' or 'cuda'") from None
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device={device!r}, but torch sees no CUDA GPU here; pass device='cpu'")
    if parsed.type not in ("cpu", "cuda"):
        raise ConfigError(f"device={device!r}; the visual scorer runs on 'cpu' or 'cuda'")


def _cpu_copy(weights: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {key: value.detach().cpu().clone() for key, value in weights.items()}


def progress_targets(length: int, success: bool) -> np.ndarray:
    """Per-frame training targets: a success ramps 0 -> 1 over its frames, a failure is 0 throughout.

    Example:
        >>> progress_targets(3, True).tolist(), progress_targets(2, False).tolist()
        ([0.0, 0.5, 1.0], [0.0, 0.0])
    """
    if length < 1:
        raise ConfigError(f"length={length!r}; a trajectory has at least one frame")
    ramp = np.linspace(0.0, 1.0, length) if length > 1 else np.ones(1)
    return ramp * float(success)


def _network(config: VisualProgressConfig) -> nn.Sequential:
    width = config.width
    with torch.random.fork_rng(devices=[]):  # seeded initialisation, leaving the caller's generator alone
        torch.manual_seed(config.seed)
        # Initialised on the CPU, then moved: the same initial weights on any device.
        return _layers(width, config.hidden).to(config.device)


def _layers(width: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(3, width, 5, stride=2, padding=2),
        nn.ReLU(),
        nn.Conv2d(width, 2 * width, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(2 * width, 2 * width, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(4),  # keeps a coarse 4x4 layout: where the cube and the gripper are
        nn.Flatten(),
        nn.Linear(2 * width * 16, hidden),
        nn.ReLU(),
        nn.Linear(hidden, 1),
    )


class VisualProgressScorer:
    """Per-frame progress from camera frames, by a small CNN trained on labelled demonstration frames.

    A :class:`~wmrl_envs.embodied.progress.ProgressScorer`: until :meth:`fit` (or :meth:`load`) it says
    ``None`` for every trajectory. A trajectory without the scorer's camera, or with frames of another
    size, is a configuration mistake (the env renders something else than what the model was trained
    on) and raises :class:`~wmrl_algos.errors.ConfigError` naming both.

    Args:
        config: camera, image size, widths and training settings.

    Example:
        >>> scorer = VisualProgressScorer(VisualProgressConfig(image_size=16, epochs=2))
        >>> frames = [np.full((16, 16, 3), 25 * t, np.uint8) for t in range(6)]
        >>> trajectory = [{"instruction": "lift", "agentview_image": f} for f in frames]
        >>> scorer.progress([progress_input(trajectory)])
        [None]
        >>> _ = scorer.fit([progress_input(trajectory)] * 2, [True, False])
        >>> scorer.progress([progress_input(trajectory)])[0].progress.shape
        (6,)
    """

    name = "visual"

    def __init__(self, config: VisualProgressConfig | None = None) -> None:
        self.config = config if config is not None else VisualProgressConfig()
        self._network = _network(self.config)
        self._network.eval()
        self._fitted = False

    @property
    def fitted(self) -> bool:
        """Whether the model has been trained (or loaded)."""
        return self._fitted

    @property
    def frame_shape(self) -> tuple[int, int, int]:
        """The ``(H, W, 3)`` shape of the frames it reads."""
        return (self.config.image_size, self.config.image_size, 3)

    def _frames(self, item: ProgressInput) -> np.ndarray:
        config = self.config
        frames = item.frames.get(config.camera)
        if frames is None:
            found = sorted(item.frames) or "no camera frames"
            camera = CAMERAS[IMAGE_KEYS.index(config.camera)]
            raise ConfigError(
                f"scorer {self.name!r} reads {config.camera!r} frames of {self.frame_shape}, the trajectory "
                f"has {found}; make the env with cameras=({camera!r},), image_size={config.image_size}, or "
                "load a scorer trained on the camera the env renders"
            )
        frames = np.asarray(frames)
        if frames.shape[1:] != self.frame_shape:
            raise ConfigError(
                f"scorer {self.name!r} was trained on {config.camera!r} frames of {self.frame_shape}, the "
                f"trajectory's are {frames.shape[1:]}; make the env with image_size={config.image_size}, or "
                "train a scorer at the env's image size"
            )
        return frames

    @staticmethod
    def _tensor(frames: np.ndarray) -> torch.Tensor:
        images = torch.from_numpy(np.ascontiguousarray(frames, dtype=np.float32))
        return images.permute(0, 3, 1, 2) / 255.0 - 0.5

    def fit(self, batch: Sequence[ProgressInput], successes: Sequence[bool]) -> dict[str, float]:
        """Train afresh on labelled trajectories (successes ramp 0 -> 1, failures are 0 throughout).

        Args:
            batch: the training trajectories (their frames of the scorer's camera are used).
            successes: whether each one succeeded.

        Returns:
            ``visual/frames``, ``visual/first_loss``, ``visual/final_loss`` (mean binary cross-entropy of
            the first and last epoch) and ``visual/fit_seconds``.

        Raises:
            ConfigError: lengths differ, outcomes are all one kind, or frames are of another camera/size.
        """
        if len(batch) != len(successes) or not batch:
            raise ConfigError(
                f"{len(batch)} trajectories for {len(successes)} outcomes; pass equal, non-zero counts"
            )
        if {bool(s) for s in successes} != {True, False}:
            raise ConfigError(
                f"successes={[bool(s) for s in successes]}; pass successes and failures (a model trained on "
                "one outcome predicts it everywhere)"
            )
        started = time.perf_counter()
        config = self.config
        device = torch.device(config.device)
        images = torch.cat([self._tensor(self._frames(item)) for item in batch]).to(device)
        targets = torch.from_numpy(
            np.concatenate(
                [progress_targets(item.length, bool(s)) for item, s in zip(batch, successes, strict=True)]
            ).astype(np.float32)
        ).to(device)
        self._network = _network(config)
        optimiser = torch.optim.Adam(self._network.parameters(), lr=config.learning_rate)
        loss_fn = nn.BCEWithLogitsLoss()
        generator = torch.Generator().manual_seed(config.seed)
        losses = []
        self._network.train()
        for _ in range(config.epochs):
            order = torch.randperm(len(targets), generator=generator)
            total = 0.0
            for start in range(0, len(order), config.batch_size):
                index = order[start : start + config.batch_size].to(device)
                loss = loss_fn(self._network(images[index]).squeeze(-1), targets[index])
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                total += float(loss.detach()) * len(index)
            losses.append(total / len(order))
        self._network.eval()
        self._fitted = True
        return {
            "visual/frames": float(len(targets)),
            "visual/first_loss": losses[0],
            "visual/final_loss": losses[-1],
            "visual/fit_seconds": time.perf_counter() - started,
        }

    def progress(self, batch: Sequence[ProgressInput]) -> list[ProgressCurve | None]:
        """Per-frame progress in [0, 1] of each trajectory; ``None`` for all before training.

        Raises:
            ConfigError: a trajectory lacks the scorer's camera or has frames of another size.
        """
        if not self._fitted:
            return [None for _ in batch]
        curves: list[ProgressCurve | None] = []
        with torch.no_grad():
            for item in batch:
                frames = self._tensor(self._frames(item)).to(self.config.device)
                progress = torch.sigmoid(self._network(frames).squeeze(-1)).cpu()
                curves.append(ProgressCurve(progress.numpy().astype(np.float64)))
        return curves

    # Checkpoints --------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The model as plain data: format, config, whether trained, and the weights (tensors)."""
        return {
            "format": VISUAL_CHECKPOINT_FORMAT,
            "config": {k: v for k, v in asdict(self.config).items() if k not in _NOT_SAVED},
            "fitted": self._fitted,
            "weights": _cpu_copy(self._network.state_dict()),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict` into this scorer.

        Raises:
            CheckpointError: the state is not a visual scorer's, was trained on another camera, image
                size or architecture (both named), or its weights do not fit (the tensor named).
        """
        if not isinstance(state, Mapping) or state.get("format") != VISUAL_CHECKPOINT_FORMAT:
            found = state.get("format") if isinstance(state, Mapping) else type(state).__name__
            raise CheckpointError(
                f"the state is not a visual progress scorer's (format {found!r}, expected "
                f"{VISUAL_CHECKPOINT_FORMAT!r}); pass what VisualProgressScorer.state_dict() or save() wrote"
            )
        saved = state.get("config")
        expected = self.config.architecture()
        found_architecture = (
            {name: saved.get(name) for name in _ARCHITECTURE} if isinstance(saved, Mapping) else saved
        )
        if found_architecture != expected:
            raise CheckpointError(
                f"the checkpoint was trained for {found_architecture!r}, this scorer expects {expected!r}; "
                "build the scorer with the checkpoint's config (VisualProgressScorer.load(path) does), or "
                "retrain it on the camera and image size the env renders"
            )
        weights = state.get("weights")
        own = self._network.state_dict()
        if not isinstance(weights, Mapping) or set(weights) != set(own):
            keys = sorted(weights) if isinstance(weights, Mapping) else type(weights).__name__
            raise CheckpointError(
                f"the checkpoint's weights are {keys}, expected {sorted(own)}; it is corrupt or not a "
                "visual scorer's"
            )
        for key, tensor in own.items():
            value = weights[key]
            if not isinstance(value, torch.Tensor) or value.shape != tensor.shape:
                shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                raise CheckpointError(
                    f"the checkpoint's weight {key!r} has shape {shape}, expected {tuple(tensor.shape)}; it "
                    "is corrupt or was written for another architecture"
                )
        self._network.load_state_dict({key: weights[key].float() for key in own})
        self._network.eval()
        self._fitted = bool(state.get("fitted", True))

    def save(self, path: str | Path) -> Path:
        """Write the scorer to ``path`` as plain data (loading it runs no code)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp")
        torch.save(self.state_dict(), temporary)
        temporary.replace(path)
        return path

    @classmethod
    def load(
        cls, path: str | Path, config: VisualProgressConfig | None = None, *, device: str | None = None
    ) -> VisualProgressScorer:
        """Read a scorer that :meth:`save` wrote, with ``torch.load(weights_only=True)``.

        Args:
            path: the checkpoint file.
            config: the scorer the caller expects (camera, image size...); ``None``: the checkpoint's own.
            device: where to score (``None``: ``config``'s device, or the CPU); a checkpoint records none,
                so one trained on a GPU loads on a CPU.

        Raises:
            CheckpointError: the file is missing, torn, holds code or other objects, or was trained for
                another camera or image size than ``config`` (both named).
        """
        path = Path(path)
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as error:
            raise CheckpointError(
                f"refusing {path}: it holds objects beyond tensors and plain data, which a visual scorer "
                f"checkpoint never does (nothing from it was run): {str(error)[:200]}"
            ) from None
        except Exception as error:  # a missing, torn or foreign file: say which
            raise CheckpointError(f"cannot read visual scorer checkpoint {path} ({error})") from error
        if config is None:
            saved = state.get("config") if isinstance(state, dict) else None
            try:
                if isinstance(saved, dict):
                    config = VisualProgressConfig(**{k: v for k, v in saved.items() if k not in _NOT_SAVED})
                else:
                    config = VisualProgressConfig()
            except (TypeError, ConfigError) as error:
                raise CheckpointError(f"{path} holds an invalid scorer config {saved!r} ({error})") from error
        if device is not None:
            config = replace(config, device=device)
        scorer = cls(config)
        try:
            scorer.load_state_dict(state)
        except CheckpointError as error:
            raise CheckpointError(f"{path}: {error}") from None
        return scorer


def render_training_episodes(
    env: Any,
    expert: Any,
    *,
    episodes: int,
    max_steps: int,
    noise: float = 0.3,
    seed: int = 0,
    tasks: Sequence[int] = (0,),
) -> tuple[list[ProgressInput], list[bool]]:
    """Rendered demonstrations to train on: the clean expert, the expert with action noise, random actions.

    ``episodes`` of each policy on each task (reset seeds ``seed``, ``seed + 1``...): the clean expert
    gives the successes, its noisy twin near misses and some successes, random actions clear failures.

    Args:
        env: an embodied env that renders the scorer's camera and has ``object_states`` (the expert
            reads them).
        expert: the scripted privileged-state expert (e.g. ``ScriptedLiftPolicy()``).
        episodes: episodes per policy and task.
        max_steps: step limit of an episode.
        noise: action noise of the perturbed expert.
        seed: seeds resets and noise.
        tasks: the task ids to render (LIBERO; a robosuite env has task 0 only).

    Returns:
        The trajectories and whether each succeeded.
    """
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise ConfigError(f"max_steps={max_steps!r}; pass a positive int")
    if not tasks:
        raise ConfigError("tasks=(); pass at least one task id")
    limited = TimeLimit(env, max_steps)
    policies = {
        "expert": expert,
        "noisy-expert": NoisyPolicy(expert, noise=noise, seed=seed),
        "random": RandomPolicy(seed=seed),
    }
    collected = []
    for task in tqdm(tasks, desc="rendering demonstrations", unit="task", disable=len(tasks) < 2):
        for label, policy in policies.items():
            collected += collect_episodes(
                limited, policy, episodes, label=label, seed=seed, task_id=int(task)
            )
    known = [episode for episode in collected if episode.sim_error is None]
    return [progress_input(list(e.observations)) for e in known], [e.success for e in known]


def training_env(env: str, *, image_size: int, frame_stride: int) -> tuple[Any, list[int], int]:
    """The env to render demonstrations in, its task ids and its step limit, from ``--env``.

    Args:
        env: ``robosuite:TASK`` or ``libero:SUITE/IDS`` (tasks the scripted expert solves).
        image_size: side of the agent-view frames.
        frame_stride: steps between rendered frames (held in between).

    Raises:
        ConfigError: an env of another form, an unknown task or suite.
    """
    kind, _, rest = env.partition(":")
    name, _, ids = rest.partition("/")
    view: dict[str, Any] = {"cameras": ("agentview",), "image_size": image_size, "frame_stride": frame_stride}
    if kind == "robosuite" and name in ROBOSUITE_TASKS and not ids:
        return RobosuiteEnv(name, object_states=True, **view), [0], ROBOSUITE_TASKS[name][1]
    if kind == "libero" and name in LIBERO_SUITES:
        try:
            tasks = [int(item) for item in ids.split(",")] if ids else []
        except ValueError:
            tasks = []
        if tasks:
            return LiberoEnv(name, object_states=True, **view), tasks, LIBERO_SUITES[name][1]
    raise ConfigError(
        f"env={env!r}; pass robosuite:TASK ({', '.join(ROBOSUITE_TASKS)}) or libero:SUITE/IDS "
        f"({', '.join(LIBERO_SUITES)}, with the task ids, e.g. libero:libero_spatial/0,1)"
    )


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """``python -m wmrl_envs.embodied.visual``: render demonstrations, train, save, report."""
    parser = argparse.ArgumentParser(description="Train the visual progress scorer on rendered demos.")
    parser.add_argument(
        "--env",
        default="robosuite:Lift",
        help="robosuite:TASK or libero:SUITE/IDS (tasks its scripted expert solves)",
    )
    parser.add_argument("--episodes", type=int, default=4, help="episodes per demo policy (3) and task")
    parser.add_argument(
        "--max-steps", type=int, default=60, help="step limit of a demo episode (0: the env's)"
    )
    parser.add_argument("--noise", type=float, default=0.3, help="action noise of the perturbed expert")
    parser.add_argument("--image-size", type=int, default=64, help="side of the rendered frames")
    parser.add_argument(
        "--frame-stride",
        type=int,
        default=1,
        help="render a frame every N steps, held in between (a run with the scorer renders the same)",
    )
    parser.add_argument("--epochs", type=int, default=30, help="training epochs")
    parser.add_argument("--seed", type=int, default=0, help="seeds resets, noise and training")
    parser.add_argument("--out", type=Path, default=Path("visual_scorer.pt"), help="checkpoint to write")
    args = parser.parse_args(argv)
    config = VisualProgressConfig(
        image_size=args.image_size, frame_stride=args.frame_stride, epochs=args.epochs, seed=args.seed
    )
    expert = scripted_expert(args.env)
    env, tasks, limit = training_env(args.env, image_size=args.image_size, frame_stride=args.frame_stride)
    try:
        batch, successes = render_training_episodes(
            env,
            expert,
            episodes=args.episodes,
            max_steps=args.max_steps or limit,
            noise=args.noise,
            seed=args.seed,
            tasks=tasks,
        )
    finally:
        env.close()
    scorer = VisualProgressScorer(config)
    report = scorer.fit(batch, successes)
    scorer.save(args.out)
    report = {**report, "visual/episodes": float(len(batch)), "visual/successes": float(sum(successes))}
    print({key: round(value, 4) for key, value in report.items()}, "->", args.out)
    return report


if __name__ == "__main__":
    main()
