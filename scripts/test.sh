#!/usr/bin/env bash
# Install what the tests need, start the services they use (a Docker engine), run the whole suite.
# This is the README's test command; .ci/run calls exactly this. Extra arguments go to pytest.
#
# On a fresh machine the one slow install step, compiling llama.cpp's server, runs in the background
# (scripts/install.sh, WMRL_LLAMA_BUILD=background) while the other tests run; the tests that need the
# server run last and wait for it (tests/conftest.py, bounded by WMRL_LLAMA_WAIT_S). Its wheel lands in
# ${WMRL_WHEEL_CACHE:-~/.cache/wmrl/wheels}, so later runs on the machine install it in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
WMRL_LLAMA_BUILD=background bash scripts/install.sh test
# The embodied stack (LeRobot 0.6 + LIBERO + robosuite 1.4 in its own Python 3.12 venv; ~12 min once, then
# seconds): the embodied-marked tests run the real simulator in a worker under it.
bash scripts/embodied.sh || echo "[test] WARNING: the embodied stack could not be built; embodied-marked tests will skip" >&2
# verl 0.9 in its own Python 3.11 venv (it pins an older transformers; a few minutes once, then seconds).
bash scripts/verl.sh || echo "[test] WARNING: the verl venv could not be built; verl-marked tests will skip" >&2
# A real Docker engine for the docker-marked tests (no systemd: dockerd is started directly).
if docker_env="$(bash scripts/docker_engine.sh start)"; then
    export "$docker_env"
    bash scripts/build_sandbox_image.sh
    trap 'bash scripts/docker_engine.sh stop >/dev/null 2>&1 || true' EXIT
else
    echo "[test] WARNING: no Docker engine could be started; docker-marked tests will skip" >&2
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 MPLBACKEND=Agg WMRL_LLAMA_INSTALL_ON_DEMAND=1
# --durations: the slowest tests are printed, so a suite drifting toward its 20-minute budget shows where.
python3 -m pytest --durations=25 "$@"
# The `long` tests (a minute or more each: wmrl train --policy llm end to end on CPU, verl's trainer, the
# LeRobot swap) are left out of a plain pytest run (pyproject addopts) and run here after the suite,
# unless pytest arguments were given.
if [ "$#" -eq 0 ]; then
    python3 -m pytest -m long --durations=10
fi
