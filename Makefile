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
VIEWER_BUNDLE := gsworkbench/viewer/static/viewer.js

.PHONY: setup run test lint bench clean notebooks
# The set-up ends by generating notebooks/NN_*.ipynb from their NN_*.py sources (git-ignored; run every
# time, it writes only what is missing or stale and keeps a notebook's outputs when it is in step).
setup: $(KERNEL_STAMP) $(VIEWER_BUNDLE)
	$(BIN)/gsworkbench sync-notebooks

# The splat viewer's browser bundle: one ES module (Spark + three.js + gsworkbench/viewer/js), built by
# esbuild from the locked npm packages. Without Node.js the set-up goes on: the widget then says in one
# line how to build it, and everything else works.
$(VIEWER_BUNDLE): package.json package-lock.json $(wildcard gsworkbench/viewer/js/*.js)
	@if command -v npm >/dev/null 2>&1; then npm ci --no-audit --no-fund && npm run --silent build; \
	else echo "note: Node.js (npm) not found: the splat viewer's browser bundle is not built (everything else works)"; fi

$(DEPS_STAMP): requirements.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (Python 3.11 is required; set PYTHON=...)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	touch $@

$(EXT_STAMP): $(DEPS_STAMP) $(CSRC)
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
	$(BIN)/python -c "from gsworkbench._libz import install_pth; install_pth()"  # pycolmap-first safe: gsworkbench/_libz.py
	$(BIN)/python -c "import torch, gsworkbench._C"
	touch $@

$(KERNEL_STAMP): $(EXT_STAMP)
	$(BIN)/python -m ipykernel install --sys-prefix --name gsworkbench --display-name "gsworkbench (.venv)" \
		--env OMP_WAIT_POLICY PASSIVE >/dev/null
	touch $@

run: setup
	$(BIN)/gsworkbench run-all

# The notebooks' smoke run goes two notebooks at a time: --dist loadfile keeps each notebook's cells on
# one worker, in order, in the one kernel nbval starts for it (their run folders and the scene cache
# are safe to share).
test: setup
	$(BIN)/python -m ruff check gsworkbench tests notebooks
	GSW_REQUIRE_EXT=1 $(BIN)/python -m pytest -q -n 2 tests
	rm -rf build/smoke && $(BIN)/gsworkbench prepare-smoke build/smoke
	GSW_HEADLESS=1 $(BIN)/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile \
		--nbval-lax --nbval-current-env build/smoke
	@if $(BIN)/python -c "import sys, torch, gsworkbench._C as c; sys.exit(0 if c.avx512 else 1)"; then \
		$(MAKE) --no-print-directory test-generic test-raster16; \
	else echo "test-generic and test-raster16 skipped: this build has no AVX-512 loops," \
		"so the tests above ran its AVX2 or generic ones"; fi

# The ext tests again against a GSW_MARCH=x86-64-v3 build (AVX2 + FMA, no AVX-512), so the twins of the
# AVX-512 loops are tested too (the AVX2 ones in float32, the generic ones in float64): a copy of the
# package in build/generic with that build's _C, first on the path (python -P: not the checkout;
# test_build_target checks which _C was imported). CPU kernels only. make test runs it only where the
# default build has AVX-512 loops: elsewhere its tests ran those twins already.
GENERIC := build/generic
EXT_TESTS := tests/test_build_target.py tests/test_splat_stages.py tests/test_splat_raster.py \
	tests/test_splat_absgrad.py tests/test_splat_edge_cases.py tests/test_field.py tests/test_field_device.py \
	tests/test_transforms.py tests/test_train_losses.py tests/test_tile_saturation.py tests/test_chunk_support.py
.PHONY: test-generic
test-generic: setup
	rm -rf $(GENERIC)/gsworkbench && mkdir -p $(GENERIC)
	tar -c --exclude='_C*.so' --exclude=__pycache__ --exclude=_build_info.json gsworkbench | tar -x -C $(GENERIC)
	GSW_MARCH=x86-64-v3 GSW_NO_CUDA=1 GSW_BUILD_INFO=$(GENERIC)/gsworkbench/_build_info.json \
		$(BIN)/python setup.py -q build_ext --build-lib $(GENERIC) --build-temp $(GENERIC)-tmp
	PYTHONPATH=$(GENERIC) GSW_EXPECT_MARCH=x86-64-v3 GSW_REQUIRE_EXT=1 \
		$(BIN)/python -P -m pytest -q -p no:cacheprovider -n 2 $(EXT_TESTS)

# The rasterizer's tests again against a build with its AVX-512 twin (GSW_RASTER_LANES=16: 16 lanes a
# chunk, mask registers), which the default build leaves out for the AVX2 twin (csrc/cpu/splat_simd.h):
# as test-generic, a copy of the package in build/raster16 with that build's _C. Run by make test only
# where the default build has AVX-512 loops. It is built as the default build is (CUDA included where
# that has it) and into its object folder (setup.py's build/ext-objects), so ninja recompiles only the
# units that read GSW_RASTER_LANES and links the default build's objects for the rest.
RASTER16 := build/raster16
RASTER_TESTS := tests/test_build_target.py tests/test_splat_stages.py tests/test_splat_raster.py \
	tests/test_splat_absgrad.py tests/test_splat_edge_cases.py tests/test_rasterize_lanes.py tests/test_splat_tile_cover.py \
	tests/test_tile_saturation.py tests/test_chunk_support.py
.PHONY: test-raster16
test-raster16: setup
	rm -rf $(RASTER16)/gsworkbench && mkdir -p $(RASTER16)
	tar -c --exclude='_C*.so' --exclude=__pycache__ --exclude=_build_info.json gsworkbench | tar -x -C $(RASTER16)
	GSW_RASTER_LANES=16 GSW_BUILD_INFO=$(RASTER16)/gsworkbench/_build_info.json \
		$(BIN)/python setup.py -q build_ext --build-lib $(RASTER16)
	PYTHONPATH=$(RASTER16) GSW_EXPECT_RASTER_LANES=16 GSW_REQUIRE_EXT=1 \
		$(BIN)/python -P -m pytest -q -p no:cacheprovider -n 2 $(RASTER_TESTS)

lint: setup
	$(BIN)/python -m ruff check gsworkbench tests notebooks

notebooks: setup  # notebooks/NN_*.ipynb from their .py sources (what setup does)

bench: setup
	$(BIN)/gsworkbench bench all

clean:
	rm -rf build $(EXT_STAMP) gsworkbench/_C*.so gsworkbench/viewer/static
