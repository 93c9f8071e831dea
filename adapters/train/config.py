"""``TrainConfig`` (Kaggle) and ``EmbodiedConfig``: every setting of a ``wmrl train`` run, validated.

Why frozen dataclasses: a run directory stores its resolved config, and ``--resume`` must refuse a
run made with different settings; comparing two dataclass dicts is exact. Every field carries help
text (shown by ``wmrl train --help``), and validation names the bad value and the valid choices. The
settings both tracks share are declared once, in :class:`~wmrl_adapters.train.settings.RunSettings`;
each config adds its track's own.

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

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from wmrl_adapters.train.settings import RunSettings, check_keys, track_default
from wmrl_adapters.train.world_models import WORLD_MODEL_SPECS, WorldModelSpec, check_embeddings_available

from wmrl_algos.algorithms import ALGORITHMS, Algo
from wmrl_algos.errors import ConfigError

__all__ = [
    "ALGOS",
    "EMBODIED_ALGOS",
    "POLICIES",
    "WORLD_MODELS",
    "EmbodiedConfig",
    "TrainConfig",
    "check_model_dir",
    "check_path",
    "load_config",
    "paper_config",
]

ALGOS: tuple[Algo, ...] = tuple(ALGORITHMS)  # type: ignore[assignment]
"""The RL algorithms (rows of :data:`wmrl_algos.algorithms.ALGORITHMS`)."""
WORLD_MODELS: tuple[str, ...] = WORLD_MODEL_SPECS
POLICIES: tuple[str, ...] = ("design", "llm")


def _help(text: str) -> dict[str, str]:
    return {"help": text}


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
"""``ORG/NAME``: a Hugging Face hub id (a relative path of one slash that does not exist reads as one)."""


def check_path(flag: str, value: str | Path, expected: str, *, kind: Literal["file", "directory"]) -> Path:
    """Refuse a path that is not an existing ``kind``, before anything tries to load it.

    Args:
        flag: the option the path came from (``--init``), named in the error.
        value: the path as the user wrote it (``~`` is expanded).
        expected: what the option wants, e.g. ``"the policy.pt of an sft run"``.
        kind: ``"file"`` or ``"directory"``.

    Returns:
        The path, ``~`` expanded.

    Raises:
        ConfigError: the path does not exist or is not a ``kind``; the message names ``flag``, the
            path and ``expected``.

    Example:
        >>> try:
        ...     check_path("--config", "/no/such.json", "a JSON file of config fields", kind="file")
        ... except ConfigError as error:
        ...     print(error)
        --config '/no/such.json' does not exist; pass a JSON file of config fields
    """
    path = Path(value).expanduser()
    if path.is_file() if kind == "file" else path.is_dir():
        return path
    if not path.exists():
        problem = "does not exist"
    elif path.is_dir():
        problem = "is a directory"
    else:
        problem = "is a file" if path.is_file() else "is neither a file nor a directory"
    raise ConfigError(f"{flag} {str(value)!r} {problem}; pass {expected}")


def check_model_dir(flag: str, value: str) -> None:
    """Refuse a model that ``from_pretrained`` could not load, before anything loads it.

    Accepted: a directory holding ``config.json`` (what ``save_pretrained`` and ``lerobot-train``
    write), or a hub id ``ORG/NAME`` that is no local path, when the hub may be reached
    (``HF_HUB_OFFLINE`` unset) or the id is in the local hub cache.

    Args:
        flag: the option the model came from (``--world-model``), named in the error.
        value: the directory or hub id.

    Raises:
        ConfigError: no such directory, a directory without ``config.json``, or an uncached hub id
            while the hub is offline; the message names ``flag``, the value and what is expected.

    Example:
        >>> try:
        ...     check_model_dir("--llm-model", "/nonexistent")
        ... except ConfigError as error:
        ...     print(error)  # doctest: +ELLIPSIS
        --llm-model '/nonexistent' does not exist; pass a model directory holding config.json...
    """
    expected = "a model directory holding config.json (as save_pretrained writes it)"
    path = Path(value).expanduser()
    if not path.exists() and _HUB_ID.fullmatch(value):
        if not _hub_offline() or _hub_cached(value):
            return
        raise ConfigError(
            f"{flag} {value!r} is no local directory and the hub id is not in the local cache while the "
            f"hub is offline (HF_HUB_OFFLINE); pass {expected}"
        )
    check_path(flag, value, expected, kind="directory")
    if not (path / "config.json").is_file():
        raise ConfigError(f"{flag} {value!r} has no config.json; pass {expected}")


def _hub_offline() -> bool:
    try:
        from huggingface_hub import constants
    except ImportError:  # without huggingface_hub nothing can download: the loader names the install
        return False
    return bool(constants.HF_HUB_OFFLINE)


def _hub_cached(repo_id: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)


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


def coerce(key: str, text: str, cls: type = TrainConfig) -> Any:
    """Parse a command-line value for field ``key`` of config class ``cls`` by the field's type."""
    check_keys({key: text}, cls)
    kind = {f.name: f.type for f in dataclasses.fields(cls)}[key]
    try:
        if kind in ("bool", bool):
            if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(text)
            return text.lower() in ("true", "1", "yes")
        if kind in ("int", int):
            return int(text)
        if kind in ("float", float):
            return float(text)
    except ValueError:
        raise ConfigError(f"--{key.replace('_', '-')} {text!r} is not a valid {kind}") from None
    return text


