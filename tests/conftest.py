"""Shared test set-up: no network, no display, deterministic thread counts."""

from __future__ import annotations

import os

import pytest

from wmrl_envs.kaggle.outcome import KaggleContext

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture
def titanic_context() -> KaggleContext:
    """A small public Kaggle context (no suite needed) for world-model and backend tests."""
    return KaggleContext(
        "titanic",
        "Predict which passengers survived.",
        "train.csv: 891 rows; columns PassengerId, Survived, Age, Sex",
        "accuracy",
        True,
        "binary",
        "Survived",
        "PassengerId",
        ("Age", "Sex"),
        leaderboard=(0.82, 0.79, 0.77, 0.7),
    )
