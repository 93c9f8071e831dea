"""Embodied policies for ``wmrl train --env robosuite:... / libero:...``: the interface a VLA fits, and the
small CPU policy behind it.

Why this interface: a vision-language-action policy (SmolVLA, pi0, OpenVLA, LeRobot's ACT) and a small
state MLP differ in everything except what the GRPO trainer needs from them: a batch of observations
(camera images + proprioception + the language instruction, the env's observation dict) in, a
distribution over the 7-d action out, with differentiable log-probs. That is
:class:`ActionDistributionPolicy`. The trainer samples from the distribution during rollouts and
re-scores the stored actions under the current parameters for the clipped GRPO loss, so the policy
needs no memory of what it sampled; a resumed run needs no cache.

:class:`GaussianMLPPolicy` is the CPU policy: an MLP on chosen state keys (``proprio`` and the
privileged ``object_state`` by default; no images, which would make every simulator step ~10x dearer,
see docs/embodied.md), a diagonal Gaussian with a state-independent learned standard deviation, inputs
normalised with statistics fitted on the demonstrations. :func:`behaviour_cloning` fits its mean to
scripted demonstrations (the SFT stage). :func:`build_embodied_policy` turns the ``policy`` config string
into a policy, so swapping in a LeRobot policy (``lerobot:<pretrained dir>``; see docs/embodied.md) is
a configuration change.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from wmrl_algos.errors import ConfigError, MissingDependencyError

__all__ = [
    "ActionDistributionPolicy",
    "GaussianMLPPolicy",
    "LeRobotGaussianPolicy",
    "behaviour_cloning",
    "build_embodied_policy",
]

ACTION_SIZE = 7


@runtime_checkable
class ActionDistributionPolicy(Protocol):
    """Observations (images + proprio + instruction, the env's dicts) in, an action distribution out.

    ``distribution(observations)`` returns a :class:`torch.distributions.Distribution` over ``(B, 7)``
    actions whose ``log_prob`` gives one value per observation (an ``Independent`` diagonal Gaussian, or
    any distribution with that shape), with gradients to :meth:`parameters`.

    Example:
        >>> isinstance(GaussianMLPPolicy({"proprio": 9}), ActionDistributionPolicy)
        True
    """

    def distribution(self, observations: Sequence[Mapping[str, Any]]) -> torch.distributions.Distribution:
        """The action distribution for each observation of the batch."""
        ...

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        """The parameters the optimiser updates."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Weights (and buffers) for a checkpoint."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> Any:
        """Restore :meth:`state_dict`."""
        ...


def _gaussian(mean: torch.Tensor, std: torch.Tensor) -> torch.distributions.Distribution:
    """A diagonal Gaussian over ``(B, 7)`` without torch's argument validation: a policy whose mean is
    NaN must still yield its (NaN) action, which the env rejects and the trainer counts as the policy's
    failure, instead of raising inside the rollout."""
    normal = torch.distributions.Normal(mean, std, validate_args=False)
    return torch.distributions.Independent(normal, 1, validate_args=False)


class GaussianMLPPolicy(torch.nn.Module):
    """A diagonal Gaussian over the 7-d action from an MLP on state observations.

    Args:
        inputs: observation key -> size, in the order the features are concatenated
            (e.g. ``{"proprio": 9, "object_state": 10}``).
        hidden: width of the two tanh hidden layers.
        init_std: the initial standard deviation of every action dimension.
        seed: seeds the initial weights.

    Example:
        >>> policy = GaussianMLPPolicy({"proprio": 9}, seed=0)
        >>> dist = policy.distribution([{"proprio": np.zeros(9)}, {"proprio": np.ones(9)}])
        >>> tuple(dist.sample().shape), tuple(dist.log_prob(torch.zeros(2, 7)).shape)
        ((2, 7), (2,))
    """

    def __init__(
        self, inputs: Mapping[str, int], *, hidden: int = 64, init_std: float = 0.3, seed: int = 0
    ) -> None:
        super().__init__()
        if not inputs or any(size < 1 for size in inputs.values()):
            raise ConfigError(f"inputs={dict(inputs)!r}; pass observation keys with positive sizes")
        if not init_std > 0 or hidden < 1:
            raise ConfigError(f"init_std={init_std!r}, hidden={hidden!r}; both must be positive")
        self.inputs = dict(inputs)
        size = sum(self.inputs.values())
        generator_state = torch.get_rng_state()
        torch.manual_seed(seed)
        self.net = torch.nn.Sequential(
            torch.nn.Linear(size, hidden),
            torch.nn.Tanh(),
            torch.nn.Linear(hidden, hidden),
            torch.nn.Tanh(),
            torch.nn.Linear(hidden, ACTION_SIZE),
        )
        torch.set_rng_state(generator_state)
        self.log_std = torch.nn.Parameter(torch.full((ACTION_SIZE,), math.log(init_std)))
        self.register_buffer("feature_mean", torch.zeros(size))
        self.register_buffer("feature_std", torch.ones(size))

    def features(self, observations: Sequence[Mapping[str, Any]]) -> torch.Tensor:
        """The normalised ``(B, D)`` feature matrix of a batch of observation dicts."""
        rows = []
        for obs in observations:
            missing = [key for key in self.inputs if key not in obs]
            if missing:
                raise ConfigError(
                    f"observation lacks {missing} (has {sorted(obs)}); make the env with those keys "
                    "(object_states=True for object_state) or change the policy's inputs"
                )
            rows.append(np.concatenate([np.ravel(obs[key])[:size] for key, size in self.inputs.items()]))
        values = torch.as_tensor(np.stack(rows), dtype=torch.float32)
        return (values - self.feature_mean) / self.feature_std

    def fit_normaliser(self, observations: Sequence[Mapping[str, Any]]) -> None:
        """Set the input normalisation to the mean and standard deviation of these observations."""
        self.feature_mean.zero_()
        self.feature_std.fill_(1.0)
        values = self.features(observations)
        self.feature_mean.copy_(values.mean(0))
        self.feature_std.copy_(values.std(0).clamp(min=1e-3))

    def mean(self, observations: Sequence[Mapping[str, Any]]) -> torch.Tensor:
        """The ``(B, 7)`` mean action."""
        return self.net(self.features(observations))

    def distribution(self, observations: Sequence[Mapping[str, Any]]) -> torch.distributions.Distribution:
        """``Independent(Normal(mean, exp(log_std)), 1)`` over ``(B, 7)`` actions."""
        mean = self.mean(observations)
        std = self.log_std.clamp(-5.0, 1.0).exp().expand_as(mean)
        return _gaussian(mean, std)


class LeRobotGaussianPolicy(torch.nn.Module):
    """A LeRobot policy (ACT, SmolVLA, pi0, ...) as an :class:`ActionDistributionPolicy`.

    The mean is the first action of the policy's predicted chunk (``predict_action_chunk``) for a batch
    in LeRobot's format (``observation.state`` = proprio, ``observation.images.<camera>`` = float images
    in [0, 1], channels first, ``task`` = the instruction); a learned state-independent log standard
    deviation makes it a Gaussian, so GRPO gets log-probs. Needs ``lerobot`` in the interpreter that runs
    ``wmrl train`` (``pip install 'lerobot[smolvla]'``, Python >= 3.12) and, for a pretrained VLA, its
    weights in a local directory or the HuggingFace cache. The images are only present if the env was
    made with cameras (``--cameras agentview,robot0_eye_in_hand``).

    Args:
        pretrained: a directory (or hub id already in the cache) of a LeRobot pretrained policy.
        init_std: the initial standard deviation.
        device: where the policy runs (``"cuda"`` on a GPU machine).

    Raises:
        MissingDependencyError: lerobot is not importable here.

    Example:
        >>> LeRobotGaussianPolicy("lerobot/smolvla_base", device="cuda")  # doctest: +SKIP
    """

    def __init__(self, pretrained: str, *, init_std: float = 0.1, device: str = "cpu") -> None:
        super().__init__()
        try:
            from lerobot.configs.policies import PreTrainedConfig
            from lerobot.policies.factory import get_policy_class
        except ImportError as error:
            raise MissingDependencyError(
                f"policy 'lerobot:{pretrained}' needs lerobot in this interpreter ({error}); pip install "
                "'lerobot[smolvla]' (Python >= 3.12), or use policy gaussian-mlp"
            ) from error
        config = PreTrainedConfig.from_pretrained(pretrained)
        self.policy = get_policy_class(config.type).from_pretrained(pretrained).to(device)
        self.device = device
        self.log_std = torch.nn.Parameter(torch.full((ACTION_SIZE,), math.log(init_std), device=device))

    def _batch(self, observations: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        state = np.stack([np.asarray(obs["proprio"], dtype=np.float32) for obs in observations])
        batch: dict[str, Any] = {
            "observation.state": torch.as_tensor(state, device=self.device),
            "task": [str(obs["instruction"]) for obs in observations],
        }
        for key, camera in (("agentview_image", "image"), ("wrist_image", "wrist_image")):
            if key in observations[0]:
                images = np.stack([np.asarray(obs[key]) for obs in observations]).astype(np.float32) / 255.0
                batch[f"observation.images.{camera}"] = torch.as_tensor(images, device=self.device).permute(
                    0, 3, 1, 2
                )
        return batch

    def distribution(self, observations: Sequence[Mapping[str, Any]]) -> torch.distributions.Distribution:
        """Gaussian around the first action of the predicted chunk."""
        mean = self.policy.predict_action_chunk(self._batch(observations))[:, 0, :ACTION_SIZE]
        std = self.log_std.clamp(-5.0, 1.0).exp().expand_as(mean)
        return _gaussian(mean.float(), std)


def build_embodied_policy(
    spec: str, inputs: Mapping[str, int], *, seed: int, init_std: float, hidden: int = 64
) -> torch.nn.Module:
    """The policy of a ``policy`` config string: ``gaussian-mlp`` or ``lerobot:<pretrained dir>``.

    Raises:
        ConfigError: an unknown spec.
        MissingDependencyError: ``lerobot:`` without lerobot installed.
    """
    if spec == "gaussian-mlp":
        return GaussianMLPPolicy(inputs, hidden=hidden, init_std=init_std, seed=seed)
    if spec.startswith("lerobot:") and len(spec) > len("lerobot:"):
        device = "cuda" if torch.cuda.is_available() else "cpu"
        return LeRobotGaussianPolicy(spec.split(":", 1)[1], init_std=init_std, device=device)
    raise ConfigError(f"policy={spec!r}; pass gaussian-mlp or lerobot:<pretrained policy directory>")


def behaviour_cloning(
    policy: GaussianMLPPolicy,
    observations: Sequence[Mapping[str, Any]],
    actions: np.ndarray,
    *,
    epochs: int = 300,
    learning_rate: float = 3e-3,
    batch_size: int = 256,
    seed: int = 0,
) -> list[float]:
    """Fit the policy's mean to demonstrated actions (mean squared error; the SFT stage).

    The input normalisation is fitted on ``observations`` first. The standard deviation is left at its
    initial value: it is the exploration noise GRPO starts from, not something the demonstrations
    (deterministic scripted actions) could estimate.

    Returns:
        The mean training loss of each epoch.

    Example:
        >>> policy = GaussianMLPPolicy({"proprio": 9}, seed=0)
        >>> obs = [{"proprio": np.full(9, float(i))} for i in range(8)]
        >>> losses = behaviour_cloning(policy, obs, np.zeros((8, 7), np.float32), epochs=20)
        >>> losses[-1] < losses[0]
        True
    """
    if len(observations) != len(actions) or not len(actions):
        raise ConfigError(
            f"{len(observations)} observations for {len(actions)} actions; pass equal, non-zero"
        )
    policy.fit_normaliser(observations)
    features = policy.features(observations).detach()
    targets = torch.as_tensor(np.asarray(actions), dtype=torch.float32)
    optimiser = torch.optim.Adam(policy.net.parameters(), lr=learning_rate)
    generator = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(epochs):
        order = torch.randperm(len(targets), generator=generator)
        total = 0.0
        for start in range(0, len(order), batch_size):
            index = order[start : start + batch_size]
            loss = torch.nn.functional.mse_loss(policy.net(features[index]), targets[index])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * len(index)
        losses.append(total / len(order))
    return losses
