#!/usr/bin/env bash
# Installs everything TraceSynth needs on a Debian 12 machine, idempotently.
# - Debian packages: babeltrace2 + python3-bt2 (CTF through the official bindings), strace,
#   trace-cmd (reads ftrace ring buffers), python3-venv.
# - A virtual environment made from Debian's /usr/bin/python3 with --system-site-packages,
#   because python3-bt2 is built for that interpreter and lives in its dist-packages.
# - PyTorch 2.13.0 CPU (from the local wheel folder when the machine has one), then the package.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
STAMP="$VENV/.tracesynth-installed"
want_stamp="$(cat pyproject.toml scripts/bootstrap.sh | sha256sum | cut -c1-16)"

apt_pkgs=(babeltrace2 python3-bt2 python3-venv python3-pip strace trace-cmd)
missing=()
for p in "${apt_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "bootstrap: need root to install Debian packages: ${missing[*]}" >&2
        exit 1
    fi
    echo "bootstrap: installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want_stamp" ] && "$VENV/bin/python" -c "import tracesynth, bt2, torch" 2>/dev/null; then
    exit 0
fi

if [ ! -x "$VENV/bin/python" ]; then
    echo "bootstrap: creating $VENV from /usr/bin/python3 (sees Debian's bt2)"
    /usr/bin/python3 -m venv --system-site-packages "$VENV"
fi
PIP=("$VENV/bin/python" -m pip -q --disable-pip-version-check)
find_links=()
[ -d /opt/wheels ] && find_links=(--find-links /opt/wheels)
if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
    echo "bootstrap: installing torch 2.13.0 (CPU)"
    "${PIP[@]}" install "${find_links[@]}" "torch==2.13.0"
fi
echo "bootstrap: installing tracesynth and its Python dependencies"
"${PIP[@]}" install "${find_links[@]}" -e ".[dev]"
"$VENV/bin/python" -c "import bt2, tracesynth" || {
    echo "bootstrap: the venv cannot import bt2 (python3-bt2) or tracesynth" >&2; exit 1; }
echo "$want_stamp" > "$STAMP"
