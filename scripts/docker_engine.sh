#!/bin/sh
# Start, stop or query a private Docker engine for the docker sandbox backend, without systemd.
#
# Why: CI machines have `apt-get install -y docker.io` but no init system, and the engine must not
# touch the host's networking. The daemon runs with no bridge and no iptables rules (sandboxes use
# network_mode="none" anyway), its own data/exec roots and socket under $WMRL_DOCKER_DIR.
#
# Usage: scripts/docker_engine.sh start|stop|status
#   start   idempotent: starts dockerd if its socket does not answer, waits until /_ping answers,
#           prints `DOCKER_HOST=unix://...` on stdout (eval-able: `export $(scripts/docker_engine.sh start)`).
#   stop    stops the daemon by its pid and unmounts what it left (netns, overlay mounts).
#   status  prints DOCKER_HOST and exits 0 when the engine answers, exits 1 otherwise.
# Environment: WMRL_DOCKER_DIR (default /tmp/wmrl-docker), WMRL_DOCKER_TIMEOUT (seconds, default 30),
# WMRL_DOCKER_STORAGE_DRIVER (default overlay2; use vfs where /tmp is itself an overlay and overlay2
# refuses to start; vfs copies the image per container and is much slower).
set -eu

DIR="${WMRL_DOCKER_DIR:-/tmp/wmrl-docker}"
SOCK="$DIR/docker.sock"
PIDFILE="$DIR/dockerd.pid"
DATA="$DIR/data"
EXEC="$DIR/exec"
LOG="$DIR/dockerd.log"
TIMEOUT="${WMRL_DOCKER_TIMEOUT:-30}"
DRIVER="${WMRL_DOCKER_STORAGE_DRIVER:-overlay2}"

ping_engine() {
    # A raw HTTP GET /_ping over the unix socket; needs only python3 (no curl, no docker CLI).
    python3 - "$SOCK" <<'EOF' >/dev/null 2>&1
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(2)
s.connect(sys.argv[1])
s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
data = b""
while chunk := s.recv(4096):
    data += chunk
sys.exit(0 if data.startswith(b"HTTP/1.") and b" 200 " in data[:16] else 1)
EOF
}

live_dockerd() {
    # The pid file names a running dockerd: not a zombie of a killed one, not a reused pid.
    [ -f "$PIDFILE" ] || return 1
    pid="$(cat "$PIDFILE")"
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ] || return 1
    [ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" != Z ]
}

unmount_leftovers() {
    # Unmount everything a daemon left under its roots (deepest first), then the netns file: a daemon
    # killed without a stop (a session that ended, a SIGKILL) leaves them, and a new one trips on them.
    if [ -r /proc/self/mounts ]; then
        awk -v d="$DIR" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r m; do
            umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
        done
    fi
    umount "$EXEC/netns/default" 2>/dev/null || true
}

start() {
    if ping_engine; then
        echo "DOCKER_HOST=unix://$SOCK"
        return 0
    fi
    command -v dockerd >/dev/null 2>&1 || {
        echo "dockerd not found: apt-get install -y docker.io" >&2
        exit 2
    }
    mkdir -p "$DATA" "$EXEC"
    if live_dockerd; then
        echo "a dockerd (pid $(cat "$PIDFILE")) is running but not answering; waiting for it" >&2
    else
        rm -f "$PIDFILE" "$SOCK"
        # A dockerd killed without a stop leaves its containerd running on our exec root, holding the
        # data root's lock: the new daemon would time out waiting for its own containerd.
        leftover="containerd --config $EXEC/containerd/containerd.toml"
        pkill -9 -f "$leftover" 2>/dev/null || true
        i=0
        while pgrep -f "$leftover" >/dev/null 2>&1 && [ "$i" -lt 50 ]; do
            sleep 0.1
            i=$((i + 1))
        done
        rm -f "$EXEC/containerd/containerd.pid"
        unmount_leftovers
        # setsid + nohup: the daemon must outlive the shell that started it (CI steps are separate shells).
        setsid nohup dockerd --storage-driver="$DRIVER" --iptables=false --ip6tables=false --bridge=none \
            --data-root "$DATA" --exec-root "$EXEC" --pidfile "$PIDFILE" -H "unix://$SOCK" \
            >"$LOG" 2>&1 </dev/null &
    fi
    waited=0
    while ! ping_engine; do
        sleep 0.2
        waited=$((waited + 1))
        if [ "$waited" -ge $((TIMEOUT * 5)) ]; then
            echo "dockerd did not answer on $SOCK within ${TIMEOUT}s; last log lines:" >&2
            tail -n 20 "$LOG" >&2 || true
            exit 1
        fi
    done
    echo "DOCKER_HOST=unix://$SOCK"
}

stop() {
    if [ -f "$PIDFILE" ]; then
        pid="$(cat "$PIDFILE")"
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid"
            i=0
            while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 100 ]; do
                sleep 0.1
                i=$((i + 1))
            done
            kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
        fi
        rm -f "$PIDFILE"
    fi
    unmount_leftovers
    rm -f "$SOCK"
    echo "stopped"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status)
        if ping_engine; then echo "DOCKER_HOST=unix://$SOCK"; else exit 1; fi
        ;;
    *)
        echo "usage: $0 start|stop|status" >&2
        exit 2
        ;;
esac
