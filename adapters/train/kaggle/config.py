"""``TrainConfig``: every setting of a Kaggle-track ``wmrl train`` run, validated.

Why frozen dataclasses: a run directory stores its resolved config, and ``--resume`` must refuse a
run made with different settings; comparing two dataclass dicts is exact. Every field carries help
text (shown by ``wmrl train --help``), and validation names the bad value and the valid choices. The
settings both tracks share are declared once, in :class:`~wmrl_adapters.train.settings.RunSettings`;
each config adds its track's own (the embodied one:
:class:`~wmrl_adapters.train.embodied.config.EmbodiedConfig`).

The algorithms (rows of :data:`wmrl_algos.algorithms.ALGORITHMS`; all on the same grouped rollouts,
``8 groups x 8 trajectories`` in the paper):

=========  ===============================================================================================
``grpo``    every group executed for real; GRPO on real scores (the expensive baseline)
``anchors`` only the anchor groups WMRL would execute (same anchor plan), GRPO on them; no world model:
            the equal-real-execution baseline
``wm``      no real execution; GRPO on world-model scores
``mix``     anchor groups real, the rest world-model scores, no correction ("direct mix")
``od``      ``mix`` + Online Debiasing (isotonic calibration of the world-model scores on anchor pairs)
``ivd``     ``mix`` + Inverse-Variance Denoising (anchor groups weighted 1 + eta2/eta2_cal)
``wmrl``    ``mix`` + OD + IVD (the method)
=========  ===============================================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field

from wmrl_adapters.train.kaggle.world_models import (
    WORLD_MODEL_SPECS,
    WorldModelSpec,
    check_embeddings_available,
)
from wmrl_adapters.train.run.checks import check_model_dir, check_path
from wmrl_adapters.train.run.checks import field_help as _help
from wmrl_adapters.train.run.settings import ALGOS, RunSettings

from wmrl_algos.errors import ConfigError

__all__ = ["ALGOS", "POLICIES", "WORLD_MODELS", "TrainConfig", "paper_config"]

WORLD_MODELS: tuple[str, ...] = WORLD_MODEL_SPECS
POLICIES: tuple[str, ...] = ("design", "llm")


def _is_path(spec: str) -> bool:
    """Whether a competition entry names a directory (``./x``, ``/x``, ``~/x``, ``a/b``), not a suite id."""
    return spec.startswith((".", "~")) or "/" in spec


@dataclass(frozen=True)
class TrainConfig(RunSettings):
    """Settings of one training run. The defaults are the CPU-scaled embedded default (see docs/training.md).

    Example:
        >>> TrainConfig(algo="od", steps=3).algo
        'od'
    """

    world_model: str = field(
        default="learned+rubric",
        metadata=_help(
            f"{' | '.join(WORLD_MODEL_SPECS)}. The learned models keep learning from the anchor executions; "
            "wmrl fidelity reads the same spec and builds the same model."
        ),
    )
    policy: str = field(
        default="design",
        metadata=_help(
            "design: a fast CPU agent that picks solution designs (no model needed); llm: a language model "
            "writes the code (needs wmrl[llm]; its model is --llm-model)."
        ),
    )
    llm_model: str = field(
        default="", metadata=_help("--policy llm: model directory (empty: the agent's default).")
    )
    llm_settings: str | None = field(
        default=None,
        metadata=_help(
            "--policy llm: agent settings (LLMAgentConfig fields) as key=value pairs separated by commas, "
            "e.g. lora_rank=8,max_new_tokens=256 (unset: the agent's defaults)."
        ),
    )
    max_turns: int = field(
        default=2, metadata=_help("Executions per episode (paper: up to 4; CPU default 2).")
    )
    competitions: str = field(
        default="train", metadata=_help("Training tasks: 'train' (the suite's split) or comma-separated ids.")
    )
    eval_competitions: str = field(
        default="heldout", metadata=_help("Evaluation tasks: 'heldout' or comma-separated ids / directories.")
    )
    sandbox: str = field(
        default="local", metadata=_help("Sandbox backend: local (bubblewrap), docker or unsafe.")
    )
    warm: int = field(default=2, metadata=_help("Warm sandbox workers (local only; 0: cold starts)."))
    timeout_s: float = field(
        default=60.0, metadata=_help("Wall-clock limit of one execution (a timeout is a failure).")
    )
    memory_mb: int = field(default=2048, metadata=_help("Memory limit of one execution."))
    cache: bool = field(
        default=True,
        metadata=_help(
            "Cache real executions by (competition, code, sandbox settings); hits are charged at cost."
        ),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        WorldModelSpec.parse(self.world_model)  # the builder's parser: what it refuses is refused here
        if self.policy.startswith("llm:"):
            raise ConfigError(
                f"--policy {self.policy!r}: the model has its own option; pass --policy llm --llm-model "
                f"{self.policy[len('llm:') :]}"
            )
        if self.policy not in POLICIES:
            raise ConfigError(f"policy={self.policy!r} is unknown; choose from {', '.join(POLICIES)}")
        self._check_paths()
        for name in ("max_turns", "memory_mb"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)!r}; pass a positive integer")
        if self.warm < 0:
            raise ConfigError(f"warm={self.warm!r}; pass 0 or more")
        if not self.timeout_s > 0:
            raise ConfigError(f"timeout_s={self.timeout_s}; pass a wall-clock limit in seconds > 0")

    def _check_paths(self) -> None:
        """Every model directory and competition directory given exists, before anything loads them."""
        world_model = WorldModelSpec.parse(self.world_model)
        if world_model.model_dir:
            check_model_dir("--world-model", world_model.model_dir)
        check_embeddings_available(world_model, "--world-model")
        if self.llm_model:
            check_model_dir("--llm-model", self.llm_model)
        for spec in self.eval_competitions.split(","):
            if _is_path(spec.strip()):
                check_path(
                    "--eval-competitions",
                    spec.strip(),
                    "a competition directory (wmrl, MLE-bench or MLE-Dojo layout) or a suite id",
                    kind="directory",
                )


def paper_config() -> TrainConfig:
    """The paper's scale (8 groups x 8 trajectories, up to 4 turns, 30 steps): for a GPU cluster."""
    return TrainConfig(groups=8, group_size=8, max_turns=4, steps=30, anchor_fraction=0.1)
