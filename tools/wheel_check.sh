#!/usr/bin/env bash
# The wheel as a user gets it: built from this checkout, installed from the lock into a clean
# venv, and run from a temporary folder outside the checkout, so that nothing works only because
# the source tree is on sys.path. Usage: tools/wheel_check.sh (PY: the interpreter that builds,
# default .venv/bin/python; it needs scikit-build-core and pybind11, both in the lock).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PY:-$ROOT/.venv/bin/python}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/icl-wheel-check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

echo "== wheel: build"
"$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$WORK/dist" "$ROOT"
wheel=$(ls "$WORK"/dist/icl_eval-*.whl)
echo "   $(basename "$wheel")"

echo "== wheel: install into a clean venv, every package pinned by requirements/lock.txt"
base=$("$PY" -c "import sys; print(sys._base_executable)")
"$base" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q --upgrade pip
"$WORK/venv/bin/python" -m pip install -q -c "$ROOT/requirements/lock.txt" "$wheel[models,vlm]"

echo "== wheel: run from $WORK/run (outside the checkout)"
mkdir "$WORK/run"
cd "$WORK/run"
export PYTHONSAFEPATH=  # the default: the current folder is on sys.path, as for a user
"$WORK/venv/bin/python" - "$ROOT" <<'PY'
import sys
from pathlib import Path
import icl, icl.ops, icl.kernels, icl._C
root = Path(sys.argv[1]).resolve()
for module in (icl, icl.ops, icl.kernels, icl._C):
    where = Path(module.__file__).resolve()
    assert root not in where.parents, f"{module.__name__} imported from the checkout: {where}"
ok, why = icl.ops.backend_status("cpu")
assert ok, why
print(f"   icl {icl.__version__ if hasattr(icl, '__version__') else ''} from {Path(icl.__file__).parent}; cpu backend: {why}")
PY
"$WORK/venv/bin/python" -m icl.run --fast --no-progress --out "$WORK/run/runs"
test -s "$WORK/run/runs/report.html"
echo "== wheel: ok"
