#!/usr/bin/env bash
# Tests on every instruction-set path, so a CPU without AVX-512 (or without AVX2) runs nothing
# CI has not run:
#  1. the kernel tests (tests/ops, but tests/ops/gpu: the Triton interpreter and the numba
#     simulator run no native loop) once per level of the native hot loops this CPU runs
#     (ICL_CPU_LEVEL=v4, v3, baseline; csrc/common.h), a level the CPU lacks is reported;
#     AFTER_SUITE=1 (CI, after `make test`) skips the best level, which the suite just ran;
#  2. the float-sensitive tests once more with numpy's own SIMD dispatch limited to AVX2
#     (NPY_DISABLE_CPU_FEATURES), as on an AMD EPYC without AVX-512; AFTER_SUITE=1 skips it on a
#     CPU without AVX-512, where the suite just ran exactly that.
# Usage: tests/run_isa_paths.sh [extra pytest args]; PY selects the interpreter (default
# .venv/bin/python, else python3). Exit status: the first failing run's.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
PYTEST=("$PY" -m pytest -q -m "not slow" -p no:cacheprovider "$@")
if "$PY" -c "import xdist" 2>/dev/null; then  # two processes, as make test
  PYTEST+=(-n "${TEST_WORKERS:-2}" --dist loadfile)
fi

levels=$("$PY" -c "import icl._C as C; print(' '.join(C.cpu_levels()))")
best=""
for level in v4 v3 baseline; do
  if [[ " $levels " == *" $level "* ]]; then
    best=${best:-$level}
    if [[ "${AFTER_SUITE:-0}" == 1 && $level == "$best" ]]; then
      echo "== native kernels at ICL_CPU_LEVEL=$level: run by the test suite (the level this CPU runs by default)"
      continue
    fi
    echo "== native kernels at ICL_CPU_LEVEL=$level"
    ICL_CPU_LEVEL=$level "${PYTEST[@]}" tests/ops --ignore=tests/ops/gpu
  else
    echo "== ICL_CPU_LEVEL=$level not run: this CPU runs only: $levels"
  fi
done

# numpy's dispatch targets above AVX2 (numpy >= 2.3 names them X86_V4, AVX512_ICL, AVX512_SPR;
# earlier releases AVX512F, AVX512_SKX, ...): disable those this numpy knows about and this CPU
# runs. A CPU with none of them already ran numpy's AVX2 paths in the suite (AFTER_SUITE=1).
read -r npy_off npy_here <<<"$("$PY" -c "
try:
    from numpy._core._multiarray_umath import __cpu_dispatch__ as d, __cpu_features__ as f
except ImportError:
    from numpy.core._multiarray_umath import __cpu_dispatch__ as d, __cpu_features__ as f
off = [x for x in d if x.startswith(('AVX512', 'X86_V4'))]
print(','.join(off) or '-', ','.join(x for x in off if f.get(x)) or '-')")"
npy_off=${npy_off//,/ }
[[ $npy_off == - ]] && npy_off=""  # this numpy has no such paths (not x86): nothing to disable
if [[ "${AFTER_SUITE:-0}" == 1 && $npy_here == - ]]; then
  echo "== numpy limited to AVX2: run by the test suite (this CPU runs none of numpy's paths above AVX2: $npy_off)"
  exit 0
fi
echo "== numpy limited to AVX2 (NPY_DISABLE_CPU_FEATURES='$npy_off')"
NPY_DISABLE_CPU_FEATURES="$npy_off" "${PYTEST[@]}" tests/ops tests/benchmarks tests/report --ignore=tests/ops/gpu
