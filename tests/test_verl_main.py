"""wmrl_adapters.verl_main in verl 0.9.1: the command's config, and verl's v1 trainer's reward step with WMRL.

Runs itself inside the verl venv (``bash scripts/verl.sh`` builds it) as a script, like
tests/test_verl_adapter.py: :func:`_inside_verl` composes the config from verl's own Hydra files and real
command-line overrides, builds the ``WMRLPPOTrainerSync`` class verl's registry gives for the default mode,
starts a one-node local Ray and verl's real TransferQueue (the store the v1 trainer reads batches from),
puts one sampled batch into it in the layout verl's agent loop writes (six uid groups of four, rows of a
group not adjacent), and calls the trainer's own ``_compute_reward_colocate`` and ``_compute_advantage``
(verl's code, with the WMRL reward step mixed in). It then runs the trainer's ``init()`` as far as it gets
on a machine without a GPU and reports where and why it stops. A last test runs the real command,
``python -m wmrl_adapters.verl_main <overrides>``, which gets as far (through verl's own Ray task runner).
The tokenizer is a real Hugging Face fast tokenizer (word level, built offline); the scorers are real
functions (exact match against the ground truth; a token-overlap guess that cannot answer empty responses).
Nothing is mocked; what cannot exist here is a GPU, so verl's workers (rollout, actor update) do not run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
VERL_PYTHON = Path(os.environ.get("WMRL_VERL_HOME", Path.home() / ".cache/wmrl/verl")) / "venv/bin/python"
VERL_LAUNCHER = REPO / "scripts" / "verl-python"
"""The stack's interpreter with this checkout's wmrl (the venv holds none of its own)."""
GROUPS, GROUP_SIZE = 6, 4
REAL_CALLS: list[int] = []
REFUSED = [  # (an override WMRL cannot run under, the fix its error must name)
    ("algorithm.adv_estimator=grpo", "set it to wmrl_grpo"),
    ("algorithm.use_kl_in_reward=True", "use_kl_in_reward=True shifts"),
    ("trainer.use_v1=False", "set trainer.use_v1=True"),
    ("trainer.v1.trainer_mode=colocate_async", "trainer.v1.trainer_mode=sync"),
    ("reward.reward_model.enable=True", "WMRL takes the reward step"),
    ("+wmrl.correction.anchor_share=0.5", "unknown keys ['anchor_share']"),
]

pytestmark = [
    pytest.mark.verl,
    pytest.mark.slow,
    pytest.mark.long,  # 70-80 s: after the default suite (scripts/test.sh), to keep that well under 20 min
    pytest.mark.skipif(
        not VERL_PYTHON.is_file(),
        reason=f"the verl venv is not built ({VERL_PYTHON} missing): run bash scripts/verl.sh",
    ),
]


def real_score(solution_strs: list[str], ground_truths: list[str], **_: Any) -> list[float | None]:
    """The real scorer the command line names: exact match against the ground truth (records its calls)."""
    REAL_CALLS.append(len(solution_strs))
    return [float(text.strip() == truth) for text, truth in zip(solution_strs, ground_truths, strict=True)]


def guess_score(solution_strs: list[str], ground_truths: list[str], **_: Any) -> list[float | None]:
    """The world model: the share of the ground truth's tokens in the response; unknown when empty."""
    out: list[float | None] = []
    for text, truth in zip(solution_strs, ground_truths, strict=True):
        words, wanted = set(text.split()), set(truth.split())
        out.append(None if not words else len(words & wanted) / len(wanted))
    return out


def _in_verl_venv(args: list[str], cwd: Path, timeout: int) -> subprocess.CompletedProcess[str]:
    """The verl venv's Python on ``args``: offline, this folder importable (the scorers), Ray's files in a
    short /tmp folder (its socket paths must stay under 108 bytes), removed afterwards."""
    ray_dir = tempfile.mkdtemp(prefix="wmrl-ray-", dir="/tmp")
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONPATH": str(REPO / "tests"),
        "RAY_TMPDIR": ray_dir,
    }
    try:
        return subprocess.run(
            [str(VERL_LAUNCHER), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
        )
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def report(
    tmp_path_factory: pytest.TempPathFactory, report_from: Callable[..., dict[str, Any]]
) -> dict[str, Any]:
    subprocess.run(["bash", str(REPO / "scripts/verl.sh")], check=True, timeout=900)
    work = tmp_path_factory.mktemp("verl_main")
    ray_dir = tempfile.mkdtemp(prefix="wmrl-ray-", dir="/tmp")  # Ray's socket paths must stay short
    env = {"PYTHONPATH": str(REPO / "tests"), "RAY_TMPDIR": ray_dir}
    try:
        return report_from(VERL_LAUNCHER, [str(Path(__file__).resolve()), str(work)], env=env)
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)


