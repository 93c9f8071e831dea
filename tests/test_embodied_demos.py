"""The SFT stage's data on the real LIBERO simulator: the scripted pick-and-place expert and its demos.

The experts (privileged object and container poses) must solve a ``libero_object`` and a
``libero_spatial`` init state on their own, and ``collect_demonstrations`` must keep the (observation,
clean action) pairs of successful episodes only: a demonstration that failed would teach the policy to
fail. ``scripted_expert`` accepts exactly the tasks each suite's committed expert table measures as
solved.

Every test that runs a simulator episode is in the long pass (``-m long``): building the LIBERO scene
alone takes about a minute on two loaded cores.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _helpers import on_the_simulator

from wmrl_algos.errors import ConfigError
from wmrl_envs.embodied.policies import (
    SCRIPTED_EXPERTS,
    SOLVED_TASKS,
    ScriptedPickPlacePolicy,
    ScriptedRimGraspPolicy,
    scripted_expert,
)

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "embodied_experts"
TABLES = {
    "libero_object": RESULTS / "table.json",
    "libero_spatial": RESULTS / "libero_spatial" / "table.json",
}


@pytest.fixture(scope="module")
def libero_object():
    from wmrl_envs.embodied import LiberoEnv

    env = LiberoEnv("libero_object", cameras=(), object_states=True)
    yield env
    env.close()


def _expert_episode(
    env: Any, task: int, init_index: int, limit: int, expert: Any = None
) -> tuple[dict[str, Any], float, bool, int]:
    expert = expert or ScriptedPickPlacePolicy()
    obs, info = env.reset(seed=0, options={"task_id": task, "init_index": init_index})
    steps, terminated, reward = 0, False, 0.0
    while not terminated and steps < limit:
        obs, reward, terminated, _, info = env.step(expert.act([obs], [info])[0])
        steps += 1
    return info, reward, terminated, steps


@on_the_simulator(pytest.mark.long)
def test_scripted_pick_place_puts_the_alphabet_soup_in_the_basket(libero_object) -> None:
    info, reward, terminated, steps = _expert_episode(libero_object, task=0, init_index=0, limit=280)
    assert "alphabet soup" in info["instruction"]
    assert terminated and info["success"] and reward == 1.0
    assert steps < 250, "the waypoints reach the basket inside libero_object's 280-step limit"


@on_the_simulator(pytest.mark.long)
def test_the_height_aware_grasp_puts_the_tall_milk_carton_in_the_basket(libero_object) -> None:
    # The milk (task 7) is taller than the fingers are long: the old grasp at its origin stalled on top.
    info, reward, terminated, steps = _expert_episode(libero_object, task=7, init_index=0, limit=280)
    assert "milk" in info["instruction"]
    assert terminated and info["success"] and reward == 1.0, f"not in the basket after {steps} steps"


@on_the_simulator(pytest.mark.long)
def test_the_rim_grasp_puts_the_black_bowl_on_the_plate() -> None:
    # libero_spatial's bowl is wider than the open gripper: the expert closes the fingers across its wall.
    from wmrl_envs.embodied import LiberoEnv

    env = LiberoEnv("libero_spatial", cameras=(), object_states=True)
    try:
        info, reward, terminated, steps = _expert_episode(
            env, 0, 0, limit=220, expert=ScriptedRimGraspPolicy()
        )
    finally:
        env.close()
    assert "black bowl" in info["instruction"] and "plate" in info["instruction"]
    assert terminated and info["success"] and reward == 1.0, f"not on the plate after {steps} steps"


@on_the_simulator(pytest.mark.long)
def test_demonstrations_keep_only_the_successful_episodes(libero_object) -> None:
    from wmrl_envs.embodied.demos import collect_demonstrations

    # Episode 0: task 0 (soup, solved); episode 1: the same task cut off after 20 steps (a failure).
    solved = collect_demonstrations(
        libero_object, ScriptedPickPlacePolicy(), episodes=1, horizon=280, noise=0.0, tasks=[0]
    )
    cut = collect_demonstrations(
        libero_object, ScriptedPickPlacePolicy(), episodes=1, horizon=20, noise=0.0, tasks=[0]
    )
    assert solved.successes == 1 and len(solved) == solved.steps, "every step of the success is a pair"
    assert len(solved.observations) == len(solved.actions) and solved.actions.shape[1] == 7
    assert np.abs(solved.actions).max() <= 1.0 and set(np.unique(solved.actions[:, 6])) == {-1.0, 1.0}
    assert cut.episodes == 1 and cut.successes == 0 and len(cut) == 0 and cut.steps == 20


@on_the_simulator(pytest.mark.long)
def test_demonstrations_refuse_an_empty_task_list(libero_object) -> None:
    from wmrl_envs.embodied.demos import collect_demonstrations

    with pytest.raises(ConfigError, match="tasks"):
        collect_demonstrations(libero_object, ScriptedPickPlacePolicy(), episodes=1, horizon=1, tasks=[])


def test_the_expert_of_an_env_is_found_by_suite_and_refused_where_none_exists() -> None:
    assert isinstance(scripted_expert("libero:libero_object/0,5"), ScriptedPickPlacePolicy)
    assert isinstance(scripted_expert("libero:libero_spatial/0,1"), ScriptedRimGraspPolicy)
    with pytest.raises(ConfigError, match="libero:libero_object"):
        scripted_expert("libero:libero_10/0")


@pytest.mark.parametrize("suite", sorted(TABLES))
def test_scripted_expert_accepts_exactly_the_tasks_the_measured_table_solves(suite: str) -> None:
    table = json.loads(TABLES[suite].read_text())
    key = f"libero:{suite}"
    assert table["suite"] == suite and table.get("expert", "ScriptedPickPlacePolicy") == (
        SCRIPTED_EXPERTS[key].__name__
    ), "the table measured the expert that scripted_expert returns"
    solved = [row["task"] for row in table["rows"] if row["success"] >= table["solved_at"]]
    assert tuple(solved) == SOLVED_TASKS[key], "SOLVED_TASKS is the committed table's"
    for row in table["rows"]:
        env = f"{key}/{row['task']}"
        if row["task"] in solved:
            assert isinstance(scripted_expert(env), SCRIPTED_EXPERTS[key])
        else:
            with pytest.raises(ConfigError, match=rf"tasks \[{row['task']}\].*{solved}"):
                scripted_expert(env)


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ("libero:libero_object", "every task"),
        ("libero:libero_object/0,x", "integers"),
    ],
)
def test_a_libero_env_without_solved_task_ids_is_refused_naming_solved_ones(env: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle) as raised:
        scripted_expert(env)
    assert str(SOLVED_TASKS["libero:libero_object"][0]) in str(raised.value)


def test_the_expert_turns_its_fingers_to_a_yawed_object_before_descending() -> None:
    policy = ScriptedPickPlacePolicy()
    down = np.r_[1.0, 0.0, 0.0, 0.0]  # the gripper pointing down, its fingers closing along the world's y
    yawed = np.r_[0.0, 0.0, np.sin(np.pi / 8), np.cos(np.pi / 8)]  # an upright box turned by 45 degrees
    obs = {
        "proprio": np.r_[0.0, 0.0, 0.2, down, 0.04, -0.04],
        "object_state": np.r_[0.0, 0.0, 0.02, yawed, 0.0, 0.3, 0.0, np.zeros(60)],
    }
    action = policy.act([obs], [{}])[0]
    assert action[5] > 0.5 and action[2] >= 0.0, "turn first, descend once aligned"
    aligned = dict(obs, object_state=np.r_[0.0, 0.0, 0.02, 0.0, 0.0, 0.0, 1.0, 0.0, 0.3, 0.0, np.zeros(60)])
    action = policy.act([aligned], [{}])[0]
    assert abs(action[5]) < 1e-6 and action[2] < 0.0
