"""Agent output is hostile: nothing an action holds can crash or stall the trainer (real env, real sandbox).

Each case was measured to crash ``env.step`` or stall it for seconds before it was fixed (see
``docs/threat-model.md``): huge integer labels, deeply nested expressions the host compiled,
quadratic fence regexes on a long line, an action longer than the action space, a ``` inside a string
cutting the solution, a submission with a 100,000-column header.
"""

from __future__ import annotations

import math
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from wmrl_envs.kaggle.competition import Competition
from wmrl_envs.kaggle.env import MAX_TEXT_LENGTH, KaggleEnv, extract_code
from wmrl_envs.kaggle.leaderboard import Leaderboard
from wmrl_envs.kaggle.suite import KaggleSuite, build_suite
from wmrl_envs.kaggle.world_models.rubric import RubricWorldModel
from wmrl_envs.sandbox import BubblewrapSandbox, ExecutionRequest, ExecutionResult, Sandbox
from wmrl_envs.wrapper import WorldModelWrapper

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def titanic(tmp_path_factory: pytest.TempPathFactory) -> Competition:
    root = build_suite(tmp_path_factory.mktemp("suite"), ids=["titanic-survival"], progress=False)
    competition = KaggleSuite(root).get("titanic-survival", with_leaderboard=False)
    board = Leaderboard((0.9, 0.8, 0.7), higher_is_better=True)
    return replace(competition, leaderboard=board, public_leaderboard=board)


class _CountingSandbox:
    """Wraps the real sandbox and remembers every copied-out file it produced (to check deletion)."""

    def __init__(self, inner: Sandbox) -> None:
        self.inner = inner
        self.name = inner.name
        self.outputs: list[Path] = []

    def run(self, request: ExecutionRequest) -> ExecutionResult:
        result = self.inner.run(request)
        if result.output is not None:
            self.outputs.append(result.output)
        return result

    def close(self) -> None:
        """The inner sandbox is closed by its fixture."""


@pytest.fixture()
def env(titanic: Competition, strict_bubblewrap: BubblewrapSandbox) -> Iterator[KaggleEnv]:
    environment = KaggleEnv(titanic, sandbox=_CountingSandbox(strict_bubblewrap), max_turns=20, timeout_s=60)
    environment.reset(seed=0)
    yield environment
    environment.close()


def _writes(rows: str) -> str:
    return f"```python\nopen('submission.csv', 'w').write({rows!r})\n```"


@pytest.mark.parametrize("label", ["1e300", "9223372036854775808", "-1e309", "nan"])
def test_huge_integer_labels_are_a_rejected_submission_not_a_crash(
    env: KaggleEnv, titanic: Competition, label: str
) -> None:
    ids = titanic.load_answers()[titanic.id_column].astype(str).tolist()
    rows = "id,survived\n" + "".join(f"{i},{label if k == 0 else 0}\n" for k, i in enumerate(ids))
    _, reward, _, _, info = env.step(_writes(rows))
    assert info["status"] == "no_submission" and "not valid labels" in info["detail"], info["detail"]
    assert reward == pytest.approx(0.2)


@pytest.mark.parametrize(
    "source",
    ["-" * 6000 + "1", "1" + "+1" * 3000, "(" * 3000 + ")" * 3000, "lambda:" * 2000 + "1"],
    ids=["unary-memoryerror", "binop-recursionerror", "parentheses", "lambdas"],
)
def test_deeply_nested_code_is_a_sandbox_status_not_a_host_crash(env: KaggleEnv, source: str) -> None:
    before = time.perf_counter()
    _, reward, _, _, info = env.step(f"```python\nx = {source}\n```")
    assert info["status"] in ("syntax_error", "runtime_error", "no_submission"), info["detail"]
    assert not math.isnan(reward)
    assert time.perf_counter() - before < 60


def test_a_long_line_of_backticks_is_parsed_in_linear_time(env: KaggleEnv) -> None:
    action = "```" * 43_690  # 128 KB, no newline: 16-22 s per call with the old regexes
    started = time.perf_counter()
    assert extract_code(action) is None
    assert time.perf_counter() - started < 0.5
    _, reward, _, _, info = env.step(action)
    assert info["status"] == "malformed" and reward == 0.0


@pytest.mark.parametrize("action", ["~~~" * 43_690, "~~~\n" * 32_768], ids=["one-line", "fence-lines"])
def test_128_kb_of_tildes_is_parsed_in_linear_time(env: KaggleEnv, action: str) -> None:
    started = time.perf_counter()
    assert extract_code(action) is None
    assert time.perf_counter() - started < 1.0
    _, reward, _, _, info = env.step(action)
    assert info["status"] == "malformed" and reward == 0.0


_COPY_LINES = ["import shutil", "shutil.copy('input/sample_submission.csv', 'submission.csv')"]


@pytest.mark.parametrize(
    "action",
    [
        "\r\n".join(["Here:", "```python", *_COPY_LINES, "```", "Done.", ""]),
        "\r".join(["Here:", "```python", *_COPY_LINES, "```", "Done."]),
        "\r\n".join(_COPY_LINES),
        "\n".join(["Here:", "~~~python", *_COPY_LINES, "~~~", "Done."]),
        "\r\n".join(["~~~~", "note = '~~~'", *_COPY_LINES, "~~~~"]),
    ],
    ids=["crlf", "lone-cr", "crlf-bare-code", "tilde-fence", "crlf-tilde-fence"],
)
def test_a_solution_in_any_line_ending_or_fence_style_runs(env: KaggleEnv, action: str) -> None:
    """LLM servers and Windows clients send ``\\r\\n``; a fence that kept its ``\\r`` graded
    ``syntax_error`` (``\\r`` alone: ``malformed``), and ``~~~`` fences were not recognised."""
    _, reward, _, _, info = env.step(action)
    assert info["status"] == "valid" and reward > 0, info["detail"]


