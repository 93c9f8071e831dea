"""The embodied track inside WMRL's loop: grouped rollouts on the real simulator, scored by progress.

A step of two Lift groups (scripted policy, sim-state progress as the world model) runs through
GroupedRollout with ``mode="score", scoring="episode"``: the anchor group must carry the simulator's
sparse success as its real score next to the collapsed progress, the other group only the prediction,
and the learned scorer must be trainable from exactly those anchor groups.
"""

from __future__ import annotations

import pytest
from _helpers import embodied_marks

from wmrl_envs.embodied import ProgressWorldModel, RobosuiteEnv, SimStateProgressScorer
from wmrl_envs.embodied.learned import LearnedProgressConfig, LearnedProgressScorer
from wmrl_envs.embodied.policies import NoisyPolicy, ScriptedLiftPolicy
from wmrl_envs.rollouts import GroupedRollout, RolloutConfig, RolloutTask

pytestmark = embodied_marks(pytest.mark.integration)


@pytest.mark.long  # out of the default suite (among its slowest); CI's long pass runs it
def test_grouped_rollout_pairs_collapsed_progress_with_real_success_on_anchor_groups() -> None:
    config = RolloutConfig(group_size=2, mode="score", scoring="episode", max_turns=80, max_workers=2)
    world_model = ProgressWorldModel(SimStateProgressScorer())
    policy = NoisyPolicy(ScriptedLiftPolicy(), noise=0.3, seed=0)
    tasks = [RolloutTask("lift"), RolloutTask("lift")]
    with GroupedRollout(lambda: RobosuiteEnv("Lift", cameras=()), world_model, config) as rollout:
        anchor, plain = rollout.run(tasks, policy, anchors=[True, False], seed=0)
    assert anchor.anchor and anchor.real is not None and set(anchor.real) <= {0.0, 1.0}
    assert plain.real is None
    for group in (anchor, plain):
        assert all(p is not None and -1.0 <= p <= 1.0 for p in group.predicted)
    # Every trajectory's reward before its last step is withheld (0.0), as the sparse setting requires.
    for trajectory in plain.trajectories:
        assert all(r == 0.0 for r in trajectory.rewards[:-1])
        assert isinstance(trajectory.observations[0], dict) and "goal_features" in trajectory.observations[0]
    # Successes, when the anchor group has one, are scored above its failures.
    scores = dict(zip(anchor.real, anchor.predicted, strict=True))
    if 0.0 in scores and 1.0 in scores:
        assert scores[1.0] > scores[0.0]
    learned = LearnedProgressScorer(LearnedProgressConfig(members=2, epochs=5))
    assert learned.push_groups([anchor, plain]) == 2
