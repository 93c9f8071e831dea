#!/usr/bin/env bash
# Build the verl stack (verl 0.9 with CPU torch and the transformers release verl pins) in its own Python 3.11
# virtual environment, with this checkout's wmrl packages installed into it editable and without dependencies.
#
#   bash scripts/verl.sh          # build once (a few minutes, ≈2 GB); later runs check and exit in seconds
#   bash scripts/verl.sh python   # print the path of the stack's interpreter (build first if needed)
#
# Why a separate venv: verl 0.9 pins transformers>=5.5.3,<5.11, below the release wmrl's [llm] and [trl]
# extras are tested with, so the two cannot share one environment. wmrl_adapters.verl runs inside this one
# (docs/scale-out.md, "Add WMRL to an existing verl GRPO run"); tests/test_verl_adapter.py drives it here.
#
# Environment: WMRL_VERL_HOME (default ~/.cache/wmrl/verl) holds the venv; WMRL_VERL_BASE_PYTHON names the
# Python 3.11 to build it from (default: python3.11 on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"
home="${WMRL_VERL_HOME:-$HOME/.cache/wmrl/verl}"
venv="$home/venv"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

# What the stack is: one line each, hashed into a stamp so that a changed list rebuilds.
torch_requirement="torch==2.13.0"
# cachetools, fastapi, uvicorn: verl 0.9.1's trainer modules (ray_trainer, main_ppo) import them, undeclared.
# TransferQueue: the store verl 0.9.1's default (v1) trainer passes batches through (its [verl-core] extra).
requirements=("verl==0.9.1" "transformers>=5.5.3,<5.11,!=5.6.0" cachetools fastapi uvicorn "TransferQueue>=0.1.10")
# What wmrl_algos and wmrl_envs import (wmrl itself goes in with --no-deps: its [llm] pins would clash).
wmrl_requirements=("numpy>=2.0" "scipy>=1.10" "scikit-learn>=1.3" "gymnasium>=1.0" "tqdm>=4.60" "pandas>=2.0"
    "matplotlib>=3.7" "pytest>=8")
stamp="$venv/.wmrl-verl-stamp"
wanted="$(printf '%s\n' "$torch_requirement" "${requirements[@]}" "${wmrl_requirements[@]}" | sha256sum | cut -c1-16)"
check="import verl.trainer.ppo.ray_trainer, verl.trainer.ppo.v1, torch, transformers, wmrl_algos, wmrl_adapters.verl_main"

log() { echo "[verl] $*" >&2; }

stack_built() { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ] && [ -x "$venv/bin/python" ]; }

# The editable wmrl install points at one checkout; a run from another checkout re-points it (seconds).
wmrl_points_here() {
    "$venv/bin/python" -c "import sys, wmrl_algos; sys.exit(not wmrl_algos.__file__.startswith('$repo/'))" \
        2>/dev/null
}

install_wmrl() {
    nice -n 10 "$venv/bin/python" -m pip install -q --no-deps --no-build-isolation -e "$repo"
}

if ! stack_built; then
    base="${WMRL_VERL_BASE_PYTHON:-python3.11}"
    if ! "$base" -c "import sys; sys.exit(sys.version_info[:2] != (3, 11))" 2>/dev/null; then
        log "no Python 3.11 found as '$base': install one (e.g. pyenv install 3.11) or set WMRL_VERL_BASE_PYTHON"
        exit 1
    fi
    log "building $venv from $(command -v "$base") (CPU torch + verl: ≈2 GB, a few minutes, once)"
    start=$SECONDS
    mkdir -p "$home"
    [ -x "$venv/bin/python" ] || "$base" -m venv "$venv"
    # CPU torch first, as scripts/install.sh does it: the pinned release (pip's find-links hold its CPU
    # wheel on this project's machines), else PyTorch's CPU index. Not verl's choice: from PyPI alone,
    # torch is the multi-GB CUDA build.
    nice -n 10 "$venv/bin/python" -m pip install -q "$torch_requirement" \
        || nice -n 10 "$venv/bin/python" -m pip install -q torch --index-url https://download.pytorch.org/whl/cpu
    # Then verl and the rest, holding torch where it is so that nothing swaps in a CUDA build.
    torch_version="$("$venv/bin/python" -c "from importlib.metadata import version; print(version('torch'))")"
    nice -n 10 "$venv/bin/python" -m pip install -q "${requirements[@]}" "${wmrl_requirements[@]}" \
        "setuptools>=68" wheel "torch==$torch_version"
    install_wmrl
    if ! failed="$("$venv/bin/python" -W ignore -c "$check" 2>&1)"; then
        log "the built venv does not import: $failed"
        exit 1
    fi
    echo "$wanted" >"$stamp"
    log "built in $((SECONDS - start)) s: $(du -sh "$venv" | cut -f1)"
elif ! wmrl_points_here; then
    log "pointing the venv's editable wmrl at $repo"
    install_wmrl
fi
if [ "${1:-}" = "python" ]; then
    echo "$venv/bin/python"
fi
