"""The embodied track's ``--world-model`` names: each builds its scorer, and a real run scores with it.

The names (``sim-state``, ``learned``, ``approach``, ``approach-stale``, ``visual:PATH``) are built
without a simulator; the runs use the real robosuite Lift simulator in the embodied stack's worker, at
tiny sizes (2 groups of 2 episodes, a few steps). The visual scorer of these runs is a real
:class:`VisualProgressScorer` fitted on a handful of synthetic frames: the runs check that the trainer
renders the scorer's camera at its size and scores every episode with it, not what it has learned.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _helpers import on_the_simulator
from wmrl_adapters.train.embodied.config import EmbodiedConfig
from wmrl_adapters.train.embodied.trainer import EmbodiedTrainer, build_progress_scorer, scorer_view

from wmrl_algos.errors import CheckpointError, ConfigError
from wmrl_envs.embodied.hackable import ApproachProgressScorer, StaleApproachProgressScorer
from wmrl_envs.embodied.learned import LearnedProgressScorer
from wmrl_envs.embodied.progress import SimStateProgressScorer, progress_input
from wmrl_envs.embodied.visual import VisualProgressConfig, VisualProgressScorer

TINY = dict(steps=1, groups=2, group_size=2, horizon=4, eval_samples=0, workers=1, progress=False)


def _visual_checkpoint(path: Path, image_size: int = 16, *, fitted: bool = True) -> Path:
    """A real visual scorer of ``image_size`` frames, fitted on synthetic frames (or left untrained)."""
    scorer = VisualProgressScorer(VisualProgressConfig(image_size=image_size, epochs=2))
    if fitted:
        frames = [np.full((image_size, image_size, 3), 25 * t, np.uint8) for t in range(6)]
        trajectory = [{"instruction": "lift", "agentview_image": frame} for frame in frames]
        scorer.fit([progress_input(trajectory)] * 2, [True, False])
    return scorer.save(path)


def test_each_world_model_name_builds_its_scorer_and_only_visual_asks_for_a_camera(tmp_path):
    checkpoint = _visual_checkpoint(tmp_path / "visual.pt", image_size=32)
    built = {
        name: build_progress_scorer(EmbodiedConfig(world_model=name))
        for name in ("sim-state", "learned", "approach", "approach-stale", f"visual:{checkpoint}")
    }
    assert [type(scorer) for scorer in built.values()] == [
        SimStateProgressScorer,
        LearnedProgressScorer,
        ApproachProgressScorer,
        StaleApproachProgressScorer,
        VisualProgressScorer,
    ]
    assert [scorer.name for scorer in built.values()][2:4] == ["approach", "approach-stale"]
    views = [scorer_view(scorer) for scorer in built.values()]
    assert views == [None, None, None, None, ("agentview", 32, 1)]


def test_the_help_of_world_model_lists_every_name():
    text = EmbodiedConfig.__dataclass_fields__["world_model"].metadata["help"]
    for name in ("sim-state", "learned", "approach", "approach-stale", "visual:PATH"):
        assert name in text


@pytest.mark.parametrize(
    ("value", "needles"),
    [
        ("robometer", ("'robometer'", "approach", "visual:PATH")),
        ("visual", ("'visual'", "visual:PATH")),
        ("visual:", ("'visual:'", "names no checkpoint", "VisualProgressScorer.save")),
        ("visual:/no/such.pt", ("--world-model", "'/no/such.pt'", "does not exist", "checkpoint")),
    ],
)
def test_a_bad_world_model_name_is_refused_quoting_it(value, needles):
    with pytest.raises(ConfigError) as caught:
        EmbodiedConfig(world_model=value)
    for needle in needles:
        assert needle in str(caught.value)


def test_a_file_that_is_no_visual_checkpoint_is_refused_naming_it(tmp_path):
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="junk.pt"):
        build_progress_scorer(EmbodiedConfig(world_model=f"visual:{junk}"))


def test_an_untrained_visual_checkpoint_is_refused_before_it_leaves_every_episode_unscored(tmp_path):
    untrained = _visual_checkpoint(tmp_path / "untrained.pt", fitted=False)
    with pytest.raises(ConfigError, match="untrained scorer"):
        build_progress_scorer(EmbodiedConfig(world_model=f"visual:{untrained}"))


def test_wmrl_train_refuses_a_missing_visual_checkpoint_naming_the_flag(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "wmrl_adapters.cli", "train", "--env", "robosuite:Lift",
         "--world-model", "visual:missing.pt", "--out", str(tmp_path / "run")],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert run.returncode != 0
    assert "--world-model visual:PATH 'missing.pt' does not exist" in run.stderr
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "run").exists()


@on_the_simulator(pytest.mark.long, pytest.mark.slow)
@pytest.mark.parametrize("name", ["approach", "approach-stale", "visual"])
def test_a_short_real_run_scores_every_episode_with_the_named_scorer(tmp_path, name):
    world_model = name if name != "visual" else f"visual:{_visual_checkpoint(tmp_path / 'visual.pt')}"
    trainer = EmbodiedTrainer(EmbodiedConfig(algo="wm", world_model=world_model, **TINY), tmp_path / "run")
    summary = trainer.run()
    final = summary["final"]
    assert trainer.world_model.name == f"progress:{name}:potential"
    assert final["compute/sim_episodes"] == 4 and final["reward/predicted_unknown"] == 0
    assert np.isfinite(final["reward/predicted_mean"]), "every episode scored by the named scorer"
    images = {key for key in trainer._envs[0].observation_space.spaces if key.endswith("_image")}
    if name == "visual":  # no --cameras given: the trainer asked for the scorer's camera at its size
        assert images == {"agentview_image"}
        assert trainer._envs[0].observation_space["agentview_image"].shape == (16, 16, 3)
    else:
        assert images == set(), "a state scorer renders nothing"


@on_the_simulator(pytest.mark.long, pytest.mark.slow)
def test_a_visual_checkpoint_of_another_size_than_the_env_renders_is_refused_naming_both(tmp_path):
    from wmrl_envs.embodied import RobosuiteEnv

    checkpoint = _visual_checkpoint(tmp_path / "visual.pt", image_size=16)
    config = EmbodiedConfig(algo="wm", world_model=f"visual:{checkpoint}", **TINY)
    made: list[RobosuiteEnv] = []

    def make() -> RobosuiteEnv:
        made.append(RobosuiteEnv("Lift", cameras=("agentview",), image_size=32, object_states=True))
        return made[-1]

    with pytest.raises(ConfigError) as caught:
        EmbodiedTrainer(config, tmp_path / "run", make_env=make)
    assert "(16, 16, 3)" in str(caught.value) and "(32, 32, 3)" in str(caught.value)
    assert not (tmp_path / "run").exists(), "refused before the run directory was written"
    assert all(env._worker is None for env in made), "and its simulator worker stopped"
