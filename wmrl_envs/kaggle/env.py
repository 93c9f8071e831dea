"""``KaggleEnv``: a Gymnasium env where each action is a Python solution, run for real and graded.

Why this env: it is the expensive environment WMRL was made for. One step executes untrusted code in
a sandbox for seconds to minutes; a world model can stand in for that step through the two
:class:`~wmrl_envs.world_model.SimulatableEnv` hooks, which advance the same bookkeeping from a
predicted :class:`~wmrl_envs.kaggle.outcome.Outcome` without executing anything.

An episode is one competition and up to ``max_turns`` executions:

* ``reset`` picks a competition (``options={"competition": id}``, or a seeded draw from the split)
  and returns the task: overview, data inventory, and the sandbox layout instructions.
* ``step(message)`` extracts the Python solution from the message (:func:`extract_code`), runs it
  with the public files under ``./input/``, grades ``./submission.csv`` outside the sandbox, and
  returns the sandbox log (:func:`~wmrl_envs.kaggle.feedback.format_feedback`): exit status, the tails
  of stdout/stderr, the traceback and the **public** score only.

Reward: the ladder value of an execution is ``RewardLadder.reward(status, position)``
(``docs/design.md``, section "Reward ladder"; the position score is the private score's rank on the
private leaderboard). Two reward schemes:

* ``reward="per_execution"`` (default): each step's reward is that execution's ladder value. Why the
  default: under :class:`~wmrl_envs.wrapper.WorldModelWrapper` an anchor episode pairs the world
  model's per-execution prediction with the real step reward, so both must be on one scale for Online
  Debiasing to calibrate anything; the episode return is the sum over executions.
* ``reward="best_improvement"``: each step's reward is the improvement of the best ladder value so
  far, ``max(0, value - best)`` (the first known value counts in full), so the undiscounted return is
  the best ladder value of the episode, as on Kaggle where the best entry counts. Use it for plain RL
  without anchor pairs: a per-execution prediction is not on its scale.

A timeout is the solution's failure and gets the runtime-error rung (stalling must not pay). Only an
unknown outcome (the sandbox infrastructure failed) gives a NaN reward, ``info["reward_unknown"] =
True``, and leaves the best value unchanged: it is never read as 0.

Agent output is hostile too (``docs/threat-model.md``): any text is an action (:class:`SolutionText`),
and :func:`parse_action` is the one judge of it (``step``, ``execute`` and every subclass go through
it): one longer than :data:`MAX_TEXT_LENGTH` is ``malformed`` without being parsed, so is one that is
not valid Unicode (a lone surrogate, which an LLM server's JSON can carry), line endings are
normalised, fences are found in linear time, the trainer never compiles the solution (the sandbox
reports syntax errors), the submission is graded with bounded work (:mod:`~wmrl_envs.kaggle.grading`),
and its copy is deleted once graded.

``info`` (for the trainer, never shown to the agent) holds ``status``, ``score`` (private),
``public_score``, ``position``, ``medal``, ``above_median``, ``ladder_value``, ``best_ladder_value``,
``reward_unknown``, ``wall_s``, ``cpu_s``, ``max_rss_mb``, ``exit_code``, ``detail``, ``turn``,
``competition_id``, ``backend`` (the sandbox that ran it), ``isolated`` (``False`` on the unisolated
``unsafe`` backend, whose rewards are not to be trusted; ``None`` when simulated) and ``simulated``.
"""

from __future__ import annotations

import math
import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
from gymnasium import spaces

from wmrl_algos.errors import ConfigError, SandboxError, WMRLError
from wmrl_envs.kaggle.competition import Competition
from wmrl_envs.kaggle.feedback import format_feedback, parse_feedback
from wmrl_envs.kaggle.grading import grade_execution
from wmrl_envs.kaggle.outcome import KaggleContext, Outcome, RewardLadder
from wmrl_envs.kaggle.suite import KaggleSuite, load_suite
from wmrl_envs.sandbox.base import ExecutionRequest, Sandbox
from wmrl_envs.world_model import Prediction

__all__ = [
    "CHARSET",
    "MAX_TEXT_LENGTH",
    "KaggleEnvConfig",
    "KaggleEnv",
    "RewardScheme",
    "SolutionText",
    "extract_code",
    "normalise_line_endings",
    "parse_action",
]

