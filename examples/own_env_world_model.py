"""Your own env and your own world model: WMRL on Gymnasium's Pendulum with a home-made physics model.

The "expensive" env is ``Pendulum-v1``; the world model is a hand-written, slightly wrong copy of its
physics (gravity 9.0 instead of 10.0, and a reward that forgets the torque cost and under-weights speed).
It predicts the next observation and the reward, so in ``mode="simulate"`` a non-anchor episode never
touches the real env. Two ways to drive it:

1. ``GroupedRollout`` + ``CorrectionLoop``: GRPO-style groups (a group shares its start state), about one
   group in four executed for real, the anchor pairs calibrating the world model's reward (Online
   Debiasing) and weighting the anchor groups (Inverse-Variance Denoising).
2. Stable-Baselines3 (``pip install stable-baselines3``): SB3 never passes reset options, so the wrapper
   anchors a seeded 10% of episodes by itself (``anchor_fraction``); PPO trains on real rewards on those
   and on the world model's elsewhere.

Run: ``python examples/own_env_world_model.py`` (about a minute on 2 CPU cores; ``--sb3-steps 0`` skips
part 2).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
from collections.abc import Sequence

import gymnasium as gym
import numpy as np

from wmrl_algos.loop import CorrectionConfig, CorrectionLoop
from wmrl_envs import (
    GroupedRollout,
    Prediction,
    RolloutConfig,
    RolloutTask,
    WorldModelQuery,
    WorldModelWrapper,
)


class PendulumPhysics:
    """A home-made world model of Pendulum-v1: its equations with the wrong gravity and a sloppy reward.

    Any object with a ``name`` and a batched ``predict(queries) -> list[Prediction]`` is a world model.
    The query's context is the env's last observation ``[cos θ, sin θ, θ̇]`` (Pendulum has no
    ``world_model_context`` hook), its action the torque.
    """

    name = "pendulum-physics"

    def __init__(self, gravity: float = 9.0, dt: float = 0.05) -> None:
        self.gravity, self.dt = gravity, dt

    def predict(self, queries: Sequence[WorldModelQuery]) -> list[Prediction]:
        predictions = []
        for query in queries:
            cos_theta, sin_theta, speed = (float(x) for x in np.asarray(query.context).reshape(-1))
            theta = math.atan2(sin_theta, cos_theta)
            torque = float(np.clip(np.asarray(query.action).reshape(-1)[0], -2.0, 2.0))
            reward = -(theta**2 + 0.05 * speed**2)  # the real cost also has 0.1·θ̇² and 0.001·u²
            acceleration = 1.5 * self.gravity * math.sin(theta) + 3.0 * torque
            speed = float(np.clip(speed + acceleration * self.dt, -8.0, 8.0))
            theta += speed * self.dt
            observation = np.array([math.cos(theta), math.sin(theta), speed], dtype=np.float32)
            predictions.append(Prediction(reward, observation=observation))
        return predictions


class RandomTorque:
    """A batched policy: random float64 torques (the wrapper checks them against the float32 Box)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def act(self, observations: Sequence[np.ndarray], infos: Sequence[dict]) -> list[np.ndarray]:
        return [self.rng.uniform(-2.0, 2.0, size=1) for _ in observations]


def grouped_rollouts(steps: int) -> None:
    """Part 1: WMRL's groups, anchors and corrections, printed per step."""
    loop = CorrectionLoop(CorrectionConfig(anchor_fraction=0.25, min_pairs=4, seed=0))
    config = RolloutConfig(group_size=4, mode="simulate", max_turns=20)
    policy = RandomTorque(seed=0)
    with GroupedRollout(lambda: gym.make("Pendulum-v1"), PendulumPhysics(), config) as rollout:
        for step in range(steps):
            tasks = [RolloutTask(f"swing-up-{k}") for k in range(8)]  # same task, 8 start states
            groups = rollout.run(tasks, policy, anchors=loop.plan(len(tasks)), seed=1000 * step)
            result = loop.correct(groups)
            metrics = result.metrics
            print(
                f"step {step}: anchor groups {metrics['wmrl/anchor_groups']:.0f}/8, "
                f"calibration pairs {metrics['wmrl/pairs']:.0f}, "
                f"anchor weight {metrics['wmrl/anchor_weight']:.2f}"
            )
        costs = rollout.ledger.as_metrics()
    print(
        f"real env steps: {costs['cost/real_steps']:.0f}, "
        f"world-model queries: {costs['cost/world_model_queries']:.0f}"
    )


def stable_baselines3(total_timesteps: int) -> None:
    """Part 2: plain SB3 PPO on the wrapped env; the wrapper anchors 10% of episodes on its own."""
    if importlib.util.find_spec("stable_baselines3") is None:
        print("Stable-Baselines3 is not installed (pip install stable-baselines3): part 2 skipped")
        return
    from stable_baselines3 import PPO

    env = WorldModelWrapper(gym.make("Pendulum-v1", max_episode_steps=20), PendulumPhysics(), mode="simulate")
    model = PPO("MlpPolicy", env, n_steps=256, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=total_timesteps)
    ledger = env.ledger
    print(
        f"SB3 PPO: {ledger.episodes} episodes, {ledger.anchor_episodes} anchored "
        f"({ledger.anchor_episodes / max(1, ledger.episodes):.0%}), real env steps {ledger.real_steps}"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3, help="WMRL steps of part 1")
    parser.add_argument("--sb3-steps", type=int, default=2048, help="PPO timesteps of part 2 (0: skip)")
    args = parser.parse_args(argv)
    grouped_rollouts(args.steps)
    if args.sb3_steps > 0:
        stable_baselines3(args.sb3_steps)


if __name__ == "__main__":
    main()
