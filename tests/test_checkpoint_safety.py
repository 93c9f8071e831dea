"""Checkpoints are data, not code (wmrl_adapters.train.run.state_io and every loader that uses it).

A tampered checkpoint is a real malicious pickle: an object whose ``__reduce__`` makes unpickling call
``os.system`` to create a marker file. Every place wmrl loads a file a run or a trainer's checkpoint
folder holds must refuse it with :class:`CheckpointError` (exit 2 and one line from the CLI) without
creating the marker: ``wmrl train --resume`` (Kaggle and embodied runs), ``wmrl eval``, ``--init`` of the
embodied trainer, TRL's ``WMRLReward.load_checkpoint`` and verl's resumed ``wmrl.pt``. A checkpoint of
the previous format (pickled numpy state) is refused with a message saying an older wmrl wrote it and
how to go on. The round-trip tests show what a real state holds (numpy and Python RNG states, numpy
arrays, tuples, optimiser state) comes back exactly.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from _helpers import run_wmrl
from wmrl_adapters.train.embodied.config import EmbodiedConfig
from wmrl_adapters.train.kaggle.config import TrainConfig
from wmrl_adapters.train.run.state_io import FORMAT_KEY, load_state, save_state, state_bytes, to_plain

from wmrl_algos.errors import CheckpointError
from wmrl_algos.loop import CorrectionConfig, CorrectionLoop
from wmrl_algos.types import ScoredGroup


class _RunsCode:
    """Unpickling this calls ``os.system(command)``: what a tampered checkpoint does."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return os.system, (self.command,)


def _tampered(path: Path, marker: Path) -> Path:
    """A checkpoint-looking file whose loading with ``weights_only=False`` creates ``marker``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"step": 1, "policy": {}, "payload": _RunsCode(f"touch {marker}")}, path)
    return path


def _older_wmrl_checkpoint(path: Path) -> Path:
    """What wmrl's previous format wrote: torch.save of the state, numpy RNG state pickled as objects."""
    torch.save(
        {
            "format": 1,
            "step": 1,
            "rng": {
                "torch": torch.get_rng_state(),
                "numpy": np.random.get_state(),
                "python": random.getstate(),
            },
            "last_eval": {},
        },
        path,
    )
    return path




def _run_dir(root: Path, config: dict[str, Any]) -> Path:
    run = root / "run"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(config))
    (run / "metrics.jsonl").write_text("")
    return run


def _loop_with_history() -> CorrectionLoop:
    """A correction loop after three real steps: calibration buffer, isotonic map, IV state, scheduler."""
    loop = CorrectionLoop(CorrectionConfig(anchor_fraction=0.5, warmup_groups=1, min_pairs=2))
    generator = np.random.default_rng(0)
    for _ in range(3):
        plan = loop.plan(4)
        groups = []
        for index in range(4):
            real = generator.random(3)
            predicted = (real + generator.normal(0, 0.2, 3)).tolist()
            anchor = bool(plan[index])
            groups.append(
                ScoredGroup(index, anchor, tuple(predicted), tuple(real.tolist()) if anchor else None)
            )
        loop.correct(groups)
    return loop


# ------------------------------------------------------------------------------------ the file format
def test_a_state_with_numpy_rng_tuples_and_arrays_comes_back_exactly(tmp_path: Path) -> None:
    np.random.seed(5)
    random.seed(5)
    generator = np.random.default_rng(3)
    state = {
        "numpy": np.random.get_state(),
        "python": random.getstate(),
        "generator": generator.bit_generator.state,
        "arrays": [
            np.arange(6, dtype=np.float32).reshape(2, 3),
            np.array(7, dtype=np.uint32),
            np.array(["a", "bc"]),
        ],
        "scalars": (np.float64(0.1), np.int64(-3), np.bool_(True)),
        "tensor": torch.randn(3),
        3: {"betas": (0.9, 0.999), "nan": float("nan"), "none": None},
    }
    save_state(tmp_path / "state.pt", state)
    loaded = load_state(tmp_path / "state.pt", if_older="n/a")
    np.random.set_state(loaded["numpy"])
    random.setstate(loaded["python"])
    restored = np.random.default_rng()
    restored.bit_generator.state = loaded["generator"]
    expected = (np.random.rand(3), random.random(), generator.random(2))
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    assert (np.random.rand(3).tolist(), random.random()) == (expected[0].tolist(), expected[1])
    assert restored.random(2).tolist() == expected[2].tolist()
    for got, want in zip(loaded["arrays"], state["arrays"], strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape and (got == want).all()
    assert [type(value) for value in loaded["scalars"]] == [np.float64, np.int64, np.bool_]
    assert loaded["scalars"] == state["scalars"] and torch.equal(loaded["tensor"], state["tensor"])
    assert loaded[3]["betas"] == (0.9, 0.999) and np.isnan(loaded[3]["nan"]) and loaded[3]["none"] is None


def test_the_saved_file_is_plain_data_for_torch_weights_only_loading(tmp_path: Path) -> None:
    path = tmp_path / "state.pt"
    path.write_bytes(state_bytes({"rng": np.random.get_state(), "loop": _loop_with_history().state_dict()}))
    assert torch.serialization.get_unsafe_globals_in_checkpoint(path) == []
    assert torch.load(path, weights_only=True)[FORMAT_KEY] == 2


def test_a_correction_loop_state_round_trips_and_the_loop_continues_identically(tmp_path: Path) -> None:
    loop = _loop_with_history()
    save_state(tmp_path / "loop.pt", loop.state_dict())
    resumed = CorrectionLoop(loop.config)
    resumed.load_state_dict(load_state(tmp_path / "loop.pt", if_older="n/a"))
    assert repr(resumed.state_dict()) == repr(loop.state_dict())
    assert resumed.plan(8).tolist() == loop.plan(8).tolist()


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"policy": {"head": object()}}, "state['policy']['head']"),
        ({"cache": {("titanic", 1): 0.5}}, "key ('titanic', 1)"),
        ({"outcomes": [np.array([object()], dtype=object)]}, "state['outcomes'][0]"),
        ({"shape": torch.Size([2, 3])}, "state['shape']"),
    ],
)
def test_saving_anything_but_plain_data_is_refused_naming_where_it_sits(value: Any, where: str) -> None:
    with pytest.raises(CheckpointError, match="cannot save") as error:
        to_plain(value)
    assert where in str(error.value)


