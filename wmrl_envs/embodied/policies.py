"""Reference policies for the embodied envs: scripted, noisy-scripted and random.

Why: a progress scorer's fidelity can only be measured on rollouts that sometimes succeed and sometimes
fail for reasons a scorer should see. A scripted grasp-and-lift on robosuite's Lift succeeds most of the
time; the same script with noise on its actions fails some of the time after partial progress (the
hard case for a scorer); uniform random actions almost never get anywhere. The three mixed give the
scorer fidelity report (:mod:`wmrl_envs.embodied.fidelity`) successes, near misses and clear failures.

All follow :class:`wmrl_envs.rollouts.Policy`: ``act(observations, infos) -> list[action]`` over a batch.
The scripted controller is stateless (it reads the phase from the observation), so one instance
serves any number of trajectories.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmrl_algos.errors import ConfigError

__all__ = ["NoisyPolicy", "RandomPolicy", "ScriptedLiftPolicy"]

_TABLE_CUBE_HEIGHT = 0.83
"""Height (m) of the Lift cube's centre above which it counts as off the table (resting: ~0.82)."""


@dataclass(frozen=True)
class ScriptedLiftPolicy:
    """Grasp-and-lift for ``wmrl/RobosuiteLift-v0`` (needs ``object_states=True``, the default there).

    Moves above the cube with the gripper open, descends, closes, and lifts; the phase is read from the
    observation (gripper opening, cube height), not remembered.

    Attributes:
        gain: proportional gain from position error (m) to the OSC_POSE action (1.0 = 5 cm per step).
        tolerance: horizontal/vertical error (m) under which a phase counts as reached.

    Example:
        >>> policy = ScriptedLiftPolicy()
        >>> obs = {"proprio": np.r_[0.0, 0.0, 1.0, np.zeros(4), 0.04, -0.04],
        ...        "object_state": np.r_[0.0, 0.0, 0.82, np.zeros(7)]}
        >>> action = policy.act([obs], [{}])[0]
        >>> float(action[2]) < 0, float(action[6])  # descend towards the cube, gripper open
        (True, -1.0)
    """

    gain: float = field(default=10.0, metadata={"help": "action per metre of position error"})
    tolerance: float = field(default=0.01, metadata={"help": "metres within which a waypoint is reached"})

    def __post_init__(self) -> None:
        if not self.gain > 0 or not self.tolerance > 0:
            raise ConfigError(f"gain={self.gain!r}, tolerance={self.tolerance!r}; both must be positive")

    def act(
        self, observations: Sequence[Mapping[str, Any]], infos: Sequence[Mapping[str, Any]]
    ) -> list[np.ndarray]:
        """One action per observation."""
        return [self._action(obs) for obs in observations]

    def _action(self, obs: Mapping[str, Any]) -> np.ndarray:
        if "object_state" not in obs:
            raise ConfigError(
                "ScriptedLiftPolicy reads the cube position: make the env with object_states=True"
            )
        proprio = np.asarray(obs["proprio"], dtype=np.float64)
        eef, opening = proprio[:3], float(proprio[7] - proprio[8])
        cube = np.asarray(obs["object_state"], dtype=np.float64)[:3]
        horizontal = float(np.linalg.norm(cube[:2] - eef[:2]))
        vertical = float(eef[2] - cube[2])
        lifted = cube[2] > _TABLE_CUBE_HEIGHT
        at_cube = horizontal < 2 * self.tolerance and abs(vertical) < self.tolerance
        if lifted or (at_cube and opening < 0.05):
            target, gripper = np.r_[cube[:2], cube[2] + 0.2], 1.0
        elif horizontal > 2 * self.tolerance:
            target, gripper = cube + np.r_[0.0, 0.0, 0.08], -1.0
        elif vertical > self.tolerance:
            target, gripper = cube, -1.0
        else:
            target, gripper = eef, 1.0
        move = np.clip(self.gain * (target - eef), -1.0, 1.0)
        return np.r_[move, 0.0, 0.0, 0.0, gripper].astype(np.float32)


@dataclass
class NoisyPolicy:
    """Another policy with Gaussian noise on its actions (clipped to [-1, 1]).

    Attributes:
        policy: the policy to perturb.
        noise: standard deviation of the noise, per action dimension.
        seed: seeds the noise.

    Example:
        >>> noisy = NoisyPolicy(RandomPolicy(seed=0), noise=0.5, seed=0)
        >>> noisy.act([{}], [{}])[0].shape
        (7,)
    """

    policy: Any
    noise: float = field(default=0.5, metadata={"help": "standard deviation of the action noise"})
    seed: int = field(default=0, metadata={"help": "seeds the noise"})

    def __post_init__(self) -> None:
        if not self.noise >= 0:
            raise ConfigError(f"noise={self.noise!r}; pass a non-negative standard deviation")
        self._generator = np.random.default_rng(self.seed)

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]) -> list[np.ndarray]:
        """The wrapped policy's actions plus noise."""
        actions = self.policy.act(observations, infos)
        return [
            np.clip(np.asarray(a) + self._generator.normal(0.0, self.noise, np.shape(a)), -1.0, 1.0).astype(
                np.float32
            )
            for a in actions
        ]


@dataclass
class RandomPolicy:
    """Uniform random 7-d actions.

    Example:
        >>> action = RandomPolicy(seed=0).act([{}, {}], [{}, {}])
        >>> len(action), action[0].shape, bool(np.abs(action[0]).max() <= 1)
        (2, (7,), True)
    """

    seed: int = field(default=0, metadata={"help": "seeds the actions"})

    def __post_init__(self) -> None:
        self._generator = np.random.default_rng(self.seed)

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]) -> list[np.ndarray]:
        """One uniform action in [-1, 1]^7 per observation."""
        return [self._generator.uniform(-1.0, 1.0, 7).astype(np.float32) for _ in observations]
