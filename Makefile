# scholarloop: `make demo` installs the whole offline stack and runs it; `make test` runs the checks.
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
export LITELLM_LOCAL_MODEL_COST_MAP := True
export PIP_DISABLE_PIP_VERSION_CHECK := 1

DATA ?= ../shared/data
QUESTION ?= How many papers does the S2ORC corpus contain, and how many have full text?

.PHONY: install demo doctor test lint typecheck pytest docs docs-cli bench-local bench-litqa2 bench-side-by-side bench-crash bench-injection bench-hostile bench-freeform clean

$(PY):
	python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# llama-cpp-python compiles from source the first time (~9 min on 2 cores); pip caches the wheel.
# The ray extra is a prebuilt wheel (~15 s) and lets `make test` run the Ray batch tests.
# A stamp, so the checks below install first in a fresh clone and reinstall when pyproject changes.
STAMP := $(VENV)/.installed
install: $(STAMP)

$(STAMP): pyproject.toml | $(PY)
	$(BIN)/pip install -q -e ".[offline,bench,dev,serve,ray]"
	touch $@

# Installs the offline stack, then answers a real question over the demo PDFs, offline.
demo: install
	$(BIN)/scholarloop ask "$(QUESTION)" --papers $(DATA)/papers

doctor: install
	$(BIN)/scholarloop doctor

# docs/cli.md is the --help of every command; tests/agent/cli/test_docs.py fails when it is stale.
docs-cli:
	$(PY) -m agent.cli.docs

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest -q

test: lint typecheck pytest

# The docs site into site/, offline; --strict turns every broken link or nav entry into an error.
# The generated pages (docs/cli.md, docs/configuration.md's tables) are regenerated first.
docs: docs-cli
	$(PY) docs/gen_configuration.py
	$(BIN)/mkdocs build --strict

bench-local:
	$(PY) benchmarks/local_overhead.py

# SIGKILL `scholarloop index build` (every write step, 60 random moments), `batch` and `bench`
# (25 kills each, SmolLM2 for every role), restart each time, and check the output equals an
# uninterrupted run's (index ~5 min on 2 cores; batch and bench side by side, see benchmarks/README).
bench-crash:
	$(PY) benchmarks/crash_harness.py --docs 300 --kills 60 --questions 4 --batch-kills 25 --bench-kills 25 \
		--parallel --seed 0 --out bench-out/crash.json

# `scholarloop index build` over ~40 generated hostile files (bombs, loops, 20,000 pages, bad
# names, links out) beside good ones: each must be reported with its reason or indexed, under
# the default per-file limits (~4 min on 2 cores, most of it those limits running out).
bench-hostile:
	$(PY) benchmarks/hostile.py --out bench-out/hostile.json

# Prompt injection (issue #16): 18 attacks in passages, each run clean and attacked through
# gather -> answer -> verify with the configured models (1-4 min a run with the local Qwen on 2 busy cores).
bench-injection:
	$(PY) benchmarks/injection.py --out bench-out/injection.json

# The mixed corpus: LitQA2 key passages among PubMedQA and SciFact abstracts (6,377 documents).
MIXED = --corpus $(DATA)/corpus/litqa2-passages.jsonl --corpus $(DATA)/corpus/pubmedqa-abstracts.jsonl.gz \
	--corpus $(DATA)/corpus/scifact-abstracts.jsonl.gz
# SYSTEMS="--system scholarloop" measures scholarloop alone.
SYSTEMS ?= --system scholarloop --system paperqa

# The grounding core's measurement: 20 seeded LitQA2 questions over the mixed corpus, offline
# default, scholarloop beside paper-qa (~35 min on 2 cores, after the ~7 min index build).
SEED ?= 4
bench-litqa2:
	$(BIN)/scholarloop bench $(DATA)/sets/litqa2-train.jsonl $(MIXED) --limit 20 --seed $(SEED) \
		$(SYSTEMS) --out bench-out/litqa2-seed$(SEED)

# scholarloop and paper-qa side by side on the same seeded samples, offline default (~75 min on 2 cores
# for N=10), then the same LitQA2 sample with each question's sources withheld.
N ?= 10
bench-side-by-side:
	$(BIN)/scholarloop bench $(DATA)/sets/litqa2-train.jsonl $(DATA)/sets/pubmedqa-dev.jsonl $(DATA)/sets/scifact-train.jsonl \
		$(MIXED) --limit $(N) --seed 1 --system scholarloop --system paperqa --out bench-out/side-by-side
	$(BIN)/scholarloop bench $(DATA)/sets/litqa2-train.jsonl --withhold-sources \
		$(MIXED) --limit $(N) --seed 1 --system scholarloop --system paperqa --out bench-out/withhold

# Free-form answers (no options) to seeded COVID-QA questions over their 46 full-text papers, scored
# against the annotated answer span (token F1, containment, judge correctness, right paper cited),
# then the same sample with each question's source withheld (abstention). N defaults to 20 here;
# SYSTEMS="--system scholarloop" runs scholarloop alone.
bench-freeform: N = 20
bench-freeform:
	$(BIN)/scholarloop bench $(DATA)/sets/covidqa-dev.jsonl --free-text \
		--corpus $(DATA)/corpus/covidqa-papers-dev.jsonl.gz --limit $(N) --seed $(SEED) \
		$(SYSTEMS) --out bench-out/freeform-seed$(SEED)
	$(BIN)/scholarloop bench $(DATA)/sets/covidqa-dev.jsonl --free-text --withhold-sources \
		--corpus $(DATA)/corpus/covidqa-papers-dev.jsonl.gz --limit $(N) --seed $(SEED) \
		$(SYSTEMS) --out bench-out/freeform-withhold-seed$(SEED)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
