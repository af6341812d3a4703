# The two entry points of the README. Both install what they need first (idempotent).
PY := .venv/bin/python
SHARED_CTF ?= ../shared/data/ctf
OUT ?= out/demo

.PHONY: install peers demo test dataset bench clean

install:
	@bash scripts/bootstrap.sh

# The optional peer generators (SDV's PAR, gretel-synthetics' DGAN) for `tracesynth experiment`;
# `make test` installs them so their adapters are tested.
peers: install
	@bash scripts/install_peers.sh

demo: install
	@PYTHONUNBUFFERED=1 bash scripts/demo.sh "$(OUT)"

test: install peers
	$(PY) -m pytest -q -p no:cacheprovider tests

dataset: install
	$(PY) scripts/build_dataset.py --all

bench: install
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf out .pytest_cache
