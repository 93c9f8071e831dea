#!/usr/bin/env bash
# Build the verl stack (verl 0.9 with CPU torch and the transformers release verl pins) in its own Python 3.11
# virtual environment.
#
#   bash scripts/verl.sh          # build once (a few minutes, ≈2 GB); later runs check and exit in seconds
#   bash scripts/verl.sh python   # print the stack's interpreter for this checkout (changes nothing)
#
# What `python` prints is scripts/verl-python of this checkout, which runs the venv's Python with this
# checkout's wmrl first on PYTHONPATH (scripts/checkout-python). The venv itself holds no wmrl: it is shared
# by every clone on the machine, and an editable install there followed whichever clone had run this script
# last (two clones silently swapped each other's code). `python` only reads: it fails, without building,
# when the stack is not built.
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
# What wmrl_algos and wmrl_envs import (wmrl itself is not installed: scripts/verl-python adds the checkout).
wmrl_requirements=("numpy>=2.0" "scipy>=1.10" "scikit-learn>=1.3" "gymnasium>=1.0" "tqdm>=4.60" "pandas>=2.0"
    "matplotlib>=3.7" "pytest>=8")
stamp="$venv/.wmrl-verl-stamp"
wanted="$(printf '%s\n' "$torch_requirement" "${requirements[@]}" "${wmrl_requirements[@]}" | sha256sum | cut -c1-16)"
check="import verl.trainer.ppo.ray_trainer, verl.trainer.ppo.v1, torch, transformers, wmrl_algos, wmrl_adapters.verl_main"
launcher="$repo/scripts/verl-python"

log() { echo "[verl] $*" >&2; }

stack_built() { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ] && [ -x "$venv/bin/python" ]; }

# Older versions of this script installed a checkout's wmrl into the venv, editable: remove it, so that only
# the launcher decides which checkout runs.
remove_installed_wmrl() {
    if "$venv/bin/python" -m pip show -q wmrl >/dev/null 2>&1; then
        log "removing the editable wmrl an older verl.sh installed into the shared venv"
        "$venv/bin/python" -m pip uninstall -y -q wmrl
    fi
}

if [ "${1:-}" = "python" ]; then
    if ! stack_built; then
        log "the verl stack is not built in $venv: run bash scripts/verl.sh first (a few minutes, once)"
        exit 1
    fi
    echo "$launcher"
    exit 0
fi

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
    remove_installed_wmrl
    if ! failed="$("$launcher" -W ignore -c "$check" 2>&1)"; then
        log "the built venv does not import: $failed"
        exit 1
    fi
    echo "$wanted" >"$stamp"
    log "built in $((SECONDS - start)) s: $(du -sh "$venv" | cut -f1)"
else
    remove_installed_wmrl
fi
