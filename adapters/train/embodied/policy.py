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
into a policy, so swapping in a LeRobot policy (``lerobot:<pretrained dir>``,
:class:`LeRobotGaussianPolicy`; see docs/embodied.md) is a configuration change. :func:`make_random_act`
(``python -m wmrl_adapters.train.embodied.policy make-act DIR``) writes a LeRobot ACT with random weights,
the offline stand-in for a pretrained VLA that the tests and the GPU cost check
(``scripts/gpu_lerobot_check.py``) train.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from wmrl_algos.errors import ConfigError, MissingDependencyError

__all__ = [
    "ActionDistributionPolicy",
    "GaussianMLPPolicy",
    "LeRobotGaussianPolicy",
    "LEROBOT_KEYS",
    "behaviour_cloning",
    "build_embodied_policy",
    "make_random_act",
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


LEROBOT_KEYS = {
    "proprio": "observation.state",
    "object_state": "observation.environment_state",
    "agentview_image": "observation.images.image",
    "wrist_image": "observation.images.image2",
}
"""wmrl observation key -> LeRobot batch key (LeRobot's own LIBERO naming for the two cameras)."""


def _import_lerobot(what: str) -> None:
    try:
        import lerobot  # noqa: F401
    except ImportError as error:
        raise MissingDependencyError(
            f"{what} needs lerobot in this interpreter ({error}); run it with the embodied stack's Python "
            "($(bash scripts/embodied.sh python) -m wmrl_adapters.cli train ...), or pip install "
            "'lerobot[smolvla]' (Python >= 3.12); or use policy gaussian-mlp"
        ) from error


class LeRobotGaussianPolicy(torch.nn.Module):
    """A LeRobot policy (ACT, SmolVLA, pi0, ...) as an :class:`ActionDistributionPolicy`.

    The mean is the first action of the policy's predicted chunk, a learned state-independent log
    standard deviation the spread, so GRPO gets log-probs. The batch is LeRobot's: the observation keys of
    :data:`LEROBOT_KEYS` that the checkpoint's config lists as inputs (``observation.state`` = proprio,
    ``observation.environment_state`` = object poses, ``observation.images.image`` / ``.image2`` = the
    agentview / wrist camera as float images in [0, 1], channels first) and ``task`` = the instruction.
    The checkpoint's own pre-processor (normalisation, tokenizer) and post-processor (action
    un-normalisation) run around the model when the directory has them, as ``lerobot-eval`` does.

    Two things differ from LeRobot's ``select_action``: the chunk is re-predicted at every step (no action
    queue: a per-step log-prob needs a per-step mean; ``n_action_steps`` is ignored), and it is predicted
    with gradients (LeRobot decorates ``predict_action_chunk`` with ``torch.no_grad``; this calls the
    undecorated function). A flow-matching policy (SmolVLA, pi0) gets zero noise, so that its mean is a
    deterministic function of the observation, the same when the trainer samples and when it re-scores.
    The distribution lives on the CPU whatever ``device`` the model runs on (the trainer's sampling
    generator and its loss are there; the gradient flows back through the copy).

    Needs ``lerobot`` in the interpreter that runs ``wmrl train`` (the embodied stack's venv has it:
    ``bash scripts/embodied.sh python``) and, for a pretrained VLA, its weights in a local directory or
    the HuggingFace cache. The images are only present if the env was made with cameras
    (``--cameras agentview,robot0_eye_in_hand``).

    Args:
        pretrained: a directory (or hub id already in the cache) of a LeRobot pretrained policy.
        init_std: the initial standard deviation.
        device: where the policy runs (``"cuda"`` on a GPU machine).
        micro_batch: observations per forward pass when gradients are on (see :meth:`mean`).

    Raises:
        MissingDependencyError: lerobot is not importable here.
        ConfigError: the checkpoint needs an input no wmrl observation provides.

    Example:
        >>> path = make_random_act("/tmp/act-doctest", tiny=True)  # doctest: +SKIP
        >>> policy = LeRobotGaussianPolicy(str(path), init_std=0.1)  # doctest: +SKIP
        >>> obs = {"proprio": np.zeros(9), "object_state": np.zeros(70)}  # doctest: +SKIP
        >>> policy.distribution([obs]).log_prob(torch.zeros(1, 7)).shape  # doctest: +SKIP
        torch.Size([1])
    """

    def __init__(
        self, pretrained: str, *, init_std: float = 0.1, device: str = "cpu", micro_batch: int = 64
    ) -> None:
        super().__init__()
        _import_lerobot(f"policy 'lerobot:{pretrained}'")
        import inspect

        from lerobot.configs.policies import PreTrainedConfig
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors

        if not init_std > 0 or micro_batch < 1:
            raise ConfigError(f"init_std={init_std!r}, micro_batch={micro_batch!r}; both must be positive")
        self.micro_batch = micro_batch
        config = PreTrainedConfig.from_pretrained(pretrained)
        config.device = device
        self.policy = get_policy_class(config.type).from_pretrained(pretrained, config=config).to(device)
        self.policy.eval()  # dropout off: the mean must be the same when sampling and when re-scoring
        self.device = device
        self.inputs = {key: name for key, name in LEROBOT_KEYS.items() if name in config.input_features}
        unknown = sorted(set(config.input_features) - set(LEROBOT_KEYS.values()))
        if unknown:
            raise ConfigError(
                f"policy 'lerobot:{pretrained}' needs inputs {unknown} that no wmrl observation provides (it "
                f"maps {LEROBOT_KEYS}); retrain or re-export the checkpoint with those keys"
            )
        self._predict = inspect.unwrap(type(self.policy).predict_action_chunk)
        self._takes_noise = "noise" in inspect.signature(self._predict).parameters
        self.preprocessor: Any = None
        self.postprocessor: Any = None
        if (Path(pretrained) / "policy_preprocessor.json").is_file():
            self.preprocessor, self.postprocessor = make_pre_post_processors(
                config,
                pretrained_path=pretrained,
                preprocessor_overrides={"device_processor": {"device": device}},
            )
        self.log_std = torch.nn.Parameter(torch.full((ACTION_SIZE,), math.log(init_std)))

    def _batch(self, observations: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The LeRobot batch (on the policy's device, before its pre-processor) of these observations."""
        missing = sorted({key for obs in observations for key in self.inputs if key not in obs})
        if missing:
            raise ConfigError(
                f"observation lacks {missing} (has {sorted(observations[0])}), which this LeRobot policy "
                "takes; make the env with the cameras it was trained on "
                "(--cameras agentview,robot0_eye_in_hand)"
            )
        batch: dict[str, Any] = {"task": [str(obs.get("instruction", "")) for obs in observations]}
        for key, name in self.inputs.items():
            values = np.stack([np.asarray(obs[key]) for obs in observations])
            tensor = torch.as_tensor(values, device=self.device)
            if key.endswith("_image"):  # (B, H, W, 3) uint8 -> (B, 3, H, W) float in [0, 1]
                tensor = tensor.permute(0, 3, 1, 2).float() / 255.0
            batch[name] = tensor.float()
        return batch

    def mean(self, observations: Sequence[Mapping[str, Any]]) -> torch.Tensor:
        """The ``(B, 7)`` mean action (on the CPU, differentiable w.r.t. the LeRobot policy's weights).

        With gradients on and more than ``micro_batch`` observations (the update re-scoring a whole
        step's episodes), each micro-batch runs under activation checkpointing: its activations are
        dropped after the forward and recomputed in the backward, so memory holds one micro-batch's
        activations, not the step's (the gradient is the same; the cost is one more forward).
        """
        if not torch.is_grad_enabled() or len(observations) <= self.micro_batch:
            return self._mean(observations)
        from torch.utils.checkpoint import checkpoint

        parts = [
            checkpoint(self._mean, observations[start : start + self.micro_batch], use_reentrant=False)
            for start in range(0, len(observations), self.micro_batch)
        ]
        return torch.cat(parts)  # type: ignore[arg-type]

    def _mean(self, observations: Sequence[Mapping[str, Any]]) -> torch.Tensor:
        batch = self._batch(observations)
        if self.preprocessor is not None:
            batch = self.preprocessor(batch)
        self.policy.eval()
        if self._takes_noise:
            config = self.policy.config
            shape = (len(observations), config.chunk_size, getattr(config, "max_action_dim", ACTION_SIZE))
            chunk = self._predict(self.policy, batch, noise=torch.zeros(shape, device=self.device))
        else:
            chunk = self._predict(self.policy, batch)
        if self.postprocessor is not None:
            chunk = self.postprocessor(chunk)
        return chunk[:, 0, :ACTION_SIZE].float().cpu()

    def distribution(self, observations: Sequence[Mapping[str, Any]]) -> torch.distributions.Distribution:
        """Gaussian around the first action of the predicted chunk."""
        mean = self.mean(observations)
        std = self.log_std.clamp(-5.0, 1.0).exp().expand_as(mean)
        return _gaussian(mean, std)


def make_random_act(
    directory: str | Path,
    *,
    cameras: Sequence[str] = (),
    image_size: int = 256,
    object_state_size: int = 70,
    tiny: bool = False,
    chunk_size: int = 10,
    seed: int = 0,
) -> Path:
    """Write a LeRobot ACT policy with random weights (no hub, no pretrained backbone) to ``directory``.

    The directory is what ``lerobot-train`` writes (``config.json``, ``model.safetensors``, the pre- and
    post-processor pipelines, with identity normalisation), so ``--policy lerobot:<directory>`` loads it
    like any LeRobot checkpoint: the offline stand-in for a pretrained VLA, to exercise the swap.

    Args:
        directory: where to write (created).
        cameras: ``agentview`` and/or ``robot0_eye_in_hand``: the image inputs (none: proprio and object
            state only; ACT needs images or the environment state).
        image_size: the env's square image size (256: what ``wmrl train``'s envs render).
        object_state_size: the env's ``object_state`` size (LIBERO: 70; robosuite Lift: 10).
        tiny: a 64-wide, one-layer transformer (seconds on a CPU) instead of ACT's defaults (512 wide,
            4 encoder layers; ResNet-18 per camera).
        chunk_size: actions predicted per call (only the first is used).
        seed: seeds the random weights.

    Returns:
        ``directory`` as a path.

    Raises:
        MissingDependencyError: lerobot is not importable here.
        ConfigError: an unknown camera.

    Example:
        >>> make_random_act("/tmp/act", tiny=True)  # doctest: +SKIP
        PosixPath('/tmp/act')
    """
    _import_lerobot("make_random_act")
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.factory import make_pre_post_processors

    image_keys = {"agentview": "agentview_image", "robot0_eye_in_hand": "wrist_image"}
    unknown = [camera for camera in cameras if camera not in image_keys]
    if unknown:
        raise ConfigError(f"cameras={list(cameras)!r}; choose among {sorted(image_keys)}")
    features = {
        LEROBOT_KEYS["proprio"]: PolicyFeature(FeatureType.STATE, (9,)),
        LEROBOT_KEYS["object_state"]: PolicyFeature(FeatureType.ENV, (object_state_size,)),
    }
    for camera in cameras:
        shape = (3, image_size, image_size)
        features[LEROBOT_KEYS[image_keys[camera]]] = PolicyFeature(FeatureType.VISUAL, shape)
    sizes: dict[str, Any] = {}
    if tiny:
        sizes = {
            "dim_model": 64,
            "n_heads": 2,
            "dim_feedforward": 128,
            "n_encoder_layers": 1,
            "n_vae_encoder_layers": 1,
            "latent_dim": 8,
        }
    config = ACTConfig(
        input_features=features,
        output_features={"action": PolicyFeature(FeatureType.ACTION, (ACTION_SIZE,))},
        pretrained_backbone_weights=None,
        chunk_size=chunk_size,
        n_action_steps=chunk_size,
        device="cpu",
        push_to_hub=False,
        **sizes,
    )
    generator_state = torch.get_rng_state()
    torch.manual_seed(seed)
    policy = ACTPolicy(config)
    torch.set_rng_state(generator_state)
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    policy.save_pretrained(path)
    for pipeline in make_pre_post_processors(config, dataset_stats=None):
        pipeline.save_pretrained(path)
    return path


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


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m wmrl_adapters.train.embodied.policy make-act DIR [--tiny] [--cameras ...]``: write a random
    ACT directory (:func:`make_random_act`) for ``--policy lerobot:DIR``; run it with the embodied stack's
    Python (``bash scripts/embodied.sh python``)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m wmrl_adapters.train.embodied.policy")
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("make-act", help="write a LeRobot ACT policy with random weights (offline)")
    make.add_argument("directory")
    make.add_argument("--cameras", default="", help="comma-separated: agentview,robot0_eye_in_hand")
    make.add_argument("--image-size", type=int, default=256)
    make.add_argument("--object-state-size", type=int, default=70, help="LIBERO: 70, robosuite Lift: 10")
    make.add_argument("--tiny", action="store_true", help="a 64-wide one-layer transformer (CPU tests)")
    make.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    cameras = [camera.strip() for camera in args.cameras.split(",") if camera.strip()]
    path = make_random_act(
        args.directory,
        cameras=cameras,
        image_size=args.image_size,
        object_state_size=args.object_state_size,
        tiny=args.tiny,
        seed=args.seed,
    )
    print(path)


if __name__ == "__main__":
    main()
