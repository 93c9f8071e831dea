"""An OpenAI-compatible HTTP backend for the LLM world models (vLLM serve, SGLang, llama.cpp server).

Why a plain HTTP client: the world model usually runs as a shared inference server next to the
trainer (often the policy's own serving stack), and every serious server speaks the OpenAI
``/v1/completions`` dialect. Raw completions (not chat) are used so the world model controls the
exact prompt: the shared task prefix comes first (the server's prefix cache reuses it) and the answer
starts with a forced prefix. Only the standard library is used (``urllib`` and a thread pool).

Failure policy, in one place:

* a server that cannot be reached when the client is built raises
  :class:`~wmrl_algos.errors.BackendUnavailableError` at once (never a silent fallback to another
  scorer: training would go on with rewards from something nobody chose);
* during generation, timeouts, connection errors, HTTP 429/5xx and malformed responses are retried a
  bounded number of times with exponential backoff, then that one prompt's result is an ``error``
  (the world model turns it into a ``None`` reward, logged with the reason); other 4xx are not retried.

:class:`LlamaCppServer` starts a local ``llama_cpp.server`` on 127.0.0.1 for tests and benchmarks.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from wmrl_algos.errors import BackendUnavailableError, ConfigError, require
from wmrl_envs.kaggle.world_models.llm import (
    CandidateDistribution,
    FinishReason,
    GenerationResult,
    OutputConstraint,
    chatml,
    distribution_from_logprobs,
)

__all__ = [
    "OpenAIClientConfig",
    "OpenAICompatibleBackend",
    "LlamaCppServer",
    "free_port",
    "build_completion_body",
]

logger = logging.getLogger(__name__)

ConstraintStyle = Literal["llama.cpp", "vllm", "sglang", "none"]
TokenCounting = Literal["estimate", "llama.cpp", "vllm"]


@dataclass(frozen=True)
class OpenAIClientConfig:
    """Settings of :class:`OpenAICompatibleBackend`.

    Attributes:
        base_url: the server's OpenAI API root, e.g. ``http://127.0.0.1:8000/v1``.
        model: the model name to request; ``None`` takes the first one ``/models`` lists.
        api_key: sent as a bearer token when set (local servers usually need none).
        concurrency: requests in flight at once. Raise it for servers that batch (vLLM, SGLang); a
            llama.cpp server decodes one request at a time, so more than 1-2 only queues.
        timeout_s: seconds one request may take before it is retried (then counted as unknown).
        max_retries: retries after the first attempt for timeouts, connection errors, 429/5xx, malformed JSON.
        backoff_s: the first retry's delay; it doubles on each retry.
        startup_wait_s: how long the constructor keeps polling a server that is still starting; 0 tries once.
        context_window: the server's context size in tokens (llama.cpp: its ``--n_ctx``).
        chars_per_token: used to estimate token counts when ``token_counting="estimate"`` (3.0 is
            conservative for English and code with BPE tokenizers).
        token_counting: ``estimate`` (no request), or the server's tokenizer endpoint (``llama.cpp``:
            ``/extras/tokenize``; ``vllm``: ``/tokenize``), exact but one request per count.
        constraint_style: how structured output is requested: llama.cpp ``grammar`` (GBNF), vLLM
            ``structured_outputs``, SGLang ``regex``/``json_schema``, or ``none``.
        chat_format: how the system and user messages are rendered into the raw prompt (``chatml`` for
            SmolLM2 and Qwen; ``plain`` for base models).
        top_logprobs: how many top next tokens score mode asks for (labels outside them count as 0).
        name: the backend's name in logs and metrics.

    Example:
        >>> OpenAIClientConfig(base_url="http://127.0.0.1:8000/v1", concurrency=4).max_retries
        2
    """

    base_url: str = "http://127.0.0.1:8000/v1"
    model: str | None = None
    api_key: str | None = None
    concurrency: int = 4
    timeout_s: float = 120.0
    max_retries: int = 2
    backoff_s: float = 0.5
    startup_wait_s: float = 0.0
    context_window: int = 4096
    chars_per_token: float = 3.0
    token_counting: TokenCounting = "estimate"
    constraint_style: ConstraintStyle = "llama.cpp"
    chat_format: Literal["chatml", "plain"] = "chatml"
    top_logprobs: int = 20
    name: str = "openai"

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base_url={self.base_url!r} must start with http:// or https://")
        if self.concurrency < 1:
            raise ConfigError(f"concurrency={self.concurrency} must be >= 1")
        if self.timeout_s <= 0:
            raise ConfigError(f"timeout_s={self.timeout_s} must be > 0 (seconds per request)")
        if self.max_retries < 0:
            raise ConfigError(f"max_retries={self.max_retries} must be >= 0 (0: no retry)")
        if self.backoff_s < 0 or self.startup_wait_s < 0:
            raise ConfigError(
                f"backoff_s={self.backoff_s} and startup_wait_s={self.startup_wait_s} must be >= 0"
            )
        if self.context_window < 16:
            raise ConfigError(
                f"context_window={self.context_window} is too small; set the server's context size"
            )
        if self.chars_per_token <= 0:
            raise ConfigError(f"chars_per_token={self.chars_per_token} must be > 0 (3.0 is conservative)")
        if not 1 <= self.top_logprobs <= 100:
            raise ConfigError(
                f"top_logprobs={self.top_logprobs} must be in [1, 100] (servers cap it; 20 is typical)"
            )
        if self.token_counting not in ("estimate", "llama.cpp", "vllm"):
            raise ConfigError(
                f"token_counting={self.token_counting!r} must be 'estimate', 'llama.cpp' or 'vllm'"
            )
        if self.constraint_style not in ("llama.cpp", "vllm", "sglang", "none"):
            raise ConfigError(
                f"constraint_style={self.constraint_style!r} must be 'llama.cpp', 'vllm', 'sglang' or 'none'"
            )


def build_completion_body(
    model: str,
    prompt: str,
    max_new_tokens: int,
    *,
    stop: Sequence[str] = (),
    constraint: OutputConstraint | None = None,
    style: ConstraintStyle = "llama.cpp",
) -> dict[str, Any]:
    """The JSON body of a greedy ``/v1/completions`` request, with the constraint in the server's dialect.

    >>> body = build_completion_body("m", "p", 8, constraint=OutputConstraint(regex="a+"), style="vllm")
    >>> body["structured_outputs"], body["temperature"]
    ({'regex': 'a+'}, 0.0)
    """
    body: dict[str, Any] = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_new_tokens,
        "temperature": 0.0,
    }
    if stop:
        body["stop"] = list(stop)
    if constraint is None or style == "none":
        return body
    if style == "llama.cpp" and constraint.gbnf:
        body["grammar"] = constraint.gbnf
    elif style == "vllm":
        if constraint.regex:
            body["structured_outputs"] = {"regex": constraint.regex}
        elif constraint.json_schema is not None:
            body["structured_outputs"] = {"json": dict(constraint.json_schema)}
        elif constraint.gbnf:
            body["structured_outputs"] = {"grammar": constraint.gbnf}
    elif style == "sglang":
        if constraint.regex:
            body["regex"] = constraint.regex
        elif constraint.json_schema is not None:
            body["json_schema"] = json.dumps(dict(constraint.json_schema))
        elif constraint.gbnf:
            body["ebnf"] = constraint.gbnf
    return body


class _RequestFailed(Exception):
    def __init__(self, reason: str, *, retryable: bool) -> None:
        super().__init__(reason)
        self.retryable = retryable


class OpenAICompatibleBackend:
    """World-model backend over an OpenAI-compatible ``/v1/completions`` server.

    Implements :class:`~wmrl_envs.kaggle.world_models.llm.TextGenerator` and
    :class:`~wmrl_envs.kaggle.world_models.llm.ScoreDistribution` (through ``logprobs``).

    Args:
        config: the server address and the client's limits.

    Raises:
        BackendUnavailableError: the server cannot be reached (or answers nonsense) at construction.

    Example:
        >>> down = OpenAIClientConfig(base_url="http://127.0.0.1:9/v1", timeout_s=0.5)
        >>> OpenAICompatibleBackend(down)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        wmrl_algos.errors.BackendUnavailableError: cannot reach the OpenAI-compatible server at ...
    """

    def __init__(self, config: OpenAIClientConfig | None = None) -> None:
        self._config = config if config is not None else OpenAIClientConfig()
        self._base = self._config.base_url.rstrip("/")
        self._root = self._base[: -len("/v1")] if self._base.endswith("/v1") else self._base
        self.context_window: int = self._config.context_window
        self.name: str = self._config.name
        self.model: str = self._connect()

    @property
    def config(self) -> OpenAIClientConfig:
        """The configuration."""
        return self._config

    def _connect(self) -> str:
        deadline = time.monotonic() + self._config.startup_wait_s
        while True:
            try:
                listing = self._request(
                    "GET", f"{self._base}/models", None, timeout=min(self._config.timeout_s, 10.0)
                )
                break
            except _RequestFailed as exc:
                if time.monotonic() >= deadline:
                    raise BackendUnavailableError(
                        f"cannot reach the OpenAI-compatible server at {self._base} ({exc}); start it (e.g. "
                        "python -m llama_cpp.server --model M.gguf --port P) or fix base_url: no world-model "
                        "prediction can be made without it"
                    ) from exc
                time.sleep(0.25)
        if self._config.model is not None:
            return self._config.model
        data = listing.get("data") if isinstance(listing, dict) else None
        if not data or not isinstance(data, list) or not isinstance(data[0], dict) or "id" not in data[0]:
            raise BackendUnavailableError(
                f"the server at {self._base} lists no model (/models answered {str(listing)[:200]!r}); "
                "pass OpenAIClientConfig(model=...)"
            )
        return str(data[0]["id"])

    def _request(self, method: str, url: str, body: Mapping[str, Any] | None, *, timeout: float) -> Any:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._config.api_key:
            headers["Authorization"] = f"Bearer {self._config.api_key}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:200].decode(errors="replace")
            raise _RequestFailed(
                f"HTTP {exc.code} from {url}: {detail}", retryable=exc.code == 429 or exc.code >= 500
            ) from exc
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            reason = getattr(exc, "reason", exc)
            raise _RequestFailed(f"{type(exc).__name__} on {url}: {reason}", retryable=True) from exc
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise _RequestFailed(f"malformed JSON from {url}: {raw[:120]!r}", retryable=True) from exc

    def _post_with_retries(self, path: str, body: Mapping[str, Any]) -> Any:
        delay = self._config.backoff_s
        attempts = self._config.max_retries + 1
        for attempt in range(attempts):
            try:
                return self._request("POST", f"{self._base}{path}", body, timeout=self._config.timeout_s)
            except _RequestFailed as exc:
                if not exc.retryable or attempt == attempts - 1:
                    raise _RequestFailed(f"{exc} (after {attempt + 1} attempt(s))", retryable=False) from exc
                logger.info("retrying %s in %.2f s after: %s", path, delay, exc)
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable: the loop returns or raises")

    def format_chat(self, system: str, user: str) -> str:
        """ChatML (default) or plain rendering of the two messages, up to the assistant's turn."""
        if self._config.chat_format == "chatml":
            return chatml(system, user)
        return f"{system}\n\n{user}\n\n"

    def count_tokens(self, text: str) -> int:
        """An estimate from ``chars_per_token``, or the server's exact count (``token_counting``)."""
        style = self._config.token_counting
        if style != "estimate":
            url, body, key = (
                (f"{self._root}/extras/tokenize", {"input": text}, "tokens")
                if style == "llama.cpp"
                else (f"{self._root}/tokenize", {"model": self.model, "prompt": text}, "tokens")
            )
            try:
                tokens = self._request("POST", url, body, timeout=self._config.timeout_s).get(key)
                if isinstance(tokens, list):
                    return len(tokens)
            except (_RequestFailed, AttributeError) as exc:
                logger.warning("token count from %s failed (%s); estimating from characters", url, exc)
        return math.ceil(len(text) / self._config.chars_per_token)

    def _map(self, work: Any, items: Sequence[Any]) -> list[Any]:
        if len(items) <= 1 or self._config.concurrency == 1:
            return [work(item) for item in items]
        with ThreadPoolExecutor(max_workers=min(self._config.concurrency, len(items))) as pool:
            return list(pool.map(work, items))

    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int,
        *,
        stop: Sequence[str] = (),
        constraint: OutputConstraint | None = None,
    ) -> list[GenerationResult]:
        """One greedy completion per prompt, ``concurrency`` requests at a time; failures become ``error``."""
        if max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens={max_new_tokens} must be >= 1")

        def one(prompt: str) -> GenerationResult:
            body = build_completion_body(
                self.model,
                prompt,
                max_new_tokens,
                stop=stop,
                constraint=constraint,
                style=self._config.constraint_style,
            )
            try:
                response = self._post_with_retries("/completions", body)
                return _completion_result(response)
            except _RequestFailed as exc:
                logger.warning("world-model request to %s failed: %s", self._base, exc)
                return GenerationResult("", "error", error=str(exc))

        return self._map(one, list(prompts))

    def next_token_distribution(
        self, prompts: Sequence[str], candidates: Sequence[str]
    ) -> list[CandidateDistribution | None]:
        """Candidate probabilities from ``logprobs`` of a one-token completion (``None`` on failure)."""

        def one(prompt: str) -> CandidateDistribution | None:
            body = {
                "model": self.model,
                "prompt": prompt,
                "max_tokens": 1,
                "temperature": 0.0,
                "logprobs": self._config.top_logprobs,
            }
            try:
                response = self._post_with_retries("/completions", body)
                top = response["choices"][0]["logprobs"]["top_logprobs"][0]
                if not isinstance(top, dict):
                    raise TypeError(f"top_logprobs[0] is {type(top).__name__}, not an object")
            except _RequestFailed as exc:
                logger.warning("score request to %s failed: %s", self._base, exc)
                return None
            except (KeyError, IndexError, TypeError) as exc:
                logger.warning("score response from %s has no top_logprobs (%s)", self._base, exc)
                return None
            return distribution_from_logprobs(top, candidates)

        return self._map(one, list(prompts))

    def __repr__(self) -> str:
        return f"OpenAICompatibleBackend(base_url={self._base!r}, model={self.model!r})"


