"""The public names of the last release still import: from where they live, or from where they lived.

No release is tagged; ``pyproject.toml`` has said 0.1.0 since the first commit. The names below are the
``__all__`` of every module of ``wmrl_envs``, ``wmrl_algos`` and ``wmrl_adapters`` at commit 8c7d411,
the last commit before a public module moved (5e53069 moved ``wmrl_envs.world_models`` to
``wmrl_envs.kaggle.world_models``), read from git history. A moved module must still import from its
old path, warn with a ``DeprecationWarning`` naming the new path, and give the same objects.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

MOVED = {
    "wmrl_envs.world_models": "wmrl_envs.kaggle.world_models",
    "wmrl_envs.world_models.features": "wmrl_envs.kaggle.world_models.features",
    "wmrl_envs.world_models.learned": "wmrl_envs.kaggle.world_models.learned",
    "wmrl_envs.world_models.llm": "wmrl_envs.kaggle.world_models.llm",
    "wmrl_envs.world_models.rubric": "wmrl_envs.kaggle.world_models.rubric",
}
"""Old module path -> new module path."""

SPLIT = {"wmrl_envs.fidelity": "wmrl_envs.kaggle.fidelity"}
"""Old module path -> where part of it moved: the generic part stays, the moved names resolve lazily."""

CHECKOUT_ONLY = {"wmrl_algos.toy_bandit": "benchmarks/toy_bandit.py"}
"""Old module path -> the repository file it moved to (not in the distribution: the shim needs a checkout)."""

RELEASE_MOVED = {
    "wmrl_envs.world_models": (
        "CandidateDistribution",
        "Embedder",
        "GenerationResult",
        "KaggleExecutionTemplate",
        "LLMScoreWorldModel",
        "LLMWorldModel",
        "LLMWorldModelConfig",
        "LearnedWorldModel",
        "LearnedWorldModelConfig",
        "OutputConstraint",
        "PromptParts",
        "PromptTemplate",
        "RubricConfig",
        "RubricWorldModel",
        "ScoreDistribution",
        "TextGenerator",
        "UncertainWorldModel",
        "uncertainty_anchor_ranking",
    ),
    "wmrl_envs.world_models.features": (
        "CodeFeatures",
        "FEATURE_NAMES",
        "MODEL_FAMILIES",
        "ModelFamily",
        "analyze_solution",
        "extract_code",
        "feature_vector",
        "inventory_files",
        "known_columns",
    ),
    "wmrl_envs.world_models.learned": (
        "Embedder",
        "LearnedWorldModel",
        "LearnedWorldModelConfig",
        "UncertainWorldModel",
        "uncertainty_anchor_ranking",
    ),
    "wmrl_envs.world_models.llm": (
        "CandidateDistribution",
        "FinishReason",
        "GenerationResult",
        "KaggleExecutionTemplate",
        "LLMScoreWorldModel",
        "LLMWorldModel",
        "LLMWorldModelConfig",
        "OutputConstraint",
        "PromptFormatter",
        "PromptParts",
        "PromptTemplate",
        "REPORT_END",
        "ScoreDistribution",
        "TextGenerator",
        "chatml",
        "distribution_from_logprobs",
        "truncate_middle",
    ),
    "wmrl_envs.world_models.rubric": (
        "DEFAULT_FAMILY_PRIORS",
        "RubricAssessment",
        "RubricConfig",
        "RubricWorldModel",
        "score_at_position",
    ),
}
"""The moved modules' public names at 8c7d411."""

