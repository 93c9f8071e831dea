"""What a world model's measured agreement is worth: the prediction-powered gradient's expected effect.

Why: no peer tells a user whether their world model is good enough *before* they spend the compute.
The prediction-powered (control-variate) estimator answers it in closed form. A GRPO step has ``N``
groups, ``n`` of them anchors drawn uniformly at random; ``Y`` is a group's gradient term with real
advantages, ``f`` the same with the world model's. The estimator of the all-real gradient,

    g(λ) = λ · mean_all f + mean_anchors (Y − λ f),

is unbiased for any world-model error (the anchors are a random sample of the groups) and has

    Var g(λ) = Var Y / n + (λ² Var f − 2 λ Cov(Y, f)) (1/n − 1/N).

At the power-tuned λ* = Cov(Y, f) / Var f (PPI++, Angelopoulos, Duchi and Zrnic 2023) its variance
against GRPO on the anchors alone (λ = 0) is

    R = 1 − ρ² (1 − n/N),    ρ = Corr(Y, f).

GRPO standardises advantages within each group, so Var f = Var Y and λ* = ρ; when the policy's score
∇log π is independent of the advantages, ρ is the within-group correlation of the standardised real
and predicted rewards (:func:`wmrl_envs.fidelity.within_group_agreement` measures it). The library
clips λ to [0, 1], so a negative ρ gives λ = 0: exactly anchors-only, R = 1, never worse.

From R, in the **variance-limited regime** (the steps an SGD-type optimiser needs to reach a score
are proportional to its gradient's variance, as when the step size is tuned to the noise):

* against anchors-only (the same n executed groups per step): R times the steps, R times the
  executions, so 1/R times fewer executions to the same score; the step is worth n/R real groups;
* against all-real GRPO (N executed groups per step, variance Var Y / N): R · N/n times the steps,
  each executing n/N of the groups, so R times the executions. Anchors-only is the case R = 1: in
  this regime it needs the same executions as all-real GRPO, only N/n times more steps.

What the prediction leaves out: the world model's own compute; the regime (where curvature, not
noise, limits progress, variance reduction buys less and the gain is smaller); λ estimated from
earlier steps' anchor pairs and shrunk toward 0 while they are few (early steps gain less than R
says); and ρ measured on another corpus than the policy's own rollouts.

Example:
    >>> effect = ExpectedEffect(correlation=0.62, anchor_fraction=1 / 8, correlation_se=0.05, n_groups=40)
    >>> round(effect.variance_ratio, 3), round(effect.speedup, 2)
    (0.664, 1.51)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Literal

from wmrl_algos.errors import ConfigError

__all__ = [
    "FEW_GROUPS",
    "NEGLIGIBLE_GAIN",
    "Verdict",
    "ExpectedEffect",
    "check_anchor_fraction",
    "variance_ratio",
]

NEGLIGIBLE_GAIN = 0.05
"""A predicted saving below this share of the executions is reported as no real help."""

FEW_GROUPS = 10
"""Below this many groups the summary warns that ρ's normal interval (from a jackknife s.e.) is rough."""

Verdict = Literal["no_gain", "negligible", "gain"]
"""``no_gain``: ρ ≤ 0, WMRL falls back to anchors-only; ``negligible``: under :data:`NEGLIGIBLE_GAIN`."""


def variance_ratio(correlation: float, anchor_fraction: float) -> float:
    """The prediction-powered gradient's variance over anchors-only's at λ* clipped to [0, 1].

    Args:
        correlation: ρ, the within-group correlation of real and predicted advantages, in [−1, 1].
        anchor_fraction: n/N, the share of groups executed for real, in (0, 1].

    Returns:
        1 − max(ρ, 0)² (1 − n/N): 1 when the model is useless or anti-correlated, n/N when it is
        perfect (the variance of all-real GRPO).

    Raises:
        ConfigError: ρ outside [−1, 1] or not a number; n/N outside (0, 1].

    >>> variance_ratio(0.0, 0.125), variance_ratio(1.0, 0.125), variance_ratio(-0.5, 0.125)
    (1.0, 0.125, 1.0)
    """
    rho = _correlation(correlation)
    fraction = check_anchor_fraction(anchor_fraction)
    return 1.0 - max(rho, 0.0) ** 2 * (1.0 - fraction)


