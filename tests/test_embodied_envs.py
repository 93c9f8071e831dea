"""LiberoEnv and RobosuiteEnv against the real simulators (LIBERO, robosuite 1.4, MuJoCo).

They run in the embodied stack's venv (``bash scripts/embodied.sh`` builds it; CI builds it through
scripts/test.sh). Without that venv these tests skip, saying how to build it. Most checks use
robosuite's Lift without cameras (milliseconds per step); LIBERO is checked without cameras (seconds per
reset) except one small-camera test, since offscreen rendering on CPU dominates the cost.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from _helpers import embodied_marks
from gymnasium.error import InvalidAction, ResetNeeded
from gymnasium.utils.env_checker import check_env

from wmrl_algos.errors import ConfigError
from wmrl_envs.embodied import (
    LiberoEnv,
    RenderingUnavailableError,
    RobosuiteEnv,
    embodied_env_ids,
)

pytestmark = embodied_marks()


@pytest.fixture(scope="module")
def lift() -> RobosuiteEnv:
    env = RobosuiteEnv("Lift", cameras=())
    yield env
    env.close()


@pytest.fixture(scope="module")
def libero() -> LiberoEnv:
    env = LiberoEnv("libero_10", cameras=(), object_states=True)
    yield env
    env.close()


def test_every_suite_and_task_has_a_registered_id_with_its_step_limit() -> None:
    ids = embodied_env_ids()
    assert {"wmrl/Libero10-v0", "wmrl/LiberoSpatial-v0", "wmrl/LiberoObject-v0", "wmrl/LiberoGoal-v0"} <= set(
        ids
    )
    assert {"wmrl/RobosuiteLift-v0", "wmrl/RobosuiteStack-v0", "wmrl/RobosuitePickPlace-v0"} <= set(ids)
    assert gym.spec("wmrl/Libero10-v0").max_episode_steps == 520


def test_robosuite_env_runs_robosuite_1_4_from_the_libero_stack(lift: RobosuiteEnv) -> None:
    versions = lift.simulator_versions
    assert versions["robosuite"].startswith("1.4") and versions["python"].startswith("3.12")


def test_lift_observation_matches_its_space_and_reward_is_sparse(lift: RobosuiteEnv) -> None:
    obs, info = lift.reset(seed=3)
    assert lift.observation_space.contains(obs)
    assert "agentview_image" not in obs and obs["proprio"].shape == (9,)
    assert info == {"success": False, "instruction": "lift the red cube", "task_id": 0, "task_name": "Lift"}
    for _ in range(5):
        obs, reward, terminated, truncated, info = lift.step(np.zeros(7, np.float32))
    assert (reward, terminated, truncated, info["success"]) == (0.0, False, False, False)


def test_same_seed_gives_the_same_start_and_another_seed_another(lift: RobosuiteEnv) -> None:
    first = lift.reset(seed=11)[0]["object_state"]
    again = lift.reset(seed=11)[0]["object_state"]
    other = lift.reset(seed=12)[0]["object_state"]
    np.testing.assert_allclose(first, again)
    assert not np.allclose(first[:3], other[:3])


@pytest.mark.parametrize("action", [np.zeros(6), np.zeros((7, 1)), np.r_[np.zeros(6), np.nan], "up"])
def test_bad_actions_raise_gymnasiums_invalid_action(lift: RobosuiteEnv, action: object) -> None:
    lift.reset(seed=0)
    with pytest.raises(InvalidAction):
        lift.step(action)


def test_step_before_reset_raises_reset_needed() -> None:
    env = RobosuiteEnv("Lift", cameras=())
    try:
        with pytest.raises(ResetNeeded):
            env.step(np.zeros(7))
    finally:
        env.close()


def test_nan_simulator_state_ends_the_episode_with_sim_error_and_reset_recovers(lift: RobosuiteEnv) -> None:
    lift.reset(seed=0)
    lift.set_joint_velocities(np.full(7, np.nan))
    obs, reward, terminated, truncated, info = lift.step(np.zeros(7))
    assert truncated and not terminated and reward == 0.0 and "not finite" in info["sim_error"]
    with pytest.raises(ResetNeeded):
        lift.step(np.zeros(7))
    obs, _ = lift.reset(seed=0)
    assert np.isfinite(obs["proprio"]).all()


def test_a_dead_simulator_worker_ends_the_episode_and_reset_starts_a_new_one() -> None:
    env = RobosuiteEnv("Lift", cameras=())
    try:
        env.reset(seed=0)
        env._worker._process.kill()  # what a MuJoCo segfault or an OOM kill does to the worker
        env._worker._process.wait()
        _, reward, terminated, truncated, info = env.step(np.zeros(7))
        assert truncated and not terminated and reward == 0.0 and "worker" in info["sim_error"]
        obs, _ = env.reset(seed=0)
        assert env.observation_space.contains(obs)
    finally:
        env.close()


def test_scripted_lift_succeeds_with_reward_one_and_termination(lift: RobosuiteEnv) -> None:
    from wmrl_envs.embodied.policies import ScriptedLiftPolicy

    policy = ScriptedLiftPolicy()
    obs, info = lift.reset(seed=1)
    for _ in range(200):
        obs, reward, terminated, truncated, info = lift.step(policy.act([obs], [info])[0])
        if terminated or truncated:
            break
    assert terminated and reward == 1.0 and info["success"]
    assert obs["goal_features"][0, 1] == 1.0  # the satisfied column agrees with the simulator


def test_lift_passes_gymnasiums_env_checker() -> None:
    env = gym.make("wmrl/RobosuiteLift-v0", cameras=(), disable_env_checker=True)
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


def test_cameras_and_rgb_array_render_give_upright_uint8_images() -> None:
    env = RobosuiteEnv(
        "Lift", cameras=("agentview", "robot0_eye_in_hand"), image_size=64, render_mode="rgb_array"
    )
    try:
        obs, _ = env.reset(seed=0)
        assert obs["agentview_image"].shape == (64, 64, 3) and obs["agentview_image"].dtype == np.uint8
        assert obs["wrist_image"].shape == (64, 64, 3)
        frame = env.render()
        assert frame.shape == (64, 64, 3) and frame.std() > 0
        # Upright: the floor/table (bright, lower half) vs the background (upper half) differ.
        assert not np.allclose(frame[:32].mean(), frame[32:].mean())
    finally:
        env.close()


def test_a_frame_stride_renders_every_nth_step_and_the_success_step_and_holds_the_frame_between() -> None:
    """Frames of a stride-3 camera: new on steps 3, 6..., the same array in between, and on a due step the
    very frame a stride-1 camera renders in the same state (same seed, same actions)."""
    actions = np.random.default_rng(0).uniform(-1.0, 1.0, (7, 7)).astype(np.float32)
    frames = {}
    for stride in (1, 3):
        env = RobosuiteEnv("Lift", cameras=("agentview",), image_size=32, frame_stride=stride)
        try:
            obs, _ = env.reset(seed=5)
            frames[stride] = [obs["agentview_image"]] + [env.step(a)[0]["agentview_image"] for a in actions]
        finally:
            env.close()
    strided, every = frames[3], frames[1]
    for step in range(len(actions) + 1):
        due = step - step % 3
        assert np.array_equal(strided[step], every[due]), step
    assert not np.array_equal(every[1], every[0]) and not np.array_equal(strided[3], strided[2])


def test_a_frame_stride_renders_the_step_that_succeeds_whatever_its_count() -> None:
    """The success frame is the one a progress scorer must see: the scripted expert lifts the cube at a
    step that is not a multiple of the stride, and that step's frame is fresh, equal to a stride-1
    camera's (the expert reads state only, so both envs take the same steps)."""
    from wmrl_envs.embodied.policies import ScriptedLiftPolicy

    frames, ends = {}, {}
    for stride in (1, 1000):
        env = RobosuiteEnv("Lift", cameras=("agentview",), image_size=32, frame_stride=stride)
        expert = ScriptedLiftPolicy()
        try:
            obs, info = env.reset(seed=0)
            frames[stride] = [obs["agentview_image"]]
            for _ in range(80):
                obs, _, terminated, _, info = env.step(expert.act([obs], [info])[0])
                frames[stride].append(obs["agentview_image"])
                if terminated:
                    break
            ends[stride] = info["success"]
        finally:
            env.close()
    assert ends == {1: True, 1000: True} and len(frames[1]) == len(frames[1000]) > 2
    assert np.array_equal(frames[1000][-1], frames[1][-1])  # rendered on success
    assert np.array_equal(frames[1000][-2], frames[1000][0])  # held since the reset before it


