# vllm-forensics: `make demo` runs the main job, `make test` the whole suite.
# Each checkout gets its own .venv (the project installed into it) from uv's shared cache.

PYTHON ?= python3
UV_VERSION := 0.13.9
UV ?= $(shell command -v uv 2>/dev/null || echo $(HOME)/.local/bin/uv)
VENV := .venv
STAMP := $(VENV)/.forensics-installed
SCALE ?= full

.PHONY: demo test lint unit bench env clean

$(UV):
	$(PYTHON) -m pip install --user --quiet "uv==$(UV_VERSION)"

$(STAMP): uv.lock pyproject.toml | $(UV)
	$(UV) sync --locked --all-extras --python $(PYTHON)
	touch $(STAMP)

env: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/forensics demo -o reports

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

unit: $(STAMP)
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider tests

test: lint unit

bench: $(STAMP)
	$(VENV)/bin/python benchmarks/run.py --scale $(SCALE)

clean:
	rm -rf $(VENV) reports .pytest_cache .mypy_cache .ruff_cache
