"""KaggleEnv: code extraction, the reward ladder per status, public-only feedback, world-model hooks."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from wmrl_algos.errors import ConfigError, SandboxError
from wmrl_envs.kaggle.competition import Competition
from wmrl_envs.kaggle.env import MAX_TEXT_LENGTH, KaggleEnv, KaggleEnvConfig, extract_code, parse_action
from wmrl_envs.kaggle.feedback import format_feedback, parse_feedback
from wmrl_envs.kaggle.leaderboard import Leaderboard
from wmrl_envs.kaggle.outcome import Outcome, RewardLadder
from wmrl_envs.kaggle.references import COMMITTED_LEADERBOARDS, data_fingerprint, reference_solutions
from wmrl_envs.kaggle.suite import KaggleSuite, build_suite
from wmrl_envs.sandbox.base import ExecutionRequest, ExecutionResult
from wmrl_envs.sandbox.unsafe import UnsafeSandbox
from wmrl_envs.world_model import Prediction

COPY_SAMPLE = "```python\nimport shutil\nshutil.copy('input/sample_submission.csv', 'submission.csv')\n```"


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> KaggleSuite:
    ids = ["concrete-strength", "titanic-survival", "telco-churn", "delivery-time"]
    return KaggleSuite(build_suite(tmp_path_factory.mktemp("suite"), ids=ids, progress=False))


@pytest.fixture(scope="module")
def sandbox() -> UnsafeSandbox:
    box = UnsafeSandbox()
    yield box
    box.close()


@pytest.fixture(scope="module")
def concrete(suite: KaggleSuite) -> Competition:
    competition = suite.get("concrete-strength", with_leaderboard=False)
    board = Leaderboard((5.0, 8.0, 12.0, 16.0), higher_is_better=False)
    return replace(competition, leaderboard=board, public_leaderboard=board)


class BrokenSandbox:
    """Stands in for a sandbox whose machinery fails (it cannot be made to fail on demand for real)."""

    name = "broken"

    def run(self, request: ExecutionRequest) -> ExecutionResult:
        raise SandboxError("container runtime vanished")

    def close(self) -> None:
        """Nothing to release."""


def test_a_failing_sandbox_gives_an_unknown_reward_not_zero(concrete: Competition) -> None:
    env = KaggleEnv(concrete, sandbox=BrokenSandbox())
    env.reset(seed=0)
    observation, reward, *_, info = env.step(COPY_SAMPLE)
    assert math.isnan(reward) and info["reward_unknown"] and info["status"] == "sandbox_error"
    assert "status: sandbox_error" in observation and info["best_ladder_value"] is None


class RefusingSandbox:
    """Stands in for a sandbox where the test asserts that nothing is executed."""

    name = "refusing"

    def run(self, request: ExecutionRequest) -> ExecutionResult:
        raise AssertionError("this path must not execute anything")

    def close(self) -> None:
        """Nothing to release."""


def test_extract_code_prefers_the_python_fence() -> None:
    message = "Plan first.\n```text\nnot code\n```\n```python\nimport pandas as pd\nprint(1)\n```\nthanks"
    assert extract_code(message) == "import pandas as pd\nprint(1)\n"
    assert extract_code("```\nx = 1\n```") == "x = 1\n"
    assert extract_code("import os\nprint(os.getcwd())") == "import os\nprint(os.getcwd())\n"
    assert extract_code("x = (1,\n") == "x = (1,\n", "broken code is code (a syntax error, not malformed)"
    assert extract_code("I would train a gradient boosting model.") is None
    assert extract_code("") is None
    assert extract_code("```python\n\n```") is None


@pytest.mark.parametrize("newline", ["\r\n", "\r"], ids=["crlf", "lone-cr"])
def test_extract_code_reads_windows_and_old_mac_line_endings(newline: str) -> None:
    message = newline.join(["Here:", "```python", "import os", "print(os.getcwd())", "```", "Done."])
    assert extract_code(message) == "import os\nprint(os.getcwd())\n"
    assert extract_code(newline.join(["import os", "x = 1", ""])) == "import os\nx = 1\n"


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("~~~python\nx = 1\n~~~\n", "x = 1\n"),
        ("~~~ Python3 {.numberLines}\nx = 1\n~~~", "x = 1\n"),
        ("~~~~py\nx = '~~~'\n~~~\ny = 2\n~~~~~\nafter", "x = '~~~'\n~~~\ny = 2\n"),
        ("~~~python\nx = 1\n```\ny = 2\n~~~", "x = 1\n```\ny = 2\n"),
        ("```python\nx = 1\n~~~\ny = 2\n```", "x = 1\n~~~\ny = 2\n"),
        ("~~~text\nnot code\n~~~\n~~~\nx = 1\n~~~", "x = 1\n"),
        ("   ~~~python\nx = 1\n   ~~~   \n", "x = 1\n"),
    ],
    ids=["python", "info-string", "longer-run-closes-only-on-as-many", "backticks-inside-tildes",
         "tildes-inside-backticks", "unlabelled-after-text", "indented"],
)
def test_tilde_fences_follow_commonmark(message: str, code: str) -> None:
    assert extract_code(message) == code


@pytest.mark.parametrize(
    ("action", "detail"),
    [
        ("```python\nx = '\ud800'\n```", "U+D800 at character 15"),
        ("x = 1  # \udfff", "U+DFFF"),
        ("prose \udc80 then\n```python\nx = 1\n```", "not valid Unicode"),
        (b"print(1)", "a bytes, not text"),
        ("x" * (MAX_TEXT_LENGTH + 1) + "\ud800", f"{MAX_TEXT_LENGTH:,}"),
    ],
    ids=["surrogate-in-code", "low-surrogate", "surrogate-in-prose", "bytes", "too-long-is-decided-first"],
)
def test_parse_action_turns_hostile_text_into_a_malformed_outcome_not_an_exception(
    action: object, detail: str
) -> None:
    outcome = parse_action(action)
    assert isinstance(outcome, Outcome) and outcome.status == "malformed" and detail in outcome.detail


def test_a_lone_surrogate_is_malformed_before_the_sandbox_and_the_history_stays_encodable(
    concrete: Competition,
) -> None:
    env = KaggleEnv(concrete, sandbox=RefusingSandbox(), max_turns=2)
    env.reset(seed=0)
    observation, reward, _, _, info = env.step("```python\nx = '\ud800'\n```")
    assert info["status"] == "malformed" and "not valid Unicode" in info["detail"] and reward == 0.0
    context = env.world_model_context()
    json.dumps([observation, *context.history, *context.previous_solutions], ensure_ascii=False).encode()


def test_reward_ladder_per_status(concrete: Competition, sandbox: UnsafeSandbox) -> None:
    env = KaggleEnv(concrete, sandbox=sandbox, max_turns=8, timeout_s=3.0, reward="best_improvement")
    env.reset(seed=0)
    ladder = RewardLadder()
    actions = {
        "malformed": "I think a random forest would do well here.",
        "syntax_error": "```python\ndef broken(:\n    pass\n```",
        "runtime_error": "```python\nraise RuntimeError('boom')\n```",
        "no_submission": "```python\nprint('forgot to write the file')\n```",
        "timeout": "```python\nimport time\ntime.sleep(30)\n```",
        "valid": COPY_SAMPLE,
    }
    rewards = []
    for expected, action in actions.items():
        _, reward, terminated, truncated, info = env.step(action)
        assert info["status"] == expected, info["detail"]
        assert not terminated and not truncated
        position = info["position"] if expected == "valid" else None
        assert info["ladder_value"] == pytest.approx(ladder.reward(expected, position))
        assert not info["reward_unknown"]
        rewards.append(reward)
    assert rewards == pytest.approx([0.0, 0.0, 0.1, 0.1, 0.0, rewards[-1]]), (
        "a timeout earns the runtime-error rung: no improvement over an earlier crash"
    )
    assert sum(rewards) == pytest.approx(info["best_ladder_value"]), "the return is the best ladder value"
    _, reward, *_ = env.step("```python\nraise SystemExit(3)\n```")
    assert reward == 0.0, "a worse execution after a better one costs nothing"


def test_the_ladder_is_configurable(concrete: Competition, sandbox: UnsafeSandbox) -> None:
    ladder = RewardLadder(malformed=-1.0, runtime_error=0.3, valid_base=0.0, valid_scale=1.0)
    env = KaggleEnv(concrete, sandbox=sandbox, ladder=ladder, reward="best_improvement")
    env.reset(seed=0)
    assert env.step("no code here, sorry.")[1] == -1.0
    assert env.step("```python\n1/0\n```")[1] == pytest.approx(1.3), "improvement from -1.0 to 0.3"


def test_only_public_score_is_shown_to_the_agent(concrete: Competition, sandbox: UnsafeSandbox) -> None:
    answers = concrete.load_answers()
    rows = [
        f"{identifier},{float(value) + (0.0 if usage == 'Public' else 7.0)}"
        for identifier, value, usage in answers.itertuples(index=False)
    ]
    code = (
        "rows = " + json.dumps(rows) + "\n"
        "with open('submission.csv', 'w') as f:\n"
        "    f.write('id,compressive_strength\\n' + '\\n'.join(rows) + '\\n')\n"
    )
    env = KaggleEnv(concrete, sandbox=sandbox)
    env.reset(seed=0)
    observation, reward, _, _, info = env.step(f"```python\n{code}```")
    assert info["status"] == "valid"
    assert info["public_score"] == 0.0 and info["score"] == pytest.approx(7.0)
    assert "public_score: 0" in observation
    assert "7.0" not in observation and "score: 7" not in observation
    assert parse_feedback(observation).public_score == 0.0  # type: ignore[union-attr]
    assert reward == pytest.approx(0.5 + 0.5 * concrete.leaderboard.position(7.0))  # type: ignore[union-attr]


def test_observations_are_text_in_the_observation_space(
    concrete: Competition, sandbox: UnsafeSandbox
) -> None:
    env = KaggleEnv(concrete, sandbox=sandbox)
    observation, info = env.reset(seed=0)
    assert env.observation_space.contains(observation)
    assert "./input/" in observation and "submission.csv" in observation and "Data inventory" in observation
    observation, *_ = env.step("```python\nprint('caf\u00e9 \u2603 \U0001f600')\nraise ValueError('x')\n```")
    assert env.observation_space.contains(observation)
    assert "ValueError" in observation and "Traceback" in observation


@pytest.fixture(scope="module")
def ranked_suite(suite: KaggleSuite) -> KaggleSuite:
    """The suite with a small leaderboard cached for every competition (independent of the committed one)."""
    for competition_id in suite.ids():
        path = suite.leaderboard_cache(competition_id)
        assert path is not None
        path.parent.mkdir(parents=True, exist_ok=True)
        entries = [
            {"name": f"r{i}", "status": "valid", "score": score, "public_score": score, "wall_s": 1.0}
            for i, score in enumerate((0.2, 0.5, 0.8, 5.0, 10.0))
        ]
        fingerprint = data_fingerprint(suite.get(competition_id, with_leaderboard=False))
        path.write_text(json.dumps({"fingerprint": fingerprint, "entries": entries}))
    return suite


def test_check_env_passes(ranked_suite: KaggleSuite, sandbox: UnsafeSandbox) -> None:
    env = KaggleEnv(suite=ranked_suite, sandbox=sandbox, split="train")
    check_env(env, skip_render_check=True)
    env.close()


def test_reset_draws_a_seeded_competition_from_the_split_only(
    ranked_suite: KaggleSuite, sandbox: UnsafeSandbox
) -> None:
    suite = ranked_suite
    env = KaggleEnv(suite=suite, sandbox=sandbox, split="train")
    drawn = {env.reset(seed=seed)[1]["competition_id"] for seed in range(20)}
    assert drawn <= set(suite.ids("train")) and "delivery-time" not in drawn
    assert env.reset(seed=5)[0] == env.reset(seed=5)[0]
    with pytest.raises(ConfigError, match="held-out"):
        env.reset(options={"competition": "delivery-time"})
    with pytest.raises(ConfigError, match="held-out"):
        KaggleEnv("delivery-time", suite=suite, sandbox=sandbox)


def test_episode_ends_after_max_turns(concrete: Competition, sandbox: UnsafeSandbox) -> None:
    env = KaggleEnv(concrete, sandbox=sandbox, max_turns=2)
    env.reset(seed=0)
    assert env.step("no code")[2] is False
    assert env.step("no code")[2] is True
    with pytest.raises(gym.error.ResetNeeded):
        env.step("no code")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_turns": 0}, "max_turns"),
        ({"timeout_s": 0.0}, "timeout_s"),
        ({"memory_mb": 16}, "memory_mb"),
        ({"split": "dev"}, "split"),
        ({"render_mode": "human"}, "render_mode"),
    ],
)
def test_invalid_arguments_are_refused(concrete: Competition, kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        KaggleEnv(concrete, sandbox=RefusingSandbox(), **kwargs)  # type: ignore[arg-type]


def test_a_single_competition_env_refuses_other_ids(concrete: Competition) -> None:
    env = KaggleEnv(concrete, sandbox=RefusingSandbox())
    assert env.reset(seed=0)[1]["competition_id"] == "concrete-strength"
    with pytest.raises(ConfigError, match="no suite"):
        env.reset(options={"competition": "titanic-survival"})


def test_world_model_context_holds_public_information_only(
    concrete: Competition, sandbox: UnsafeSandbox
) -> None:
    env = KaggleEnv(concrete, sandbox=sandbox)
    env.reset(seed=0)
    env.step("```python\nprint('hello from turn one')\n```")
    context = env.world_model_context()
    assert context.turn == 1 and len(context.history) == 1 and "hello from turn one" in context.history[0]
    assert context.previous_solutions == ("print('hello from turn one')\n",)
    assert context.leaderboard == concrete.public_leaderboard.scores  # type: ignore[union-attr]
    text = repr(context)
    assert str(concrete.answers_path) not in text and "Private" not in text


def test_best_improvement_reward_makes_the_return_the_best_ladder_value(concrete: Competition) -> None:
    env = KaggleEnv(concrete, sandbox=RefusingSandbox(), max_turns=3, reward="best_improvement")
    env.reset(seed=0)
    valid = Outcome(status="valid", score=6.0, public_score=6.0, exit_code=0)
    best = env.step_reward(valid)
    _, first, *_ = env.apply_prediction("x", Prediction(None, info={"outcome": valid}))
    _, second, *_ = env.apply_prediction(
        "x", Prediction(0.1, info={"outcome": Outcome(status="runtime_error")})
    )
    assert first == pytest.approx(best) and second == 0.0, (
        "a worse execution after a better one costs nothing"
    )
    assert env.step_reward(valid) == 0.0, "no improvement over the best so far"


def test_per_execution_rewards_sum_over_the_episode(concrete: Competition) -> None:
    env = KaggleEnv(concrete, sandbox=RefusingSandbox(), max_turns=2)
    env.reset(seed=0)
    _, first, *_ = env.apply_prediction(
        "x", Prediction(0.75, info={"outcome": Outcome(status="valid", score=6.0)})
    )
    _, second, terminated, *_ = env.apply_prediction(
        "x", Prediction(0.1, info={"outcome": Outcome(status="runtime_error")})
    )
    assert (first, second) == (0.75, 0.1) and terminated


def test_unknown_reward_scheme_is_refused() -> None:
    with pytest.raises(ConfigError, match="'best'"):
        KaggleEnvConfig(reward="best")  # type: ignore[arg-type]


def test_apply_prediction_advances_without_executing(concrete: Competition) -> None:
    env = KaggleEnv(concrete, sandbox=RefusingSandbox(), max_turns=3)
    env.reset(seed=0)
    predicted = Outcome(status="valid", score=6.0, public_score=6.0, exit_code=0, wall_s=2.0)
    observation, reward, terminated, _, info = env.apply_prediction(
        COPY_SAMPLE, Prediction(reward=None, info={"outcome": predicted})
    )
    expected = 0.5 + 0.5 * concrete.leaderboard.position(6.0)  # type: ignore[union-attr]
    assert reward == pytest.approx(expected) and info["simulated"] and info["status"] == "valid"
    assert observation == format_feedback(predicted)

    simulated_log = format_feedback(Outcome(status="runtime_error", exit_code=1, stderr_tail="KeyError"))
    prediction = Prediction(0.1, observation=simulated_log)
    observation, reward, terminated, _, info = env.apply_prediction("x", prediction)
    assert info["status"] == "runtime_error" and observation == simulated_log
    assert reward == pytest.approx(0.1), (
        "the world model's own reward is the step reward (anchor pairs match)"
    )
    assert env.world_model_context().turn == 2

    assert env.step_reward(predicted) == pytest.approx(expected), "per execution: the ladder value itself"
    assert env.step_reward(Outcome(status="timeout")) == pytest.approx(0.1), "a timeout is a runtime error"
    assert env.step_reward(Outcome(status="sandbox_error")) is None
    _, reward, terminated, _, info = env.apply_prediction("x", Prediction(None, observation="garbled text"))
    assert math.isnan(reward) and info["reward_unknown"] and terminated


@pytest.mark.integration
def test_end_to_end_episode_with_a_real_reference_through_the_local_sandbox(tmp_path: Path) -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed: the local sandbox cannot run here")
    if not COMMITTED_LEADERBOARDS.is_file():
        pytest.skip("the committed leaderboards.json has not been built yet")
    from wmrl_envs.sandbox.local import BubblewrapSandbox

    suite = KaggleSuite(build_suite(tmp_path, ids=["concrete-strength"], progress=False))
    competition = suite.get("concrete-strength")
    assert competition.leaderboard is not None, "the committed leaderboard must be attached"
    committed = json.loads(COMMITTED_LEADERBOARDS.read_text())["competitions"]["concrete-strength"]
    expected = {entry["name"]: entry for entry in committed["entries"]}["linear_numeric"]
    solution = next(s for s in reference_solutions(competition) if s.name == "linear_numeric")
    sandbox = BubblewrapSandbox()
    try:
        env = KaggleEnv("concrete-strength", suite=suite, sandbox=sandbox, max_turns=2, timeout_s=120)
        env.reset(seed=0)
        message = f"Here is my solution:\n```python\n{solution.code}```"
        observation, reward, terminated, _, info = env.step(message)
        assert info["status"] == "valid", observation
        assert info["score"] == pytest.approx(expected["score"], abs=1e-6)
        assert info["public_score"] == pytest.approx(expected["public_score"], abs=1e-6)
        assert reward == pytest.approx(0.5 + 0.5 * competition.leaderboard.position(info["score"]))
        assert f"public_score: {expected['public_score']:.6g}" in observation
        assert info["wall_s"] > 0 and not terminated
        _, reward, terminated, _, info = env.step(COPY_SAMPLE)
        position = competition.leaderboard.position(info["score"])
        assert info["status"] == "valid" and reward == pytest.approx(0.5 + 0.5 * position) and terminated
    finally:
        sandbox.close()


def test_a_named_sandbox_is_created_and_closed_by_the_env(concrete: Competition) -> None:
    env = KaggleEnv(concrete, sandbox="unsafe")
    env.reset(seed=0)
    _, reward, _, _, info = env.step(COPY_SAMPLE)
    assert info["status"] == "valid" and not info["reward_unknown"]
    assert reward == pytest.approx(0.5 + 0.5 * info["position"])
    assert info["cpu_s"] is None or info["cpu_s"] >= 0.0
    assert info["backend"] == "unsafe" and info["isolated"] is False, "an unisolated run says so"
    env.close()
