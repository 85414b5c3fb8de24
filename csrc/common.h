// Shared helpers for the CPU kernels: array checks and OpenMP shims.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#ifdef ICL_WITH_OPENMP
#include <omp.h>
#endif

// Hot loops compiled for AVX-512, AVX2 and baseline x86-64, picked at load time (GCC/Clang).
#if defined(__GNUC__) && defined(__x86_64__)
#define ICL_SIMD_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ICL_SIMD_CLONES
#endif

namespace icl {
namespace py = pybind11;

template <typename T>
using carray = py::array_t<T, py::array::c_style | py::array::forcecast>;

inline void require_ndim(const py::array& a, int ndim, const char* what) {
  if (a.ndim() != ndim) {
    throw std::invalid_argument(std::string(what) + ": expected " + std::to_string(ndim) +
                                " dimensions, got " + std::to_string(a.ndim()));
  }
}

inline int max_threads() {
#ifdef ICL_WITH_OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace icl
