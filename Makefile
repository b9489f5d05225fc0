# The README's two commands:  `make run` (set up + the notebook suite)  and  `make test` (set up + the tests).
# Re-runs reuse .venv and the build: each step below is redone only when its inputs change.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
export OMP_WAIT_POLICY ?= PASSIVE
export MAX_JOBS ?= 2

DEPS_STAMP := $(VENV)/.deps-stamp
EXT_STAMP := gsworkbench/.ext-stamp
KERNEL_STAMP := $(VENV)/.kernel-stamp
CSRC := $(shell find csrc -type f 2>/dev/null) setup.py

.PHONY: setup run test lint bench clean notebooks
setup: $(KERNEL_STAMP)

$(DEPS_STAMP): requirements.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (Python 3.11 is required; set PYTHON=...)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	touch $@

$(EXT_STAMP): $(DEPS_STAMP) $(CSRC)
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
	$(BIN)/python -c "import torch, gsworkbench._C"
	touch $@

$(KERNEL_STAMP): $(EXT_STAMP)
	$(BIN)/python -m ipykernel install --sys-prefix --name gsworkbench --display-name "gsworkbench (.venv)" \
		--env OMP_WAIT_POLICY PASSIVE >/dev/null
	touch $@

run: setup
	$(BIN)/gsworkbench run-all

test: setup
	$(BIN)/python -m ruff check gsworkbench tests notebooks
	GSW_REQUIRE_EXT=1 $(BIN)/python -m pytest -q -n 2 tests
	rm -rf build/smoke && $(BIN)/gsworkbench prepare-smoke build/smoke
	$(BIN)/python -m pytest -q -p no:cacheprovider --nbval-lax --nbval-current-env build/smoke

lint: setup
	$(BIN)/python -m ruff check gsworkbench tests notebooks

notebooks: setup  # regenerate notebooks/NN_*.ipynb from their .py sources
	$(BIN)/gsworkbench sync-notebooks

bench: setup
	$(BIN)/gsworkbench bench all

clean:
	rm -rf build $(EXT_STAMP) gsworkbench/_C*.so