def test_a_frame_stride_below_one_is_a_config_error() -> None:
    for stride in (0, -2, 1.5, True):
        with pytest.raises(ConfigError, match="frame_stride"):
            RobosuiteEnv("Lift", cameras=("agentview",), image_size=32, frame_stride=stride)


def test_no_rendering_backend_raises_an_error_naming_mujoco_gl() -> None:
    with pytest.raises(RenderingUnavailableError, match="MUJOCO_GL"):
        RobosuiteEnv(
            "Lift", cameras=("agentview",), image_size=32, worker_env={"MUJOCO_GL": "glfw", "DISPLAY": ""}
        )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"cameras": ("top",)},
        {"cameras": ("agentview", "agentview")},
        {"image_size": 8},
        {"render_mode": "human"},
    ],
)
def test_invalid_constructor_arguments_are_config_errors(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        RobosuiteEnv("Lift", **kwargs)


def test_libero_resets_to_the_suites_fixed_initial_states(libero: LiberoEnv) -> None:
    assert libero.n_tasks == 10 and "basket" in libero.instructions[0]
    obs, info = libero.reset(seed=0, options={"task_id": 0, "init_index": 3})
    again, _ = libero.reset(seed=99, options={"task_id": 0, "init_index": 3})
    np.testing.assert_allclose(obs["object_state"], again["object_state"], atol=1e-4)
    assert info["task_id"] == 0 and info["instruction"] == libero.instructions[0]
    assert libero.observation_space.contains(obs)
    assert obs["goal_features"][:, 0].sum() >= 1  # the BDDL goal has at least one condition


def test_libero_steps_with_sparse_reward_and_rejects_out_of_range_tasks(libero: LiberoEnv) -> None:
    obs, info = libero.reset(seed=0, options={"task_id": 1})
    obs, reward, terminated, truncated, info = libero.step(np.zeros(7))
    assert (reward, terminated, info["success"], info["task_id"]) == (0.0, False, False, 1)
    with pytest.raises(ConfigError):
        libero.reset(options={"task_id": 10})
    with pytest.raises(ConfigError):
        libero.reset(options={"task_id": 0, "init_index": 500})
    with pytest.raises(ConfigError):
        libero.reset(options={"camera": 1})


@pytest.mark.slow
def test_libero_passes_gymnasiums_env_checker(libero: LiberoEnv) -> None:
    check_env(libero, skip_render_check=True)
