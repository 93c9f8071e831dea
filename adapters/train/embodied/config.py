"""``EmbodiedConfig``: every setting of an embodied ``wmrl train --env ...`` run, validated.

Why its own module in the embodied wing: the shared settings are declared once in
:class:`~wmrl_adapters.train.run.settings.RunSettings`; what only a simulator run has (the env, the
policy, demonstrations, the progress scorer, simulator workers) is declared here, beside the trainer
that reads it, and importing it loads no simulator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from wmrl_adapters.train.run.checks import check_model_dir, check_path
from wmrl_adapters.train.run.checks import field_help as _help
from wmrl_adapters.train.run.settings import ALGOS, RunSettings, track_default

from wmrl_algos.errors import ConfigError

__all__ = ["EMBODIED_ALGOS", "WORLD_MODELS", "EmbodiedConfig"]


EmbodiedAlgo = Literal["sft", "grpo", "anchors", "wm", "mix", "od", "ivd", "wmrl"]
EMBODIED_ALGOS: tuple[str, ...] = ("sft", *ALGOS)
"""``sft`` (demonstrations + behaviour cloning) and the RL algorithms of :data:`ALGOS`."""
WORLD_MODELS: tuple[str, ...] = ("sim-state", "learned", "approach", "approach-stale")
"""The progress scorers named without a file; ``visual:PATH`` names a trained visual scorer's checkpoint."""


