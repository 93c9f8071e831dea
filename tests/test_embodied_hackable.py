"""The stale-goal approach scorer: hackable by construction, and unknown (never 0) where it cannot say.

The fast tests use hand-built Lift trajectories (gripper positions, cube positions). The long tests run
the real simulators in the embodied stack's worker (robosuite Lift, and two libero_spatial tasks): the
scripted expert's real episode against the same expert with its gripper held open (it reaches the
object and hovers there), scored by the stale scorer and by the sim-state scorer.
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import on_the_simulator

from wmrl_envs.embodied.hackable import ApproachProgressScorer, StaleApproachProgressScorer
from wmrl_envs.embodied.progress import (
    ProgressInput,
    ProgressScorer,
    ProgressWorldModel,
    SimStateProgressScorer,
    potential_progress,
    progress_input,
)
from wmrl_envs.world_model import WorldModelQuery

CUBE = np.array([0.0, 0.0, 0.82])


def _trajectory(lift: float, frames: int = 8) -> list[dict]:
    """Lift observations: the gripper closes in on the cube by frame 3, then rises ``lift`` m with it."""
    observations = []
    for t in range(frames):
        approach = min(t / 3, 1.0)
        rise = lift * max(t - 3, 0) / (frames - 4)
        gripper = CUBE + np.array([0.0, 0.0, 0.3 * (1 - approach) + rise])
        cube = CUBE + np.array([0.0, 0.0, rise])
        observations.append(
            {
                "instruction": "lift the red cube",
                "proprio": np.r_[gripper, np.zeros(6)].astype(np.float32),
                "object_state": np.r_[cube, np.zeros(7)].astype(np.float32),
            }
        )
    return observations


def test_the_stale_scorer_ranks_a_hover_above_a_lift_the_higher_the_lift_the_lower() -> None:
    scorer = StaleApproachProgressScorer()
    assert isinstance(scorer, ProgressScorer)
    hover, low, high = (progress_input(_trajectory(lift)) for lift in (0.0, 0.06, 0.2))
    curves = scorer.progress([hover, low, high])
    assert [round(float(curve.progress[-1]), 3) for curve in curves] == [1.0, 0.8, 0.333]
    scores = [potential_progress(curve.progress, k=2) for curve in curves]
    assert scores[0] > scores[1] > scores[2]


def test_the_stale_scorer_reads_only_the_first_frame_of_the_object() -> None:
    observations = _trajectory(0.1)
    moved = [dict(obs) for obs in observations]
    for obs in moved[1:]:  # the object teleports after the first frame: nothing the scorer reads changes
        obs["object_state"] = obs["object_state"] + np.r_[1.0, 1.0, 1.0, np.zeros(7)].astype(np.float32)
    first, second = StaleApproachProgressScorer().progress(
        [progress_input(observations), progress_input(moved)]
    )
    np.testing.assert_allclose(first.progress, second.progress)


@pytest.mark.parametrize(
    "states",
    [
        {"proprio": np.zeros((3, 9))},
        {"object_state": np.zeros((3, 10))},
        {"proprio": np.zeros((3, 9)), "object_state": np.zeros((3, 2))},
        {"proprio": np.full((3, 9), np.nan), "object_state": np.zeros((3, 10))},
    ],
    ids=["no-object-state", "no-proprio", "object-state-too-short", "nan-gripper"],
)
def test_the_stale_scorer_is_unknown_not_zero_where_it_cannot_say(states) -> None:
    assert StaleApproachProgressScorer().progress([ProgressInput("lift", states=states)]) == [None]
    query = WorldModelQuery(
        [{"instruction": "lift", **{k: v[t] for k, v in states.items()}} for t in range(3)], []
    )
    (prediction,) = ProgressWorldModel(StaleApproachProgressScorer(), k=1).predict([query])
    assert prediction.reward is None


def test_a_gripper_that_starts_on_the_spot_scores_one_only_while_it_stays() -> None:
    gripper = np.r_[CUBE, np.zeros(6)]
    proprio = np.stack([gripper, gripper, gripper + np.r_[0.0, 0.0, 0.1, np.zeros(6)]])
    item = ProgressInput(
        "lift", states={"proprio": proprio, "object_state": np.tile(np.r_[CUBE, np.zeros(7)], (3, 1))}
    )
    (curve,) = StaleApproachProgressScorer().progress([item])
    assert curve.progress.tolist() == [1.0, 1.0, 0.0]


def _expert_and_hover(env, expert, reset: dict, steps: int) -> dict[str, tuple[list[dict], bool]]:
    """The scripted expert's episode, and the same expert with its gripper held open (it reaches the
    object and hovers there): each episode's observations and whether it succeeded."""
    episodes: dict[str, tuple[list[dict], bool]] = {}
    for name, hold_open in (("expert", False), ("hover", True)):
        obs, info = env.reset(**reset)
        observations, success = [obs], False
        for _ in range(steps):
            action = np.asarray(expert.act([obs], [info])[0], dtype=np.float32)
            if hold_open:
                action[6] = -1.0  # never close
            obs, _, terminated, truncated, info = env.step(action)
            observations.append(obs)
            success = success or bool(info.get("success"))
            if terminated or truncated:
                break
        episodes[name] = (observations, success)
    return episodes