def test_a_torn_file_is_refused_as_torn(tmp_path: Path) -> None:
    path = tmp_path / "state.pt"
    path.write_bytes(state_bytes({"step": 1})[:100])
    with pytest.raises(CheckpointError, match="torn"):
        load_state(path, if_older="n/a")


@pytest.mark.parametrize(
    "saved",
    [
        {FORMAT_KEY: 2, "state": {"shape": torch.Size([2, 3])}},  # allowed by weights_only, not by wmrl
        {
            FORMAT_KEY: 2,
            "state": {"x": {"__wmrl_type__": "numpy.ndarray", "dtype": "O", "shape": [1], "data": [1]}},
        },
        {FORMAT_KEY: 2, "state": {"x": {"__wmrl_type__": "builtins.eval", "items": ["1"]}}},
        {"step": 1, "policy": {}},  # plain, but not written by state_io: an older or foreign file
    ],
)
def test_a_file_torch_would_load_but_wmrl_never_writes_is_refused(tmp_path: Path, saved: Any) -> None:
    torch.save(saved, tmp_path / "state.pt")
    with pytest.raises(CheckpointError, match="never|not a wmrl checkpoint|not a valid"):
        load_state(tmp_path / "state.pt", if_older="n/a")


def test_a_tampered_file_is_refused_naming_the_code_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = _tampered(tmp_path / "state.pt", marker)
    with pytest.raises(CheckpointError, match="system") as error:
        load_state(path, if_older="n/a")
    assert str(path) in str(error.value) and "tampered" in str(error.value)
    assert not marker.exists()


def test_an_older_wmrl_checkpoint_is_refused_saying_so_and_how_to_go_on(tmp_path: Path) -> None:
    path = _older_wmrl_checkpoint(tmp_path / "checkpoint.pt")
    with pytest.raises(CheckpointError, match="older wmrl") as error:
        load_state(path, if_older="START A NEW RUN")
    assert "numpy" in str(error.value) and "START A NEW RUN" in str(error.value)