@dataclass(frozen=True)
class EmbodiedConfig(RunSettings):
    """Settings of one embodied run (``wmrl train --env robosuite:Lift`` / ``--env libero:SUITE[/IDS]``).

    The defaults are the CPU scale of docs/embodied.md (8 groups x 4 episodes, 1 anchor group of 8).

    Example:
        >>> EmbodiedConfig(env="libero:libero_object/0", algo="wm").tasks()
        [0]
    """

    env: str = field(
        default="robosuite:Lift",
        metadata=_help(
            "robosuite:TASK (Lift, Stack, PickPlaceCan, PickPlace) or libero:SUITE[/IDS] (e.g. "
            "libero:libero_object/0,3; all tasks of the suite without /IDS)."
        ),
    )
    algo: EmbodiedAlgo = field(  # type: ignore[assignment]
        default="wmrl",
        metadata=_help(
            "sft (scripted demonstrations + behaviour cloning) | grpo (sparse success on every episode) | wm "
            "(progress scores only) | wmrl (progress corrected by the anchor groups' success) | anchors "
            "(success on the anchor groups only) | mix | od | ivd."
        ),
    )
    policy: str = field(
        default="gaussian-mlp",
        metadata=_help("gaussian-mlp (CPU state policy) | lerobot:<pretrained policy dir> (a VLA, GPU)."),
    )
    init: str = field(
        default="",
        metadata=_help("Start from this policy checkpoint (an sft run's policy.pt); empty: fresh."),
    )
    world_model: str = field(
        default="sim-state",
        metadata=_help(
            "Progress scorer: sim-state (privileged simulator state: the upper bound) | learned (an ensemble "
            "that learns from the anchor episodes during the run) | approach (deliberately hackable: credit "
            "for reaching the object, grasped or not) | approach-stale (the same, to where the object was "
            "in the first frame: a lift scores less than a hover) | visual:PATH (a VisualProgressScorer "
            "checkpoint, python -m wmrl_envs.embodied.visual --out PATH; the run renders its camera at its "
            "image size)."
        ),
    )
    collapse: str = field(default="potential", metadata=_help("Progress curve -> score: potential | max."))
    steps: int = track_default("steps", 6)
    horizon: int = field(default=60, metadata=_help("Step limit of an episode (Lift's own: 200)."))
    cameras: str = field(
        default="", metadata=_help("Comma-separated cameras to render (agentview, robot0_eye_in_hand).")
    )
    learning_rate: float = track_default("learning_rate", 5e-4)
    update_epochs: int = track_default("update_epochs", 4)
    init_std: float = field(default=0.3, metadata=_help("Initial action standard deviation."))
    hidden: int = field(default=64, metadata=_help("Hidden width of the gaussian-mlp policy."))
    demos: int = field(default=30, metadata=_help("sft: scripted demonstration episodes."))
    demo_noise: float = field(default=0.3, metadata=_help("sft: executed-action noise of the demos (DART)."))
    demo_horizon: int | None = field(
        default=None,
        metadata=_help(
            "sft: step limit of a demonstration (none: horizon). Shorter cuts the expert off before some "
            "demonstrations succeed, so fewer successes are cloned (a knob for a lower SFT start; no "
            "recipe is measured yet); evaluation and RL keep horizon."
        ),
    )
    bc_epochs: int = field(default=200, metadata=_help("sft: behaviour-cloning epochs."))
    eval_samples: int = track_default("eval_samples", 20)
    workers: int = field(default=2, metadata=_help("Simulator workers running episodes in parallel."))

    def __post_init__(self) -> None:
        super().__post_init__()
        kind, _, rest = self.env.partition(":")
        if kind not in ("robosuite", "libero") or not rest:
            raise ConfigError(
                f"env={self.env!r}; pass robosuite:TASK (e.g. robosuite:Lift) or libero:SUITE[/IDS] "
                "(e.g. libero:libero_object/0)"
            )
        self.tasks()
        self._check_world_model()
        if self.collapse not in ("potential", "max"):
            raise ConfigError(f"collapse={self.collapse!r}; choose potential or max")
        for name in ("horizon", "workers", "demos", "hidden", "bc_epochs"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)!r}; pass a positive integer")
        if not self.init_std > 0:
            raise ConfigError(f"init_std={self.init_std}; pass an action standard deviation > 0")
        if self.demo_horizon is not None and (
            isinstance(self.demo_horizon, bool)
            or not isinstance(self.demo_horizon, int)
            or not 1 <= self.demo_horizon <= self.horizon
        ):
            raise ConfigError(
                f"demo_horizon={self.demo_horizon!r}; pass an integer from 1 to horizon ({self.horizon}), "
                "or none for horizon"
            )
        if self.demo_noise < 0:
            raise ConfigError(f"demo_noise={self.demo_noise}; pass a standard deviation >= 0")
        if self.policy.startswith("lerobot:") and self.policy != "lerobot:":
            check_model_dir("--policy", self.policy[len("lerobot:") :])
        if self.init:
            check_path("--init", self.init, "the policy.pt of an sft run, or no --init", kind="file")

    def _check_world_model(self) -> None:
        if self.world_model in WORLD_MODELS:
            return
        if not self.world_model.startswith("visual:"):
            raise ConfigError(
                f"world_model={self.world_model!r} is unknown; choose {', '.join(WORLD_MODELS)} or "
                "visual:PATH (a visual progress scorer checkpoint)"
            )
        expected = (
            "the checkpoint file VisualProgressScorer.save wrote (python -m wmrl_envs.embodied.visual --out "
            "PATH), e.g. --world-model visual:visual_scorer.pt"
        )
        path = self.visual_checkpoint()
        if not path:
            raise ConfigError(f"world_model={self.world_model!r} names no checkpoint; pass {expected}")
        check_path("--world-model visual:PATH", path, expected, kind="file")

    def visual_checkpoint(self) -> str | None:
        """The checkpoint path of ``world_model="visual:PATH"`` (``None`` for the other scorers)."""
        kind, _, path = self.world_model.partition(":")
        return path if kind == "visual" else None

    def _check_algo(self) -> None:
        if self.algo not in EMBODIED_ALGOS:
            raise ConfigError(f"algo={self.algo!r} is unknown; choose from {', '.join(EMBODIED_ALGOS)}")

    @property
    def kind(self) -> str:
        """``"robosuite"`` or ``"libero"``."""
        return self.env.partition(":")[0]

    @property
    def name(self) -> str:
        """The robosuite task or the LIBERO suite."""
        return self.env.partition(":")[2].partition("/")[0]

    def tasks(self) -> list[int] | None:
        """The LIBERO task ids of ``env`` (``None``: every task of the suite; robosuite: ``[0]``)."""
        if self.kind == "robosuite":
            return [0]
        ids = self.env.partition(":")[2].partition("/")[2]
        if not ids:
            return None
        try:
            return [int(item) for item in ids.split(",")]
        except ValueError:
            raise ConfigError(
                f"env={self.env!r}: task ids must be integers, e.g. libero:libero_10/0,3"
            ) from None

    def camera_list(self) -> tuple[str, ...]:
        """The cameras to render, as a tuple."""
        return tuple(item.strip() for item in self.cameras.split(",") if item.strip())
