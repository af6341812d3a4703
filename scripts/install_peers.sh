#!/usr/bin/env bash
# Installs the optional peer generators of `tracesynth experiment` (docs/experiments.md, "Peers")
# into the project's .venv, without moving anything TraceSynth itself runs on:
# - SDV (PARSynthesizer), through the `peers` extra, with torch, numpy, pandas, scikit-learn,
#   scipy and pyarrow pinned to the versions already installed (a constraints file), so pip
#   cannot swap the CPU torch for a multi-GB CUDA build or downgrade numpy;
# - gretel-synthetics' DGAN (DoppelGANger), with --no-deps. Every release >= 0.21 declares
#   numpy<1.24, pandas<2, sdv<0.18 and sentencepiece for its other models (text, ACTGAN);
#   the timeseries_dgan module this project uses imports only torch, numpy, pandas, scipy and
#   category_encoders, so those are what is installed beside it. tests/experiments/test_peers.py
#   runs DGAN end to end when it is present.
# Idempotent; `make peers` (and so `make test`) runs it after the main install.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=.venv/bin/python
GRETEL_VERSION=0.22.20
SDV_VERSION=1.32.1  # the versions the published peer results ran with
[ -x "$PY" ] || { echo "install_peers: run 'make install' first (no $PY)" >&2; exit 1; }
PIP=("$PY" -m pip -q --disable-pip-version-check)

constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
"$PY" - >"$constraints" <<'EOF'
from importlib.metadata import version, PackageNotFoundError
for name in ("torch", "numpy", "pandas", "scikit-learn", "scipy", "pyarrow"):
    try:
        print(f"{name}=={version(name)}")
    except PackageNotFoundError:
        pass
EOF

if ! "$PY" -c "import sdv" 2>/dev/null; then
    echo "install_peers: installing SDV (PARSynthesizer) with the installed torch/numpy/pandas pinned"
    "${PIP[@]}" install -c "$constraints" -e ".[peers]" "sdv==$SDV_VERSION"
fi
if ! "$PY" -c "import gretel_synthetics.timeseries_dgan.dgan" 2>/dev/null; then
    echo "install_peers: installing gretel-synthetics $GRETEL_VERSION (DGAN only, --no-deps) and category_encoders"
    "${PIP[@]}" install -c "$constraints" "category_encoders>=2.6"
    "${PIP[@]}" install --no-deps "gretel-synthetics==$GRETEL_VERSION"
fi
"$PY" - <<'EOF'
from importlib.metadata import version
import sdv  # noqa: F401
from gretel_synthetics.timeseries_dgan.dgan import DGAN  # noqa: F401
print(f"install_peers: sdv {version('sdv')}, gretel-synthetics {version('gretel-synthetics')} (DGAN) ready")
EOF
