"""Robometer through LeRobot's RobometerRewardModel, end to end on a real rollout.

The real Robometer-4B weights are not reachable here (no hub at run time), so these tests build a
TINY, RANDOMLY INITIALISED Robometer (~0.5 M parameters, an offline Qwen3-VL processor with a byte-level
tokenizer): its progress values are meaningless, but every step of the real code path runs inside the
embodied stack (LeRobot's encoder processor step, the Qwen3-VL backbone, Robometer's progress head,
LeRobot's per-frame windowing recipe). On a GPU machine with the weights cached, the same class loads
``RobometerScorer("lerobot/Robometer-4B", device="cuda")`` (docs/embodied.md).
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import embodied_marks

from wmrl_algos.errors import ConfigError
from wmrl_envs.embodied import (
    ProgressInput,
    ProgressScorer,
    ProgressWorldModel,
    RobosuiteEnv,
)
from wmrl_envs.wrapper import WorldModelWrapper

pytestmark = embodied_marks(pytest.mark.slow)


@pytest.fixture(scope="module")
def tiny_robometer():
    from wmrl_adapters.robometer import RobometerScorer

    scorer = RobometerScorer(tiny_random=True, stride=4)
    yield scorer
    scorer.close()


@pytest.mark.long  # the tiny Robometer's load: 38 s in CI; the long pass runs it
def test_tiny_random_robometer_is_a_progress_scorer_built_offline(tiny_robometer) -> None:
    assert isinstance(tiny_robometer, ProgressScorer)
    assert tiny_robometer.parameters > 100_000 and tiny_robometer.name == "robometer-tiny-random"


@pytest.mark.long  # the tiny Robometer's load: 38 s in CI; the long pass runs it
def test_tiny_robometer_scores_a_real_lift_rollout_as_the_anchor_world_model(tiny_robometer) -> None:
    env = RobosuiteEnv("Lift", cameras=("agentview",), image_size=64)
    wrapped = WorldModelWrapper(
        env, ProgressWorldModel(tiny_robometer, k=2), mode="score", scoring="episode", max_episode_steps=9
    )
    try:
        wrapped.reset(seed=0, options={"anchor": True})
        rng = np.random.default_rng(0)
        while True:
            _, reward, terminated, truncated, info = wrapped.step(rng.uniform(-1, 1, 7).astype(np.float32))
            if terminated or truncated:
                break
    finally:
        wrapped.close()
    block = info["wmrl"]
    assert block["anchor"] and block["real"] == 0.0  # the simulator's sparse success is the anchor
    assert block["predicted"] is not None and -1.0 <= block["predicted"] <= 1.0


@pytest.mark.long  # the tiny Robometer's load: 38 s in CI; the long pass runs it
def test_every_frame_gets_a_progress_value_in_the_unit_interval(tiny_robometer) -> None:
    frames = np.random.default_rng(1).integers(0, 255, (10, 64, 64, 3), dtype=np.uint8)
    [curve] = tiny_robometer.progress(
        [ProgressInput("lift the red cube", frames={"agentview_image": frames})]
    )
    assert curve.progress.shape == (10,) and ((curve.progress >= 0) & (curve.progress <= 1)).all()


@pytest.mark.long  # the tiny Robometer's load: 38 s in CI; the long pass runs it
def test_a_trajectory_without_the_camera_is_unknown_not_zero(tiny_robometer) -> None:
    item = ProgressInput("lift", states={"proprio": np.zeros((5, 9))})
    assert tiny_robometer.progress([item]) == [None]


@pytest.mark.parametrize(
    "kwargs", [{}, {"tiny_random": True, "stride": 0}, {"tiny_random": True, "window": True}]
)
def test_invalid_arguments_are_config_errors(kwargs: dict) -> None:
    from wmrl_adapters.robometer import RobometerScorer

    with pytest.raises(ConfigError):
        RobometerScorer(**kwargs)