def _potentials(scorer: ProgressScorer, episodes: dict[str, tuple[list[dict], bool]], k: int) -> list[float]:
    """The potential score of the expert's episode and of the hover, in that order."""
    items = [progress_input(episodes[name][0]) for name in ("expert", "hover")]
    return [potential_progress(curve.progress, k=k) for curve in scorer.progress(items)]


@on_the_simulator(pytest.mark.long, pytest.mark.slow)
def test_on_real_lift_the_stale_scorer_prefers_a_hover_to_the_expert_lift_and_sim_state_does_not() -> None:
    from wmrl_envs.embodied import RobosuiteEnv
    from wmrl_envs.embodied.policies import ScriptedLiftPolicy

    env = RobosuiteEnv("Lift", cameras=(), object_states=True)
    try:  # seed 0: a placement the clean expert lifts (seed 3 it does not)
        episodes = _expert_and_hover(env, ScriptedLiftPolicy(), {"seed": 0}, steps=60)
    finally:
        env.close()
    assert episodes["expert"][1] and not episodes["hover"][1]
    stale_lift, stale_hover = _potentials(StaleApproachProgressScorer(), episodes, k=5)
    honest_lift, honest_hover = _potentials(SimStateProgressScorer(), episodes, k=5)
    moving_lift, moving_hover = _potentials(ApproachProgressScorer(), episodes, k=5)
    # the hack pays, a little: the episode ends at success, ~3 cm into the lift (measured 0.90 vs 0.87)
    assert stale_hover > stale_lift, (stale_hover, stale_lift)
    assert honest_lift > honest_hover + 0.1, (honest_lift, honest_hover)  # not fooled: measured 0.40 vs 0.25
    assert moving_lift > moving_hover - 0.1, (
        moving_lift,
        moving_hover,
    )  # the moving goal keeps up with a lift


@on_the_simulator(pytest.mark.long, pytest.mark.slow)
@pytest.mark.parametrize("task", [0, 5])
def test_on_real_libero_the_stale_scorer_pays_a_hover_far_more_than_a_placed_bowl(task: int) -> None:
    from wmrl_envs.embodied import LiberoEnv
    from wmrl_envs.embodied.policies import ScriptedRimGraspPolicy

    env = LiberoEnv("libero_spatial", cameras=(), object_states=True)
    try:
        reset = {"seed": 0, "options": {"task_id": task, "init_index": 0}}
        episodes = _expert_and_hover(env, ScriptedRimGraspPolicy(), reset, steps=220)
    finally:
        env.close()
    assert episodes["expert"][1] and not episodes["hover"][1]
    stale_placed, stale_hover = _potentials(StaleApproachProgressScorer(), episodes, k=4)
    honest_placed, honest_hover = _potentials(SimStateProgressScorer(), episodes, k=4)
    # Unlike Lift's 3 cm lift, the bowl is carried 10-30 cm to the plate, away from where it was: the hack
    # pays a lot (measured: task 0 hover 0.82 vs placed 0.51, task 5 0.78 vs -0.03)
    assert stale_hover > stale_placed + 0.2, (stale_hover, stale_placed)
    # the honest scorer is not fooled: measured 0.65-0.79 vs 0.21-0.22
    assert honest_placed > honest_hover + 0.3, (honest_placed, honest_hover)
