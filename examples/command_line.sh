#!/usr/bin/env bash
# The wmrl command line in a short session: version, health check, the offline Kaggle suite, and how well
# the rubric world model predicts two real sandboxed executions. About a minute on 2 CPU cores.
#
#   bash examples/command_line.sh [OUTPUT_DIR]
set -euo pipefail
out="${1:-$(mktemp -d)}"

wmrl --version
# One line per component (sandboxes, Docker engine, offline models); exit status 1 only when the default
# sandbox cannot run here, which the rest of this session needs.
wmrl doctor
# Generate the 16 competitions (once; cached under ~/.cache/wmrl) and list them with their metrics.
wmrl suite
# Run two reference solutions for real in the sandbox and compare with the rubric world model's predictions.
wmrl fidelity --world-models rubric --competitions titanic-survival \
    --reference-names sample_submission,prior --output-dir "$out" --quiet
# A bad input is one line on stderr and exit status 2, not a traceback.
status=0
wmrl fidelity --split nope --quiet || status=$?
echo "a bad --split exits with status $status"
