"""Reference policies: the scripted Lift, pick-and-place and rim-grasp controllers' phases, noise and random
actions."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_algos.errors import ConfigError
from wmrl_envs.embodied.policies import (
    NoisyPolicy,
    RandomPolicy,
    ScriptedLiftPolicy,
    ScriptedPickPlacePolicy,
    ScriptedRimGraspPolicy,
)


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


_DOWN = np.r_[1.0, 0.0, 0.0, 0.0]  # the gripper pointing down, its fingers closing along the world's y axis
_PLATE = (0.3, 0.0, 0.9)


def _bowl_obs(eef: tuple[float, float, float], bowl: tuple[float, float, float], opening: float) -> dict:
    proprio = np.r_[eef, _DOWN, opening / 2, -opening / 2].astype(np.float32)
    poses = np.r_[bowl, np.zeros(4), _PLATE, np.zeros(4), np.zeros(56)].astype(np.float32)
    return {"proprio": proprio, "object_state": poses}


# The bowl's origin is its bottom: resting at z 0.9 its rim points on the fingers' axis are (0, +-0.045)
# and the fingers close on the wall at z 0.9 + 0.053 - 0.03 = 0.923 (the plate is along x: the gripper
# takes the rim point it comes to).
@pytest.mark.parametrize(
    ("eef", "bowl", "opening", "moves", "gripper"),
    [
        ((0.2, 0.1, 1.2), (0.0, 0.0, 0.9), 0.078, "towards x<0, height held", -1.0),  # far: over the rim
        ((0.0, 0.045, 1.1), (0.0, 0.0, 0.9), 0.078, "down", -1.0),  # over the rim: descend, open
        ((0.0, 0.045, 0.925), (0.0, 0.0, 0.9), 0.078, "still", 1.0),  # at the wall: close
        ((0.0, 0.045, 0.925), (0.0, 0.0, 0.9), 0.05, "still", 1.0),  # closing: no lift before it grips
        ((0.0, 0.045, 0.925), (0.0, 0.0, 0.9), 0.01, "up", 1.0),  # closed on the wall: lift straight up
        ((0.0, -0.045, 0.925), (0.0, 0.0, 0.9), 0.01, "up", 1.0),  # the other rim point holds it too
        ((0.0, 0.045, 0.99), (0.0, 0.0, 0.9), 0.005, "down", -1.0),  # closed on nothing: open, try again
        ((0.0, 0.045, 1.123), (0.0, 0.0, 1.1), 0.01, "towards x>0", 1.0),  # carried high: to the plate
        ((0.3, 0.045, 1.023), (0.3, 0.0, 1.0), 0.01, "down", 1.0),  # bowl over the plate: lower it
        ((0.3, 0.045, 0.978), (0.3, 0.0, 0.955), 0.01, "still", -1.0),  # bowl low over the plate: let go
    ],
)
def test_scripted_rim_grasp_reads_its_phase_from_the_observation(eef, bowl, opening, moves, gripper) -> None:
    action = ScriptedRimGraspPolicy().act([_bowl_obs(eef, bowl, opening)], [{}])[0]
    assert action.shape == (7,) and action[6] == gripper and np.abs(action).max() <= 1.0
    assert np.allclose(action[3:6], 0), "the fingers keep their yaw: the grasp point follows them"
    expected = {
        "towards x<0, height held": action[0] < 0 and action[2] == 0,
        "towards x>0": action[0] > 0,
        "down": action[2] < 0,
        "still": np.allclose(action[:3], 0),
        "up": action[2] > 0 and np.allclose(action[:2], 0),
    }
    assert expected[moves], action


def test_the_rim_grasp_takes_the_plate_side_keeps_the_point_it_is_over_and_steers_the_tilted_bowl() -> None:
    policy = ScriptedRimGraspPolicy()
    bowl, plate_along_minus_y = (0.0, 0.0, 0.9), (0.0, -0.3, 0.9)
    for eef, side in (((0.2, 0.2, 1.2), -1.0), ((0.0, 0.2, 1.2), -1.0), ((0.0, 0.04, 1.0), 1.0)):
        # from afar the rim point on the plate's side, even where the other is nearer; over a rim point,
        # that one (it is the one the fingers hold once closed, wherever the plate is by then)
        obs = _bowl_obs(eef, bowl, 0.078)
        obs["object_state"][7:10] = plate_along_minus_y
        grasp = policy.grasp_point(obs["proprio"], obs["object_state"])
        assert np.allclose(grasp, [0.0, side * 0.045, 0.923], atol=1e-6), (eef, grasp)
    # Hanging tilted from its rim, the bowl is 1.5 cm short of the plate in x while the hand is over it:
    # the expert moves by the bowl's offset, so it keeps moving (a hand-based target would stop here).
    action = policy.act([_bowl_obs((0.3, 0.045, 1.123), (0.285, 0.0, 1.1), 0.01)], [{}])[0]
    assert action[0] > 0 and action[2] < 0 and action[6] == 1.0


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"rim_radius": 0.0}, "rim_radius"),
        ({"lift_step": -0.01}, "lift_step"),
        ({"carry_height": 0.05}, "carry_height"),
        ({"tolerance": 0.0}, "tolerance"),
    ],
)
def test_scripted_rim_grasp_rejects_bad_settings_naming_them(kwargs: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        ScriptedRimGraspPolicy(**kwargs)


def test_scripted_rim_grasp_needs_object_states() -> None:
    with pytest.raises(ConfigError, match="object_states"):
        ScriptedRimGraspPolicy().act([{"proprio": np.zeros(9)}], [{}])