RewardScheme = Literal["per_execution", "best_improvement"]
"""How an execution's ladder value becomes the step reward (see the module docstring)."""

CHARSET: str = string.printable + "".join(chr(code) for code in range(0xA0, 0x180))
"""Characters of observations and actions: printable ASCII with newlines and tabs, plus Latin-1 and
Latin Extended-A. Anything else in a log or an inventory is replaced by ``?``."""
MAX_TEXT_LENGTH = 200_000
_FENCE_OPEN = re.compile(
    r" {0,3}(?:(?P<ticks>`{3,}+)[ \t]*+(?P<lang>[^`\s]*+)[^`]*+"
    r"|(?P<tildes>~{3,}+)[ \t]*+(?P<tilde_lang>\S*+).*+)"
)
"""An opening fence line (CommonMark): backticks with an info string free of backticks, or tildes with
any info string; the first word of the info string is the language."""
_SURROGATE = re.compile("[\ud800-\udfff]")
"""A lone UTF-16 surrogate: a ``str`` can hold one, UTF-8 cannot encode it."""
_CODE_LINE = re.compile(
    r"import[ \t]++\w|from[ \t]++[\w.]++[ \t]++import[ \t]|def[ \t]++\w++[ \t]*+\(|class[ \t]++\w|"
    r"(?:for|while|if|with)[ \t][^\n]*+(?<=:)|print\(|"
    r"[A-Za-z_][\w.]*+[ \t]*+(?:\[[^=\]\n]*+\])?+[ \t]*+=(?!=)"
)
"""One line of Python (matched against a stripped line; possessive quantifiers keep it linear)."""
_ALLOWED = frozenset(CHARSET)


class SolutionText(spaces.Text):
    """The action space: any text. The env itself judges an action, not the space.

    Why not Gymnasium's ``Text`` with :data:`CHARSET`: a wrapper that checks actions (as
    :class:`~wmrl_envs.wrapper.WorldModelWrapper` does) raises ``InvalidAction`` for anything outside the
    space, and an LLM policy writes whatever it likes: a ``→`` in a comment (valid Python) or a reply of
    gibberish in another script stopped a GPU training run that way. Here every string is an action;
    one longer than :data:`MAX_TEXT_LENGTH` or without code is the policy's failure (``malformed``,
    reward 0), not an error. Samples still come from :data:`CHARSET`. Non-text actions are outside.

    Example:
        >>> space = SolutionText(max_length=MAX_TEXT_LENGTH, charset=CHARSET)
        >>> space.contains("x = 1  # 预测 → ok"), space.contains(b"bytes")
        (True, False)
    """

    def contains(self, x: Any) -> bool:
        """Any ``str``, whatever its characters and length."""
        return isinstance(x, str)
_UNISOLATED_BACKENDS = frozenset({"unsafe"})


def normalise_line_endings(text: str) -> str:
    """``text`` with Windows (``\\r\\n``) and old Mac (lone ``\\r``) line endings turned into ``\\n``.

    Why: LLM servers and Windows clients send both, and a fence line that keeps its ``\\r`` never
    closes its block. Linear time.

    >>> normalise_line_endings("a\\r\\nb\\rc\\n")
    'a\\nb\\nc\\n'
    """
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _fenced_blocks(message: str) -> list[tuple[str, str]]:
    """``(info word, body)`` of every fenced code block, by CommonMark's rules, in one pass over the lines.

    A fence opens on a line that starts (after at most three spaces) with three or more backticks or
    tildes, and closes only on a line holding nothing but at least as many of the same character (and
    spaces): a ```` ``` ```` inside a string, after code on the same line, or inside a ``~~~`` block
    never cuts a block. An unclosed block runs to the end of the message. Lines end at ``\\n`` only
    (:func:`extract_code` normalises the others first). Linear in the message length, whatever the
    message.
    """
    blocks: list[tuple[str, str]] = []
    fence = ""
    lang = ""
    body: list[str] = []
    for line in message.split("\n"):
        if fence:
            stripped = line.strip(" \t")
            indent = len(line) - len(line.lstrip(" "))
            if indent <= 3 and len(stripped) >= len(fence) and not stripped.strip(fence[0]):
                blocks.append((lang, "".join(body)))
                fence, body = "", []
            else:
                body.append(line + "\n")
            continue
        opening = _FENCE_OPEN.fullmatch(line)
        if opening is not None:
            fence = opening.group("ticks") or opening.group("tildes")
            lang = (opening.group("lang") or opening.group("tilde_lang") or "").lower()
            body = []
    if fence:
        text = "".join(body)
        blocks.append((lang, text[:-1] if text.endswith("\n") and not message.endswith("\n") else text))
    return blocks