@dataclass(frozen=True)
class ExpectedEffect:
    """The expected effect of training with a world model of measured agreement ``correlation``.

    The inputs are the fields; everything else is derived (see the module docstring for the maths
    and the variance-limited assumption behind the execution counts).

    Attributes:
        correlation: ρ, the within-group correlation of real and predicted advantages on the
            policy's own rollouts, in [−1, 1].
        anchor_fraction: n/N, the share of groups executed for real each step, in (0, 1].
        correlation_se: the standard error of ρ (e.g. a jackknife over groups); ``None``: unknown,
            no interval.
        n_groups: the groups ρ was measured on (``None``: not stated).
        confidence: the coverage of the normal interval ρ ± z · s.e.

    Raises:
        ConfigError: a value outside its range or not a number (the message quotes it).

    Example:
        >>> ExpectedEffect(correlation=-0.1, anchor_fraction=0.125).verdict
        'no_gain'
    """

    correlation: float
    anchor_fraction: float
    correlation_se: float | None = None
    n_groups: int | None = None
    confidence: float = 0.95

    def __post_init__(self) -> None:
        _correlation(self.correlation)
        check_anchor_fraction(self.anchor_fraction)
        if self.correlation_se is not None:
            se = _number("correlation_se", self.correlation_se)
            if not se >= 0.0:
                raise ConfigError(
                    f"correlation_se={self.correlation_se!r}; pass the correlation's standard error (>= 0) "
                    "or None when it is unknown"
                )
        if self.n_groups is not None and (isinstance(self.n_groups, bool) or not self.n_groups >= 1):
            raise ConfigError(
                f"n_groups={self.n_groups!r}; pass the number of groups measured (>= 1) or None"
            )
        confidence = _number("confidence", self.confidence)
        if not 0.0 < confidence < 1.0:
            raise ConfigError(f"confidence={self.confidence!r} is outside (0, 1); pass e.g. 0.95")

    @property
    def correlation_interval(self) -> tuple[float, float] | None:
        """ρ ± z · s.e. clipped to [−1, 1] (``None`` without a standard error)."""
        if self.correlation_se is None:
            return None
        half = NormalDist().inv_cdf(0.5 + self.confidence / 2) * self.correlation_se
        return max(-1.0, self.correlation - half), min(1.0, self.correlation + half)

    @property
    def variance_ratio(self) -> float:
        """R: the prediction-powered gradient's variance over anchors-only's (see :func:`variance_ratio`)."""
        return variance_ratio(self.correlation, self.anchor_fraction)

    @property
    def variance_ratio_interval(self) -> tuple[float, float] | None:
        """R at the ends of :attr:`correlation_interval` (low, high); ``None`` without a standard error."""
        interval = self.correlation_interval
        if interval is None:
            return None
        low, high = interval
        return variance_ratio(high, self.anchor_fraction), variance_ratio(low, self.anchor_fraction)

    @property
    def speedup(self) -> float:
        """1/R: how many times fewer executions than anchors-only reach the same score."""
        return 1.0 / self.variance_ratio

    @property
    def effective_anchor_fraction(self) -> float:
        """(n/N)/R: the share of real groups that anchors-only would need for the same variance."""
        return self.anchor_fraction / self.variance_ratio

    def effective_anchor_groups(self, groups_per_step: int) -> float:
        """n/R: the real groups per step this step is worth, with ``groups_per_step`` groups in all.

        >>> ExpectedEffect(correlation=1.0, anchor_fraction=0.125).effective_anchor_groups(8)
        8.0
        """
        if isinstance(groups_per_step, bool) or not groups_per_step >= 1:
            raise ConfigError(f"groups_per_step={groups_per_step!r}; pass the groups of one step (>= 1)")
        return self.effective_anchor_fraction * groups_per_step

    @property
    def all_real_steps_ratio(self) -> float:
        """R · N/n: the steps to the same score against all-real GRPO (its variance is Var Y / N)."""
        return self.variance_ratio / self.anchor_fraction

    @property
    def all_real_executions_ratio(self) -> float:
        """R: the executions to the same score against all-real GRPO (R · N/n steps of n/N executions)."""
        return self.variance_ratio

    @property
    def verdict(self) -> Verdict:
        """Whether the world model is expected to help (see :data:`Verdict`)."""
        if self.correlation <= 0.0 or self.anchor_fraction == 1.0:
            return "no_gain"
        return "gain" if 1.0 - self.variance_ratio >= NEGLIGIBLE_GAIN else "negligible"

    def as_dict(self, prefix: str = "power/") -> dict[str, float | int | str | None]:
        """The inputs and the derived numbers as a flat dict with namespaced keys (JSON-ready)."""
        variance_interval = self.variance_ratio_interval
        derived: dict[str, float | int | str | None] = {
            "variance_ratio": self.variance_ratio,
            "variance_ratio_low": variance_interval[0] if variance_interval else None,
            "variance_ratio_high": variance_interval[1] if variance_interval else None,
            "speedup": self.speedup,
            "effective_anchor_fraction": self.effective_anchor_fraction,
            "all_real_steps_ratio": self.all_real_steps_ratio,
            "all_real_executions_ratio": self.all_real_executions_ratio,
            "verdict": self.verdict,
            "regime": "variance-limited",
        }
        return {f"{prefix}{key}": value for key, value in {**asdict(self), **derived}.items()}

    def summary(self) -> str:
        """One line a user can act on: the variance ratio, its interval and the executions it saves.

        >>> print(ExpectedEffect(correlation=0.0, anchor_fraction=0.125).summary())  # doctest: +ELLIPSIS
        at this agreement (within-group r = 0.00) the world model will not help: ... anchors alone
        """
        agreement = f"within-group r = {self.correlation:.2f}"
        if self.correlation_se is not None:
            agreement += f" ± {self.correlation_se:.2f}"
        if self.n_groups is not None:
            agreement += f" on {self.n_groups} group{'s' if self.n_groups != 1 else ''}"
            if self.correlation_se is not None and self.n_groups < FEW_GROUPS:
                agreement += ", too few for a firm interval"
        head = f"at this agreement ({agreement})"
        if self.anchor_fraction == 1.0:
            return f"{head} every group is executed for real: a world model has nothing to add"
        if self.verdict == "no_gain":
            return (
                f"{head} the world model will not help: its advantages do not agree with the real ones, "
                "the power-tuned coefficient is clipped to 0 and WMRL falls back to GRPO on the anchors alone"
            )
        ratio = f"{_percent(self.variance_ratio)} %"
        interval = self.variance_ratio_interval
        if interval is not None:
            ratio += f" ({_percent(interval[0])}–{_percent(interval[1])} %)"
        line = (
            f"{head}, the prediction-powered gradient's variance is {ratio} of anchors-only's at "
            f"{_fraction_text(self.anchor_fraction)}: "
        )
        if self.verdict == "negligible":
            line += (
                f"expected ≈ {self.speedup:.2f}× fewer executions, too little to matter: WMRL trains "
                "almost as GRPO on the anchors alone"
            )
        else:
            line += (
                f"expected ≈ {self.speedup:.1f}× fewer executions to the same score than GRPO on the "
                f"anchors alone, and {self.all_real_executions_ratio:.2f}× the executions of all-real GRPO "
                f"in {self.all_real_steps_ratio:.1f}× its steps"
            )
        if interval is not None and interval[1] >= 1.0:
            line += "; the interval includes no gain at all"
        return line + " (variance-limited regime)"


