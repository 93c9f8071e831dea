"""The run settings both ``wmrl train`` tracks share, declared once, and the correction they resolve to.

Why one base: the Kaggle run (:class:`~wmrl_adapters.train.kaggle.config.TrainConfig`) and the embodied run
(:class:`~wmrl_adapters.train.embodied.config.EmbodiedConfig`) train with the same loop (anchor plan, OD, IVD,
clipped GRPO) and store their resolved settings the same way. Declared in each config, the shared
settings drifted: the same knob got two defaults, two help texts and two validations.
:class:`RunSettings` declares each shared setting once, with its help, validates it once and gives
both configs ``to_dict`` / ``replace`` / ``learning_settings``.

One default per setting: the correction settings (``anchor_fraction``, ``min_pairs``, ``warmup_groups``,
``weighting``, ``refit_every``) take their defaults from :class:`~wmrl_algos.loop.CorrectionConfig`,
except where the CPU scale needs another value; those overrides are :data:`CPU_SCALE_OVERRIDES`, the
one place that says which and why. :func:`correction_config` turns the settings and the algorithm's
row of :data:`~wmrl_algos.algorithms.ALGORITHMS` into the :class:`CorrectionConfig` of a run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from wmrl_algos.algorithms import ALGORITHMS, Algo, Algorithm, algorithm
from wmrl_algos.denoise import WeightRule
from wmrl_algos.errors import ConfigError
from wmrl_algos.loop import CorrectionConfig

__all__ = [
    "ALGOS",
    "CPU_SCALE_OVERRIDES",
    "RunSettings",
    "check_keys",
    "correction_config",
    "run_algorithm",
    "settings_before",
    "track_default",
]

SettingsT = TypeVar("SettingsT", bound="RunSettings")

ALGOS: tuple[Algo, ...] = tuple(ALGORITHMS)  # type: ignore[assignment]
"""The RL algorithms of both tracks (rows of :data:`wmrl_algos.algorithms.ALGORITHMS`)."""

CPU_SCALE_OVERRIDES: Mapping[str, Any] = {
    "anchor_fraction": 0.125,
    "min_pairs": 8,
    "warmup_groups": 3,
    "weighting": "paper",
    "refit_every": 4,
}
"""Where a ``wmrl train`` run's correction defaults differ from :class:`CorrectionConfig`'s, and why.

A CPU run has 8 groups per step and runs 6-8 steps, not the paper's long runs: ``anchor_fraction``
0.125 is exactly one anchor group of 8 per step (0.1 rounds to the same one, but reads as a fraction
the plan cannot hit); with one anchor group per step, ``warmup_groups`` 3 (not 32) lets IVD freeze its
calibration within the run, and ``min_pairs`` 8 (not 16) lets OD fit after two steps of
``group_size`` 4, refitting every ``refit_every`` 4 new pairs (half of them). ``weighting`` is the
paper's rule, which the comparison reproduces; ``CorrectionConfig``'s own default, ``agreement``, is
the library's safer fallback for users of the loop.
"""


def _default(name: str) -> Any:
    """The default of correction setting ``name``: the CPU-scale override, else CorrectionConfig's."""
    if name in CPU_SCALE_OVERRIDES:
        return CPU_SCALE_OVERRIDES[name]
    return {spec.name: spec.default for spec in dataclasses.fields(CorrectionConfig)}[name]


def _correction_field(name: str, text: str) -> Any:
    """A settings field whose default comes from :func:`_default` and whose help says where from."""
    return field(default=_default(name), metadata={"help": text})


