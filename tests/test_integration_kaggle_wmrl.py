"""WMRL end to end on the Kaggle env: rubric world model, anchors executed in the real sandbox, corrections.

This is the paper's loop at the smallest scale that still exercises every real part: the built-in suite,
the bubblewrap sandbox, the grader, ``GroupedRollout`` in simulate mode (non-anchor groups never execute),
the rubric world model, and ``CorrectionLoop``. The policy is a fixed rotation through reference solutions
(no LLM), so the scores are reproducible.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from wmrl_algos.loop import CorrectionConfig, CorrectionLoop
from wmrl_envs.kaggle.env import KaggleEnv
from wmrl_envs.kaggle.references import reference_solutions
from wmrl_envs.kaggle.suite import KaggleSuite, build_suite
from wmrl_envs.kaggle.world_models.rubric import RubricWorldModel
from wmrl_envs.rollouts import GroupedRollout, RolloutConfig, RolloutTask

pytestmark = pytest.mark.integration

COMPETITION = "concrete-strength"
TURNS = 2
"""Two executions per episode: the trajectory score sums per-execution ladder values on both sides."""
SOLUTIONS = ("prior", "linear_numeric", "random_forest", "syntax_error_on_purpose")


class ReferencePolicy:
    """Trajectory ``i`` of every group writes reference solution ``i`` (a broken one included)."""

    def __init__(self, codes: Sequence[str]) -> None:
        self.codes = list(codes)
        self.calls = 0

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]) -> list[str]:
        self.calls += 1
        return [f"```python\n{self.codes[i % len(self.codes)]}```" for i in range(len(observations))]


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> KaggleSuite:
    root: Path = tmp_path_factory.mktemp("suite")
    return KaggleSuite(build_suite(root, ids=[COMPETITION], progress=False))


def test_anchor_pairs_and_world_model_scores_share_one_scale_and_only_anchors_execute(
    suite: KaggleSuite,
) -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed: the local sandbox cannot run here")
    competition = suite.get(COMPETITION)
    by_name = {solution.name: solution.code for solution in reference_solutions(competition)}
    codes = [by_name[name] for name in SOLUTIONS[:-1]] + ["def broken(:\n    pass\n"]
    executed: list[str] = []

    def make_env() -> KaggleEnv:
        env = KaggleEnv(COMPETITION, suite=suite, sandbox="local", max_turns=TURNS, timeout_s=120)
        original = env.execute

        def counting_execute(action: str) -> Any:
            executed.append(action)
            return original(action)

        env.execute = counting_execute  # type: ignore[method-assign]
        return env

    loop = CorrectionLoop(CorrectionConfig(anchor_fraction=0.25, min_anchor_groups=1, seed=0))
    rollout = GroupedRollout(make_env, RubricWorldModel(), RolloutConfig(group_size=4, mode="simulate"))
    try:
        tasks = [RolloutTask(f"{COMPETITION}/{g}", {"competition": COMPETITION}) for g in range(4)]
        anchors = loop.plan(len(tasks))
        groups = rollout.run(tasks, ReferencePolicy(codes), anchors=anchors, seed=0)
    finally:
        rollout.close()

    assert sum(anchors) == 1
    assert len(executed) == 4 * TURNS, "only the anchor group's four trajectories ran in the sandbox"
    anchor_group = next(group for group in groups if group.anchor)
    assert anchor_group.real is not None
    real = dict(zip(SOLUTIONS, anchor_group.real, strict=True))
    predicted = dict(zip(SOLUTIONS, anchor_group.predicted, strict=True))
    assert real["syntax_error_on_purpose"] == 0.0 and predicted["syntax_error_on_purpose"] == 0.0
    for name in ("prior", "linear_numeric", "random_forest"):
        assert 0.5 * TURNS <= real[name] <= TURNS, f"{name} is graded valid: 0.5 + 0.5 x position, per turn"
        assert 0.5 * TURNS <= predicted[name] <= TURNS, "the prediction is on the same ladder scale"
    assert real["random_forest"] > real["prior"]
    for group in groups:
        if not group.anchor:
            assert group.real is None
            assert all(score is not None and 0.0 <= score <= TURNS for score in group.predicted)

    result = loop.correct(groups)
    advantages, mask = result.flat()
    assert mask.sum() == 16 and all(math.isfinite(value) for value in advantages)
    assert result.metrics["wmrl/anchor_groups"] == 1.0
    assert result.metrics["wmrl/pairs"] == 4.0