def load_config(path: Path | None, overrides: dict[str, Any] | None = None, cls: type = TrainConfig) -> Any:
    """A ``cls`` config from a JSON file (any subset of the fields) plus overrides; defaults for the rest.

    Raises:
        ConfigError: unreadable file, unknown key or invalid value.
    """
    values: dict[str, Any] = {}
    if path is not None:
        try:
            values = json.loads(Path(path).read_text())
        except (OSError, ValueError) as error:
            raise ConfigError(
                f"cannot read config file {path}: {error}; pass a JSON object of fields"
            ) from None
        if not isinstance(values, dict):
            raise ConfigError(
                f"config file {path} holds {type(values).__name__}; pass a JSON object of fields"
            )
    values.update(overrides or {})
    check_keys(values, cls)
    return cls(**values)


def paper_config() -> TrainConfig:
    """The paper's scale (8 groups x 8 trajectories, up to 4 turns, 30 steps): for a GPU cluster."""
    return TrainConfig(groups=8, group_size=8, max_turns=4, steps=30, anchor_fraction=0.1)


EmbodiedAlgo = Literal["sft", "grpo", "anchors", "wm", "mix", "od", "ivd", "wmrl"]
EMBODIED_ALGOS: tuple[str, ...] = ("sft", *ALGOS)
"""``sft`` (demonstrations + behaviour cloning) and the RL algorithms of :data:`ALGOS`."""


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
        default="sim-state", metadata=_help("Progress scorer: sim-state (privileged) | learned (ensemble).")
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
        if self.world_model not in ("sim-state", "learned"):
            raise ConfigError(f"world_model={self.world_model!r}; choose sim-state or learned")
        if self.collapse not in ("potential", "max"):
            raise ConfigError(f"collapse={self.collapse!r}; choose potential or max")
        for name in ("horizon", "workers", "demos", "hidden", "bc_epochs"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)!r}; pass a positive integer")
        if not self.init_std > 0:
            raise ConfigError(f"init_std={self.init_std}; pass an action standard deviation > 0")
        if self.demo_noise < 0:
            raise ConfigError(f"demo_noise={self.demo_noise}; pass a standard deviation >= 0")
        if self.policy.startswith("lerobot:") and self.policy != "lerobot:":
            check_model_dir("--policy", self.policy[len("lerobot:") :])
        if self.init:
            check_path("--init", self.init, "the policy.pt of an sft run, or no --init", kind="file")

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
