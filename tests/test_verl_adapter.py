"""wmrl_adapters.verl inside verl 0.9: the reward manager and estimator through verl's own registries.

verl cannot share wmrl's main environment (it pins an older transformers), so this module runs itself
inside the verl venv (``bash scripts/verl.sh`` builds it) as a script: :func:`_inside_verl` builds real
``DataProto`` batches (six uid groups of four, rows shuffled as verl's ``balance_batch`` leaves them,
tokens from a real Hugging Face fast tokenizer built offline), gets the manager and the estimator from
verl's registries, runs three steps through them and verl's ``compute_advantage`` (the function verl's
trainer calls), and prints a JSON report; the tests below assert on it. The real scorer is a real wmrl
env (:class:`~wmrl_envs.toy.CostlyToyEnv`, one episode per execution), the world model a real
:class:`~wmrl_envs.toy.ToyWorldModel` (biased, noisy, and unable to answer a quarter of the queries).
Nothing is mocked. Skipped, with the reason, where the venv is not built.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
VERL_PYTHON = Path(os.environ.get("WMRL_VERL_HOME", Path.home() / ".cache/wmrl/verl")) / "venv/bin/python"
VERL_LAUNCHER = REPO / "scripts" / "verl-python"
"""The stack's interpreter with this checkout's wmrl (the venv holds none of its own)."""
GROUPS, GROUP_SIZE, STEPS = 6, 4, 3

pytestmark = [
    pytest.mark.verl,
    pytest.mark.slow,
    pytest.mark.long,  # the verl venv's run takes 65 s in CI: the long pass runs this module
    pytest.mark.skipif(
        not VERL_PYTHON.is_file(),
        reason=f"the verl venv is not built ({VERL_PYTHON} missing): run bash scripts/verl.sh",
    ),
]


@pytest.fixture(scope="module")
def report(report_from: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    # Builds the stack if its stamp is stale (seconds when it is built).
    subprocess.run(["bash", str(REPO / "scripts/verl.sh")], check=True, timeout=900)
    return report_from(VERL_LAUNCHER, [str(Path(__file__).resolve())])


def test_the_manager_and_the_estimator_are_in_verls_registries(report: dict[str, Any]) -> None:
    assert report["registered_manager"] == "WMRLRewardManager"
    assert report["registered_estimator"] == "wmrl_grpo_advantage"
    assert report["verl_version"].startswith("0.9.")


def test_groups_are_formed_from_the_uid_column_of_a_shuffled_batch(report: dict[str, Any]) -> None:
    for step in report["steps"]:
        assert step["groups"] == step["expected_groups"]
        assert len(step["groups"]) == GROUPS
        assert all(len(rows) == GROUP_SIZE for rows in step["groups"].values())


def test_anchor_groups_and_only_those_are_executed_in_the_real_env(report: dict[str, Any]) -> None:
    for step in report["steps"]:
        anchor_rows = sorted(
            row for uid, rows in step["groups"].items() if step["anchor_by_uid"][uid] for row in rows
        )
        assert 0 < len(anchor_rows) < GROUPS * GROUP_SIZE
        assert sorted(step["executed_rows"]) == anchor_rows
        assert sorted(step["predicted_rows"]) == list(range(GROUPS * GROUP_SIZE))
        for row, real in enumerate(step["real"]):
            if row in anchor_rows:
                assert real == pytest.approx(step["true_score"][row], abs=1e-12)
            else:
                assert real is None


def test_verls_compute_advantage_with_wmrl_grpo_equals_the_correction_loop(report: dict[str, Any]) -> None:
    for step in report["steps"]:
        assert step["advantage"] == pytest.approx(step["loop_advantage"], abs=1e-5)
        assert any(abs(value) > 1e-3 for value in step["advantage"])
    weights = {weight for step in report["steps"] for weight in step["weight"] if weight is not None}
    assert any(weight != pytest.approx(1.0) for weight in weights)  # the anchor weight moved off 1


def test_the_advantage_is_constant_over_the_valid_tokens_and_zero_on_padding(report: dict[str, Any]) -> None:
    for step in report["steps"]:
        assert step["constant_over_valid_tokens"] and step["zero_on_padding"]


def test_unknown_world_model_scores_are_excluded_not_zeroed(report: dict[str, Any]) -> None:
    checked = 0
    for step in report["steps"]:
        for uid, rows in step["groups"].items():
            unknown = [row for row in rows if step["predicted"][row] is None]
            if step["anchor_by_uid"][uid] or not unknown or len(unknown) > len(rows) - 2:
                continue
            assert all(step["advantage"][row] == 0.0 for row in unknown)
            known = [row for row in rows if row not in unknown]
            assert [step["advantage"][row] for row in known] == pytest.approx(
                [step["loop_advantage"][row] for row in known], abs=1e-5
            )
            assert [step["advantage"][row] for row in known] != pytest.approx(
                [step["zeroed_advantage"][row] for row in known], abs=1e-5
            )
            checked += 1
    assert checked > 0, "no world-model group had an unknown score: the fixture no longer tests exclusion"


def test_wmrl_grpo_matches_verls_grpo_without_std_and_refuses_plain_rewards(report: dict[str, Any]) -> None:
    for step in report["steps"]:
        assert step["advantage"] == pytest.approx(step["grpo_no_std_advantage"], abs=1e-6)
    assert "not 0" in report["plain_reward_error"]
    assert "use_kl_in_reward=False" in report["plain_reward_error"]


def test_validation_batches_are_scored_for_real_and_leave_the_loop_alone(report: dict[str, Any]) -> None:
    validation = report["validation"]
    assert validation["executed_rows"] == list(range(GROUPS * GROUP_SIZE))
    assert validation["score"] == pytest.approx(validation["true_score"], abs=1e-6)
    assert validation["loop_steps_before"] == validation["loop_steps_after"]


def _inside_verl() -> dict[str, Any]:
    """Runs in the verl venv: three training steps and one validation batch through verl's own code."""
    import numpy as np
    import torch
    import verl
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from verl import DataProto
    from verl.trainer.ppo import core_algos
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.trainer.ppo.reward import extract_reward
    from verl.workers.reward_manager import get_reward_manager_cls
    from wmrl_adapters.verl import register

    from wmrl_algos.errors import ConfigError
    from wmrl_algos.loop import CorrectionConfig, CorrectionLoop
    from wmrl_algos.types import ScoredGroup
    from wmrl_envs.toy import CostlyToyEnv, ToyWorldModel
    from wmrl_envs.world_model import WorldModelQuery

    # A real word-level fast tokenizer: one token per coordinate ("-0.3"), padding and end of sequence.
    words = ["[PAD]", "[EOS]", "<q>"] + [f"{value / 10:.1f}" for value in range(-10, 11)]
    backend = Tokenizer(models.WordLevel({word: i for i, word in enumerate(words)}, unk_token="[PAD]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", eos_token="[EOS]")

    env = CostlyToyEnv(dim=2)
    world_model = ToyWorldModel(bias=0.15, noise=0.05, unknown_rate=0.25, seed=3)
    calls: dict[str, list[int]] = {"real": [], "world_model": []}

    def parse(text: str) -> np.ndarray:
        return np.array([float(token) for token in text.split()])

    def real(solution_strs: list[str], extra_infos: list[dict[str, Any]], **_: Any) -> list[float | None]:
        scores: list[float | None] = []
        for text, info in zip(solution_strs, extra_infos, strict=True):
            calls["real"].append(info["row"])
            env.reset(options={"task_id": info["task_id"]})
            scores.append(float(env.step(parse(text))[1]))
        return scores

    def predict(solution_strs: list[str], extra_infos: list[dict[str, Any]], **_: Any) -> list[float | None]:
        queries = []
        for text, info in zip(solution_strs, extra_infos, strict=True):
            calls["world_model"].append(info["row"])
            env.reset(options={"task_id": info["task_id"]})
            queries.append(WorldModelQuery(env.world_model_context(), parse(text)))
        return [prediction.reward for prediction in world_model.predict(queries)]

    def true_scores(texts: list[str], tasks: list[int]) -> list[float]:
        truth = CostlyToyEnv(dim=2)
        out = []
        for text, task in zip(texts, tasks, strict=True):
            truth.reset(options={"task_id": task})
            out.append(float(truth.step(parse(text))[1]))
        return out

    rng = np.random.default_rng(7)
    prompt_len, response_len = 3, 4

    def batch(step: int) -> tuple[Any, dict[str, list[int]], list[str], list[int]]:
        n = GROUPS * GROUP_SIZE
        order = rng.permutation(n)  # row of the k-th sample of the repeated batch, as balance_batch shuffles
        uids = np.empty(n, dtype=object)
        texts, tasks = [""] * n, [0] * n
        responses = torch.full((n, response_len), tokenizer.pad_token_id)
        attention = torch.zeros((n, prompt_len + response_len), dtype=torch.long)
        attention[:, :prompt_len] = 1
        expected: dict[str, list[int]] = {}
        for k, row in enumerate(order.tolist()):
            group = k // GROUP_SIZE
            uid = f"step{step}-prompt{group}"
            point = np.round(rng.uniform(-1, 1, size=2), 1)
            texts[row] = " ".join(f"{value:.1f}" for value in point)
            tasks[row] = 10 * step + group
            ids = tokenizer(texts[row])["input_ids"] + [tokenizer.eos_token_id] * int(rng.integers(0, 2))
            responses[row, : len(ids)] = torch.tensor(ids)
            attention[row, prompt_len : prompt_len + len(ids)] = 1
            uids[row] = uid
            expected.setdefault(uid, []).append(row)
        prompts = torch.full((n, prompt_len), tokenizer.convert_tokens_to_ids("<q>"))
        data = DataProto.from_dict(
            tensors={
                "prompts": prompts,
                "responses": responses,
                "input_ids": torch.cat([prompts, responses], dim=1),
                "attention_mask": attention,
            },
            non_tensors={
                "uid": uids,
                "data_source": np.array(["toy"] * n, dtype=object),
                "reward_model": np.array([{"ground_truth": None}] * n, dtype=object),
                "extra_info": np.array(
                    [{"task_id": tasks[row], "row": row} for row in range(n)], dtype=object
                ),
            },
        )
        return data, {uid: sorted(rows) for uid, rows in expected.items()}, texts, tasks

    register()
    register()  # idempotent
    manager_cls = get_reward_manager_cls("wmrl")
    estimator = core_algos.get_adv_estimator_fn("wmrl_grpo")
    config = CorrectionConfig(
        anchor_fraction=0.5, min_pairs=4, refit_every=1, weighting="paper", warmup_groups=2, seed=1
    )
    manager = manager_cls(tokenizer, 0, real, "data_source", world_model=predict, correction=config)
    twin, zeroed_twin = CorrectionLoop(config), CorrectionLoop(config)
    report: dict[str, Any] = {
        "verl_version": verl.__version__,
        "registered_manager": manager_cls.__name__,
        "registered_estimator": estimator.__name__,
        "steps": [],
    }
    for step in range(STEPS):
        data, expected, texts, tasks = batch(step)
        calls["real"].clear()
        calls["world_model"].clear()
        # What verl's v0 trainer does from the reward to the advantage (RayPPOTrainer.fit), with the reward
        # coming from the manager's compute_rm_score instead of the reward loop's.
        data = data.union(manager.compute_rm_score(data))
        reward_tensor, info = extract_reward(data)
        data.batch["token_level_scores"] = reward_tensor
        data.batch["token_level_rewards"] = data.batch["token_level_scores"]
        data = compute_advantage(data, adv_estimator="wmrl_grpo", num_repeat=GROUP_SIZE, config=None)
        advantages, mask = data.batch["advantages"], data.batch["response_mask"]
        grpo, _ = core_algos.compute_grpo_outcome_advantage(
            data.batch["token_level_rewards"],
            mask,
            data.non_tensor_batch["uid"],
            norm_adv_by_std_in_grpo=False,
        )
        groups = {uid: list(rows) for uid, rows in manager.last_groups}
        anchor_by_uid = {uid: bool(info["wmrl_anchor"][rows[0]]) for uid, rows in groups.items()}
        # The same step through a plain CorrectionLoop, with the unknown scores excluded and zeroed.
        loop_advantage, zeroed_advantage = [0.0] * len(texts), [0.0] * len(texts)
        for loop, out, fill in ((twin, loop_advantage, None), (zeroed_twin, zeroed_advantage, 0.0)):
            scored = [
                ScoredGroup(
                    index,
                    anchor_by_uid[uid],
                    tuple(
                        fill if info["wmrl_predicted"][row] is None else info["wmrl_predicted"][row]
                        for row in rows
                    ),
                    tuple(info["wmrl_real"][row] for row in rows) if anchor_by_uid[uid] else None,
                )
                for index, (uid, rows) in enumerate(groups.items())
            ]
            for rows, result in zip(groups.values(), loop.correct(scored).advantages, strict=True):
                for k, row in enumerate(rows):
                    out[row] = float(result.values[k])
        valid = mask.bool()
        per_row = [advantages[row][valid[row]] for row in range(len(texts))]
        report["steps"].append(
            {
                "groups": groups,
                "expected_groups": expected,
                "anchor_by_uid": anchor_by_uid,
                "executed_rows": list(calls["real"]),
                "predicted_rows": list(calls["world_model"]),
                "predicted": list(info["wmrl_predicted"]),
                "real": list(info["wmrl_real"]),
                "weight": list(info["wmrl_weight"]),
                "true_score": true_scores(texts, tasks),
                "advantage": [float(values[0]) if len(values) else 0.0 for values in per_row],
                "loop_advantage": loop_advantage,
                "zeroed_advantage": zeroed_advantage,
                "grpo_no_std_advantage": [
                    float(grpo[row].sum() / max(1, int(mask[row].sum()))) for row in range(len(texts))
                ],
                "constant_over_valid_tokens": all(
                    bool((values == values[0]).all()) for values in per_row if len(values)
                ),
                "zero_on_padding": bool((advantages[~valid] == 0).all()),
            }
        )
    data, _, texts, tasks = batch(STEPS)
    try:
        reward = torch.zeros_like(data.batch["responses"], dtype=torch.float32)
        reward[:, 0] = torch.tensor(true_scores(texts, tasks))
        estimator(
            token_level_rewards=reward,
            response_mask=torch.ones_like(reward),
            index=data.non_tensor_batch["uid"],
        )
        report["plain_reward_error"] = ""
    except ConfigError as exc:
        report["plain_reward_error"] = str(exc)
    data.meta_info["validate"] = True
    calls["real"].clear()
    steps_before = manager.loop.state_dict()["steps"]
    scores = manager(data)
    report["validation"] = {
        "executed_rows": sorted(calls["real"]),
        "score": scores.sum(dim=-1).tolist(),
        "true_score": true_scores(texts, tasks),
        "loop_steps_before": steps_before,
        "loop_steps_after": manager.loop.state_dict()["steps"],
    }
    return report


if __name__ == "__main__":
    sys.stdout.write(json.dumps(_inside_verl()) + "\n")
