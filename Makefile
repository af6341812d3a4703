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

# The benchmarks that need no trained model; bench_support.py and bench_revisions.py take
# --models DIR (a results directory's models/) and are run by hand.
BENCH_SELF := bench_ingest bench_constraints bench_evaluate bench_model

bench: install
	@for b in $(BENCH_SELF); do echo "== benchmarks/$$b.py"; $(PY) benchmarks/$$b.py || exit 1; done

clean:
	rm -rf out .pytest_cache
