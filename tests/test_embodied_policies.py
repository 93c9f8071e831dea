"""Reference policies: the scripted Lift and pick-and-place controllers' phases, noise and random actions."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_algos.errors import ConfigError
from wmrl_envs.embodied.policies import NoisyPolicy, RandomPolicy, ScriptedLiftPolicy, ScriptedPickPlacePolicy


def _obs(eef: tuple[float, float, float], cube: tuple[float, float, float], opening: float = 0.08) -> dict:
    proprio = np.r_[eef, np.zeros(4), opening / 2, -opening / 2].astype(np.float32)
    return {"proprio": proprio, "object_state": np.r_[cube, np.zeros(7)].astype(np.float32)}


@pytest.mark.parametrize(
    ("eef", "cube", "opening", "moves", "gripper"),
    [
        ((0.2, 0.0, 1.0), (0.0, 0.0, 0.82), 0.08, "towards x<0", -1.0),  # far: go above the cube, open
        ((0.0, 0.0, 0.9), (0.0, 0.0, 0.82), 0.08, "down", -1.0),  # above: descend, open
        ((0.0, 0.0, 0.82), (0.0, 0.0, 0.82), 0.08, "still", 1.0),  # at the cube: close
        ((0.0, 0.0, 0.82), (0.0, 0.0, 0.82), 0.04, "up", 1.0),  # closed on it: lift
    ],
)
def test_scripted_lift_reads_its_phase_from_the_observation(eef, cube, opening, moves, gripper) -> None:
    action = ScriptedLiftPolicy().act([_obs(eef, cube, opening)], [{}])[0]
    assert action.shape == (7,) and action[6] == gripper and np.abs(action).max() <= 1.0
    expected = {
        "towards x<0": action[0] < 0,
        "down": action[2] < 0,
        "still": np.allclose(action[:3], 0),
        "up": action[2] > 0,
    }
    assert expected[moves]


def test_scripted_lift_needs_object_states() -> None:
    with pytest.raises(ConfigError, match="object_states"):
        ScriptedLiftPolicy().act([{"proprio": np.zeros(9)}], [{}])


def test_noisy_policy_perturbs_and_clips_and_is_seeded() -> None:
    base = ScriptedLiftPolicy()
    observation = [_obs((0.0, 0.0, 0.9), (0.0, 0.0, 0.82))]
    first = NoisyPolicy(base, noise=2.0, seed=3).act(observation, [{}])[0]
    again = NoisyPolicy(base, noise=2.0, seed=3).act(observation, [{}])[0]
    np.testing.assert_array_equal(first, again)
    assert np.abs(first).max() <= 1.0 and not np.allclose(first, base.act(observation, [{}])[0])


def test_random_policy_draws_one_action_per_observation_in_range() -> None:
    actions = RandomPolicy(seed=0).act([{}] * 5, [{}] * 5)
    assert len(actions) == 5 and all(a.shape == (7,) and np.abs(a).max() <= 1 for a in actions)


@pytest.mark.parametrize("kwargs", [{"gain": 0.0}, {"tolerance": -1.0}])
def test_scripted_lift_rejects_non_positive_settings(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        ScriptedLiftPolicy(**kwargs)


def test_noisy_policy_rejects_negative_noise() -> None:
    with pytest.raises(ConfigError):
        NoisyPolicy(RandomPolicy(), noise=-0.1)


BASKET = (0.0, 0.25, 0.0)


def _pick_obs(eef: tuple[float, float, float], item: tuple[float, float, float], opening: float) -> dict:
    proprio = np.r_[eef, np.zeros(4), opening / 2, -opening / 2].astype(np.float32)
    poses = np.r_[item, np.zeros(4), BASKET, np.zeros(4), np.zeros(56)].astype(np.float32)
    return {"proprio": proprio, "object_state": poses}


@pytest.mark.parametrize(
    ("eef", "item", "opening", "moves", "gripper"),
    [
        ((0.2, 0.0, 0.3), (0.0, 0.0, 0.04), 0.078, "towards x<0", -1.0),  # far: above the object, open
        ((0.0, 0.0, 0.12), (0.0, 0.0, 0.04), 0.078, "down", -1.0),  # above it: descend, open
        ((0.0, 0.0, 0.04), (0.0, 0.0, 0.04), 0.078, "still", 1.0),  # at it, open: close
        ((0.0, 0.0, 0.04), (0.0, 0.0, 0.04), 0.06, "up", 1.0),  # closed on it: lift straight up
        ((0.0, 0.0, 0.32), (0.0, 0.0, 0.32), 0.06, "towards y>0", 1.0),  # carried high: to the basket
        ((0.0, 0.25, 0.25), (0.0, 0.25, 0.25), 0.06, "down", 1.0),  # over the basket: lower, closed
        ((0.0, 0.25, 0.15), (0.0, 0.25, 0.15), 0.06, "still", -1.0),  # low over the basket: let go
    ],
)
def test_scripted_pick_place_reads_its_phase_from_the_observation(eef, item, opening, moves, gripper) -> None:
    action = ScriptedPickPlacePolicy().act([_pick_obs(eef, item, opening)], [{}])[0]
    assert action.shape == (7,) and action[6] == gripper and np.abs(action).max() <= 1.0
    expected = {
        "towards x<0": action[0] < 0,
        "towards y>0": action[1] > 0,
        "down": action[2] < 0,
        "still": np.allclose(action[:3], 0),
        "up": action[2] > 0 and np.allclose(action[:2], 0),
    }
    assert expected[moves]


@pytest.mark.parametrize("kwargs", [{"gain": 0.0}, {"carry_height": 0.1, "release_height": 0.2}])
def test_scripted_pick_place_rejects_bad_settings_naming_them(kwargs: dict) -> None:
    with pytest.raises(ConfigError, match=next(iter(kwargs))):
        ScriptedPickPlacePolicy(**kwargs)


def test_scripted_pick_place_needs_object_states() -> None:
    with pytest.raises(ConfigError, match="object_states"):
        ScriptedPickPlacePolicy().act([{"proprio": np.zeros(9)}], [{}])