def test_the_command_line_config_comes_from_verls_own_files(report: dict[str, Any]) -> None:
    config = report["config"]
    assert config["adv_estimator"] == "wmrl_grpo" and config["rollout_n"] == GROUP_SIZE
    assert config["anchor_fraction"] == 0.5 and config["weighting"] == "paper"
    assert config["use_v1"] and config["trainer_mode"] == "sync"  # verl 0.9.1's defaults, not ours
    assert config["trainer_class"] == "WMRLPPOTrainerSync"
    assert config["trainer_bases"] == ["WMRLRewardStep", "PPOTrainerSync"]


@pytest.mark.parametrize(("override", "fix"), REFUSED)
def test_settings_wmrl_cannot_run_under_are_refused_with_the_fix(
    report: dict[str, Any], override: str, fix: str
) -> None:
    assert fix in report["refused"][override]


def test_scorers_load_from_a_module_or_a_file_path(report: dict[str, Any]) -> None:
    assert report["loaded_from_path"] == "real_score"


def test_the_reward_step_hands_the_whole_batch_to_the_manager_once(report: dict[str, Any]) -> None:
    step = report["step"]
    assert step["manager_calls"] == 1
    assert step["manager_batch_rows"] == GROUPS * GROUP_SIZE
    assert step["groups"] == step["expected_groups"]
    assert step["real_calls"] == [step["anchor_rows"]]  # one real call, on the anchor rows only
    assert 0 < step["anchor_rows"] < GROUPS * GROUP_SIZE
    assert step["executed"] == step["anchor_row_set"]


def test_verls_advantage_step_accepts_the_corrected_advantages(report: dict[str, Any]) -> None:
    step = report["step"]
    assert step["advantage"] == pytest.approx(step["loop_advantage"], abs=1e-5)
    assert any(abs(value) > 1e-3 for value in step["advantage"])
    assert step["constant_over_valid_tokens"]
    assert step["rm_scores_written"] and step["extra_columns_written"]
    assert "wmrl/anchor_fraction" in step["metrics"]


def test_a_validation_batch_is_scored_for_real_on_every_row(report: dict[str, Any]) -> None:
    validation = report["validation"]
    assert validation["real_calls"] == [GROUPS * GROUP_SIZE]
    assert validation["score"] == validation["true_score"]


def test_the_correction_state_is_saved_with_verls_checkpoint_and_restored_on_resume(
    report: dict[str, Any],
) -> None:
    checkpoint = report["checkpoint"]
    assert checkpoint["path"] == "global_step_1/wmrl.pt"
    assert checkpoint["saved_steps"] == 1
    assert checkpoint["steps"] == {"resumed": 1, "fresh": 0}
    assert checkpoint["same_next_plan"]["resumed"]  # the anchor scheduler continues where it stopped


def test_on_cpu_the_trainer_sets_up_until_verl_asks_ray_for_gpus(report: dict[str, Any]) -> None:
    init = report["init"]
    assert init["train_dataset_rows"] == GROUPS
    assert init["stopped_in"] == "_check_resource_available"
    assert "GPU" in init["error"]


