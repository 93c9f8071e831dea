"""Tests of the fidelity harness: real executions and their cache, prequential and cross-fitted evaluation."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from wmrl_algos.errors import ConfigError, DataError, WorldModelError
from wmrl_envs.fidelity import cross_fitted_calibration, within_group_agreement
from wmrl_envs.kaggle.fidelity import (
    ExecutionCache,
    FidelityCase,
    RealRecord,
    evaluate_world_model,
    execute_cases,
    fidelity_metrics,
    plot_calibration,
    plot_reliability,
    predict_cases,
    write_table,
)
from wmrl_envs.kaggle.leaderboard import Leaderboard
from wmrl_envs.kaggle.outcome import KaggleContext, Outcome
from wmrl_envs.kaggle.world_models.learned import LearnedWorldModel, LearnedWorldModelConfig
from wmrl_envs.kaggle.world_models.rubric import RubricWorldModel
from wmrl_envs.world_model import Prediction, WorldModelQuery


def context(competition_id: str) -> KaggleContext:
    return KaggleContext(
        competition_id=competition_id,
        overview="",
        inventory="train.csv test.csv",
        metric="rmse",
        higher_is_better=False,
        task_type="regression",
        target="y",
        id_column="id",
        feature_columns=("x",),
    )


def cases_of(tasks: Sequence[str], per_task: int) -> list[FidelityCase]:
    return [
        FidelityCase(context(task), f"import numpy\nx = {index}\n")
        for task in tasks
        for index in range(per_task)
    ]


def records(rewards: Sequence[float | None], status: str = "valid") -> list[RealRecord]:
    return [
        RealRecord(status=status if reward is not None else "timeout", reward=reward) for reward in rewards
    ]


def predictions(rewards: Sequence[float | None], status: str = "valid") -> list[Prediction]:
    return [Prediction(reward=reward, info={"status": status}) for reward in rewards]


@pytest.fixture(scope="module")
def titanic_suite():
    """The real titanic competition of the built-in suite, with a small hand-made leaderboard attached."""
    from wmrl_envs.kaggle.suite import KaggleSuite, load_suite

    competition = load_suite().get("titanic-survival", with_leaderboard=False)
    board = Leaderboard((0.85, 0.8, 0.75, 0.7, 0.6), competition.higher_is_better)
    return KaggleSuite(competitions=[replace(competition, leaderboard=board, public_leaderboard=board)])


@pytest.mark.integration
def test_real_executions_are_graded_cached_and_never_run_twice(titanic_suite, tmp_path: Path) -> None:
    from wmrl_adapters.fidelity_cli import SandboxExecutor

    from wmrl_envs.sandbox import make_sandbox

    sandbox = make_sandbox("unsafe")
    executor = SandboxExecutor(titanic_suite, sandbox, timeout_s=60, memory_mb=1024)
    calls: list[str] = []

    def counting(case: FidelityCase) -> Outcome:
        calls.append(case.label)
        return executor(case)

    titanic = titanic_suite.get("titanic-survival").context()
    corpus = [
        FidelityCase(
            titanic,
            "```python\nimport shutil\nshutil.copyfile('input/sample_submission.csv', 'submission.csv')\n```",
            label="copy",
        ),
        FidelityCase(titanic, "```python\nraise ValueError('boom')\n```", label="crash"),
        FidelityCase(titanic, "```python\ndef broken(:\n    pass\n```", label="syntax"),
        FidelityCase(titanic, "I would train a model.", label="prose"),
        FidelityCase(titanic, "```python\nprint('forgot the submission')\n```", label="nothing"),
    ]
    try:
        cache_file = tmp_path / "executions.jsonl"
        real, stats = execute_cases(corpus, counting, ExecutionCache(cache_file), progress=False)
        assert [record.status for record in real] == [
            "valid",
            "runtime_error",
            "syntax_error",
            "malformed",
            "no_submission",
        ]
        assert real[0].reward is not None and 0.5 <= real[0].reward <= 1.0
        assert [record.reward for record in real[1:]] == pytest.approx([0.1, 0.0, 0.0, 0.2])
        assert stats.n_executed == 5 and stats.executions_per_s is not None

        again, stats_again = execute_cases(corpus, counting, ExecutionCache(cache_file), progress=False)
        assert len(calls) == 5
        assert stats_again.n_cached == 5 and stats_again.n_executed == 0
        assert stats_again.executions_per_s == pytest.approx(stats.executions_per_s)
        assert [record.reward for record in again] == [record.reward for record in real]
    finally:
        sandbox.close()


def test_a_corrupt_cache_file_is_rejected_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "executions.jsonl"
    path.write_text('{"key": "a", "status": "valid", "reward": 0.6}\nnot json\n')
    with pytest.raises(DataError, match="delete the file"):
        ExecutionCache(path)


def test_the_cache_key_covers_the_competition_content_and_the_grading_code(monkeypatch) -> None:
    case = FidelityCase(context("t"), "print(1)\n")
    same_id_other_content = replace(case, fingerprint="f" * 64)
    assert len({case.key, same_id_other_content.key, replace(case, fingerprint="e" * 64).key}) == 3
    before = same_id_other_content.key
    monkeypatch.setattr("wmrl_envs.kaggle.fidelity.grading_code_version", lambda: "another-grader")
    assert same_id_other_content.key != before


@pytest.mark.parametrize("status", ["timeout", "sandbox_error"])
def test_a_timeout_or_an_unknown_outcome_is_executed_again_not_cached(status: str) -> None:
    calls: list[str] = []

    def executor(case: FidelityCase) -> Outcome:
        calls.append(case.solution)
        return Outcome(status=status)  # type: ignore[arg-type]

    cache = ExecutionCache(None)
    cases = cases_of(["t"], 1)
    for _ in range(2):
        execute_cases(cases, executor, cache, progress=False)
    assert len(calls) == 2 and len(cache) == 0


class RecordingLearned(LearnedWorldModel):
    """The real learned world model, logging the order of predict and observe calls."""

    def __init__(self) -> None:
        super().__init__(RubricWorldModel(), config=LearnedWorldModelConfig(min_observations=4))
        self.log: list[tuple[str, str]] = []

    def predict(self, queries: Sequence[WorldModelQuery]) -> list[Prediction]:
        self.log += [("predict", query.context.competition_id) for query in queries]
        return super().predict(queries)

    def observe(self, queries: Sequence[WorldModelQuery], real_rewards: Sequence[float | None]) -> None:
        self.log += [("observe", query.context.competition_id) for query in queries]
        super().observe(queries, real_rewards)


def test_a_learning_world_model_predicts_every_task_before_observing_it() -> None:
    corpus = cases_of(["a", "b", "c"], per_task=5)
    model = RecordingLearned()
    run = predict_cases(model, corpus, records([0.6] * len(corpus)), batch_size=2, progress=False)
    assert run.prequential
    assert len(run.predictions) == len(corpus)
    for task in "abc":
        first_observe = model.log.index(("observe", task))
        last_predict = max(index for index, entry in enumerate(model.log) if entry == ("predict", task))
        assert last_predict < first_observe
    assert model.n_observations == len(corpus)


def test_a_frozen_world_model_is_not_evaluated_prequentially() -> None:
    run = predict_cases(RubricWorldModel(), cases_of(["a"], 3), records([0.5] * 3), progress=False)
    assert not run.prequential
    assert run.predictions_per_s is not None and run.predictions_per_s > 0


def test_a_world_model_returning_the_wrong_count_is_reported() -> None:
    class Short:
        name = "short"

        def predict(self, queries: Sequence[WorldModelQuery]) -> list[Prediction]:
            return [Prediction(reward=0.5)] * (len(queries) - 1)

    with pytest.raises(WorldModelError, match="exactly one per query"):
        predict_cases(Short(), cases_of(["a"], 3), progress=False)


def test_cross_fitted_calibration_never_uses_a_tasks_own_pairs() -> None:
    ids = [f"task{index // 9}" for index in range(72)]
    predicted = [0.1 + 0.1 * (index % 9) for index in range(72)]
    real = [min(1.0, value + 0.05 * (index % 3)) for index, value in enumerate(predicted)]
    baseline = cross_fitted_calibration(ids, predicted, real, seed=0)
    flipped_real = [1.0 - value if task == "task0" else value for task, value in zip(ids, real, strict=True)]
    flipped = cross_fitted_calibration(ids, predicted, flipped_real, seed=0)
    own = [index for index, task in enumerate(ids) if task == "task0"]
    others = [index for index, task in enumerate(ids) if task != "task0"]
    assert [flipped[index] for index in own] == [baseline[index] for index in own]
    assert any(flipped[index] != baseline[index] for index in others)
    assert (
        cross_fitted_calibration(["same"] * 72, predicted, real) == predicted
    )  # nothing to fit on: identity


def test_cross_fitted_calibration_removes_a_bias_shared_by_all_tasks() -> None:
    ids = [f"t{index // 10}" for index in range(80)]
    predicted = [0.1 + 0.8 * ((index * 7) % 10) / 9 for index in range(80)]
    real = [value**3 for value in predicted]
    calibrated = cross_fitted_calibration(ids, predicted, real, seed=3)
    before = np.mean(np.abs(np.array(predicted) - real))
    after = np.mean(np.abs(np.array(calibrated) - real))
    assert after < 0.2 * before


def test_perfect_and_reversed_predictors_score_plus_and_minus_one_within_tasks() -> None:
    corpus = cases_of(["a", "b"], per_task=5)
    real_rewards = [0.5, 0.6, 0.7, 0.8, 0.9] * 2
    perfect = fidelity_metrics(corpus, records(real_rewards), predictions(real_rewards))
    reversed_ = fidelity_metrics(corpus, records(real_rewards), predictions(real_rewards[::-1]))
    assert perfect.spearman == pytest.approx(1.0) and perfect.kendall == pytest.approx(1.0)
    assert perfect.mae == 0.0 and perfect.status_accuracy == 1.0 and perfect.n_rank_tasks == 2
    assert reversed_.spearman == pytest.approx(-1.0)


def test_rank_correlation_is_within_task_not_pooled_across_tasks() -> None:
    corpus = cases_of(["low", "high"], per_task=4)
    real_rewards = [0.1, 0.2, 0.3, 0.4, 0.7, 0.8, 0.9, 1.0]
    predicted = [0.4, 0.3, 0.2, 0.1, 1.0, 0.9, 0.8, 0.7]  # pooled they agree; within each task they disagree
    metrics = fidelity_metrics(corpus, records(real_rewards), predictions(predicted))
    assert metrics.spearman == pytest.approx(-1.0)


def test_unknown_predictions_count_as_parse_failures_and_stay_out_of_the_errors() -> None:
    corpus = cases_of(["a"], per_task=4)
    metrics = fidelity_metrics(corpus, records([0.5, 0.6, 0.7, 0.8]), predictions([None, 0.6, 0.7, 0.9]))
    assert metrics.parse_failure_rate == 0.25
    assert metrics.mae == pytest.approx(0.1 / 3)


def test_unknown_real_outcomes_are_left_out_of_status_accuracy() -> None:
    corpus = cases_of(["a"], per_task=3)
    real = [RealRecord("valid", 0.7), RealRecord("sandbox_error", None), RealRecord("runtime_error", 0.1)]
    metrics = fidelity_metrics(corpus, real, predictions([0.7, 0.7, 0.7]))
    assert metrics.status_accuracy == 0.5 and metrics.status_coverage == 1.0


def test_metrics_reject_mismatched_lengths() -> None:
    with pytest.raises(ConfigError, match="one of each"):
        fidelity_metrics(cases_of(["a"], 2), records([0.5]), predictions([0.5, 0.5]))


def test_evaluation_writes_a_table_and_both_plots(tmp_path: Path) -> None:
    corpus = cases_of(["a", "b", "c", "d"], per_task=6)
    real = records([0.5 + 0.05 * (index % 6) for index in range(len(corpus))])
    results = [
        evaluate_world_model(model, corpus, real, progress=False)
        for model in (
            RubricWorldModel(),
            LearnedWorldModel(config=LearnedWorldModelConfig(min_observations=4)),
        )
    ]
    assert results[1].metrics.n_cases == len(corpus)
    markdown = write_table(results, tmp_path / "table.md", tmp_path / "table.csv")
    assert "| rubric |" in markdown and "| learned |" in markdown
    assert (tmp_path / "table.csv").read_text().count("\n") == 3
    for path in (
        plot_reliability(results, tmp_path / "r.png"),
        plot_calibration(results, tmp_path / "c.png"),
    ):
        assert path.stat().st_size > 5_000


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"world_models": ("oracle",)}, "oracle"),
        ({"world_models": ()}, "choose from"),
        ({"references": False}, "corpus is empty"),
        ({"timeout_s": 0.0}, "positive timeout"),
        ({"embeddings": "bert"}, "minilm"),
        ({"world_models": ("llm-http",)}, "llm_base_url"),
    ],
)
def test_invalid_fidelity_args_are_rejected_with_the_fix(kwargs: dict, message: str) -> None:
    from wmrl_adapters.fidelity_cli import FidelityArgs

    with pytest.raises(ConfigError, match=message):
        FidelityArgs(**kwargs)


def test_rollout_files_with_bad_lines_or_unknown_competitions_are_rejected(
    titanic_suite, tmp_path: Path
) -> None:
    from wmrl_adapters.fidelity_cli import rollout_cases

    good = tmp_path / "good.jsonl"
    good.write_text('{"competition": "titanic-survival", "solution": "print(1)", "label": "a"}\n\n')
    [case] = rollout_cases(titanic_suite, good)
    assert (
        case.source == "rollout" and case.label == "a" and case.context.competition_id == "titanic-survival"
    )
    for text, message in (
        ('{"solution": "x"}\n', "expected a JSON object"),
        ("nope\n", "expected a JSON object"),
        ('{"competition": "mars", "solution": "x"}\n', "unknown competition"),
    ):
        bad = tmp_path / "bad.jsonl"
        bad.write_text(text)
        with pytest.raises(DataError, match=message):
            rollout_cases(titanic_suite, bad)


@pytest.mark.integration
def test_reference_runs_are_executed_for_the_current_code_once_then_cached(
    titanic_suite, tmp_path: Path
) -> None:
    from wmrl_adapters.fidelity_cli import reference_cases

    from wmrl_envs.kaggle.outcome import RewardLadder
    from wmrl_envs.sandbox import make_sandbox

    sandbox = make_sandbox("unsafe")
    cache = ExecutionCache(tmp_path / "executions.jsonl")
    try:
        cases, stats = reference_cases(
            titanic_suite,
            ["titanic-survival"],
            sandbox,
            cache,
            ladder=RewardLadder(),
            names=("sample_submission",),
            progress=False,
        )
        again, stats_again = reference_cases(
            titanic_suite,
            ["titanic-survival"],
            sandbox,
            ExecutionCache(tmp_path / "executions.jsonl"),
            ladder=RewardLadder(),
            names=("sample_submission",),
            progress=False,
        )
    finally:
        sandbox.close()
    assert [case.label for case in cases] == ["sample_submission"] and cases[0].source == "reference"
    assert stats.n_executed == 1 and stats_again.n_executed == 0 and stats_again.n_cached == 1
    record = cache.get(cases[0].key)
    assert record is not None and record.status == "valid" and record.reward is not None
    assert again[0].key == cases[0].key


def test_cli_options_map_onto_fidelity_args_and_bad_values_name_the_fix() -> None:
    from wmrl_adapters.fidelity_cli import parse_args

    args = parse_args(
        [
            "--world-models",
            "rubric,learned+rubric",
            "--competitions",
            "a,b",
            "--timeout-s",
            "30",
            "--cache",
            "x.jsonl",
            "--no-strict-sandbox",
            "--quiet",
            "--reference-names",
            "prior",
        ]
    )
    assert args.world_models == ("rubric", "learned+rubric") and args.competitions == ("a", "b")
    assert args.timeout_s == 30.0 and args.cache == Path("x.jsonl") and args.reference_names == ("prior",)
    assert not args.strict_sandbox and not args.progress and args.references
    with pytest.raises(ConfigError, match="oracle"):
        parse_args(["--world-models", "oracle"])


def test_status_is_read_from_an_llm_style_outcome_when_info_has_no_status() -> None:
    corpus = cases_of(["a"], per_task=2)
    llm_style = [
        Prediction(reward=0.1, info={"outcome": Outcome(status="runtime_error")}),
        Prediction(reward=0.7, info={"outcome": Outcome(status="valid", public_score=0.8)}),
    ]
    metrics = fidelity_metrics(
        corpus, [RealRecord("runtime_error", 0.1), RealRecord("no_submission", 0.2)], llm_style
    )
    assert metrics.status_coverage == 1.0 and metrics.status_accuracy == 0.5


def test_within_group_agreement_is_the_pearson_of_grpo_standardised_rewards_not_of_raw_ones() -> None:
    rng = np.random.default_rng(0)
    real = rng.standard_normal((5, 8))
    predicted = 0.6 * real + 0.8 * rng.standard_normal((5, 8))
    scale = np.arange(1, 6)[:, None] * 10.0  # groups on very different scales and offsets
    groups = [str(group) for group in range(5) for _ in range(8)]
    agreement = within_group_agreement(
        groups, list((predicted * scale + scale).ravel()), list((real - scale).ravel())
    )
    per_group = [np.corrcoef(predicted[group], real[group])[0, 1] for group in range(5)]
    assert agreement is not None and agreement.n_groups == 5 and agreement.n_pairs == 40
    assert agreement.correlation == pytest.approx(np.mean(per_group))
    pooled_raw = np.corrcoef((predicted * scale + scale).ravel(), (real - scale).ravel())[0, 1]
    assert abs(pooled_raw - agreement.correlation) > 0.2


def test_a_group_where_only_the_model_varies_counts_against_it_as_in_the_gradient() -> None:
    varied = within_group_agreement(["a"] * 3, [0.1, 0.5, 0.9], [0.0, 0.5, 1.0])
    diluted = within_group_agreement(
        ["a"] * 3 + ["b"] * 3, [0.1, 0.5, 0.9] * 2, [0.0, 0.5, 1.0, 0.2, 0.2, 0.2]
    )
    assert varied is not None and diluted is not None
    assert varied.correlation == pytest.approx(1.0) and diluted.correlation == pytest.approx(1 / math.sqrt(2))
    assert diluted.pairwise_accuracy == 1.0  # the constant group has no ordered pair to get wrong
    flat = within_group_agreement(["a"] * 3 + ["b"] * 3, [0.5] * 6, [0.0, 0.5, 1.0, 1.0, 0.5, 0.0])
    assert flat is not None and flat.correlation == 0.0 and flat.pairwise_accuracy == 0.5
    assert within_group_agreement(["a"] * 3, [0.1, 0.5, 0.9], [0.3] * 3) is None


def test_unknown_or_nan_rewards_are_left_out_of_the_agreement_not_zeroed() -> None:
    agreement = within_group_agreement(["a"] * 5, [0.1, None, 0.5, 0.9, math.nan], [0.0, 1.0, 0.5, 1.0, 0.0])
    assert agreement is not None and agreement.n_pairs == 3 and agreement.correlation == pytest.approx(1.0)
    assert agreement.pairwise_accuracy == 1.0 and agreement.correlation_se is None  # one group: no s.e.


def test_the_jackknife_standard_error_matches_the_spread_over_repeated_corpora() -> None:
    rng = np.random.default_rng(1)
    groups = [str(group) for group in range(30) for _ in range(6)]
    correlations, errors = [], []
    for _ in range(150):
        real = rng.standard_normal(180)
        predicted = 0.6 * real + 0.8 * rng.standard_normal(180)
        agreement = within_group_agreement(groups, list(predicted), list(real))
        assert agreement is not None and agreement.correlation_se is not None
        correlations.append(agreement.correlation)
        errors.append(agreement.correlation_se)
    assert np.mean(errors) == pytest.approx(np.std(correlations), rel=0.2)


def _cached_rollouts(tmp_path: Path, real_of_rank: dict[int, float]) -> tuple[Path, Path]:
    """Reference codes of three competitions as rollouts, with their real outcomes already in a cache.

    The cache stands in for an earlier run's real executions (their execution and grading are tested
    above, in the integration tests): the test is about what the CLI reports, and a real run of 15
    solutions would take minutes. ``real_of_rank`` gives each solution's real reward by its rank in
    the rubric's prediction, so the agreement is set by the test.
    """
    import json

    from wmrl_adapters.fidelity_cli import rollout_cases

    from wmrl_envs.kaggle.references import reference_solutions
    from wmrl_envs.kaggle.suite import load_suite

    names = ("sample_submission", "linear_two_columns", "knn_unscaled", "random_forest", "stacking")
    suite = load_suite(progress=False)
    competitions = suite.ids()[:3]
    tmp_path.mkdir(parents=True, exist_ok=True)
    rollouts = tmp_path / "rollouts.jsonl"
    lines = [
        json.dumps({"competition": competition, "solution": solution.code, "label": solution.name})
        for competition in competitions
        for solution in reference_solutions(suite.get(competition, with_leaderboard=False))
        if solution.name in names
    ]
    rollouts.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cases = rollout_cases(suite, rollouts)
    predicted = [
        prediction.reward for prediction in RubricWorldModel().predict([case.query() for case in cases])
    ]
    cache = ExecutionCache(tmp_path / "executions.jsonl")
    for start in range(0, len(cases), len(names)):
        group = range(start, start + len(names))
        for rank, index in enumerate(sorted(group, key=lambda index: predicted[index])):
            reward = real_of_rank[rank] + 0.01 * start
            cache.put(
                cases[index].key, RealRecord(status="valid", reward=reward, position=reward, wall_s=1.0)
            )
    return rollouts, tmp_path / "executions.jsonl"


def _fidelity_cli(tmp_path: Path, rollouts: Path, cache: Path, *extra: str) -> None:
    from wmrl_adapters.fidelity_cli import main

    argv = ["--world-models", "rubric", "--no-references", "--rollouts", str(rollouts), "--cache", str(cache)]
    argv += ["--sandbox", "unsafe", "--output-dir", str(tmp_path / "out"), "--quiet", *extra]
    assert main(argv) == 0


def test_the_cli_turns_the_measured_agreement_into_the_expected_effect(tmp_path: Path, capsys) -> None:
    import json

    rollouts, cache = _cached_rollouts(tmp_path, {0: 0.1, 1: 0.3, 2: 0.4, 3: 0.7, 4: 0.9})
    _fidelity_cli(tmp_path, rollouts, cache, "--anchor-fraction", "0.25")
    [line] = [
        line for line in capsys.readouterr().out.splitlines() if line.startswith("rubric (OD-calibrated)")
    ]
    saved = json.loads((tmp_path / "out" / "expected_effect.json").read_text(encoding="utf-8"))["rubric"]
    effect, agreement = saved["expected_effect"], saved["agreement"]
    assert agreement["n_groups"] == 3 and agreement["n_pairs"] == 15 and agreement["correlation"] > 0.5
    assert (
        effect["anchor_fraction"] == 0.25 and effect["variance_ratio"] < 1.0 and effect["verdict"] == "gain"
    )
    assert f"within-group r = {agreement['correlation']:.2f}" in line and "on 3 groups" in line
    assert f"variance is {100 * effect['variance_ratio']:.0f} %" in line and "at 1 anchor group in 4" in line
    assert "fewer executions to the same score than GRPO on the anchors alone" in line
    assert line.endswith("(variance-limited regime)") and saved["summary"] in line


def test_a_useless_or_unmeasurable_world_model_is_told_plainly_and_a_reference_corpus_is_flagged() -> None:
    from wmrl_adapters.fidelity_cli import FidelityReport

    from wmrl_algos.power import ExpectedEffect
    from wmrl_envs.kaggle.fidelity import ExecutionStats

    corpus = cases_of(["a", "b", "c"], per_task=4)
    varied = records([0.1, 0.4, 0.6, 0.9] * 3)
    constant = records([0.5] * 12)
    results = [
        evaluate_world_model(RubricWorldModel(), corpus, real, progress=False) for real in (varied, constant)
    ]
    agreements = [within_group_agreement(r.competition_ids, r.calibrated, r.real) for r in results]
    assert (
        agreements[0] is not None and agreements[0].correlation == 0.0
    )  # the rubric cannot tell x = 0 from x = 3
    assert agreements[1] is None
    effect = ExpectedEffect(
        correlation=agreements[0].correlation,
        anchor_fraction=0.125,
        correlation_se=agreements[0].correlation_se,
    )
    report = FidelityReport(
        results=tuple(results),
        execution=ExecutionStats(n_cases=12, n_executed=0, n_cached=12, execution_s=0.0),
        cases_by_source={"reference": 12},
        table="",
        agreements=tuple(agreements),
        effects=(effect, None),
    )
    useless, unknown, note = report.effect_lines()
    assert "will not help" in useless and "falls back to GRPO on the anchors alone" in useless
    assert "expected effect is unknown" in unknown and "--rollouts" in unknown
    assert note.startswith("note: measured on the reference population")


@pytest.mark.parametrize(
    ("text", "message"), [("0", "anchor_fraction=0.0 is outside"), ("a lot", "'a lot' is not a number")]
)
def test_a_bad_anchor_fraction_is_rejected_with_the_value_and_the_fix(text: str, message: str) -> None:
    from wmrl_adapters.fidelity_cli import parse_args

    with pytest.raises(ConfigError, match=message):
        parse_args(["--anchor-fraction", text])


def test_the_expected_effect_is_stated_at_wmrl_trains_anchor_fraction_by_default() -> None:
    from wmrl_adapters.fidelity_cli import parse_args
    from wmrl_adapters.train.kaggle.config import TrainConfig

    assert parse_args([]).anchor_fraction == TrainConfig().anchor_fraction
