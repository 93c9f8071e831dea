#!/usr/bin/env bash
# Pack what scripts/gpu_lerobot_check.py needs beyond a bare GPU machine's own packages into .gpu/.
#
#   bash scripts/gpu_pack.sh            # writes .gpu/ (≈MiB: du prints it); idempotent, rebuilt each time
#   PYTHONPATH=.gpu python3 scripts/gpu_lerobot_check.py --device cuda    # then, on the GPU machine
#
# Why: a borrowed GPU machine (Python 3.12, CUDA torch, torchvision, transformers, numpy, huggingface_hub,
# einops) may have no LeRobot and no network. LeRobot's policy code is pure Python, and so are the few
# packages its import chain adds (draccus for its configs, gymnasium for its env types, ...): this copies
# them from the embodied stack's venv (bash scripts/embodied.sh builds it), no compiled wheel, so the
# folder works on any Linux Python 3.12. .gpu/ is git-ignored through .git/info/exclude.
set -euo pipefail
cd "$(dirname "$0")/.."
python="$(bash scripts/embodied.sh python)"
site="$("$python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")"
# lerobot and what its policy import chain needs that the GPU machine lacks (found by running the check in a
# Python that has only the GPU machine's packages); each a top-level package or module of the venv.
packages=(lerobot draccus mergedeep typing_inspect.py mypy_extensions.py gymnasium requests urllib3)
rm -rf .gpu
mkdir -p .gpu
for package in "${packages[@]}"; do
    if [ ! -e "$site/$package" ]; then
        echo "[gpu_pack] $package is not in $site: rebuild the embodied venv (bash scripts/embodied.sh)" >&2
        exit 1
    fi
    cp -r "$site/$package" .gpu/
done
# lerobot's metadata (lerobot.__version__ and its own version checks read it).
cp -r "$site"/lerobot-*.dist-info .gpu/
# GR00T's processor (imported by lerobot.policies.factory, used by neither ACT nor SmolVLA) imports OpenCV at
# module level: 163 MB with its shared libraries, over the folder's budget. The packed copy defers it.
"$python" - <<'PY'
from pathlib import Path

path = Path(".gpu/lerobot/policies/groot/processor_groot.py")
text = path.read_text()
lazy = "try:\n    import cv2\nexcept ImportError:  # scripts/gpu_pack.sh packs no OpenCV; GR00T is not run\n    cv2 = None\n"
assert text.count("\nimport cv2\n") == 1, "lerobot's groot processor changed: check scripts/gpu_pack.sh"
path.write_text(text.replace("\nimport cv2\n", "\n" + lazy, 1))
PY
find .gpu -name __pycache__ -type d -prune -exec rm -rf {} +
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >>.git/info/exclude
echo "[gpu_pack] .gpu: $(du -sh .gpu | cut -f1)" >&2
