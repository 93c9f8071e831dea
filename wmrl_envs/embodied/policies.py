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

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmrl_algos.errors import ConfigError

__all__ = [
    "SCRIPTED_EXPERTS",
    "NoisyPolicy",
    "RandomPolicy",
    "ScriptedLiftPolicy",
    "ScriptedPickPlacePolicy",
    "scripted_expert",
]

_TABLE_CUBE_HEIGHT = 0.83
"""Height (m) of the Lift cube's centre above which it counts as off the table (resting: ~0.82)."""


@dataclass(frozen=True)
class _WaypointExpert(abc.ABC):
    """What the scripted experts share: a waypoint and a gripper command from privileged state, a
    proportional move towards the waypoint (OSC_POSE, orientation held), stateless over a batch."""

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
                f"{type(self).__name__} reads the objects' poses: make the env with object_states=True"
            )
        proprio = np.asarray(obs["proprio"], dtype=np.float64)
        eef, opening = proprio[:3], float(proprio[7] - proprio[8])
        target, gripper = self._waypoint(eef, opening, np.asarray(obs["object_state"], dtype=np.float64))
        move = np.clip(self.gain * (target - eef), -1.0, 1.0)
        return np.r_[move, 0.0, 0.0, 0.0, gripper].astype(np.float32)

    @abc.abstractmethod
    def _waypoint(self, eef: np.ndarray, opening: float, poses: np.ndarray) -> tuple[np.ndarray, float]:
        """Where the gripper goes next and the gripper command (-1 open, 1 close)."""


@dataclass(frozen=True)
class ScriptedLiftPolicy(_WaypointExpert):
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

    def _waypoint(self, eef: np.ndarray, opening: float, poses: np.ndarray) -> tuple[np.ndarray, float]:
        cube = poses[:3]
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
        return target, gripper


@dataclass(frozen=True)
class ScriptedPickPlacePolicy(_WaypointExpert):
    """Pick-and-place for LIBERO's ``pick up the X and place it in the basket`` tasks (``libero_object``).

    Reads ``object_state`` (``object_states=True``): LIBERO lists the goal's objects of interest first,
    so the first pose is the object to pick and the second the container. The waypoints: above the
    object with the gripper open, down to it, close, lift straight up, carry above the container,
    lower, open. Like :class:`ScriptedLiftPolicy` the phase is read from the observation (gripper
    opening, where the object is relative to the gripper and to the container), never remembered.

    Attributes:
        gain: proportional gain from position error (m) to the OSC_POSE action.
        tolerance: horizontal/vertical error (m) under which a waypoint counts as reached.
        grasp_height: grasp point above the object's origin (m).
        carry_height: height (m) of the gripper while carrying (the basket's rim is lower).
        release_height: gripper height (m) above the container's origin at which the object is let go.

    Example:
        >>> policy = ScriptedPickPlacePolicy()
        >>> obs = {"proprio": np.r_[0.0, 0.0, 0.3, np.zeros(4), 0.04, -0.04],
        ...        "object_state": np.r_[0.0, 0.0, 0.04, np.zeros(4), 0.0, 0.25, 0.0, np.zeros(60)]}
        >>> action = policy.act([obs], [{}])[0]
        >>> float(action[2]) < 0, float(action[6])  # descend towards the object, gripper open
        (True, -1.0)
    """

    gain: float = field(default=15.0, metadata={"help": "action per metre of position error"})
    grasp_height: float = field(default=0.0, metadata={"help": "grasp point above the object origin (m)"})
    carry_height: float = field(default=0.25, metadata={"help": "gripper height while carrying (m)"})
    release_height: float = field(
        default=0.15, metadata={"help": "gripper height above the container at which to open (m)"}
    )
    open_width: float = field(
        default=0.07, metadata={"help": "finger opening (m) under which the gripper counts as closing"}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.carry_height > self.release_height:
            raise ConfigError(
                f"carry_height={self.carry_height!r} <= release_height={self.release_height!r}; carry higher "
                "than the release point"
            )

    def _waypoint(self, eef: np.ndarray, opening: float, poses: np.ndarray) -> tuple[np.ndarray, float]:
        grasp = poses[:3] + np.r_[0.0, 0.0, self.grasp_height]
        container = poses[7:10]
        horizontal = float(np.linalg.norm(grasp[:2] - eef[:2]))
        vertical = float(eef[2] - grasp[2])
        at_object = horizontal < 2 * self.tolerance and abs(vertical) < 2 * self.tolerance
        over_container = float(np.linalg.norm(grasp[:2] - container[:2])) < 2 * self.tolerance
        if at_object and opening < self.open_width:  # holding (or closing on) the object
            if over_container:
                release = container[2] + self.release_height
                if eef[2] < release + self.tolerance:
                    target, gripper = eef, -1.0
                else:
                    target, gripper = np.r_[container[:2], release], 1.0
            elif eef[2] < self.carry_height - self.tolerance and horizontal < self.tolerance * 4:
                target, gripper = np.r_[eef[:2], self.carry_height], 1.0
            else:
                target, gripper = np.r_[container[:2], self.carry_height], 1.0
        elif horizontal > 2 * self.tolerance:
            target, gripper = np.r_[grasp[:2], max(grasp[2] + 0.08, eef[2])], -1.0
        elif vertical > self.tolerance:
            target, gripper = grasp, -1.0
        else:
            target, gripper = eef, 1.0
        return target, gripper


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


SCRIPTED_EXPERTS: Mapping[str, type] = {
    "robosuite:Lift": ScriptedLiftPolicy,
    "libero:libero_object": ScriptedPickPlacePolicy,
}
"""``KIND:NAME`` of an env (task ids left out) -> its scripted privileged-state expert."""


def scripted_expert(env: str) -> ScriptedLiftPolicy | ScriptedPickPlacePolicy:
    """The scripted expert for ``env`` (``robosuite:Lift``, ``libero:libero_object[/IDS]``).

    Raises:
        ConfigError: no scripted expert exists for the env.

    Example:
        >>> type(scripted_expert("libero:libero_object/0")).__name__
        'ScriptedPickPlacePolicy'
    """
    key = env.partition("/")[0]
    if key not in SCRIPTED_EXPERTS:
        raise ConfigError(
            f"env={env!r} has no scripted expert with privileged state; the envs that have one: "
            f"{sorted(SCRIPTED_EXPERTS)}"
        )
    return SCRIPTED_EXPERTS[key]()
