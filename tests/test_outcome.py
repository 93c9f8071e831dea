"""The reward ladder (docs/design.md, section "Reward ladder") and MLE-Dojo's position score."""

from __future__ import annotations

import pytest

from wmrl_envs.kaggle.outcome import RewardLadder, position_score


@pytest.mark.parametrize(
    ("status", "expected"),
    [("malformed", 0.0), ("syntax_error", 0.0), ("runtime_error", 0.1), ("no_submission", 0.2)],
)
def test_reward_ladder_per_status(status: str, expected: float) -> None:
    assert RewardLadder().reward(status, None) == expected  # type: ignore[arg-type]


def test_valid_reward_is_half_plus_half_the_position() -> None:
    ladder = RewardLadder()
    assert ladder.reward("valid", 0.0) == 0.5
    assert ladder.reward("valid", 1.0) == 1.0


def test_an_infrastructure_failure_is_none_not_zero() -> None:
    assert RewardLadder().reward("sandbox_error", 1.0) is None


def test_a_timeout_is_the_solutions_failure_and_gets_the_runtime_error_rung() -> None:
    ladder = RewardLadder(runtime_error=0.25)
    assert ladder.reward("timeout", None) == ladder.reward("runtime_error", None) == 0.25, (
        "stalling a crash into a timeout must not turn a low reward into an unknown one"
    )


def test_valid_without_a_position_is_unknown() -> None:
    assert RewardLadder().reward("valid", None) is None


def test_position_score_matches_mle_dojo_definition() -> None:
    board = (0.95, 0.9, 0.8, 0.7)
    # p = 1 + index of the first entry beaten or tied, position = (N - p + 1) / N
    assert position_score(0.99, board, higher_is_better=True) == 1.0
    assert position_score(0.9, board, higher_is_better=True) == 0.75  # ties the 2nd entry: p = 2
    assert position_score(0.85, board, higher_is_better=True) == 0.5
    assert position_score(0.1, board, higher_is_better=True) == 0.0  # beats none: p = N + 1


def test_position_score_respects_lower_is_better() -> None:
    board = (1.0, 2.0, 3.0, 4.0)
    assert position_score(0.5, board, higher_is_better=False) == 1.0
    assert position_score(2.5, board, higher_is_better=False) == 0.5
    assert position_score(9.0, board, higher_is_better=False) == 0.0


def test_position_score_is_order_independent_in_the_board() -> None:
    assert position_score(0.85, (0.7, 0.95, 0.8, 0.9), True) == position_score(
        0.85, (0.95, 0.9, 0.8, 0.7), True
    )