def test_a_lone_surrogate_in_the_code_is_malformed_not_an_exception(env: KaggleEnv) -> None:
    """An LLM server's JSON can carry ``\\ud800``; it raised ``UnicodeEncodeError`` out of ``step``."""
    counting = env.sandbox
    assert isinstance(counting, _CountingSandbox)
    observation, reward, _, _, info = env.step("```python\nx = '\ud800'\n" + "\n".join(_COPY_LINES) + "\n```")
    assert info["status"] == "malformed" and "not valid Unicode" in info["detail"] and reward == 0.0
    assert not counting.outputs, "nothing may run"
    observation.encode()


@pytest.mark.parametrize("size", [MAX_TEXT_LENGTH + 1, 2 * 1024 * 1024])
def test_an_action_longer_than_the_limit_is_malformed_unparsed(env: KaggleEnv, size: int) -> None:
    action = "```python\nx = [" + "1," * (size // 2) + "]\n```"
    assert env.action_space.contains(action)  # any text is an action; the env judges it
    tracemalloc.start()
    started = time.perf_counter()
    _, reward, _, _, info = env.step(action)
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert info["status"] == "malformed" and f"{MAX_TEXT_LENGTH:,}" in info["detail"] and reward == 0.0
    assert elapsed < 1.0 and peak < 16 * 2**20, (elapsed, peak)


@pytest.mark.parametrize(
    ("reply", "status"),
    [
        ("Решение → ✓\n```python\n# 预测 → ok\nimport shutil\n"
         "shutil.copy('input/sample_submission.csv', 'submission.csv')\n```", "valid"),
        ("1\n\"titanic.conf\" Bìn-Bìnnguyetsis hatsphthalocity ─－－－－�", "malformed"),
    ],
    ids=["code-with-other-scripts", "gibberish-measured-on-a-gpu-run"],
)
def test_a_reply_in_any_script_is_judged_by_the_env_not_refused_by_a_checking_wrapper(
    titanic: Competition, strict_bubblewrap: BubblewrapSandbox, reply: str, status: str
) -> None:
    """A bf16 SmolLM2 reply like the second one stopped ``wmrl train`` with ``InvalidAction`` (the old
    Latin-1 action space): the wrapper checks actions, and an LLM writes any character."""
    env = KaggleEnv(titanic, sandbox=strict_bubblewrap, max_turns=2)
    wrapped = WorldModelWrapper(env, RubricWorldModel())
    wrapped.reset(seed=0, options={"anchor": True})
    _, reward, _, _, info = wrapped.step(reply)
    assert info["status"] == status, info["detail"]
    assert (reward > 0) == (status == "valid")
    wrapped.close()


def test_a_large_valid_action_costs_the_trainer_no_compile_memory(env: KaggleEnv) -> None:
    action = "```python\nx = [" + "1," * 90_000 + "]\nprint(len(x))\n```"
    assert env.action_space.contains(action)
    tracemalloc.start()
    code = extract_code(action)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert code is not None and peak < 4 * len(action), "extracting the code must not compile it"
    observation, _, _, _, info = env.step(action)
    assert info["status"] == "no_submission" and "90000" in observation, info["detail"]


def test_a_fence_inside_a_string_does_not_cut_the_solution(env: KaggleEnv, titanic: Competition) -> None:
    action = (
        "Here is my solution:\n```python\nimport shutil\nnote = '```'\n"
        "shutil.copy('input/sample_submission.csv', 'submission.csv')\nprint(note)\n```\nDone."
    )
    _, _, _, _, info = env.step(action)
    assert info["status"] == "valid", info["detail"]


def test_a_hundred_thousand_column_header_is_rejected_fast(env: KaggleEnv) -> None:
    code = (
        "```python\nwith open('submission.csv', 'w') as f:\n"
        "    f.write(','.join(f'c{i}' for i in range(100_000)) + '\\n')\n"
        "    for _ in range(20):\n        f.write(','.join('1' for _ in range(100_000)) + '\\n')\n```"
    )
    _, _, _, _, info = env.step(code)
    assert info["status"] == "no_submission" and "100,000 columns" in info["detail"], info["detail"]


def test_copied_out_submissions_are_deleted_once_graded(env: KaggleEnv) -> None:
    counting = env.sandbox
    assert isinstance(counting, _CountingSandbox)
    copy = "```python\nimport shutil\nshutil.copy('input/sample_submission.csv', 'submission.csv')\n```"
    for _ in range(2):
        assert env.step(copy)[4]["status"] == "valid"
    assert len(counting.outputs) == 2 and not any(path.exists() for path in counting.outputs)


def test_a_stalled_crash_earns_the_crash_reward_not_an_unknown_one(
    titanic: Competition, strict_bubblewrap: BubblewrapSandbox
) -> None:
    environment = KaggleEnv(titanic, sandbox=strict_bubblewrap, max_turns=2, timeout_s=2.0)
    environment.reset(seed=0)
    _, crash, *_ = environment.step("```python\nraise ValueError('boom')\n```")
    _, stall, _, _, info = environment.step(
        "```python\ntry:\n    raise ValueError('boom')\nexcept Exception:\n    while True:\n        pass\n```"
    )
    assert info["status"] == "timeout" and not info["reward_unknown"]
    assert stall == crash == pytest.approx(0.1), "stalling must not turn a crash into a dropped trajectory"
