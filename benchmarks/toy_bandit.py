"""A contextual bandit with known true rewards, and a synthetic world model with a controllable error.

Why this exists: the paper's claims (a world-model-only run stops at a bias floor; Online Debiasing
removes the floor; Inverse-Variance Denoising recovers what the noise costs) are statements about
mechanics, and a toy problem whose true rewards are known exactly is the cheapest place to check them.
``benchmarks/bandit_ablation.py`` runs the paper's ablation on it, and it lives next to that script
because nothing in the library uses it (the library's own toy environment is :mod:`wmrl_envs.toy`).
Scripts in this folder import it as ``toy_bandit`` (a script's folder comes first on ``sys.path``);
it used to be ``wmrl_algos.toy_bandit``, a path kept for checkouts of the repository until wmrl 0.3.0.

The error model is built so that each correction has something to fix, and nothing more:

* **Bias that reorders actions although it is monotone.** Each trajectory's real score is random around
  its action's mean (the same strategy, implemented differently, sometimes fails). Some actions are
  *ambitious*: a high ceiling, frequent failures, a mediocre mean. The world model reads the trajectory
  and reports its outcome through a convex, monotone distortion ``h`` (it is over-impressed by top
  scores). By Jensen's inequality ``E[h(r)]`` favours high-variance actions, so the action with the best
  *expected predicted* score is often an ambitious one while the best *expected real* score is a safe
  one: training on predictions learns the wrong argmax, however long it runs. An affine ``h`` would be
  harmless (GRPO standardises within a group); ``h`` is non-affine, so it survives standardisation.
* **Noise that the monotone map cannot undo, but averaging can.** Noise is added on the outcome scale,
  before the distortion, so a monotone map of the prediction can recover ``r + noise`` up to shrinkage.
  (Noise added *after* a strongly convex ``h`` is drowned in the flat low end of ``h``: failures then
  become indistinguishable from mediocre successes, and no map of the prediction alone can restore the
  ranking. Debiasing presupposes that the prediction still carries the information.)
* **Drift with the policy.** The world model was fit on the initial policy's behaviour: as the policy
  moves away (measured by :func:`policy_shift`), its distortion grows more convex and its noise larger.
  A map fitted once goes stale; an online refit on recent anchor pairs tracks it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from wmrl_algos.errors import ConfigError

__all__ = [
    "BanditConfig",
    "ContextualBandit",
    "WorldModelErrorConfig",
    "SyntheticWorldModel",
    "policy_shift",
    "sample_actions",
]

_SAFE_MEAN = (0.30, 0.70)
_SAFE_SPREAD = (0.00, 0.05)
_AMBITIOUS_MEAN = (0.40, 0.55)
_AMBITIOUS_SPREAD = (0.30, 0.40)


@dataclass(frozen=True)
class BanditConfig:
    """Shape of the contextual bandit.

    Attributes:
        n_contexts: number of contexts (tasks); each GRPO group is one context.
        n_actions: number of actions (solution strategies) per context.
        n_ambitious: actions per context that are ambitious: mean real score in [0.40, 0.55], outcome
            ``mean +- spread`` with spread in [0.30, 0.40] (a high ceiling and frequent failures). The
            others are safe: mean in [0.30, 0.70], spread in [0, 0.05]. 0 makes every action safe (then
            a monotone bias cannot reorder actions and the world model has no bias floor).
        seed: seed of the reward table.
    """

    n_contexts: int = 16
    n_actions: int = 8
    n_ambitious: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n_contexts < 1:
            raise ConfigError(f"n_contexts={self.n_contexts!r}; pass at least 1 context")
        if self.n_actions < 2:
            raise ConfigError(f"n_actions={self.n_actions!r}; pass at least 2 actions, or nothing is learned")
        if not 0 <= self.n_ambitious < self.n_actions:
            raise ConfigError(
                f"n_ambitious={self.n_ambitious!r} with n_actions={self.n_actions!r}; pass "
                "0 <= n_ambitious < n_actions so every context keeps at least one safe action"
            )


class ContextualBandit:
    """Contexts x actions, each action a two-point real score ``mean +- spread`` with equal odds.

    The reward table is drawn once from ``config.seed``. Expected rewards of any policy are exact
    (:meth:`expected_reward`), so learning curves carry no evaluation noise.

    Args:
        config: the bandit's shape.

    Example:
        >>> bandit = ContextualBandit(BanditConfig(n_contexts=4, n_actions=5, n_ambitious=2, seed=1))
        >>> uniform = np.full((4, 5), 1 / 5)
        >>> bool(bandit.expected_reward(uniform) < bandit.optimal_reward())
        True
        >>> rng = np.random.default_rng(0)
        >>> bandit.sample_outcomes(np.array([0]), np.array([[2, 2]]), rng).shape
        (1, 2)
    """

    def __init__(self, config: BanditConfig | None = None) -> None:
        self.config = config if config is not None else BanditConfig()
        rng = np.random.default_rng(self.config.seed)
        shape = (self.config.n_contexts, self.config.n_actions)
        ambitious = np.zeros(shape, dtype=bool)
        for context in range(self.config.n_contexts):
            ambitious[context, rng.choice(self.config.n_actions, self.config.n_ambitious, replace=False)] = (
                True
            )
        mean = np.where(ambitious, rng.uniform(*_AMBITIOUS_MEAN, shape), rng.uniform(*_SAFE_MEAN, shape))
        spread = np.where(
            ambitious, rng.uniform(*_AMBITIOUS_SPREAD, shape), rng.uniform(*_SAFE_SPREAD, shape)
        )
        self.mean_reward: np.ndarray = mean
        self.spread: np.ndarray = np.minimum(spread, np.minimum(mean, 1.0 - mean))
        self.ambitious: np.ndarray = ambitious

    @property
    def n_contexts(self) -> int:
        """Number of contexts."""
        return self.config.n_contexts

    @property
    def n_actions(self) -> int:
        """Number of actions per context."""
        return self.config.n_actions

    def sample_contexts(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Draw ``n`` contexts uniformly (one per GRPO group)."""
        return rng.integers(0, self.n_contexts, size=n)

    def sample_outcomes(
        self, contexts: np.ndarray, actions: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        """Real scores of trajectories: ``mean +- spread`` of each (context, action), sign drawn fairly.

        Args:
            contexts: shape ``(groups,)``, the context of each group.
            actions: shape ``(groups, trajectories)``, the action of each trajectory.
            rng: generator for the outcome signs.

        Returns:
            Real scores, shape ``(groups, trajectories)``, in [0, 1].
        """
        rows = np.asarray(contexts)[:, None]
        sign = rng.choice(np.array([-1.0, 1.0]), size=np.shape(actions))
        return self.mean_reward[rows, actions] + self.spread[rows, actions] * sign

    def expected_reward(self, probabilities: np.ndarray) -> float:
        """Exact expected real score of a policy, averaged over contexts.

        Args:
            probabilities: shape ``(n_contexts, n_actions)``, each row a distribution over actions.
        """
        return float((probabilities * self.mean_reward).sum(axis=1).mean())

    def optimal_reward(self) -> float:
        """Expected real score of the best policy (always the best-mean action)."""
        return float(self.mean_reward.max(axis=1).mean())

    def greedy_reward(self, action_values: np.ndarray) -> float:
        """Expected real score of the policy that always takes the argmax of ``action_values``.

        With ``action_values`` the world model's expected predictions this is the bias floor: where a
        world-model-only run converges however long it trains.
        """
        best = np.asarray(action_values).argmax(axis=1)
        return float(self.mean_reward[np.arange(self.n_contexts), best].mean())


@dataclass(frozen=True)
class WorldModelErrorConfig:
    """Error of the synthetic world model: ``r_hat = h_beta(r + noise)``.

    ``h_beta(x) = expm1(beta * x) / expm1(beta)`` is monotone, convex for ``beta > 0``, the identity for
    ``beta = 0``, and maps [0, 1] onto [0, 1]. With ``s`` the policy's shift from its initial behaviour
    (:func:`policy_shift`, in [0, 1]): ``beta = curvature + curvature_drift * s`` and the noise standard
    deviation is ``noise_std * (1 + noise_drift * s)``.

    Attributes:
        curvature: convexity of the distortion at the initial policy (0: no bias).
        curvature_drift: how much more convex the distortion gets as the policy moves (0: no drift).
        noise_std: standard deviation of the outcome-scale noise at the initial policy (0: no noise).
        noise_drift: relative growth of the noise as the policy moves (0: stationary noise).
    """

    curvature: float = 3.0
    curvature_drift: float = 2.0
    noise_std: float = 0.15
    noise_drift: float = 1.0

    def __post_init__(self) -> None:
        for name in ("curvature", "curvature_drift", "noise_std", "noise_drift"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0.0):
                raise ConfigError(f"{name}={value!r}; pass a finite value >= 0 (0 switches that error off)")


class SyntheticWorldModel:
    """Predicts each trajectory's score from its real outcome, through a drifting monotone distortion.

    It stands for a world model that reads the trajectory (so it can tell a failed implementation from a
    successful one) but reports on a distorted, noisy scale.

    Args:
        config: the error's size and drift.

    Example:
        >>> world_model = SyntheticWorldModel(WorldModelErrorConfig(noise_std=0.0))
        >>> predicted = world_model.predict(np.array([[0.2, 0.5, 0.9]]), 0.0, np.random.default_rng(0))
        >>> bool(np.all(np.diff(predicted) > 0)), bool(predicted[0, 1] < 0.5)
        (True, True)
    """

    def __init__(self, config: WorldModelErrorConfig | None = None) -> None:
        self.config = config if config is not None else WorldModelErrorConfig()

    def curvature(self, shift: float) -> float:
        """Convexity ``beta`` of the distortion when the policy has moved by ``shift``."""
        return self.config.curvature + self.config.curvature_drift * _check_shift(shift)

    def noise_std(self, shift: float) -> float:
        """Outcome-scale noise standard deviation when the policy has moved by ``shift``."""
        return self.config.noise_std * (1.0 + self.config.noise_drift * _check_shift(shift))

    def distort(self, outcome: np.ndarray, shift: float) -> np.ndarray:
        """The noiseless distortion ``h_beta`` applied to outcome-scale values."""
        beta = self.curvature(shift)
        values = np.asarray(outcome, dtype=float)
        if beta == 0.0:
            return values.copy()
        return np.expm1(beta * values) / np.expm1(beta)

    def predict(self, real: np.ndarray, shift: float, rng: np.random.Generator) -> np.ndarray:
        """Predicted scores of trajectories whose real scores are ``real``.

        Args:
            real: real scores, any shape.
            shift: the current policy's shift from its initial policy, in [0, 1].
            rng: generator for the noise.

        Returns:
            Predictions, same shape as ``real``.
        """
        noise = self.noise_std(shift) * rng.standard_normal(np.shape(real))
        return self.distort(np.asarray(real, dtype=float) + noise, shift)

    def expected_prediction(self, bandit: ContextualBandit, shift: float) -> np.ndarray:
        """Exact expected prediction of every (context, action), shape ``(n_contexts, n_actions)``.

        Uses the Gaussian moment ``E[exp(beta * (x + noise))] = exp(beta * x + beta^2 sigma^2 / 2)``.
        """
        beta, sigma = self.curvature(shift), self.noise_std(shift)
        outcomes = (bandit.mean_reward - bandit.spread, bandit.mean_reward + bandit.spread)
        if beta == 0.0:
            return bandit.mean_reward.copy()
        moments = [np.expm1(beta * x + 0.5 * (beta * sigma) ** 2) for x in outcomes]
        return 0.5 * (moments[0] + moments[1]) / np.expm1(beta)


def policy_shift(probabilities: np.ndarray, initial: np.ndarray) -> float:
    """Mean total-variation distance between a policy and its initial policy, over contexts, in [0, 1].

    Example:
        >>> policy_shift(np.array([[1.0, 0.0]]), np.array([[0.5, 0.5]]))
        0.5
    """
    return float(0.5 * np.abs(np.asarray(probabilities) - np.asarray(initial)).sum(axis=1).mean())


def sample_actions(
    probabilities: np.ndarray, contexts: np.ndarray, n_per_context: int, rng: np.random.Generator
) -> np.ndarray:
    """Draw ``n_per_context`` actions for each context from a tabular policy, vectorised.

    Args:
        probabilities: shape ``(n_contexts, n_actions)``.
        contexts: shape ``(groups,)``.
        n_per_context: trajectories per group.
        rng: generator.

    Returns:
        Action indices, shape ``(groups, n_per_context)``.
    """
    cumulative = np.cumsum(np.asarray(probabilities)[np.asarray(contexts)], axis=1)
    uniform = rng.random((len(contexts), n_per_context, 1))
    actions = (uniform > cumulative[:, None, :-1]).sum(axis=2)
    return actions


def _check_shift(shift: float) -> float:
    if not (np.isfinite(shift) and 0.0 <= shift <= 1.0):
        raise ConfigError(f"shift={shift!r}; a policy shift is a total-variation distance in [0, 1]")
    return float(shift)