def check_anchor_fraction(value: float) -> float:
    """``value`` as a float when it is a share of groups executed for real, in (0, 1].

    Raises:
        ConfigError: not a number, NaN, or outside (0, 1] (the message quotes it and gives an example).
    """
    fraction = _number("anchor_fraction", value)
    if not 0.0 < fraction <= 1.0:
        raise ConfigError(
            f"anchor_fraction={value!r} is outside (0, 1]; pass the share of groups executed for real, "
            "e.g. 0.125 for one anchor group in 8"
        )
    return fraction


def _number(name: str, value: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name}={value!r} is not a number; pass a float") from exc
    if math.isnan(number):
        raise ConfigError(f"{name}={value!r} is NaN; pass a measured value (is the corpus empty?)")
    return number


def _correlation(value: float) -> float:
    rho = _number("correlation", value)
    if not -1.0 <= rho <= 1.0:
        raise ConfigError(
            f"correlation={value!r} is outside [-1, 1]; pass the Pearson correlation of within-group "
            "standardised real and predicted rewards"
        )
    return rho


def _percent(ratio: float) -> str:
    return f"{100 * ratio:.0f}"


def _fraction_text(fraction: float) -> str:
    """'1 anchor group in 8' when n/N is one in a whole number, else 'an anchor fraction of 0.3'."""
    groups = 1.0 / fraction
    if abs(groups - round(groups)) < 1e-9:
        return f"1 anchor group in {round(groups)}"
    return f"an anchor fraction of {fraction:g}"