RELEASE_API = {
    "wmrl_adapters.cli": ("SUBCOMMANDS", "main", "parse_dataclass_args", "plain_help"),
    "wmrl_adapters.docker": (
        "DEFAULT_IMAGE",
        "DockerSandbox",
        "IMAGE_PACKAGES",
        "build_sandbox_image",
        "docker_client",
        "engine_reachable",
        "sweep_stale_containers",
    ),
    "wmrl_adapters.doctor": ("Check", "main", "run_checks"),
    "wmrl_adapters.embeddings": ("MINILM_PACKAGE", "MiniLMEmbedder", "minilm_model_dir"),
    "wmrl_adapters.fidelity_cli": (
        "FidelityArgs",
        "FidelityReport",
        "SandboxExecutor",
        "WORLD_MODEL_NAMES",
        "main",
        "make_world_model",
        "parse_args",
        "reference_cases",
        "rollout_cases",
        "run_fidelity",
    ),
    "wmrl_adapters.llm_agent": ("DEFAULT_SYSTEM_PROMPT", "Generation", "LLMAgent", "LLMAgentConfig"),
    "wmrl_adapters.models": (
        "SMOLLM2_GGUF_NAME",
        "SMOLLM2_PACKAGE",
        "dequantised_model_dir",
        "model_cache_dir",
        "smollm2_gguf_path",
    ),
    "wmrl_adapters.openai_backend": (
        "LlamaCppServer",
        "OpenAIClientConfig",
        "OpenAICompatibleBackend",
        "build_completion_body",
        "free_port",
    ),
    "wmrl_adapters.ray_exec": (
        "ExecutionStats",
        "RayExecutor",
        "RaySandbox",
        "RayWorldModelPool",
        "connect",
        "start_local_cluster",
    ),
    "wmrl_adapters.robometer": ("RobometerScorer",),
    "wmrl_adapters.train": ("TrainablePolicy",),
    "wmrl_adapters.train.cli": ("main", "parse_overrides"),
    "wmrl_adapters.train.kaggle.compare": ("CompareArgs", "main", "run_compare", "summarise"),
    "wmrl_adapters.train.kaggle.config": ("ALGOS", "POLICIES", "TrainConfig", "WORLD_MODELS", "paper_config"),
    "wmrl_adapters.train.embodied.config": ("EMBODIED_ALGOS", "EmbodiedConfig"),
    "wmrl_adapters.train.run.checks": (
        "check_model_dir",
        "check_path",
        "coerce",
        "field_help",
        "load_config",
    ),
    "wmrl_adapters.train.kaggle.design_policy": ("DesignPolicy", "design_action"),
    "wmrl_adapters.train.kaggle.evaluate": (
        "EvalResult",
        "evaluate_policy",
        "main",
        "resolve_competitions",
    ),
    "wmrl_adapters.train.kaggle.execution": ("CachedKaggleEnv", "ComputeMeter", "ExecutionCache"),
    "wmrl_adapters.train.run.plots": ("plot_run",),
    "wmrl_adapters.train.run.policy": ("TrainablePolicy",),
    "wmrl_adapters.train.kaggle.trainer": ("Trainer", "build_policy", "correction_config", "write_atomic"),
    "wmrl_adapters.train.kaggle.world_models": ("NoWorldModel", "build_world_model"),
    "wmrl_adapters.transformers_backend": ("TransformersBackend", "TransformersConfig"),
    "wmrl_adapters.trl": ("STATE_FILE", "TRLRewardFunction", "WMRLReward"),
    "wmrl_adapters.vllm_backend": (
        "VLLMBackend",
        "VLLMConfig",
        "result_from_output",
        "sampling_kwargs",
        "score_kwargs",
        "top_logprobs_from_output",
    ),
    "wmrl_algos": (
        "AdvantageScale",
        "AnchorScheduler",
        "BackendUnavailableError",
        "CheckpointError",
        "ConfigError",
        "CorrectionConfig",
        "CorrectionLoop",
        "DataError",
        "GRPOConfig",
        "GroupAdvantages",
        "InverseVarianceWeighter",
        "IsolationUnavailableError",
        "IsotonicMap",
        "LossType",
        "MissingDependencyError",
        "OnlineDebiaser",
        "ResidualCorrection",
        "RidgeResidual",
        "SandboxError",
        "Score",
        "ScoredGroup",
        "Scorer",
        "StepResult",
        "WMRLError",
        "WeightRule",
        "WorldModelError",
        "as_score_array",
        "centre_and_scale",
        "centred_residual",
        "fit_isotonic",
        "group_advantages",
        "grpo_loss",
    ),
    "wmrl_algos.advantages": ("AdvantageScale", "centre_and_scale", "group_advantages"),
    "wmrl_algos.anchors": ("AnchorScheduler",),
    "wmrl_algos.debias": ("IsotonicMap", "OnlineDebiaser", "fit_isotonic"),
    "wmrl_algos.denoise": ("InverseVarianceWeighter", "WeightRule", "centred_residual"),
    "wmrl_algos.errors": (
        "BackendUnavailableError",
        "CheckpointError",
        "ConfigError",
        "DataError",
        "IsolationUnavailableError",
        "MissingDependencyError",
        "SandboxError",
        "WMRLError",
        "WorldModelError",
        "require",
    ),
    "wmrl_algos.grpo": ("GRPOConfig", "LossType", "grpo_loss"),
    "wmrl_algos.loop": ("CorrectionConfig", "CorrectionLoop", "Scorer"),
    "wmrl_algos.residual": ("ResidualCorrection", "RidgeResidual"),
    "wmrl_algos.toy_bandit": (
        "BanditConfig",
        "ContextualBandit",
        "SyntheticWorldModel",
        "WorldModelErrorConfig",
        "policy_shift",
        "sample_actions",
    ),
    "wmrl_algos.types": (
        "GroupAdvantages",
        "Score",
        "ScoreSource",
        "ScoredGroup",
        "StepResult",
        "as_score_array",
    ),
    "wmrl_envs": (
        "CachedWorldModel",
        "CostLedger",
        "CostlyToyEnv",
        "GroupedRollout",
        "Policy",
        "Prediction",
        "RolloutConfig",
        "RolloutTask",
        "SimulatableEnv",
        "StepInfo",
        "ToyWorldModel",
        "Trajectory",
        "TurnContext",
        "WorldModel",
        "WorldModelQuery",
        "WorldModelWrapper",
        "best_return",
        "episode_return",
        "predict_batch",
        "read_vector_info",
        "register_envs",
    ),
    "wmrl_envs.embodied": (
        "EmbodiedEnv",
        "LIBERO_SUITES",
        "LiberoEnv",
        "ProgressCurve",
        "ProgressInput",
        "ProgressScorer",
        "ProgressWorldModel",
        "ROBOSUITE_TASKS",
        "RenderingUnavailableError",
        "RobosuiteEnv",
        "SimStateProgressScorer",
        "SimulatorError",
        "SimulatorProcess",
        "collapse_progress",
        "embodied_env_ids",
        "embodied_python",
        "max_progress",
        "potential_progress",
        "progress_input",
        "register_embodied_envs",
    ),
    "wmrl_envs.embodied.envs": (
        "Camera",
        "EmbodiedEnv",
        "LIBERO_SUITES",
        "LiberoEnv",
        "ROBOSUITE_TASKS",
        "RobosuiteEnv",
        "embodied_env_ids",
        "register_embodied_envs",
    ),
    "wmrl_envs.embodied.fidelity": (
        "Episode",
        "ScorerFidelity",
        "collect_episodes",
        "fidelity_table",
        "plot_progress_curves",
        "scorer_fidelity",
    ),
    "wmrl_envs.embodied.learned": ("LearnedProgressConfig", "LearnedProgressScorer"),
    "wmrl_envs.embodied.policies": ("NoisyPolicy", "RandomPolicy", "ScriptedLiftPolicy"),
    "wmrl_envs.embodied.progress": (
        "Collapse",
        "ProgressCurve",
        "ProgressInput",
        "ProgressScorer",
        "ProgressWorldModel",
        "SimStateProgressScorer",
        "collapse_progress",
        "max_progress",
        "potential_progress",
        "progress_input",
    ),
    "wmrl_envs.embodied.stack": (
        "EMBODIED_HOME_VARIABLE",
        "EMBODIED_PYTHON_VARIABLE",
        "RenderingUnavailableError",
        "SimulatorError",
        "SimulatorProcess",
        "embodied_python",
    ),
    "wmrl_envs.fidelity": (
        "CaseSource",
        "ExecutionCache",
        "ExecutionStats",
        "Executor",
        "FidelityCase",
        "FidelityMetrics",
        "FidelityResult",
        "PredictionRun",
        "RealRecord",
        "cross_fitted_calibration",
        "evaluate_world_model",
        "execute_cases",
        "fidelity_metrics",
        "plot_calibration",
        "plot_reliability",
        "predict_cases",
        "predicted_status",
        "prequential_calibration",
        "write_table",
    ),
    "wmrl_envs.kaggle": (
        "Competition",
        "GradeReport",
        "KaggleContext",
        "KaggleEnv",
        "KaggleEnvConfig",
        "KaggleSuite",
        "Leaderboard",
        "METRICS",
        "Metric",
        "Outcome",
        "RewardLadder",
        "SPECS",
        "SubmissionRejected",
        "build_suite",
        "default_suite_dir",
        "extract_code",
        "format_feedback",
        "get_metric",
        "grade_execution",
        "load_competition",
        "load_mlebench_competition",
        "load_mledojo_competition",
        "load_suite",
        "medal_positions",
        "parse_feedback",
        "position_score",
        "score_submission",
    ),
    "wmrl_envs.kaggle.competition": (
        "COMPETITION_FORMAT",
        "Competition",
        "Layout",
        "describe_public_files",
        "load_competition",
        "load_mlebench_competition",
        "load_mledojo_competition",
        "load_wmrl_competition",
    ),
    "wmrl_envs.kaggle.design": (
        "DECISIONS",
        "Design",
        "FEEDBACK_FEATURES",
        "STATUSES",
        "TASK_FEATURES",
        "design_header",
        "feedback_features",
        "parse_design",
        "relevant_decisions",
        "render_design",
        "task_features",
    ),
    "wmrl_envs.kaggle.env": (
        "CHARSET",
        "KaggleEnv",
        "KaggleEnvConfig",
        "MAX_TEXT_LENGTH",
        "RewardScheme",
        "extract_code",
    ),
    "wmrl_envs.kaggle.feedback": ("FEEDBACK_HEADER", "format_feedback", "parse_feedback"),
    "wmrl_envs.kaggle.grading": (
        "DEFAULT_MAX_SUBMISSION_BYTES",
        "GradeReport",
        "MAX_CELL_CHARS",
        "SubmissionRejected",
        "extract_traceback",
        "grade_execution",
        "read_submission",
        "score_submission",
    ),
    "wmrl_envs.kaggle.leaderboard": (
        "Leaderboard",
        "Medal",
        "MedalThresholds",
        "medal_positions",
        "read_leaderboard_csv",
    ),
    "wmrl_envs.kaggle.metrics": ("METRICS", "Metric", "PredictionKind", "get_metric", "metric_from_alias"),
    "wmrl_envs.kaggle.outcome": (
        "ExecutionStatus",
        "KaggleContext",
        "Outcome",
        "RewardLadder",
        "TaskType",
        "position_score",
    ),
    "wmrl_envs.kaggle.references": (
        "COMMITTED_LEADERBOARDS",
        "LEADERBOARDS_FORMAT",
        "LeaderboardRecord",
        "REFERENCE_NAMES",
        "ReferenceEntry",
        "ReferenceSolution",
        "SUBMISSION_WRITER",
        "build_leaderboard",
        "data_fingerprint",
        "load_leaderboard_record",
        "main",
        "reference_solutions",
        "solution_preamble",
        "write_leaderboards",
    ),
    "wmrl_envs.kaggle.suite": (
        "CompetitionSpec",
        "HELDOUT",
        "KaggleSuite",
        "SPECS",
        "SUITE_SEED",
        "SUITE_VERSION",
        "Split",
        "build_suite",
        "default_suite_dir",
        "load_suite",
    ),
    "wmrl_envs.ledger": ("CostLedger",),
    "wmrl_envs.registration": ("COSTLY_TOY_ID", "KAGGLE_ID", "register_envs", "registered_ids"),
    "wmrl_envs.rollouts": (
        "GroupedRollout",
        "Policy",
        "Reducer",
        "RolloutConfig",
        "RolloutTask",
        "Trajectory",
        "TurnContext",
        "best_return",
        "episode_return",
    ),
    "wmrl_envs.sandbox": (
        "BackendName",
        "BubblewrapSandbox",
        "ExecutionRequest",
        "ExecutionResult",
        "RunStatus",
        "Sandbox",
        "SandboxFactory",
        "UnsafeSandbox",
        "WarmSandbox",
        "available_backends",
        "make_sandbox",
        "register_backend",
        "sweep_stale",
    ),
    "wmrl_envs.sandbox.base": ("ExecutionRequest", "ExecutionResult", "RunStatus", "Sandbox"),
    "wmrl_envs.sandbox.lifetime": (
        "OWNED_NAME",
        "OWNER_GONE_EXIT",
        "SweepReport",
        "launcher_call",
        "owner_alive",
        "owner_guard",
        "owner_tag",
        "parse_owner",
        "process_start_time",
        "sweep_stale",
    ),
    "wmrl_envs.sandbox.limits": (
        "CGROUP_V1_ROOT",
        "CgroupUsage",
        "RunCgroups",
        "TailBuffer",
        "cgroup_v1_available",
        "kill_cgroup_members",
        "sandbox_cgroup_parents",
    ),
    "wmrl_envs.sandbox.local": (
        "BubblewrapSandbox",
        "LaunchedRun",
        "SANDBOX_CWD",
        "SHM_MB",
        "input_target",
        "python_roots",
    ),
    "wmrl_envs.sandbox.process": ("ManagedProcess", "ProcessOutcome"),
    "wmrl_envs.sandbox.results": ("build_result", "signal_name"),
    "wmrl_envs.sandbox.seccomp": ("DENIED_SYSCALLS", "seccomp_fd", "seccomp_program"),
    "wmrl_envs.sandbox.unsafe": ("UnsafeSandbox",),
    "wmrl_envs.sandbox.warm": ("DEFAULT_PRELOAD", "WarmSandbox"),
    "wmrl_envs.sandbox.workdir": ("CopiedOutput", "OutputStore", "WorkDir", "copy_out", "remove_tree"),
    "wmrl_envs.toy": (
        "BurnMode",
        "CachedWorldModel",
        "CostlyToyEnv",
        "ToyContext",
        "ToyWorldModel",
        "burn",
        "stable_key",
        "toy_oracle",
        "toy_score",
        "toy_target",
    ),
    "wmrl_envs.world_model": ("Prediction", "SimulatableEnv", "WorldModel", "WorldModelQuery"),
    "wmrl_envs.wrapper": (
        "AnchorSelector",
        "BatchPrediction",
        "Mode",
        "PendingStep",
        "Scoring",
        "StepInfo",
        "WorldModelWrapper",
        "predict_batch",
        "read_vector_info",
    ),
}
"""Every other module's public names at 8c7d411."""

