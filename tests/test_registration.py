"""Tests of Gymnasium registration (wmrl_envs/registration.py)."""

from __future__ import annotations

import inspect
import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import wmrl_envs
from wmrl_envs import registration
from wmrl_envs.registration import COSTLY_TOY_ID, KAGGLE_ID, register_envs, registered_ids
from wmrl_envs.toy import CachedWorldModel, CostlyToyEnv, ToyWorldModel
from wmrl_envs.wrapper import WorldModelWrapper


def test_importing_the_package_registers_the_costly_toy_env():
    assert COSTLY_TOY_ID in registered_ids()
    assert isinstance(gym.make(COSTLY_TOY_ID).unwrapped, CostlyToyEnv)
    assert gym.make(COSTLY_TOY_ID, dim=4).observation_space.shape == (7,)


def test_registering_again_is_a_silent_no_op():
    before = registered_ids()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert register_envs() == before
    assert wmrl_envs.register_envs is register_envs


def test_kaggle_env_is_registered_without_importing_its_stack():
    assert KAGGLE_ID == "wmrl/Kaggle-v0" and KAGGLE_ID in registered_ids()
    assert gym.spec(KAGGLE_ID).entry_point == "wmrl_envs.kaggle.env:KaggleEnv"
    source = inspect.getsource(registration)
    assert "when that module exists" not in source and "issue" not in source  # no working notes left


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version:UserWarning")
def test_check_env_passes_on_the_registered_costly_toy_env_bare_and_wrapped():
    check_env(gym.make(COSTLY_TOY_ID).unwrapped)
    for mode, scoring in [("simulate", "step"), ("score", "step"), ("score", "episode")]:
        wrapped = WorldModelWrapper(
            gym.make(COSTLY_TOY_ID).unwrapped,
            CachedWorldModel(ToyWorldModel()),
            mode=mode,
            scoring=scoring,
        )
        check_env(wrapped)


@pytest.mark.integration
@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version:UserWarning")
def test_check_env_passes_on_the_registered_kaggle_env_bare_and_wrapped(tmp_path):
    from dataclasses import replace

    from wmrl_envs.kaggle.leaderboard import Leaderboard
    from wmrl_envs.kaggle.suite import KaggleSuite, build_suite
    from wmrl_envs.kaggle.world_models.rubric import RubricWorldModel
    from wmrl_envs.sandbox.unsafe import UnsafeSandbox

    suite = KaggleSuite(build_suite(tmp_path, ids=["concrete-strength"], progress=False))
    board = Leaderboard((5.0, 8.0, 12.0, 16.0), higher_is_better=False)
    competition = replace(
        suite.get("concrete-strength", with_leaderboard=False), leaderboard=board, public_leaderboard=board
    )
    sandbox = UnsafeSandbox()
    try:
        bare = gym.make(KAGGLE_ID, competition=competition, sandbox=sandbox).unwrapped
        check_env(bare, skip_render_check=True)
        for mode in ("simulate", "score"):
            real = gym.make(KAGGLE_ID, competition=competition, sandbox=sandbox).unwrapped
            model = CachedWorldModel(RubricWorldModel())
            wrapped = WorldModelWrapper(real, model, mode=mode)
            check_env(wrapped, skip_render_check=True)
            assert wrapped.ledger.world_model_queries > 0
            assert (wrapped.ledger.real_steps > 0) == (mode == "score")
    finally:
        sandbox.close()