def extract_code(message: str) -> str | None:
    """The Python solution in an agent's message, or ``None`` when it holds no code.

    Line endings are normalised first (:func:`normalise_line_endings`). The first ```` ```python ````
    (or ``py``/``python3``; or the same after ``~~~``) fenced block wins; else the first unlabelled
    fenced block; else, with no fence at all, the whole message if one of its lines looks like Python
    (an import, a def, an assignment, a ``print(``...). Prose alone is not code. Fences follow
    CommonMark (see :func:`_fenced_blocks`); nothing is compiled here: the sandbox reports syntax
    errors, so hostile source never reaches the trainer's compiler. Linear time in the message. It
    checks neither length nor encoding: :func:`parse_action` does, before calling it.

    >>> extract_code("Here:\\r\\n~~~python\\r\\nprint(1)\\r\\n~~~\\r\\nDone.")
    'print(1)\\n'
    >>> extract_code("import pandas as pd") is not None, extract_code("I would use a random forest.")
    (True, None)
    """
    message = normalise_line_endings(message)
    fences = _fenced_blocks(message)
    for wanted in (("python", "py", "python3"), ("",)):
        for lang, body in fences:
            if lang in wanted and body.strip():
                return body
    if fences:
        return None
    text = message.strip()
    if not text:
        return None
    looks_like_code = any(_CODE_LINE.match(line.strip(" \t")) for line in text.split("\n"))
    return text + "\n" if looks_like_code else None


def parse_action(action: object) -> str | Outcome:
    """The solution to run for ``action``, or the ``malformed`` outcome that replaces running it.

    The one judge of an action: :meth:`KaggleEnv.step`, :meth:`KaggleEnv.execute` and
    :meth:`KaggleEnv.apply_prediction` all call it, and a subclass (the trainer's execution cache)
    receives only what it returns, so no two paths can disagree on an action. In order, each check
    cheaper than the next and none of them raising: not text; longer than :data:`MAX_TEXT_LENGTH`
    (decided before anything reads the text); not valid Unicode (a lone surrogate, which UTF-8, and so
    the sandbox, cannot encode); no Python solution in it (:func:`extract_code`). The solution
    returned is exactly the code the sandbox runs, with ``\\n`` line endings.

    Args:
        action: what the policy sent: any object; only a ``str`` can hold a solution.

    Returns:
        The solution source, or an :class:`Outcome` with status ``malformed`` and a detail that says
        what is wrong and what to send instead.

    Example:
        >>> parse_action("```python\\r\\nprint(1)\\r\\n```")
        'print(1)\\n'
        >>> parse_action("x = '\\ud800'").detail
        'the action is not valid Unicode: a lone surrogate U+D800 at character 5; send UTF-8 text'
    """
    if not isinstance(action, str):
        return Outcome(status="malformed", detail=f"the action is a {type(action).__name__}, not text")
    if len(action) > MAX_TEXT_LENGTH:
        return Outcome(
            status="malformed",
            detail=f"the action is {len(action):,} characters; the env runs at most "
            f"{MAX_TEXT_LENGTH:,}: send one shorter solution",
        )
    surrogate = _SURROGATE.search(action)
    if surrogate is not None:
        return Outcome(
            status="malformed",
            detail=f"the action is not valid Unicode: a lone surrogate U+{ord(surrogate.group()):04X} at "
            f"character {surrogate.start():,}; send UTF-8 text",
        )
    code = extract_code(action)
    if code is None:
        return Outcome(
            status="malformed",
            detail="no Python solution found in the message; put it in a ```python fenced block",
        )
    return code


def _recorded_text(action: object) -> str:
    """What the history keeps of a malformed action: text only, at most :data:`MAX_TEXT_LENGTH`
    characters, lone surrogates as ``?`` (world models and logs must be able to encode it)."""
    if not isinstance(action, str):
        return ""
    return _SURROGATE.sub("?", action[:MAX_TEXT_LENGTH])