def test_the_command_runs_verls_task_runner_with_the_wmrl_trainer_up_to_the_gpu_check(
    report: dict[str, Any],
) -> None:
    # The real command line, end to end: Hydra, verl's run_ppo, a Ray TaskRunner actor that builds the WMRL
    # trainer from verl's registry; on this machine verl's setup then stops where its workers need a GPU.
    work = Path(report["work"])
    # cwd: Hydra writes its outputs/ folder there.
    done = _in_verl_venv(["-m", "wmrl_adapters.verl_main", *overrides(work)], cwd=work, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "ray::WMRLTaskRunner.run()" in output
    assert "verl_main.py" in output and "in _setup" in output  # WMRLRewardStep._setup, inside the actor
    assert "ValueError: Total available GPUs 0 is less than total desired GPUs 1" in output


def overrides(work: Path) -> list[str]:
    """The command line of both tests: verl's GRPO overrides for a tiny run plus the WMRL ones."""
    return [
        f"actor_rollout_ref.model.path={work / 'model'}",
        f"data.train_files={work / 'train.parquet'}",
        f"data.val_files={work / 'train.parquet'}",
        f"data.train_batch_size={GROUPS}",
        "data.max_prompt_length=16",
        "data.max_response_length=8",
        f"actor_rollout_ref.rollout.n={GROUP_SIZE}",
        "actor_rollout_ref.actor.ppo_mini_batch_size=2",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
        "algorithm.adv_estimator=wmrl_grpo",
        "algorithm.use_kl_in_reward=False",
        "trainer.n_gpus_per_node=1",
        "trainer.logger=[console]",
        f"trainer.default_local_dir={work / 'checkpoints'}",
        # On 2 cores: verl's default 8 TransferQueue storage actors (1 CPU each) would never be scheduled.
        "ray_kwargs.ray_init.num_cpus=4",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
        "+wmrl.real=test_verl_main:real_score",
        "+wmrl.world_model=test_verl_main:guess_score",
        "+wmrl.correction.anchor_fraction=0.5",
        "+wmrl.correction.weighting=paper",
        "+wmrl.correction.seed=3",
    ]


def _layout(tokenizer: Any, texts: list[str], truths: list[str], uids: list[str]) -> tuple[Any, list[dict]]:
    """Sampled rows as verl's agent loop (``AgentLoopWorkerTQ._agent_loop_postprocess``) writes them."""
    import torch
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    prompt = tokenizer("<q>")["input_ids"]
    fields, tags = [], []
    for text, truth, uid in zip(texts, truths, uids, strict=True):
        response = tokenizer(text)["input_ids"] + [tokenizer.eos_token_id]
        fields.append(
            {
                "prompts": torch.tensor(prompt),
                "responses": torch.tensor(response),
                "response_mask": torch.ones(len(response), dtype=torch.int64),
                "input_ids": torch.tensor(prompt + response),
                "uid": uid,
                "data_source": "toy",
                "reward_model": {"ground_truth": truth, "style": "rule"},
                "extra_info": {"split": "train"},
                "raw_prompt": [{"role": "user", "content": "<q>"}],
            }
        )
        tags.append({"status": "success", "seq_len": len(prompt) + len(response)})
    return list_of_dict_to_tensordict(fields), tags


def _inside_verl(work: Path) -> dict[str, Any]:
    """Runs in the verl venv."""
    import traceback

    import numpy as np
    import pandas as pd
    import ray
    import test_verl_main as scorers  # the copy the command line's 'test_verl_main:real_score' imports
    import transfer_queue as tq
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config
    from verl.trainer.ppo.v1 import PPOTrainerSync
    from wmrl_adapters.verl_main import compose, load_scorer, trainer_class

    from wmrl_algos.errors import ConfigError
    from wmrl_algos.loop import CorrectionLoop
    from wmrl_algos.types import ScoredGroup

    words = ["[PAD]", "[EOS]", "<q>", "user", "assistant"] + [f"w{i}" for i in range(12)]
    backend = Tokenizer(models.WordLevel({word: i for i, word in enumerate(words)}, unk_token="[PAD]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", eos_token="[EOS]")
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    model_dir = work / "model"
    tokenizer.save_pretrained(model_dir)
    Qwen2Config(  # a tiny model's config: verl's setup reads it; no weights are needed before the workers
        vocab_size=len(words),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        architectures=["Qwen2ForCausalLM"],
    ).save_pretrained(model_dir)
    rows = [
        {
            "data_source": "toy",
            "prompt": [{"role": "user", "content": "<q>"}],
            "reward_model": {"ground_truth": f"w{i} w{i + 1}", "style": "rule"},
            "extra_info": {"index": i},
        }
        for i in range(GROUPS)
    ]
    pd.DataFrame(rows).to_parquet(work / "train.parquet")

    command_line = overrides(work)
    config = compose(command_line)
    cls = trainer_class(config)
    report: dict[str, Any] = {
        "config": {
            "adv_estimator": config.algorithm.adv_estimator,
            "rollout_n": config.actor_rollout_ref.rollout.n,
            "anchor_fraction": config.wmrl.correction.anchor_fraction,
            "weighting": config.wmrl.correction.weighting,
            "use_v1": config.trainer.use_v1,
            "trainer_mode": config.trainer.v1.trainer_mode,
            "trainer_class": cls.__name__,
            "trainer_bases": [base.__name__ for base in cls.__bases__],
        },
        "refused": {},
        "work": str(work),
        "loaded_from_path": load_scorer(f"{Path(__file__).resolve()}:real_score").__name__,
    }
    assert issubclass(cls, PPOTrainerSync)
    for override, _ in REFUSED:
        try:
            compose([*command_line, override])
            report["refused"][override] = ""
        except ConfigError as exc:
            report["refused"][override] = str(exc)

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    tq.init(config.transfer_queue)
    try:
        trainer = cls(config)
        # The tokenizer the policy would have. Not the one verl's _init_tokenizer loads from model_dir:
        # transformers 5 rebuilds a saved word-level tokenizer as the model type's (Qwen2's BPE) tokenizer.
        trainer.tokenizer = tokenizer
        trainer.attach_wmrl()
        report["step"] = _reward_and_advantage(trainer, scorers, tq, np, CorrectionLoop, ScoredGroup)
        report["validation"] = _validation(trainer, scorers, tq)
        report["checkpoint"] = _checkpoint_round_trip(trainer, cls, config, tokenizer)
        report["init"] = {}
        try:
            cls(config).init()
            report["init"]["stopped_in"] = "nowhere"
        except Exception as exc:  # where verl's setup stops on this machine is what is reported
            frames = traceback.extract_tb(exc.__traceback__)
            report["init"]["stopped_in"] = frames[-1].name
            report["init"]["error"] = f"{type(exc).__name__}: {exc}"
            report["init"]["train_dataset_rows"] = len(trainer_setup_dataset(config))
    finally:
        tq.close()
        ray.shutdown()
    return report


def trainer_setup_dataset(config: Any) -> Any:
    """The train dataset verl's setup built before it stopped (rebuilt the same way, to count its rows)."""
    from verl.trainer.main_ppo_v0 import create_rl_dataset
    from verl.utils.config import omega_conf_to_dataclass

    tokenizer = omega_conf_to_dataclass(config.actor_rollout_ref.model).tokenizer
    return create_rl_dataset(config.data.train_files, config.data, tokenizer, None, is_train=True)


def _reward_and_advantage(
    trainer: Any, scorers: Any, tq: Any, np: Any, loop_cls: Any, group_cls: Any
) -> dict[str, Any]:
    """One sampled batch through the trainer's reward step and verl's advantage step."""
    rng = np.random.default_rng(5)
    n = GROUPS * GROUP_SIZE
    group_of_row = rng.permutation(np.repeat(np.arange(GROUPS), GROUP_SIZE))  # groups not adjacent
    truths = [f"w{g} w{g + 1}" for g in group_of_row]
    texts = [
        rng.choice([truths[row], f"w{group_of_row[row]}", f"w{group_of_row[row] + 2} w9", ""])
        for row in range(n)
    ]
    uids = [f"prompt{g}" for g in group_of_row]
    keys = [f"{uid}_{row}_0" for row, uid in enumerate(uids)]
    fields, tags = _layout(trainer.tokenizer, list(texts), truths, uids)
    batch = tq.kv_batch_put(keys=keys, partition_id="train", fields=fields, tags=tags)

    scorers.REAL_CALLS.clear()
    metrics: dict[str, Any] = {}
    batch = trainer._compute_reward_colocate(batch, metrics=metrics)
    batch = trainer._compute_advantage(batch, metrics=metrics)
    stored = tq.kv_batch_get(keys=keys, partition_id="train")
    advantages = stored["advantages"].to_padded_tensor(padding=0.0)
    mask = stored["response_mask"].to_padded_tensor(padding=0).bool()

    manager = trainer.wmrl_reward.manager
    groups = {uid: list(rows) for uid, rows in manager.last_groups}
    expected = {f"prompt{g}": [row for row in range(n) if group_of_row[row] == g] for g in range(GROUPS)}
    anchor = [bool(value) for value in stored["wmrl_anchor"]]
    real = list(stored["wmrl_real"])
    predicted = list(stored["wmrl_predicted"])
    twin = loop_cls(manager.loop.config)
    scored = [
        group_cls(
            index,
            anchor[rows[0]],
            tuple(predicted[row] for row in rows),
            tuple(real[row] for row in rows) if anchor[rows[0]] else None,
        )
        for index, rows in enumerate(groups.values())
    ]
    loop_advantage = [0.0] * n
    for rows, result in zip(groups.values(), twin.correct(scored).advantages, strict=True):
        for k, row in enumerate(rows):
            loop_advantage[row] = float(result.values[k])
    per_row = [advantages[row][mask[row]] for row in range(n)]
    anchor_rows = sorted(row for row in range(n) if anchor[row])
    return {
        "manager_calls": trainer.wmrl_reward.calls,
        "manager_batch_rows": sum(len(rows) for rows in groups.values()),
        "groups": {uid: sorted(rows) for uid, rows in groups.items()},
        "expected_groups": expected,
        "real_calls": list(scorers.REAL_CALLS),
        "anchor_rows": len(anchor_rows),
        "anchor_row_set": anchor_rows,
        "executed": sorted(row for row in range(n) if real[row] is not None),
        "advantage": [float(values[0]) for values in per_row],
        "loop_advantage": loop_advantage,
        "constant_over_valid_tokens": all(bool((values == values[0]).all()) for values in per_row),
        "rm_scores_written": "rm_scores" in set(stored.keys()),
        "extra_columns_written": {"wmrl_weight", "wmrl_calibrated"} <= set(stored.keys()),
        "metrics": sorted(metrics),
    }


def _checkpoint_round_trip(trainer: Any, cls: type, config: Any, tokenizer: Any) -> dict[str, Any]:
    """The WMRL state saved at step 1 as verl's checkpoint step saves it, restored by a resumed trainer."""
    trainer.global_steps = 1
    trainer.save_wmrl_state()
    resumed = cls(config)
    resumed.tokenizer, resumed.global_steps = tokenizer, 1  # what verl's _load_checkpoint leaves
    resumed.attach_wmrl()
    fresh = cls(config)
    fresh.tokenizer, fresh.global_steps = tokenizer, 0
    fresh.attach_wmrl()
    saved, loops = trainer.wmrl_reward.manager.loop, {"resumed": resumed, "fresh": fresh}
    next_plan = saved.plan(GROUPS).tolist()  # the anchor groups the saved run would pick next
    return {
        "path": str(trainer.wmrl_state_path().relative_to(config.trainer.default_local_dir)),
        "steps": {name: t.wmrl_reward.manager.loop.state_dict()["steps"] for name, t in loops.items()},
        "saved_steps": saved.state_dict()["steps"],
        "same_next_plan": {
            name: t.wmrl_reward.manager.loop.plan(GROUPS).tolist() == next_plan for name, t in loops.items()
        },
    }


def _validation(trainer: Any, scorers: Any, tq: Any) -> dict[str, Any]:
    """A batch in verl's validation partition: every row scored for real, the loop untouched."""
    n = GROUPS * GROUP_SIZE
    truths = [f"w{row % GROUPS} w{row % GROUPS + 1}" for row in range(n)]
    texts = [truths[row] if row % 3 else "w11" for row in range(n)]
    uids = [f"val{row % GROUPS}" for row in range(n)]
    keys = [f"{uid}_{row}_0" for row, uid in enumerate(uids)]
    fields, tags = _layout(trainer.tokenizer, texts, truths, uids)
    batch = tq.kv_batch_put(keys=keys, partition_id="val", fields=fields, tags=tags)
    scorers.REAL_CALLS.clear()
    trainer._compute_reward_colocate(batch)
    stored = tq.kv_batch_get(keys=keys, partition_id="val", select_fields=["rm_scores"])
    return {
        "real_calls": list(scorers.REAL_CALLS),
        "score": [float(row.sum()) for row in stored["rm_scores"].unbind()],
        "true_score": [float(text == truth) for text, truth in zip(texts, truths, strict=True)],
    }


if __name__ == "__main__":
    sys.stdout.write(json.dumps(_inside_verl(Path(sys.argv[1])), default=str) + "\n")
