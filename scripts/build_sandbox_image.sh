#!/bin/sh
# Build the docker sandbox image `wmrl-sandbox:<wmrl version>` from this host's own Python and ML
# packages (numpy, pandas, scikit-learn, scipy, lightgbm and their dependencies, plus the shared
# libraries they link), with `docker import`: no Dockerfile, no registry, no network.
#
# Usage: scripts/build_sandbox_image.sh [--tag NAME:TAG] [--force]
# Needs a running engine: DOCKER_HOST, /var/run/docker.sock, or the socket of scripts/docker_engine.sh
# (started here if none answers). Prints "<tag> <image id> (<seconds>)". Idempotent without --force.
set -eu
HERE="$(cd "$(dirname "$0")" && pwd)"
if [ -z "${DOCKER_HOST:-}" ] && [ ! -S /var/run/docker.sock ]; then
    DOCKER_HOST="$("$HERE/docker_engine.sh" start | sed -n 's/^DOCKER_HOST=//p')"
    export DOCKER_HOST
fi
PYTHON="${PYTHON:-python3}"
exec "$PYTHON" -m wmrl_adapters.docker build-image "$@"
