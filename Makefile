# scholarloop: `make demo` installs the whole offline stack and runs it; `make test` runs the checks.
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
export LITELLM_LOCAL_MODEL_COST_MAP := True
export PIP_DISABLE_PIP_VERSION_CHECK := 1

DATA ?= ../shared/data
QUESTION ?= How many papers does the S2ORC corpus contain, and how many have full text?

.PHONY: install demo doctor test lint typecheck pytest docs docs-cli bench-local bench-litqa2 bench-side-by-side clean

$(PY):
	python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# llama-cpp-python compiles from source the first time (~9 min on 2 cores); pip caches the wheel.
install: $(PY)
	$(BIN)/pip install -q -e ".[offline,bench,dev,serve]"

# Installs the offline stack, then answers a real question over the demo PDFs, offline.
demo: install
	$(BIN)/scholarloop ask "$(QUESTION)" --papers $(DATA)/papers

doctor: install
	$(BIN)/scholarloop doctor

# docs/cli.md is the --help of every command; tests/agent/cli/test_docs.py fails when it is stale.
docs-cli:
	$(PY) -m agent.cli.docs

lint:
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

typecheck:
	$(BIN)/mypy

pytest:
	$(BIN)/pytest -q

test: lint typecheck pytest

# The docs site into site/, offline; --strict turns every broken link or nav entry into an error.
# The generated pages (docs/cli.md, docs/configuration.md's tables) are regenerated first.
docs: docs-cli
	$(PY) docs/gen_configuration.py
	$(BIN)/mkdocs build --strict

bench-local:
	$(PY) benchmarks/local_overhead.py

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

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
