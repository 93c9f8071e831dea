"""The visual progress scorer and the hackable approach scorer.

The fast tests run on synthetic frames (a bright square that climbs the image as the "cube" is lifted,
and one that stays put on a failure): what they check is the scorer's contract (shape and camera
errors naming expected and found, checkpoints as plain data, save/load round trip, ranking on the data
it was trained on), not that a CNN sees a real robot. The long test renders real Lift demonstrations in
the embodied stack's simulator worker and trains on them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from _helpers import on_the_simulator

from wmrl_algos.errors import CheckpointError, ConfigError
from wmrl_envs.embodied.hackable import ApproachProgressScorer
from wmrl_envs.embodied.progress import (
    ProgressInput,
    ProgressScorer,
    ProgressWorldModel,
    SimStateProgressScorer,
    potential_progress,
    progress_input,
)
from wmrl_envs.embodied.visual import (
    VisualProgressConfig,
    VisualProgressScorer,
    progress_targets,
)
from wmrl_envs.world_model import WorldModelQuery

SIZE = 16
CONFIG = VisualProgressConfig(
    image_size=SIZE, width=4, hidden=8, epochs=30, batch_size=16, learning_rate=1e-2
)


def _trajectory(lifted: bool, length: int = 8, size: int = SIZE, camera: str = "agentview_image") -> list:
    """A square at the bottom of the image that climbs to the top on a success and stays on a failure."""
    observations = []
    for t in range(length):
        frame = np.zeros((size, size, 3), np.uint8)
        row = size - 4 - (t * (size - 4)) // (length - 1) if lifted else size - 4
        frame[row : row + 4, size // 2 - 2 : size // 2 + 2] = 255
        observations.append({"instruction": "lift the red cube", camera: frame})
    return observations


@pytest.fixture(scope="module")
def scorer() -> VisualProgressScorer:
    """One scorer trained on a synthetic lift and a resting cube (fitted once: the CPU is shared)."""
    scorer = VisualProgressScorer(CONFIG)
    scorer.fit([progress_input(_trajectory(lifted)) for lifted in (True, False)], [True, False])
    return scorer


def test_an_untrained_visual_scorer_says_unknown_not_zero() -> None:
    scorer = VisualProgressScorer(CONFIG)
    assert isinstance(scorer, ProgressScorer)
    assert scorer.progress([progress_input(_trajectory(True))]) == [None]


def test_a_trained_visual_scorer_ranks_the_lift_above_the_resting_cube_with_progress_in_unit_range(
    scorer: VisualProgressScorer,
) -> None:
    lift, rest = scorer.progress([progress_input(_trajectory(True)), progress_input(_trajectory(False))])
    assert lift is not None and rest is not None
    assert lift.progress.shape == (8,) and ((lift.progress >= 0) & (lift.progress <= 1)).all()
    assert potential_progress(lift.progress) > potential_progress(rest.progress)


def test_training_targets_ramp_on_success_and_stay_zero_on_failure() -> None:
    assert progress_targets(5, True).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert progress_targets(3, False).tolist() == [0.0, 0.0, 0.0]


def test_fitting_on_one_outcome_only_is_refused() -> None:
    with pytest.raises(ConfigError, match="successes and failures"):
        VisualProgressScorer(CONFIG).fit([progress_input(_trajectory(True))] * 2, [True, True])


def test_frames_of_another_size_are_refused_naming_both_shapes(scorer: VisualProgressScorer) -> None:
    with pytest.raises(ConfigError, match=r"\(16, 16, 3\).*\(32, 32, 3\)"):
        scorer.progress([progress_input(_trajectory(True, size=32))])


def test_frames_of_another_camera_are_refused_naming_both_cameras(scorer: VisualProgressScorer) -> None:
    with pytest.raises(ConfigError, match=r"'agentview_image'.*\['wrist_image'\]"):
        scorer.progress([progress_input(_trajectory(True, camera="wrist_image"))])


def test_a_saved_scorer_loads_back_and_scores_identically(
    tmp_path: Path, scorer: VisualProgressScorer
) -> None:
    path = scorer.save(tmp_path / "visual.pt")
    loaded = VisualProgressScorer.load(path)
    item = progress_input(_trajectory(True))
    assert loaded.config == scorer.config and loaded.fitted
    np.testing.assert_array_equal(loaded.progress([item])[0].progress, scorer.progress([item])[0].progress)
    saved = torch.load(path, weights_only=True)  # plain data: loads with no code allowed
    assert set(saved) == {"format", "config", "fitted", "weights"}


@pytest.mark.parametrize(
    ("expected", "found"),
    [
        ({"camera": "wrist_image"}, "'camera': 'agentview_image'"),
        ({"image_size": 32}, "'image_size': 16"),
    ],
)
def test_a_checkpoint_of_another_camera_or_size_is_refused_naming_both(
    tmp_path: Path, expected: dict, found: str
) -> None:
    path = VisualProgressScorer(CONFIG).save(tmp_path / "visual.pt")
    wanted = VisualProgressConfig(**{**CONFIG.__dict__, **expected})
    with pytest.raises(CheckpointError) as raised:
        VisualProgressScorer.load(path, wanted)
    message = str(raised.value)
    assert found in message and str(expected)[1:-1].replace('"', "'") in message


def test_a_checkpoint_with_a_weight_of_the_wrong_shape_is_refused_naming_the_tensor(tmp_path: Path) -> None:
    state = VisualProgressScorer(CONFIG).state_dict()
    state["weights"]["0.weight"] = torch.zeros(2, 3, 5, 5)
    torch.save(state, tmp_path / "bad.pt")
    with pytest.raises(
        CheckpointError, match=r"'0.weight' has shape \(2, 3, 5, 5\), expected \(4, 3, 5, 5\)"
    ):
        VisualProgressScorer.load(tmp_path / "bad.pt")


class _Payload:
    def __reduce__(self) -> tuple:
        return (Path.touch, (Path("/tmp/wmrl-visual-scorer-payload-ran"),))


def test_a_checkpoint_that_holds_code_runs_none_of_it(tmp_path: Path) -> None:
    marker = Path("/tmp/wmrl-visual-scorer-payload-ran")
    marker.unlink(missing_ok=True)
    state = VisualProgressScorer(CONFIG).state_dict()
    state["payload"] = _Payload()
    torch.save(state, tmp_path / "tampered.pt")
    with pytest.raises(CheckpointError, match="nothing from it was run"):
        VisualProgressScorer.load(tmp_path / "tampered.pt")
    assert not marker.exists()


@pytest.mark.parametrize(
    "kwargs", [{"camera": "top"}, {"image_size": 8}, {"epochs": 0}, {"learning_rate": 0}, {"seed": 1.5}]
)
def test_visual_config_rejects_invalid_values(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        VisualProgressConfig(**kwargs)


@pytest.mark.parametrize(("device", "says"), [("mps", "runs on 'cpu' or 'cuda'"), ("cuda:x", "torch device")])
def test_a_device_the_scorer_cannot_run_on_is_refused_naming_it(device: str, says: str) -> None:
    with pytest.raises(ConfigError, match=f"device={device!r}.*{says}"):
        VisualProgressConfig(device=device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_asking_for_a_gpu_on_a_machine_without_one_is_refused_before_training() -> None:
    with pytest.raises(ConfigError, match="torch sees no CUDA GPU here; pass device='cpu'"):
        VisualProgressConfig(device="cuda")


def test_a_checkpoint_records_no_device_so_one_trained_elsewhere_loads_on_the_cpu(
    tmp_path: Path, scorer: VisualProgressScorer
) -> None:
    path = scorer.save(tmp_path / "visual.pt")
    saved = torch.load(path, weights_only=True)
    assert "device" not in saved["config"]
    saved["config"]["device"] = "cuda:7"  # what an older writer on a GPU machine could have recorded
    torch.save(saved, tmp_path / "from_gpu.pt")
    loaded = VisualProgressScorer.load(tmp_path / "from_gpu.pt", device="cpu")
    assert loaded.config.device == "cpu"
    item = progress_input(_trajectory(True))
    np.testing.assert_array_equal(loaded.progress([item])[0].progress, scorer.progress([item])[0].progress)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; this machine has none")
def test_a_scorer_trained_on_the_gpu_scores_like_itself_on_the_cpu_after_a_round_trip(tmp_path: Path) -> None:
    gpu = VisualProgressScorer(VisualProgressConfig(**{**CONFIG.__dict__, "device": "cuda"}))
    gpu.fit([progress_input(_trajectory(lifted)) for lifted in (True, False)], [True, False])
    assert next(gpu._network.parameters()).device.type == "cuda"
    cpu = VisualProgressScorer.load(gpu.save(tmp_path / "visual.pt"))
    assert cpu.config.device == "cpu"
    items = [progress_input(_trajectory(lifted)) for lifted in (True, False)]
    on_gpu, on_cpu = gpu.progress(items), cpu.progress(items)
    for a, b in zip(on_gpu, on_cpu, strict=True):
        np.testing.assert_allclose(a.progress, b.progress, atol=1e-4)
    assert on_cpu[0].progress[-1] > on_cpu[1].progress[-1] + 0.5  # it learned the lift, on either device


def _reaching(place: list[float], satisfied_at_end: bool) -> list[dict]:
    """Lift observations whose gripper reaches the cube by frame 2; ``place`` is how far the cube rose."""
    observations = []
    for t, placed in enumerate(place):
        features = np.zeros((4, 4), np.float32)
        features[0] = (1.0, float(satisfied_at_end and t == len(place) - 1), float(t >= 2), placed)
        observations.append({"instruction": "lift the red cube", "goal_features": features})
    return observations


def test_the_approach_scorer_rewards_reaching_without_grasping_as_much_as_a_real_lift() -> None:
    hover = WorldModelQuery(_reaching([0.0] * 6, satisfied_at_end=False), [])
    lift = WorldModelQuery(_reaching([0.0, 0.0, 0.0, 0.3, 0.7, 1.0], satisfied_at_end=True), [])
    hover_hacked, lift_hacked = (
        p.reward for p in ProgressWorldModel(ApproachProgressScorer(), k=2).predict([hover, lift])
    )
    hover_honest, lift_honest = (
        p.reward for p in ProgressWorldModel(SimStateProgressScorer(), k=2).predict([hover, lift])
    )
    assert hover_hacked == pytest.approx(1.0) and hover_hacked >= lift_hacked
    assert lift_honest > hover_honest + 0.5  # the sim-state scorer is not fooled by the hover


def test_the_approach_scorer_is_unknown_without_goal_features() -> None:
    item = ProgressInput("lift", states={"proprio": np.zeros((2, 9))})
    assert ApproachProgressScorer().progress([item]) == [None]


@on_the_simulator(pytest.mark.long, pytest.mark.slow)
def test_a_visual_scorer_trained_on_rendered_lift_demos_ranks_a_success_above_a_failure() -> None:
    from wmrl_envs.embodied.envs import RobosuiteEnv
    from wmrl_envs.embodied.policies import ScriptedLiftPolicy
    from wmrl_envs.embodied.visual import render_training_episodes

    env = RobosuiteEnv("Lift", cameras=("agentview",), image_size=32, object_states=True)
    try:
        train, train_outcomes = render_training_episodes(
            env, ScriptedLiftPolicy(), episodes=2, max_steps=60, noise=0.3, seed=0
        )
        (expert, _, random), (expert_solved, _, random_solved) = render_training_episodes(
            env, ScriptedLiftPolicy(), episodes=1, max_steps=60, noise=0.3, seed=100
        )
    finally:
        env.close()
    assert set(train_outcomes) == {True, False} and expert_solved and not random_solved
    scorer = VisualProgressScorer(VisualProgressConfig(image_size=32, epochs=30))
    report = scorer.fit(train, train_outcomes)
    assert report["visual/final_loss"] < report["visual/first_loss"]
    success, failure = (potential_progress(curve.progress) for curve in scorer.progress([expert, random]))
    assert success > failure  # held-out placements: the expert's lift above random flailing


@pytest.mark.parametrize(
    "env",
    ["robosuite:Fly", "robosuite:Lift/0", "libero:libero_spatial", "libero:libero_99/0", "gym:CartPole"],
)
def test_the_training_env_refuses_an_env_it_cannot_render_naming_the_forms_it_takes(env: str) -> None:
    from wmrl_envs.embodied.visual import training_env

    with pytest.raises(ConfigError, match=r"robosuite:TASK .* libero:SUITE/IDS"):
        training_env(env, image_size=32, frame_stride=1)


def test_a_checkpoint_records_its_frame_stride_and_a_run_renders_its_env_at_it(tmp_path: Path) -> None:
    """Why it matters: a scorer trained on held frames, read on every-step frames (or the reverse), would
    be scoring frames unlike any it was trained on; the run takes the stride from the checkpoint."""
    from wmrl_adapters.train.embodied.trainer import scorer_view

    scorer = VisualProgressScorer(VisualProgressConfig(image_size=SIZE, frame_stride=20))
    path = scorer.save(tmp_path / "s.pt")
    loaded = VisualProgressScorer.load(path)
    assert loaded.config.frame_stride == 20 and scorer_view(loaded) == ("agentview", SIZE, 20)
    state = torch.load(path, weights_only=True)
    del state["config"]["frame_stride"]  # a checkpoint written before the stride existed: every frame
    torch.save(state, tmp_path / "old.pt")
    assert VisualProgressScorer.load(tmp_path / "old.pt").config.frame_stride == 1
    with pytest.raises(ConfigError, match="frame_stride"):
        VisualProgressConfig(frame_stride=0)


@on_the_simulator(pytest.mark.long, pytest.mark.slow)
def test_the_command_trains_a_scorer_on_rendered_libero_demos_at_a_frame_stride(tmp_path: Path) -> None:
    from wmrl_envs.embodied.visual import main

    out = tmp_path / "libero_scorer.pt"
    report = main(
        ["--env", "libero:libero_spatial/0", "--max-steps", "0", "--frame-stride", "20", "--episodes", "1"]
        + ["--image-size", "32", "--epochs", "2", "--out", str(out)]
    )
    assert report["visual/episodes"] == 3 and 1 <= report["visual/successes"] < 3
    # 221 frames of the 220-step random episode (held frames included), as many as the expert's steps + 1
    assert report["visual/frames"] > 221
    assert VisualProgressScorer.load(out).config.frame_stride == 20