REMOVED = {
    ("wmrl_adapters.fidelity_cli", "WORLD_MODEL_NAMES"): (
        "removed, not moved, in 8a49d1c: wmrl fidelity takes any --world-model spec of the trainer's "
        "builder, so there is no closed list of names any more"
    ),
}
"""Release names deliberately dropped, each with why."""


def _fresh_import(name: str) -> tuple[object, list[warnings.WarningMessage]]:
    for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[loaded]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(name)
    return module, list(caught)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_moved_module_imports_from_its_old_path_warning_with_the_new_one(old: str) -> None:
    module, caught = _fresh_import(old)
    new = importlib.import_module(MOVED[old])
    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert any(f"{old} moved to {MOVED[old]}" in message for message in messages), messages
    for name in RELEASE_MOVED[old]:
        assert getattr(module, name) is getattr(new, name), f"{old}.{name} is not {MOVED[old]}.{name}"
    assert set(RELEASE_MOVED[old]) <= set(module.__all__)


def test_the_users_line_from_wmrl_envs_world_models_import_llm_world_model_works() -> None:
    script = (
        "import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
        "try:\n    from wmrl_envs.world_models import LLMWorldModel\n"
        "except DeprecationWarning as w:\n    print(w)\n"
        "warnings.simplefilter('ignore')\n"
        "from wmrl_envs.world_models import LLMWorldModel\n"
        "from wmrl_envs.kaggle.world_models import LLMWorldModel as New\n"
        "print(LLMWorldModel is New)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "moved to wmrl_envs.kaggle.world_models" in done.stdout and done.stdout.endswith("True\n")


@pytest.mark.slow
def test_every_public_name_of_the_release_still_imports_from_its_module() -> None:
    """All 72 other modules in one child process (importing them all takes ~30 s on a busy machine)."""
    script = (
        "import importlib, json, sys\n"
        "api = json.loads(sys.argv[1])\n"
        "missing = [f'{m}.{n}' for m, names in api.items() for n in names\n"
        "           if not hasattr(importlib.import_module(m), n)]\n"
        "print(json.dumps(missing))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(RELEASE_API)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    missing = set(json.loads(done.stdout.splitlines()[-1]))
    expected = {f"{module}.{name}" for module, name in REMOVED}
    assert missing == expected, f"public names gone without a shim: {sorted(missing - expected)}"


@pytest.mark.parametrize("old", sorted(SPLIT))
def test_a_split_module_imports_without_its_moved_part_and_forwards_those_names_warning(old: str) -> None:
    """In a child process: this session has imported the Kaggle track already (conftest)."""
    script = (
        "import importlib, json, sys, warnings\n"
        "old, new, names = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])\n"
        "with warnings.catch_warnings(record=True) as on_import:\n"
        "    warnings.simplefilter('always')\n"
        "    module = importlib.import_module(old)\n"
        "track = new.rpartition('.')[0]\n"
        "report = {'loaded': sorted(m for m in sys.modules if m == track or m.startswith(track + '.')),\n"
        "          'on_import': [str(w.message) for w in on_import], 'warned': {}, 'same': {}}\n"
        "for name in names:\n"
        "    with warnings.catch_warnings(record=True) as caught:\n"
        "        warnings.simplefilter('always')\n"
        "        value = getattr(module, name)\n"
        "    report['warned'][name] = [str(w.message) for w in caught if w.category is DeprecationWarning]\n"
        "    report['same'][name] = value is getattr(importlib.import_module(new), name, None)\n"
        "report['moved'] = [name for name in names if name in importlib.import_module(new).__all__]\n"
        "print(json.dumps(report))\n"
    )
    names = RELEASE_API[old]
    done = subprocess.run(
        [sys.executable, "-c", script, old, SPLIT[old], json.dumps(names)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["loaded"] == [] and report["on_import"] == [], report
    moved = report["moved"]
    kept = [name for name in names if name not in moved]
    assert moved and all(report["same"][name] for name in moved), report
    assert kept and set(kept) <= set(importlib.import_module(old).__all__), (moved, kept)
    expected = f"{old}.{moved[0]} moved to {SPLIT[old]}"
    assert any(expected in message for message in report["warned"][moved[0]]), report
    assert not any(report["warned"][name] for name in kept), report


@pytest.mark.parametrize("old", sorted(CHECKOUT_ONLY))
def test_a_module_moved_out_of_the_distribution_imports_in_a_checkout_naming_its_file(old: str) -> None:
    module, caught = _fresh_import(old)
    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert any(f"{old} moved to {CHECKOUT_ONLY[old]}" in message for message in messages), messages
    root = Path(__file__).resolve().parents[1]
    fixture = sys.modules[Path(CHECKOUT_ONLY[old]).stem]
    assert Path(fixture.__file__ or "").resolve() == root / CHECKOUT_ONLY[old]
    for name in RELEASE_API[old]:
        assert getattr(module, name) is getattr(fixture, name), f"{old}.{name} is not the fixture's"


@pytest.mark.parametrize("old", sorted(CHECKOUT_ONLY))
def test_a_module_moved_out_of_the_distribution_fails_to_import_in_an_install_naming_where_it_went(
    old: str, tmp_path: Path
) -> None:
    """The installed layout: the package alone in site-packages, no repository files beside it."""
    top = old.partition(".")[0]
    shutil.copytree(
        Path(importlib.import_module(top).__file__ or "").parent,
        tmp_path / "site" / top,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    script = (
        "import importlib, sys\n"
        f"assert importlib.import_module({top!r}).__file__.startswith({str(tmp_path)!r})\n"
        "try:\n"
        f"    importlib.import_module({old!r})\n"
        "except ImportError as error:\n"
        "    print(type(error).__name__, error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("MissingDependencyError"), done.stdout
    assert f"{old} moved to {CHECKOUT_ONLY[old]}" in done.stdout and "checkout" in done.stdout, done.stdout

