#!/usr/bin/env bash
# The visual progress scorer on a GPU: its GPU test, then the full grid of benchmarks/visual_scorer_scaling.py.
#
#   python benchmarks/visual_scorer_scaling.py render        # first, on the CPU machine (the simulator)
#   bash scripts/gpu_visual_scaling.sh pack                  # on the CPU machine: gymnasium into .gpuvis/
#   bash scripts/gpu_visual_scaling.sh run OUT [FIT ARGS]    # on the GPU machine (CUDA torch, no network)
#
# FRAMES (default below) and DEVICE (default cuda) override what `run` reads and trains on; FIT ARGS go to
# the fit stage (e.g. --demos 4,16 --widths 16).
#
# Why: the fit stage needs only torch, numpy, scipy, scikit-learn, matplotlib, tqdm and gymnasium (which wmrl's
# core imports); a bare GPU machine has all but gymnasium, so `pack` copies gymnasium's pure-Python package
# from the embodied stack's venv (bash scripts/embodied.sh builds it) into .gpuvis/, git-ignored through
# .git/info/exclude. wmrl itself is not installed there: the checkout is put on PYTHONPATH, adapters/ as
# wmrl_adapters through a link.
set -euo pipefail
cd "$(dirname "$0")/.."
frames="${FRAMES:-benchmarks/results/visual_scorer_scaling/frames.npz}"
case "${1:-}" in
pack)
    python="$(bash scripts/embodied.sh python)"
    site="$("$python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")"
    rm -rf .gpuvis && mkdir -p .gpuvis
    for package in gymnasium farama_notifications; do
        [ -e "$site/$package" ] && cp -r "$site/$package" .gpuvis/
    done
    find .gpuvis -name __pycache__ -type d -prune -exec rm -rf {} +
    mkdir -p .git/info
    grep -qx '/.gpuvis/' .git/info/exclude 2>/dev/null || echo '/.gpuvis/' >>.git/info/exclude
    echo "[gpu_visual_scaling] .gpuvis: $(du -sh .gpuvis | cut -f1); $frames: $(du -sh "$frames" | cut -f1)" >&2
    ;;
run)
    out="${2:?pass the output folder: bash scripts/gpu_visual_scaling.sh run OUT}"
    [ -f "$frames" ] || { echo "[gpu_visual_scaling] no $frames: render it first (see above)" >&2; exit 2; }
    mkdir -p "$out" /tmp/wmrl-py
    ln -sfn "$PWD/adapters" /tmp/wmrl-py/wmrl_adapters
    export PYTHONPATH="$PWD:/tmp/wmrl-py:$PWD/.gpuvis${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
    device="${DEVICE:-cuda}"
    python3 -c "import torch; print('torch', torch.__version__, torch.cuda.is_available() and torch.cuda.get_device_name())" \
        | tee "$out/device.txt"
    # The GPU test of the scorer (and the CPU ones beside it); a failure is reported, the grid still runs.
    python3 -m pytest -q -p no:cacheprovider -o addopts="" tests/test_embodied_visual.py -m "not long" \
        >"$out/pytest.log" 2>&1 || echo "[gpu_visual_scaling] pytest failed: see $out/pytest.log" >&2
    tail -3 "$out/pytest.log"
    python3 benchmarks/visual_scorer_scaling.py fit --frames "$frames" --device "$device" --out "$out/grid" "${@:3}"
    ;;
*)
    echo "usage: bash scripts/gpu_visual_scaling.sh pack | run OUT" >&2
    exit 2
    ;;
esac