def _clean(text: str) -> str:
    cleaned = "".join(character if character in _ALLOWED else "?" for character in text)
    return cleaned[:MAX_TEXT_LENGTH]


def _instructions(competition: Competition, max_turns: int, timeout_s: float) -> str:
    return (
        "# How to submit\n\n"
        f"Reply with one Python solution in a ```python fenced block. It runs in a fresh sandbox with no "
        f"network, for at most {timeout_s:.0f} s: the current directory is a writable work dir, the "
        f"files above are read-only under `./input/` (e.g. `./input/{competition.train_file}`), and it must "
        f"write `./submission.csv` with the columns `{competition.id_column},{competition.target}`. "
        "Anything else it writes is ignored. After each run you see the execution log and the public "
        f"leaderboard score only. You have {max_turns} executions; your best submission counts.\n"
    )


@dataclass(frozen=True)
class KaggleEnvConfig:
    """The execution settings of :class:`KaggleEnv`, validated (the env builds one from its arguments).

    Example:
        >>> KaggleEnvConfig(max_turns=2).timeout_s
        300.0

    Attributes:
        max_turns: executions per episode (the paper uses up to 4). Must be >= 1.
        timeout_s: wall-clock limit of one execution; a run past it is killed and rewarded like a
            runtime error. Must be > 0.
        memory_mb: memory limit of one execution. Must be >= 256.
        max_submission_mb: size cap on the graded submission file. Must be >= 1.
        feedback_chars: approximate size of the log shown after each execution. Must be >= 400.
        reward: ``"per_execution"`` (each step's ladder value; the scale world-model predictions are
            on, so anchor pairs are consistent) or ``"best_improvement"`` (improvement of the best
            value so far; the return is the episode's best ladder value).
    """

    max_turns: int = 4
    timeout_s: float = 300.0
    memory_mb: int = 4096
    max_submission_mb: int = 32
    feedback_chars: int = 4000
    reward: RewardScheme = "per_execution"

    def __post_init__(self) -> None:
        if self.reward not in ("per_execution", "best_improvement"):
            raise ConfigError(f"reward={self.reward!r}; use 'per_execution' or 'best_improvement'")
        if self.max_turns < 1:
            raise ConfigError(f"max_turns={self.max_turns}; an episode needs an execution, use >= 1")
        if not self.timeout_s > 0:
            raise ConfigError(f"timeout_s={self.timeout_s}; use a positive number of seconds")
        if self.memory_mb < 256:
            raise ConfigError(f"memory_mb={self.memory_mb}; pandas alone needs more, use >= 256")
        if self.max_submission_mb < 1:
            raise ConfigError(f"max_submission_mb={self.max_submission_mb}; use >= 1")
        if self.feedback_chars < 400:
            raise ConfigError(f"feedback_chars={self.feedback_chars}; the log needs >= 400 characters")


