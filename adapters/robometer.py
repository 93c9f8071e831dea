"""Robometer as a wmrl progress scorer, through LeRobot's ``RobometerRewardModel``.

Why through LeRobot: Robometer (a Qwen3-VL-4B with progress and success heads) is the paper's world model
on LIBERO, and LeRobot >= 0.6 is where the robotics teams already run it (model, processor step,
per-frame recipe). LeRobot 0.6 needs Python 3.12, so the model runs in a worker under the embodied
stack's interpreter (``bash scripts/embodied.sh``), loaded by :mod:`wmrl_adapters.robometer_stack`;
this side only ships frames over the pipe and gets per-frame progress back.

Weights: ``pretrained_path`` is a local directory or a hub id already in the HuggingFace cache
(``lerobot/Robometer-4B``); nothing is downloaded when ``HF_HUB_OFFLINE=1``. On a GPU machine::

    python -c "from wmrl_adapters.robometer import RobometerScorer; \\
        RobometerScorer('lerobot/Robometer-4B', device='cuda')"

``tiny_random=True`` builds a randomly initialised ~20 M-parameter Robometer with an offline processor: its
progress means nothing, but it exercises the whole code path on CPU (it is what the tests use).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_algos.errors import ConfigError
from wmrl_envs.embodied.progress import ProgressCurve, ProgressInput
from wmrl_envs.embodied.stack import SimulatorProcess

__all__ = ["RobometerScorer"]

_PLUGIN = Path(__file__).resolve().parent / "robometer_stack.py"


class RobometerScorer:
    """Per-frame task progress from Robometer, for :class:`~wmrl_envs.embodied.progress.ProgressWorldModel`.

    Args:
        pretrained_path: a Robometer checkpoint (local directory or cached hub id); ignored with
            ``tiny_random``.
        camera: which image observation to score (``"agentview_image"`` or ``"wrist_image"``).
        window: frames sub-sampled from the start up to each scored frame (LeRobot's recipe uses 4).
        stride: score every ``stride``-th frame (and the last), interpolate the rest: one model call
            per scored frame.
        batch_size: windows per model call.
        device: ``"cpu"`` or ``"cuda"``.
        tiny_random: build a tiny random Robometer instead of loading weights (code-path tests only).
        seed: initialisation seed of the tiny model.
        python: the embodied stack's interpreter (default: the venv ``scripts/embodied.sh`` builds).

    Raises:
        ConfigError: invalid arguments.
        MissingDependencyError: the embodied stack is not built.
        SimulatorError: the model could not be loaded (e.g. weights absent offline).

    Example:
        >>> scorer = RobometerScorer(tiny_random=True)  # doctest: +SKIP
        >>> scorer.parameters > 10_000_000  # doctest: +SKIP
        True
    """

    def __init__(
        self,
        pretrained_path: str | None = None,
        *,
        camera: str = "agentview_image",
        window: int = 4,
        stride: int = 8,
        batch_size: int = 8,
        device: str = "cpu",
        tiny_random: bool = False,
        seed: int = 0,
        python: str | None = None,
    ) -> None:
        if pretrained_path is None and not tiny_random:
            raise ConfigError(
                "pretrained_path=None; pass a Robometer checkpoint (e.g. 'lerobot/Robometer-4B' from the hub "
                "cache, or a local directory), or tiny_random=True to exercise the code path"
            )
        for name, value in (("window", window), ("stride", stride), ("batch_size", batch_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name}={value!r}; pass a positive int")
        self.camera = camera
        self.stride = stride
        self.name = "robometer-tiny-random" if tiny_random else f"robometer:{pretrained_path}"
        self._worker = SimulatorProcess(python)
        options: dict[str, Any] = {
            "pretrained_path": pretrained_path,
            "window": window,
            "batch_size": batch_size,
            "device": device,
            "tiny_random": tiny_random,
            "seed": seed,
        }
        try:
            description = self._worker.call("load_plugin", path=str(_PLUGIN), options=options)
        except BaseException:
            self._worker.close()
            raise
        self._plugin = int(description["plugin"])
        self.parameters = int(description["parameters"])

    def progress(self, batch: Sequence[ProgressInput]) -> list[ProgressCurve | None]:
        """Per-frame progress for each trajectory; ``None`` for one without the chosen camera."""
        curves: list[ProgressCurve | None] = []
        for item in batch:
            frames = item.frames.get(self.camera)
            if frames is None:
                curves.append(None)
                continue
            values = self._worker.call(
                "call_plugin",
                plugin=self._plugin,
                method="progress",
                arguments={
                    "frames": np.ascontiguousarray(frames),
                    "instruction": item.instruction,
                    "stride": self.stride,
                },
            )
            curves.append(ProgressCurve(np.clip(np.asarray(values, dtype=np.float64), 0.0, 1.0)))
        return curves

    def close(self) -> None:
        """Stop the worker that holds the model."""
        self._worker.close()
