# Set-up and everyday commands. Both `make demo` and `make test` create .venv themselves.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
OUT    := out

.PHONY: fuzz demo test lint lab bench samples browser-check clean
SHELL := /bin/bash

# Every step says what it does on one line; the tools print only on trouble (or, for pip, its
# progress: the first install downloads a few hundred MB).
PIP := $(BIN)/python -m pip --disable-pip-version-check --no-input
# pip's whole log goes to .venv/pip.log; the terminal gets what it fetches and installs (its
# "already satisfied" lines, build-backend notices and the package indexes a machine is set up
# with are left there), and the whole log when it fails
PIP_SHOWN := grep --line-buffered -E '^(Collecting|  Downloading|Installing collected|Successfully installed)'
PIP_LOGGED = 2>&1 | tee $(VENV)/pip.log | { $(PIP_SHOWN) || true; }; \
	status=$${PIPESTATUS[0]}; [ $$status -eq 0 ] || { cat $(VENV)/pip.log; exit $$status; }

$(BIN)/python:
	@echo "== creating $(VENV) with $(PYTHON)"
	@$(PYTHON) -m venv $(VENV)
	@$(PIP) install --quiet --upgrade pip

$(VENV)/.demo-installed: pyproject.toml | $(BIN)/python
	@echo "== installing toolkit and its runtime and notebook dependencies into $(VENV)"
	@$(PIP) install --progress-bar on -e ".[runtime,notebooks]" $(PIP_LOGGED)
	@touch $@

$(VENV)/.dev-installed: pyproject.toml | $(BIN)/python
	@echo "== installing toolkit and its development dependencies into $(VENV)"
	@$(PIP) install --progress-bar on -e ".[dev]" $(PIP_LOGGED)
	@touch $@ $(VENV)/.demo-installed

## demo: compile, run, trace-join and partition the sample models; results under out/
demo: $(VENV)/.demo-installed
	@echo "== toolkit demo --out $(OUT)"
	@$(BIN)/toolkit demo --out $(OUT)

## test: ruff, the type checker, the layer contracts and the whole test suite (notebooks too)
test: $(VENV)/.dev-installed
	@echo "== ruff (style)"
	@$(BIN)/ruff check --quiet toolkit tests bench sample_models
	@echo "== mypy (types)"
	@$(BIN)/mypy --no-error-summary
	@echo "== import-linter (layer contracts)"
	@$(BIN)/lint-imports --no-logo > $(VENV)/lint-imports.log 2>&1 || { cat $(VENV)/lint-imports.log; exit 1; }
	@echo "== pytest (the whole suite, notebooks too)"
	@$(BIN)/python -m pytest -n 2 -q

## browser-check: every notebook run in JupyterLab in headless Chromium (installs Debian's
## chromium when missing and running as root); screenshots in out/browser/
browser-check: $(VENV)/.dev-installed
	$(BIN)/python tests/browser/check_notebooks.py --out $(OUT)/browser

## fuzz: the fuzz suite with 3,000 cases per format, 100 kills per writer and 500 command lines per verb
fuzz: $(VENV)/.dev-installed
	@echo "== fuzz: readers, trace readers, writers under kill, and the command line"
	@TOOLKIT_FUZZ_CASES=3000 TOOLKIT_KILL_TRIES=100 TOOLKIT_CLI_FUZZ_CASES=500 \
		$(BIN)/python -m pytest -n 2 -q -s \
		tests/test_fuzz.py tests/test_fuzz_traces.py tests/test_reliability.py \
		tests/test_kill_writers.py tests/test_cli_fuzz.py \
		-k "fuzz or os_errors or permission or killed"

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check toolkit tests bench sample_models
	$(BIN)/mypy
	$(BIN)/lint-imports

## lab: JupyterLab on notebooks/ (as root too); saving strips outputs, so git stays clean
lab: $(VENV)/.demo-installed
	@echo "== JupyterLab on notebooks/ (Ctrl-C twice stops it)"
	@$(BIN)/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) \
		--ContentsManager.pre_save_hook=toolkit.util.nbstrip.pre_save_hook notebooks/

## bench: every benchmark in bench/ (ratios against in-process baselines)
bench: $(VENV)/.dev-installed
	@for f in bench/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || echo "   ($$f: a target was missed or it failed; see above)"; done

## samples: rebuild the committed sample models
samples: $(VENV)/.dev-installed
	$(BIN)/python sample_models/make_samples.py

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache .ruff_cache
