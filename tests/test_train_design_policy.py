"""Tests of wmrl_adapters.train.kaggle.design_policy: sampling, stateless log-probs, resume."""

from __future__ import annotations

import pytest
import torch
from wmrl_adapters.train.kaggle.design_policy import DesignPolicy, design_action
from wmrl_adapters.train.run.policy import TrainablePolicy

from wmrl_algos.errors import CheckpointError, ConfigError
from wmrl_envs.kaggle.design import DECISIONS, Design, parse_design
from wmrl_envs.kaggle.suite import load_suite
from wmrl_envs.rollouts import Trajectory, TurnContext

LOG = "=== execution report ===\nstatus: valid\npublic_score: 0.8\n=== end of report ===\n"


@pytest.fixture(scope="module")
def suite():
    return load_suite()


def _trajectory(task_id: str, actions: tuple[str, ...], feedback: str = LOG) -> Trajectory:
    observations = ("task",) + (feedback,) * len(actions)
    n = len(actions)
    return Trajectory(task_id, 0, 0, False, observations, actions, (0.5,) * n, (0.5,) * n, (None,) * n, True)


def test_design_policy_implements_the_trainable_policy_protocol(suite):
    assert isinstance(DesignPolicy(suite.get, seed=0), TrainablePolicy)


def test_act_returns_rendered_scripts_whose_design_can_be_recovered(suite):
    policy = DesignPolicy(suite.get, seed=1)
    actions = policy.act(["task"] * 3, [{"competition_id": "titanic-survival"}] * 3)
    assert len(actions) == 3
    assert all(parse_design(action) is not None for action in actions)


def test_logprobs_are_stateless_and_independent_of_the_batch(suite):
    policy = DesignPolicy(suite.get, seed=0)
    one = _trajectory(
        "titanic-survival", (design_action(Design(model="knn"), suite.get("titanic-survival")),)
    )
    two = _trajectory(
        "concrete-strength",
        tuple(design_action(Design(model=m), suite.get("concrete-strength")) for m in ("linear", "lightgbm")),
    )
    alone, mask_alone = policy.logprobs([one])
    together, mask = policy.logprobs([one, two])
    width = len(DECISIONS)
    assert together.shape == mask.shape == (2, 2 * width)
    assert torch.allclose(alone[0], together[0, :width])
    assert mask[0, width:].sum() == 0, "a one-turn trajectory has no second-turn decisions"
    assert mask[1, width:].sum() > 0
    assert mask[0].tolist()[:width] == mask_alone[0].tolist()


def test_untrained_policy_is_uniform_over_each_decision(suite):
    policy = DesignPolicy(suite.get, seed=0)
    trajectory = _trajectory("titanic-survival", (design_action(Design(), suite.get("titanic-survival")),))
    logprobs, mask = policy.logprobs([trajectory])
    expected = torch.tensor([-torch.log(torch.tensor(float(len(c)))) for c in DECISIONS.values()])
    assert torch.allclose(logprobs[0] * mask[0], expected * mask[0], atol=1e-6)


def test_logprobs_carry_a_gradient_to_exactly_the_relevant_heads(suite):
    policy = DesignPolicy(suite.get, seed=0)
    action = design_action(Design(model="lightgbm"), suite.get("ames-house-prices"))
    logprobs, mask = policy.logprobs([_trajectory("ames-house-prices", (action,))])
    (logprobs * mask).sum().backward()
    moved = [bool(head.bias.grad is not None and head.bias.grad.abs().sum() > 0) for head in policy.heads]
    assert moved == [bool(m) for m in mask[0].tolist()]
    assert not moved[list(DECISIONS).index("scale")], "scaling cannot change a tree model"


def test_a_second_turn_conditions_on_the_previous_design_and_its_feedback(suite):
    policy = DesignPolicy(suite.get, seed=0)
    torch.nn.init.normal_(policy.heads[0].weight)
    competition = suite.get("titanic-survival")
    first = design_action(Design(model="linear"), competition)
    second = design_action(Design(model="knn"), competition)
    a = policy.logprobs([_trajectory("titanic-survival", (first, second))])[0][0, len(DECISIONS)]
    b = policy.logprobs([_trajectory("titanic-survival", (second, second))])[0][0, len(DECISIONS)]
    assert not torch.isclose(a, b)


def test_act_with_contexts_revises_from_the_history(suite):
    policy = DesignPolicy(suite.get, seed=3)
    competition = suite.get("titanic-survival")
    previous = design_action(Design(model="svm"), competition)
    context = TurnContext(0, "titanic-survival", 0, 0, ("task", LOG), (previous,), ({}, {}))
    [action] = policy.act([LOG], [{}], contexts=[context])
    assert parse_design(action) is not None


def test_state_dict_restores_the_sampling_stream(suite):
    policy = DesignPolicy(suite.get, seed=5)
    state = policy.state_dict()
    first = policy.act(["task"] * 4, [{"competition_id": "titanic-survival"}] * 4)
    fresh = DesignPolicy(suite.get, seed=99)
    fresh.load_state_dict(state)
    assert fresh.act(["task"] * 4, [{"competition_id": "titanic-survival"}] * 4) == first


def test_a_foreign_state_is_refused(suite):
    with pytest.raises(CheckpointError, match="_generator"):
        DesignPolicy(suite.get).load_state_dict({})


def test_scoring_an_action_it_did_not_write_is_an_error(suite):
    with pytest.raises(ConfigError, match="wmrl-design"):
        DesignPolicy(suite.get).logprobs([_trajectory("titanic-survival", ("print(1)",))])