def _completion_result(response: Any) -> GenerationResult:
    """Read one ``/v1/completions`` response; a response of the wrong shape is a retry-less failure."""
    try:
        choice = response["choices"][0]
        text = choice["text"]
        if not isinstance(text, str):
            raise TypeError(f"choices[0].text is {type(text).__name__}")
        reason = choice.get("finish_reason")
        usage = response.get("usage") or {}
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise _RequestFailed(
            f"malformed completion response ({exc}): {str(response)[:200]}", retryable=False
        ) from exc
    finish: FinishReason = "length" if reason == "length" else "stop"
    return GenerationResult(
        text, finish, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LlamaCppServer:
    """A local ``llama_cpp.server`` process on 127.0.0.1, started and stopped as a context manager.

    Args:
        model: the GGUF file to serve.
        n_ctx: context size (tokens).
        n_threads: CPU threads for decoding and prompt processing.
        port: the port; ``None`` picks a free one.
        ready_timeout_s: how long to wait for ``/v1/models`` to answer before giving up.

    Raises:
        MissingDependencyError: ``llama-cpp-python[server]`` is not installed (extra ``server``).
        BackendUnavailableError: the server exited or did not become ready in time (its log tail is quoted).

    Example:
        >>> with LlamaCppServer(smollm2_gguf_path()) as server:  # doctest: +SKIP
        ...     backend = OpenAICompatibleBackend(OpenAIClientConfig(base_url=server.base_url))
    """

    def __init__(
        self,
        model: Path,
        *,
        n_ctx: int = 2048,
        n_threads: int = 1,
        port: int | None = None,
        ready_timeout_s: float = 120.0,
    ) -> None:
        require("llama_cpp.server", "server")
        self.model = Path(model)
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.port = port if port is not None else free_port()
        self.ready_timeout_s = ready_timeout_s
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.NamedTemporaryFile(prefix="wmrl-llama-server-", suffix=".log", delete=False)  # noqa: SIM115

    def start(self) -> LlamaCppServer:
        """Start the process and wait until it answers; returns ``self``."""
        command = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.model),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.n_threads),
            "--n_threads_batch",
            str(self.n_threads),
            "--cache",
            "true",
            "--verbose",
            "false",
        ]
        self._process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2.0) as response:
                    if response.status == 200:
                        return self
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError):
                time.sleep(0.25)
        tail = self.log_tail()
        self.stop()
        raise BackendUnavailableError(
            f"llama.cpp server on port {self.port} did not become ready within {self.ready_timeout_s:.0f} s; "
            f"log tail: {tail!r}"
        )

    def cpu_seconds(self) -> float:
        """CPU seconds (user + system) the server process has used so far (Linux ``/proc``; 0.0 elsewhere)."""
        if self._process is None:
            return 0.0
        try:
            fields = Path(f"/proc/{self._process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def log_tail(self, chars: int = 600) -> str:
        """The end of the server's log."""
        self._log.flush()
        return Path(self._log.name).read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        """Terminate the process (kill it if it does not exit within 10 s) and remove its log."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        self._log.close()
        if os.path.exists(self._log.name):
            os.unlink(self._log.name)

    def __enter__(self) -> LlamaCppServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()
