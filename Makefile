# Set-up and everyday commands. Both `make demo` and `make test` create .venv themselves.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
OUT    := out

.PHONY: fuzz demo test lint lab bench samples browser-check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.demo-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e ".[runtime,notebooks]"
	touch $@

$(VENV)/.dev-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@ $(VENV)/.demo-installed

## demo: compile, run, trace-join and partition the sample models; results under out/
demo: $(VENV)/.demo-installed
	$(BIN)/toolkit demo --out $(OUT)

## test: ruff, the type checker, the layer contracts and the whole test suite (notebooks too)
test: $(VENV)/.dev-installed
	$(BIN)/ruff check toolkit tests bench sample_models
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -n 2 -q

## browser-check: every notebook run in JupyterLab in headless Chromium (installs Debian's
## chromium when missing and running as root); screenshots in out/browser/
browser-check: $(VENV)/.dev-installed
	$(BIN)/python tests/browser/check_notebooks.py --out $(OUT)/browser

## fuzz: the fuzz suite with 3,000 cases per format and 100 kills per writer
fuzz: $(VENV)/.dev-installed
	TOOLKIT_FUZZ_CASES=3000 TOOLKIT_KILL_TRIES=100 $(BIN)/python -m pytest -n 2 -q -s \
		tests/test_fuzz.py tests/test_fuzz_traces.py tests/test_reliability.py \
		tests/test_kill_writers.py \
		-k "fuzz or os_errors or permission or killed"

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check toolkit tests bench sample_models
	$(BIN)/mypy
	$(BIN)/lint-imports

## lab: JupyterLab on notebooks/
lab: $(VENV)/.demo-installed
	$(BIN)/jupyter lab notebooks/

## bench: every benchmark in bench/ (ratios against in-process baselines)
bench: $(VENV)/.dev-installed
	@for f in bench/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || echo "   ($$f: a target was missed or it failed; see above)"; done

## samples: rebuild the committed sample models
samples: $(VENV)/.dev-installed
	$(BIN)/python sample_models/make_samples.py

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache .ruff_cache
