"""Shared test set-up: no network, no display, deterministic thread counts."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from wmrl_algos.errors import IsolationUnavailableError
from wmrl_envs.kaggle.outcome import KaggleContext
from wmrl_envs.sandbox import BubblewrapSandbox
from wmrl_envs.world_model import WorldModel

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def report_from() -> Callable[..., dict[str, Any]]:
    """Runs a script under another interpreter (the verl or the embodied venv) and returns its report.

    The script prints a JSON object as its last line of output. Offline, with this session's
    ``PYTHONPATH`` cleared unless ``env`` sets one; a non-zero exit fails the test with the output's tail.
    """

    def run(
        python: Path, args: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: int = 600
    ) -> dict[str, Any]:
        environment = {
            **os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": "", **(env or {})
        }
        repo = Path(__file__).resolve().parent.parent
        done = subprocess.run(
            [str(python), *args], cwd=repo, env=environment, capture_output=True, text=True, timeout=timeout
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))

    return run


@pytest.fixture(scope="module")
def strict_bubblewrap() -> Iterator[BubblewrapSandbox]:
    """A strict local (bubblewrap) sandbox, one per test module; skips where full isolation is unavailable."""
    try:
        box = BubblewrapSandbox(strict=True)
    except IsolationUnavailableError as exc:
        pytest.skip(f"full bubblewrap isolation unavailable here: {exc}")
    yield box
    box.close()


@pytest.fixture
def titanic_context() -> KaggleContext:
    """A small public Kaggle context (no suite needed) for world-model and backend tests."""
    return KaggleContext(
        "titanic",
        "Predict which passengers survived.",
        "train.csv: 891 rows; columns PassengerId, Survived, Age, Sex",
        "accuracy",
        True,
        "binary",
        "Survived",
        "PassengerId",
        ("Age", "Sex"),
        leaderboard=(0.82, 0.79, 0.77, 0.7),
    )


@pytest.fixture
def check_world_model_is_shared_by_a_grouped_rollout(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[WorldModel], None]:
    """Checks that ONE world model instance serves every wrapper of a grouped rollout on the Kaggle env.

    One group of two trajectories, one simulated turn each (the world model is asked twice, in one
    batch: the Kaggle prompt is long); every wrapper must hold that very instance (not a copy), and the
    spec must stay JSON and re-make the wrapper around the same instance.
    """

    def check(world_model: WorldModel) -> None:
        import gymnasium as gym

        from wmrl_envs.kaggle.suite import build_suite
        from wmrl_envs.rollouts import GroupedRollout, RolloutConfig, RolloutTask

        root = tmp_path_factory.mktemp("suite")
        build_suite(root, ids=["titanic-survival"], progress=False)

        class CopySample:
            def act(self, observations: Sequence[Any], infos: Sequence[Any]) -> list[str]:
                code = "import shutil\nshutil.copy('input/sample_submission.csv', 'submission.csv')"
                return [f"```python\n{code}\n```"] * len(observations)

        def make() -> gym.Env[Any, Any]:
            return gym.make(
                "wmrl/Kaggle-v0", competition="titanic-survival", suite=str(root), sandbox="unsafe"
            )

        with GroupedRollout(make, world_model, RolloutConfig(group_size=2, max_turns=1)) as rollout:
            groups = rollout.run([RolloutTask("titanic")], CopySample())
            assert len(rollout.envs) == 2 and all(env.world_model is world_model for env in rollout.envs)
            assert json.loads(rollout.envs[0].spec.to_json())["id"] == "wmrl/Kaggle-v0"
            assert gym.make(rollout.envs[0].spec).world_model is world_model
            assert rollout.ledger.world_model_calls == 1 and rollout.ledger.world_model_queries == 2
        assert [len(group.predicted) for group in groups] == [2]

    return check


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the tests that need llama.cpp's server last (stable order otherwise).

    On a fresh machine scripts/test.sh builds the server in the background while the other tests run;
    the first real-server test waits for that build (tests/test_openai_backend.py).
    """
    items.sort(key=lambda item: "llama_server" in getattr(item, "fixturenames", ()))


@pytest.fixture
def models_server() -> Iterator[str]:
    """A real HTTP server that lists one model at ``/v1/models``, as an OpenAI-compatible server does."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = json.dumps({"data": [{"id": "served-model"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
