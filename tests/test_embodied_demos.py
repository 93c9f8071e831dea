"""The SFT stage's data on the real LIBERO simulator: the scripted pick-and-place expert and its demos.

The expert (privileged object and basket poses) must solve a ``libero_object`` init state on its own,
and ``collect_demonstrations`` must keep the (observation, clean action) pairs of successful episodes
only: a demonstration that failed would teach the policy to fail.
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import embodied_marks

from wmrl_algos.errors import ConfigError
from wmrl_envs.embodied import LiberoEnv
from wmrl_envs.embodied.demos import collect_demonstrations
from wmrl_envs.embodied.policies import ScriptedPickPlacePolicy, scripted_expert

pytestmark = embodied_marks()


@pytest.fixture(scope="module")
def libero_object():
    env = LiberoEnv("libero_object", cameras=(), object_states=True)
    yield env
    env.close()


def test_scripted_pick_place_puts_the_alphabet_soup_in_the_basket(libero_object: LiberoEnv) -> None:
    expert = ScriptedPickPlacePolicy()
    obs, info = libero_object.reset(seed=0, options={"task_id": 0, "init_index": 0})
    assert "alphabet soup" in info["instruction"]
    steps, terminated = 0, False
    while not terminated and steps < 200:
        obs, reward, terminated, _, info = libero_object.step(expert.act([obs], [info])[0])
        steps += 1
    assert terminated and info["success"] and reward == 1.0
    assert steps < 150, "the waypoints reach the basket well inside libero_object's 280-step limit"


def test_demonstrations_keep_only_the_successful_episodes(libero_object: LiberoEnv) -> None:
    # Episode 0: task 0 (soup, solved); episode 1: the same task cut off after 20 steps (a failure).
    solved = collect_demonstrations(
        libero_object, ScriptedPickPlacePolicy(), episodes=1, horizon=200, noise=0.0, tasks=[0]
    )
    cut = collect_demonstrations(
        libero_object, ScriptedPickPlacePolicy(), episodes=1, horizon=20, noise=0.0, tasks=[0]
    )
    assert solved.successes == 1 and len(solved) == solved.steps, "every step of the success is a pair"
    assert len(solved.observations) == len(solved.actions) and solved.actions.shape[1] == 7
    assert np.abs(solved.actions).max() <= 1.0 and set(np.unique(solved.actions[:, 6])) == {-1.0, 1.0}
    assert cut.episodes == 1 and cut.successes == 0 and len(cut) == 0 and cut.steps == 20


def test_demonstrations_refuse_an_empty_task_list(libero_object: LiberoEnv) -> None:
    with pytest.raises(ConfigError, match="tasks"):
        collect_demonstrations(libero_object, ScriptedPickPlacePolicy(), episodes=1, horizon=1, tasks=[])


def test_the_expert_of_an_env_is_found_by_suite_and_refused_where_none_exists() -> None:
    assert isinstance(scripted_expert("libero:libero_object/0,5"), ScriptedPickPlacePolicy)
    with pytest.raises(ConfigError, match="libero:libero_object"):
        scripted_expert("libero:libero_10/0")