# ------------------------------------------------------------------------------- every loader of wmrl
@pytest.mark.parametrize(
    ("command", "config"),
    [
        ("train", TrainConfig(progress=False).to_dict()),
        ("eval", TrainConfig(progress=False).to_dict()),
        ("train", EmbodiedConfig(env="robosuite:Lift", progress=False).to_dict()),
    ],
    ids=["train-resume", "eval", "embodied-train-resume"],
)
def test_a_tampered_run_checkpoint_is_refused_by_the_cli_with_one_line_and_runs_no_code(
    tmp_path: Path, command: str, config: dict[str, Any]
) -> None:
    marker = tmp_path / "pwned"
    run = _run_dir(tmp_path, config)
    _tampered(run / "checkpoint.pt", marker)
    result = run_wmrl(command, *(["--resume"] if command == "train" else []), str(run), cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "refusing" in lines[0] and "checkpoint.pt" in lines[0], result.stderr[-2000:]
    assert "Traceback" not in result.stderr and not marker.exists()


def test_resuming_an_older_wmrl_run_is_refused_with_how_to_start_again(tmp_path: Path) -> None:
    run = _run_dir(tmp_path, TrainConfig(progress=False).to_dict())
    _older_wmrl_checkpoint(run / "checkpoint.pt")
    result = run_wmrl("train", "--resume", str(run), cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "older wmrl" in result.stderr and f"wmrl train --config {run / 'config.json'}" in result.stderr


def test_a_tampered_init_policy_is_refused_and_runs_no_code(tmp_path: Path) -> None:
    """``EmbodiedTrainer._load_init`` on a real policy; the trainer around it (simulator workers) is not
    built: it is not what reads the file, and it needs the embodied stack."""
    from wmrl_adapters.train.embodied.policy import GaussianMLPPolicy
    from wmrl_adapters.train.embodied.trainer import EmbodiedTrainer

    marker = tmp_path / "pwned"
    trainer = SimpleNamespace(policy=GaussianMLPPolicy({"proprio": 9}, seed=0), config=EmbodiedConfig())
    with pytest.raises(CheckpointError, match="refusing"):
        EmbodiedTrainer._load_init(trainer, _tampered(tmp_path / "policy.pt", marker))  # type: ignore[arg-type]
    assert not marker.exists()
    saved = GaussianMLPPolicy({"proprio": 9}, seed=1)
    save_state(tmp_path / "good.pt", saved.state_dict())
    EmbodiedTrainer._load_init(trainer, tmp_path / "good.pt")  # type: ignore[arg-type]
    assert all(
        torch.equal(a, b) for a, b in zip(trainer.policy.parameters(), saved.parameters(), strict=True)
    )


@pytest.mark.slow  # ~20 s: importing transformers
@pytest.mark.long  # out of the default suite (among its slowest); CI's long pass runs it
def test_trl_load_checkpoint_refuses_a_tampered_state_and_resumes_a_saved_one(tmp_path: Path) -> None:
    """The save side is the real ``transformers.TrainerCallback`` that :meth:`WMRLReward.attach` adds."""
    pytest.importorskip("transformers", reason="pip install 'wmrl[trl]'")
    from wmrl_adapters.trl import STATE_FILE, WMRLReward, _checkpoint_callback

    def real(prompts: list[Any], completions: list[str], **kwargs: Any) -> list[float | None]:
        return [float("return" in completion) for completion in completions]

    def guess(prompts: list[Any], completions: list[str], **kwargs: Any) -> list[float | None]:
        return [min(1.0, len(completion) / 10) for completion in completions]

    marker = tmp_path / "pwned"
    _tampered(tmp_path / "checkpoint-9" / STATE_FILE, marker)
    config = CorrectionConfig(anchor_fraction=0.5, warmup_groups=1, min_pairs=2)
    with pytest.raises(CheckpointError, match="refusing"):
        WMRLReward(real, guess, config, num_generations=2).load_checkpoint(tmp_path / "checkpoint-9")
    assert not marker.exists()

    reward = WMRLReward(real, guess, config, num_generations=2)
    for _ in range(3):
        reward(prompts=["p", "p", "q", "q"], completions=["return 1", "x", "return", "y = 2"])
    _checkpoint_callback(reward).on_save(
        SimpleNamespace(output_dir=str(tmp_path)), SimpleNamespace(global_step=3), None
    )
    resumed = WMRLReward(real, guess, config, num_generations=2)
    resumed.load_checkpoint(tmp_path / "checkpoint-3")
    assert repr(resumed.state_dict()) == repr(reward.state_dict())


def test_verl_restore_refuses_a_tampered_state_and_restores_a_saved_one(tmp_path: Path) -> None:
    """verl itself is not installed here (it has its own venv): its config is the two trainer fields
    ``wmrl_state_path`` reads; the manager and the save/restore methods are wmrl's real ones."""
    from wmrl_adapters.verl import WMRLRewardManager
    from wmrl_adapters.verl_main import WholeBatchReward, WMRLRewardStep

    def score(solution_strs: list[str], **kwargs: Any) -> list[float | None]:
        return [float(len(text) > 2) for text in solution_strs]

    def manager() -> WMRLRewardManager:
        return WMRLRewardManager(None, compute_score=score, world_model=score, correction=loop.config)

    loop = _loop_with_history()
    saving = WMRLRewardStep()
    saving.config = SimpleNamespace(
        trainer=SimpleNamespace(resume_mode="auto", default_local_dir=str(tmp_path))
    )
    saving.global_steps = 3
    saving.wmrl_reward = WholeBatchReward(manager())
    saving.wmrl_reward.manager.loop = loop
    saving.save_wmrl_state()
    folder = tmp_path / "global_step_3"
    resuming = WMRLRewardStep()
    resuming.config = SimpleNamespace(
        trainer=SimpleNamespace(resume_mode="resume_path", resume_from_path=str(folder), default_local_dir="")
    )
    resuming.global_steps = 3
    restored = manager()
    resuming.restore_wmrl_state(restored)
    assert repr(restored.state_dict()) == repr(loop.state_dict())

    marker = tmp_path / "pwned"
    _tampered(folder / "wmrl.pt", marker)
    with pytest.raises(CheckpointError, match="refusing"):
        resuming.restore_wmrl_state(manager())
    assert not marker.exists()