@dataclass(frozen=True)
class RunSettings:
    """The settings every ``wmrl train`` run has (both tracks inherit them; their defaults are the CPU scale).

    A track's config adds its own settings and, where its scale differs (the embodied run's steps,
    learning rate, update epochs, evaluation episodes), declares that default with
    :func:`track_default`, which keeps the help written here.

    Example:
        >>> RunSettings(algo="od").replace(seed=3).learning_settings()["seed"]
        3
    """

    algo: Algo = field(
        default="wmrl",
        metadata={
            "help": (
                "wmrl: the method (anchor groups executed for real correct the world model's scores of the "
                "rest); grpo: every group executed for real (the expensive baseline); anchors: only the "
                "anchor groups, real, no world model (the baseline at WMRL's execution cost); wm: "
                "world-model scores only, nothing executed; mix: anchors real, the rest world model, "
                "uncorrected; od / "
                "ivd: mix with only Online Debiasing / only Inverse-Variance Denoising (ablations)."
            )
        },
    )
    seed: int = field(
        default=0, metadata={"help": "Seeds the policy, the task draw, the anchor plan and the sampling."}
    )
    steps: int = field(default=8, metadata={"help": "Training steps (the paper trains 30)."})
    groups: int = field(
        default=8, metadata={"help": "Groups per step (Kaggle: tasks; embodied: initial states; paper: 8)."}
    )
    group_size: int = field(
        default=4, metadata={"help": "Trajectories (episodes) per group (paper: 8; CPU default 4)."}
    )
    anchor_fraction: float = _correction_field(
        "anchor_fraction", "Share of groups executed for real (paper: ~10%, at least one: 1 of 8)."
    )
    min_pairs: int = _correction_field(
        "min_pairs", "Anchor pairs before Online Debiasing fits its first map."
    )
    refit_every: int = _correction_field("refit_every", "New anchor pairs between Online Debiasing refits.")
    warmup_groups: int = _correction_field(
        "warmup_groups",
        "Measured anchor groups before the paper's IVD rule freezes eta2_cal (one anchor group per step at "
        "the CPU scale; wmrl_algos' default of 32 suits the paper's longer runs).",
    )
    weighting: WeightRule = _correction_field(
        "weighting",
        "IVD weights: 'paper' (anchor weight 1 + eta2/eta2_cal, the paper's definition) or 'agreement' "
        "(wmrl_algos' fallback: world-model groups weigh by their measured agreement with real scores).",
    )
    learning_rate: float = field(default=0.01, metadata={"help": "Adam learning rate of the policy."})
    update_epochs: int = field(
        default=2, metadata={"help": "Gradient steps per training step on the same rollouts."}
    )
    clip: float = field(default=0.2, metadata={"help": "GRPO ratio clip epsilon."})
    max_grad_norm: float = field(default=1.0, metadata={"help": "Gradient-norm clip."})
    eval_every: int = field(default=0, metadata={"help": "Evaluate every N steps (0: only at the end)."})
    eval_samples: int = field(
        default=2, metadata={"help": "Evaluation episodes per evaluation task (0: no evaluation)."}
    )
    checkpoint_every: int = field(default=1, metadata={"help": "Save a checkpoint every N steps."})
    progress: bool = field(default=True, metadata={"help": "Show tqdm progress bars."})

    def __post_init__(self) -> None:
        self._check_algo()
        if self.weighting not in ("paper", "agreement"):
            raise ConfigError(f"weighting={self.weighting!r} is unknown; choose from paper, agreement")
        for name in ("steps", "groups", "update_epochs", "checkpoint_every", "refit_every"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)!r}; pass a positive integer")
        if self.group_size < 2:
            raise ConfigError(f"group_size={self.group_size}; GRPO needs >= 2 trajectories per group")
        for name in ("eval_every", "eval_samples", "seed", "warmup_groups", "min_pairs"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}={getattr(self, name)!r}; pass 0 or more")
        if not 0.0 < self.anchor_fraction <= 1.0:
            raise ConfigError(f"anchor_fraction={self.anchor_fraction}; pass a share in (0, 1], e.g. 0.125")
        if not (self.learning_rate > 0 and self.max_grad_norm > 0 and 0 < self.clip < 1):
            raise ConfigError(
                f"learning_rate={self.learning_rate}, max_grad_norm={self.max_grad_norm} must be > 0 and "
                f"clip={self.clip} in (0, 1)"
            )

    def _check_algo(self) -> None:
        """Refuse an ``algo`` this config does not train (a track with more algorithms overrides it)."""
        algorithm(self.algo)

    def to_dict(self) -> dict[str, Any]:
        """The settings as a JSON-ready dict."""
        return dataclasses.asdict(self)

    def replace(self: SettingsT, **changes: Any) -> SettingsT:
        """A copy with ``changes`` (unknown keys raise :class:`ConfigError` listing the valid ones)."""
        check_keys(changes, type(self))
        return dataclasses.replace(self, **changes)

    def learning_settings(self) -> dict[str, Any]:
        """The fields that change what a run computes (everything except progress display)."""
        return {key: value for key, value in self.to_dict().items() if key != "progress"}


def track_default(name: str, default: Any) -> Any:
    """A field for a track's config that changes only the default of shared setting ``name``.

    Example:
        >>> @dataclass(frozen=True)
        ... class Short(RunSettings):
        ...     steps: int = track_default("steps", 2)
        >>> Short().steps, Short.__dataclass_fields__["steps"].metadata["help"]
        (2, 'Training steps (the paper trains 30).')
    """
    shared = RunSettings.__dataclass_fields__[name]
    return field(default=default, metadata=shared.metadata)


def check_keys(values: Mapping[str, Any], cls: type) -> None:
    """Raise :class:`ConfigError` naming unknown keys and listing the valid ones (of config class ``cls``)."""
    valid = [spec.name for spec in dataclasses.fields(cls)]
    unknown = sorted(set(values) - set(valid))
    if unknown:
        raise ConfigError(f"unknown config key(s) {unknown}; valid keys: {', '.join(valid)}")


def settings_before(saved: Mapping[str, Any]) -> dict[str, Any]:
    """A saved ``config.json`` with the settings it predates filled in as the code that wrote it used them.

    ``refit_every`` was derived from ``min_pairs`` (half of it, at least 1) before it was a setting.

    Example:
        >>> settings_before({"min_pairs": 16})["refit_every"]
        8
    """
    filled = dict(saved)
    if "refit_every" not in filled and "min_pairs" in filled:
        filled["refit_every"] = max(1, int(filled["min_pairs"]) // 2)
    return filled


def run_algorithm(algo: str) -> Algorithm:
    """The row of :data:`ALGORITHMS` a run of ``algo`` trains with (``sft`` never corrects: ``grpo``'s).

    Raises:
        ConfigError: ``algo`` is neither ``sft`` nor an algorithm.

    Example:
        >>> run_algorithm("sft").name, run_algorithm("anchors").rolls_out_only_anchors
        ('grpo', True)
    """
    return ALGORITHMS["grpo"] if algo == "sft" else algorithm(algo)


def correction_config(settings: RunSettings) -> CorrectionConfig:
    """The :class:`CorrectionConfig` of a run: its algorithm's row (:func:`run_algorithm`) applied to the
    run's correction settings.

    Example:
        >>> config = correction_config(RunSettings(algo="wm"))
        >>> config.anchor_fraction, config.min_anchor_groups, config.debias
        (0.0, 0, False)
    """
    return run_algorithm(settings.algo).correction_config(
        settings.anchor_fraction,
        seed=settings.seed,
        weighting=settings.weighting,
        warmup_groups=settings.warmup_groups,
        min_pairs=settings.min_pairs,
        refit_every=settings.refit_every,
    )
