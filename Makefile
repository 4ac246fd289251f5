# scholarloop: `make demo` installs the whole offline stack and runs it; `make test` runs the checks.
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
export LITELLM_LOCAL_MODEL_COST_MAP := True
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: install demo test lint typecheck pytest bench-local clean

$(PY):
	python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# llama-cpp-python compiles from source the first time (~9 min on 2 cores); pip caches the wheel.
install: $(PY)
	$(BIN)/pip install -q -e ".[offline,dev]"

demo: install
	$(BIN)/scholarloop doctor

lint:
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

typecheck:
	$(BIN)/mypy

pytest:
	$(BIN)/pytest -q

test: lint typecheck pytest

bench-local:
	$(PY) benchmarks/local_overhead.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
