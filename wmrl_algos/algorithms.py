"""What each training algorithm of the comparison is, as one table instead of string tests.

Why a table: the seven algorithms of the paper's comparison differ only in a few switches (which groups
get a real score, whether the world model scores the rest, whether Online Debiasing and
Inverse-Variance Denoising run). Written as ``algo in ("grpo", "anchors")`` tests in every trainer,
a new algorithm or a changed definition has to be found in each of them; here each algorithm is one
row, and every trainer (and :meth:`Algorithm.correction_config`) reads its switches from the row.

=========  =========  ===========  ==  ===  ======================================================
algorithm  real       world model  OD  IVD  meaning
=========  =========  ===========  ==  ===  ======================================================
``grpo``   all        no           -   -    every group real: the expensive baseline
``anchors`` anchors   no           -   -    only the planned anchor groups, real; the rest dropped
``wm``     none       yes          -   -    world-model scores only, nothing real
``mix``    anchors    yes          -   -    anchor groups real, the rest world model, uncorrected
``od``     anchors    yes          yes -    ``mix`` + Online Debiasing
``ivd``    anchors    yes          -   yes  ``mix`` + Inverse-Variance Denoising
``wmrl``   anchors    yes          yes yes  the method
=========  =========  ===========  ==  ===  ======================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from wmrl_algos.errors import ConfigError
from wmrl_algos.loop import CorrectionConfig

__all__ = ["ALGORITHMS", "Algo", "Algorithm", "RealGroups", "algorithm"]

Algo = Literal["grpo", "anchors", "wm", "mix", "od", "ivd", "wmrl"]
"""The training algorithms of the comparison (rows of :data:`ALGORITHMS`)."""

RealGroups = Literal["all", "anchors", "none"]
"""Which groups of a step get a real (trusted) score."""


@dataclass(frozen=True)
class Algorithm:
    """One training algorithm: which groups are real, what scores the rest, which corrections run.

    Attributes:
        name: the algorithm's name (``--algo``).
        real: ``"all"`` groups real, only the planned ``"anchors"``, or ``"none"``.
        world_model: whether the world model scores the groups that are not real (``False``: they are
            not rolled out at all, unless every group is real).
        debias: Online Debiasing runs.
        denoise: Inverse-Variance Denoising runs.

    Example:
        >>> ALGORITHMS["anchors"].rolls_out_only_anchors, ALGORITHMS["wmrl"].uses_world_model
        (True, True)
    """

    name: Algo
    real: RealGroups
    world_model: bool
    debias: bool = False
    denoise: bool = False

    @property
    def uses_world_model(self) -> bool:
        """Whether the world model scores (and learns from) this algorithm's rollouts."""
        return self.world_model

    @property
    def rolls_out_only_anchors(self) -> bool:
        """Whether only the planned anchor groups are rolled out (the rest would have no score)."""
        return self.real == "anchors" and not self.world_model

    def anchor_plan(self, anchor_fraction: float) -> tuple[float, int]:
        """The ``(anchor_fraction, min_anchor_groups)`` this algorithm plans with, given the run's share.

        Example:
            >>> ALGORITHMS["grpo"].anchor_plan(0.125), ALGORITHMS["wm"].anchor_plan(0.125)
            ((1.0, 1), (0.0, 0))
        """
        if self.real == "all":
            return 1.0, 1
        if self.real == "none":
            return 0.0, 0
        return anchor_fraction, 1

    def correction_config(self, anchor_fraction: float, **settings: Any) -> CorrectionConfig:
        """The :class:`CorrectionConfig` that makes this algorithm from the run's correction settings.

        Args:
            anchor_fraction: the run's share of anchor groups (overridden by :meth:`anchor_plan`).
            **settings: the other :class:`CorrectionConfig` fields the run sets (``seed``,
                ``weighting``, ``warmup_groups``, ``min_pairs``, ``refit_every``, ...).

        Example:
            >>> ALGORITHMS["od"].correction_config(0.25, seed=1).debias
            True
        """
        fraction, minimum = self.anchor_plan(anchor_fraction)
        return CorrectionConfig(
            anchor_fraction=fraction,
            min_anchor_groups=minimum,
            debias=self.debias,
            denoise=self.denoise,
            **settings,
        )


ALGORITHMS: dict[str, Algorithm] = {
    row.name: row
    for row in (
        Algorithm("grpo", real="all", world_model=False),
        Algorithm("anchors", real="anchors", world_model=False),
        Algorithm("wm", real="none", world_model=True),
        Algorithm("mix", real="anchors", world_model=True),
        Algorithm("od", real="anchors", world_model=True, debias=True),
        Algorithm("ivd", real="anchors", world_model=True, denoise=True),
        Algorithm("wmrl", real="anchors", world_model=True, debias=True, denoise=True),
    )
}
"""Every algorithm by name, in the comparison's order (see the module doc's table)."""


def algorithm(name: str) -> Algorithm:
    """The row of ``name``.

    Raises:
        ConfigError: ``name`` is not an algorithm; the message lists them.

    Example:
        >>> algorithm("mix").debias
        False
    """
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ConfigError(f"algo={name!r} is unknown; choose from {', '.join(ALGORITHMS)}") from None