class KaggleEnv(gym.Env[str, str]):
    """Kaggle-style code-agent env: text in (a solution), sandbox log out, ladder reward.

    Args:
        competition: a competition id of the suite, a :class:`Competition` (e.g. from an MLE-bench
            loader), or ``None`` to draw one from ``split`` at every reset.
        suite: the task pool: a :class:`KaggleSuite`, a directory, or ``None`` for the built-in suite
            (generated on first use).
        split: ``"train"`` (default), ``"heldout"`` (evaluation only) or ``"all"``; a competition
            outside the split is refused, so held-out tasks are never trained on by accident.
        sandbox: a :class:`~wmrl_envs.sandbox.base.Sandbox` (the caller closes it) or a backend name
            for ``make_sandbox`` (``"local"``, ``"docker"``, ``"unsafe"``; the env closes it).
        max_turns: executions per episode.
        ladder: the reward ladder.
        timeout_s: per-execution wall-clock limit.
        memory_mb: per-execution memory limit.
        max_submission_mb: size cap on the graded submission file.
        feedback_chars: approximate size of the log shown after each execution.
        reward: ``"per_execution"`` (default) or ``"best_improvement"``; see the module docstring.
        seed: seeds the competition draw (``reset(seed=...)`` overrides it).
        render_mode: ``None`` or ``"ansi"`` (``render()`` returns the last observation).

    Raises:
        ConfigError: an invalid setting, an unknown competition, or one outside ``split``.

    Example:
        >>> env = KaggleEnv("concrete-strength", sandbox="local")  # doctest: +SKIP
        >>> observation, info = env.reset(seed=0)  # doctest: +SKIP
        >>> code = "import shutil; shutil.copy('input/sample_submission.csv', 'submission.csv')"
        >>> observation, reward, terminated, truncated, info = env.step(code)  # doctest: +SKIP
        >>> info["status"], reward  # doctest: +SKIP
        ('valid', 0.5)
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        competition: str | Competition | None = None,
        *,
        suite: KaggleSuite | Path | str | None = None,
        split: Literal["train", "heldout", "all"] = "train",
        sandbox: Sandbox | str = "local",
        max_turns: int = 4,
        ladder: RewardLadder | None = None,
        timeout_s: float = 300.0,
        memory_mb: int = 4096,
        max_submission_mb: int = 32,
        feedback_chars: int = 4000,
        reward: RewardScheme = "per_execution",
        seed: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        self.config = KaggleEnvConfig(
            max_turns=max_turns,
            timeout_s=timeout_s,
            memory_mb=memory_mb,
            max_submission_mb=max_submission_mb,
            feedback_chars=feedback_chars,
            reward=reward,
        )
        if split not in ("train", "heldout", "all"):
            raise ConfigError(f"split={split!r}; use 'train', 'heldout' or 'all'")
        if render_mode not in (None, "ansi"):
            raise ConfigError(f"render_mode={render_mode!r}; KaggleEnv renders only 'ansi' (or None)")
        self.render_mode = render_mode
        self.ladder = ladder or RewardLadder()
        self.split = split
        self._fixed: Competition | None = competition if isinstance(competition, Competition) else None
        needs_suite = not isinstance(competition, Competition)
        if isinstance(suite, KaggleSuite):
            self.suite: KaggleSuite | None = suite
        elif suite is not None:
            self.suite = KaggleSuite(Path(suite))
        else:
            self.suite = load_suite() if needs_suite else None
        self._fixed_id = competition if isinstance(competition, str) else None
        if self._fixed_id is not None:
            self._check_split(self._fixed_id)
        elif self._fixed is None and self.suite is not None and not self.suite.ids(split):
            raise ConfigError(f"the suite has no competitions in split {split!r}")
        self._owns_sandbox = isinstance(sandbox, str)
        self.sandbox = _make_sandbox(sandbox) if isinstance(sandbox, str) else sandbox
        self.observation_space = spaces.Text(max_length=MAX_TEXT_LENGTH, min_length=0, charset=CHARSET)
        self.action_space = SolutionText(max_length=MAX_TEXT_LENGTH, min_length=0, charset=CHARSET)
        self._seed = seed
        self._seeded = False
        self.competition: Competition | None = None
        self._turn = 0
        self._best: float | None = None
        self._history: list[str] = []
        self._solutions: list[str] = []
        self._done = True
        self._last_observation = ""
        self._prepared: tuple[str, str | Outcome] | None = None

    def _check_split(self, competition_id: str) -> KaggleSuite:
        if self.suite is None:
            raise ConfigError(
                f"competition {competition_id!r} requested, but this env was given a single Competition and "
                "no suite; pass suite=... to choose competitions by id"
            )
        if competition_id not in self.suite:
            raise ConfigError(f"unknown competition {competition_id!r}; choose from {self.suite.ids()}")
        if self.split != "all" and competition_id not in self.suite.ids(self.split):
            raise ConfigError(
                f"competition {competition_id!r} is not in split {self.split!r} (held-out competitions are "
                "for evaluation only); pass split='heldout' or split='all' to use it"
            )
        return self.suite

    def _pick(self, options: dict[str, Any] | None) -> Competition:
        requested = (options or {}).get("competition")
        if isinstance(requested, Competition):
            chosen = requested
        elif requested is not None or self._fixed_id is not None:
            competition_id = str(requested if requested is not None else self._fixed_id)
            chosen = self._check_split(competition_id).get(competition_id)
        elif self._fixed is not None:
            chosen = self._fixed
        else:
            assert self.suite is not None
            pool = self.suite.ids(self.split)
            chosen = self.suite.get(pool[int(self.np_random.integers(len(pool)))])
        if chosen.leaderboard is None:
            raise ConfigError(
                f"competition {chosen.id!r} has no leaderboard, so a valid submission's reward is unknown; "
                f"build it with: python -m wmrl_envs.kaggle.references --ids {chosen.id}"
            )
        return chosen

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode on a competition; returns the task text and ``{"competition_id", "turn"}``."""
        if seed is None and not self._seeded and self._seed is not None:
            seed = self._seed
        super().reset(seed=seed)
        self._seeded = True
        self.competition = self._pick(options)
        self._turn, self._best, self._done = 0, None, False
        self._history, self._solutions = [], []
        competition = self.competition
        observation = _clean(
            f"{competition.description.rstrip()}\n\n{competition.inventory().rstrip()}\n\n"
            f"{_instructions(competition, self.config.max_turns, self.config.timeout_s)}"
        )
        self._last_observation = observation
        return observation, {"competition_id": competition.id, "turn": 0, "heldout": competition.heldout}

    def _require_episode(self) -> Competition:
        if self.competition is None or self._done:
            raise gym.error.ResetNeeded("the episode is over (or never started); call reset() first")
        return self.competition

    def execute(self, action: str) -> Outcome:
        """Run one action for real and grade it, without touching the episode's state.

        The action is judged by :func:`parse_action` (a ``malformed`` one runs nothing); its solution
        goes to :meth:`execute_solution`.
        """
        prepared = self._prepared
        code = prepared[1] if prepared is not None and prepared[0] is action else parse_action(action)
        self._require_episode()
        if isinstance(code, Outcome):
            return code
        return self.execute_solution(code)

    def execute_solution(self, code: str) -> Outcome:
        """Run a solution that :func:`parse_action` returned in the sandbox, and grade it.

        The hook for subclasses that change how a solution is run (the trainer's execution cache): it
        only ever receives validated code, so an override cannot bypass the checks on the action.

        Args:
            code: the solution source, exactly as :func:`parse_action` returned it.

        Returns:
            The graded outcome; ``sandbox_error`` (unknown) when the sandbox or the competition's own
            files failed.
        """
        competition = self._require_episode()
        request = ExecutionRequest(
            code=code,
            inputs=competition.public_files(),
            timeout_s=self.config.timeout_s,
            memory_mb=self.config.memory_mb,
            max_output_file_mb=self.config.max_submission_mb,
        )
        try:
            result = self.sandbox.run(request)
        except SandboxError as error:
            return Outcome(status="sandbox_error", detail=f"the sandbox failed: {error}",
                           backend=getattr(self.sandbox, "name", ""))
        try:
            return grade_execution(result, competition, max_bytes=self.config.max_submission_mb * 1024 * 1024)
        except WMRLError as error:  # the competition's own files failed: unknown, not the solution's fault
            return Outcome(status="sandbox_error", detail=f"grading failed: {error}", backend=result.backend)
        finally:
            if result.output is not None:
                result.output.unlink(missing_ok=True)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Execute the solution in ``action`` and return its sandbox log and reward.

        The reward follows ``config.reward``: by default (``"per_execution"``) it is this execution's
        ladder value, ``RewardLadder.reward(status, position)``; with ``"best_improvement"`` it is the
        improvement of the episode's best ladder value. An action that :func:`parse_action` rejects
        (not text, longer than :data:`MAX_TEXT_LENGTH`, not valid Unicode, no solution in it) is
        ``malformed`` and runs nothing.

        Returns:
            ``(observation, reward, terminated, truncated, info)``; see the module docstring for ``info``.
        """
        self._require_episode()
        code = parse_action(action)
        self._prepared = (action, code)  # execute() reuses it: the action is parsed once per step
        try:
            outcome = self.execute(action)
        finally:
            self._prepared = None
        solution = _recorded_text(action) if isinstance(code, Outcome) else code
        return self._advance(solution, outcome, simulated=False)

    def _ladder_value(self, outcome: Outcome) -> float | None:
        position = outcome.position
        if outcome.status == "valid" and position is None and self.competition is not None:
            board = self.competition.leaderboard
            score = outcome.score if outcome.score is not None else outcome.public_score
            position = board.position(score) if board is not None and score is not None else None
        return self.ladder.reward(outcome.status, position)

    def step_reward(self, outcome: Outcome) -> float | None:
        """The reward ``step`` would give for ``outcome`` now (the ladder improvement), without advancing.

        World models that score rather than simulate use it to turn a predicted outcome into a reward
        on the same scale as the real one. ``None`` when the outcome is unknown.
        """
        self._require_episode()
        value = self._ladder_value(outcome)
        if value is None:
            return None
        return self._reward_for(value)

    def _reward_for(self, value: float) -> float:
        if self.config.reward == "per_execution" or self._best is None:
            return value
        return max(0.0, value - self._best)

    def _advance(
        self, solution: str, outcome: Outcome, *, simulated: bool, observation: str | None = None,
        ladder_value: float | None = None, use_outcome: bool = True, end: bool = False,
    ) -> tuple[str, float, bool, bool, dict[str, Any]]:
        competition = self._require_episode()
        value = self._ladder_value(outcome) if use_outcome else ladder_value
        if value is None:
            reward = math.nan
        else:
            reward = self._reward_for(value)
            self._best = value if self._best is None else max(self._best, value)
        text = _clean(observation if observation is not None else format_feedback(
            outcome, max_chars=self.config.feedback_chars))
        self._turn += 1
        self._history.append(text)
        self._solutions.append(solution)
        terminated = end or self._turn >= self.config.max_turns
        self._done = terminated
        self._last_observation = text
        info: dict[str, Any] = {
            "competition_id": competition.id,
            "turn": self._turn,
            "status": outcome.status,
            "score": outcome.score,
            "public_score": outcome.public_score,
            "position": outcome.position,
            "medal": outcome.medal,
            "above_median": outcome.above_median,
            "ladder_value": value,
            "best_ladder_value": self._best,
            "reward_unknown": value is None,
            "wall_s": outcome.wall_s,
            "cpu_s": outcome.extra.get("cpu_s"),
            "max_rss_mb": outcome.extra.get("max_rss_mb"),
            "exit_code": outcome.exit_code,
            "detail": outcome.detail,
            "backend": outcome.backend,
            "isolated": outcome.backend not in _UNISOLATED_BACKENDS if outcome.backend else None,
            "simulated": simulated,
        }
        return text, float(reward), terminated, False, info

    def world_model_context(self) -> KaggleContext:
        """Public information for a world model: the task, the public leaderboard, turn and history."""
        competition = self._require_episode()
        return competition.context(
            turn=self._turn, history=tuple(self._history), previous_solutions=tuple(self._solutions)
        )

    def apply_prediction(
        self, action: str, prediction: Prediction
    ) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Advance the episode from a predicted outcome, without executing anything.

        The outcome is ``prediction.info["outcome"]`` (an :class:`Outcome`) if present, else parsed
        from ``prediction.observation`` with :func:`parse_feedback`; it drives the log, the status and
        the turn. The ladder value is the prediction's own ``reward`` when it has one (so the step
        reward is exactly what an anchor pair records for the same prediction), else the ladder of
        the outcome (a predicted valid outcome without a position is ranked by its score on the
        private leaderboard); with neither, the reward is unknown.
        """
        self._require_episode()
        predicted = prediction.info.get("outcome") if prediction.info else None
        outcome = predicted if isinstance(predicted, Outcome) else None
        observation = prediction.observation if isinstance(prediction.observation, str) else None
        if outcome is None and observation is not None:
            outcome = parse_feedback(observation)
        solution = parse_action(action)
        code = _recorded_text(action) if isinstance(solution, Outcome) else solution
        end = bool(prediction.terminated)
        if outcome is not None:
            own = prediction.reward
            return self._advance(
                code, outcome, simulated=True, observation=observation, end=end,
                ladder_value=own, use_outcome=own is None,
            )
        unknown = Outcome(status="sandbox_error", detail="the world model gave no usable prediction")
        return self._advance(
            code, unknown, simulated=True, observation=observation, ladder_value=prediction.reward,
            use_outcome=False, end=end,
        )

    def render(self) -> str | None:
        """The last observation (``render_mode="ansi"``)."""
        return self._last_observation if self.render_mode == "ansi" else None

    def close(self) -> None:
        """Close the sandbox if the env created it."""
        if self._owns_sandbox:
            self.sandbox.close()
        super().close()


def _make_sandbox(name: str) -> Sandbox:
    from wmrl_envs.sandbox import make_sandbox

    return make_sandbox(name)
