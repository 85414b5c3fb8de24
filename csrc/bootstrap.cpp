// Bootstrap totals from a counter-based index stream (icl/ops/bootstrap.py holds the numpy
// reference and states the stream).
//
// Draw j of resample r takes row idx(seed, r, j) of x [K, C]: c = r * K + j,
// h = mix(mix(seed + G) + (c + 1) * G) (SplitMix64's finaliser ``mix`` and increment G), and
// idx = floor(h * K / 2^64) (Lemire's multiply-shift, computed exactly from 32-bit halves; a
// row's probability differs from 1 / K by less than 2^-64, K / 2^64 relative). Every step is integer arithmetic, and each
// resample's totals are summed in draw order j = 0..K-1, so the totals are the same bits on
// every instruction-set level, thread count and chunking. Lanes are resamples: a vector unit
// draws for kLanes resamples at once, each lane keeping its own sequential sum.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "common.h"
#include "registry.h"

namespace {

namespace py = pybind11;

constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ULL;
constexpr int64_t kLanes = 16;  // resamples drawn together (two AVX-512 vectors of uint64)

ICL_INLINE uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// floor(h * k / 2^64) for k < 2^32 from two 32x32->64 products (vectorises; no 128-bit product)
ICL_INLINE uint64_t scale_index(uint64_t h, uint64_t k) {
  return ((h >> 32) * k + (((h & 0xffffffffULL) * k) >> 32)) >> 32;
}

// Columns col0 .. col0 + NC - 1 of resamples r0 .. r0 + n - 1 (n <= kLanes) into
// out[(r0 + l) * C + col]; a few columns share each draw, their sums stay apart.
template <int NC, bool VectorHash>
ICL_INLINE void block_columns(const double* x, int64_t K, int64_t C, uint64_t key, int64_t r0, int64_t n,
                              int64_t col0, double* out) {
  uint64_t state[kLanes];  // key + (r * K + j + 1) * G, advanced by G per draw
  double acc[NC][kLanes];
  for (int64_t l = 0; l < kLanes; ++l)  // lanes past n repeat the last resample and are dropped
    state[l] = key + (static_cast<uint64_t>(r0 + (l < n ? l : n - 1)) * static_cast<uint64_t>(K) + 1) * kGamma;
  for (int c = 0; c < NC; ++c)
    for (int64_t l = 0; l < kLanes; ++l) acc[c][l] = 0.0;
  const uint64_t k = static_cast<uint64_t>(K);
  const double* xc = x + col0;
  for (int64_t j = 0; j < K; ++j) {
    int64_t at[kLanes];
    if constexpr (VectorHash) {
#pragma omp simd
      for (int64_t l = 0; l < kLanes; ++l) {
        at[l] = static_cast<int64_t>(scale_index(mix(state[l]), k)) * C;
        state[l] += kGamma;
      }
    } else {
      for (int64_t l = 0; l < kLanes; ++l) {
        uint64_t z = state[l];
#if defined(__GNUC__)
        asm("" : "+r"(z));  // keeps the vectoriser out: SSE2 emulates 64-bit multiplies slowly
#endif
        at[l] = static_cast<int64_t>(scale_index(mix(z), k)) * C;
        state[l] = z + kGamma;
      }
    }
#if defined(__GNUC__)
    if constexpr (NC <= 2) {  // scalar loads (measured ~15% faster than gathers on AMD Zen 4;
      for (int64_t l = 0; l < kLanes; ++l) {  // with more columns the sums spill: gathers win)
        int64_t a = at[l];
        asm("" : "+r"(a));  // keeps the vectoriser from turning the loads back into a gather
        for (int c = 0; c < NC; ++c) acc[c][l] += xc[a + c];
      }
      continue;
    }
#endif
    for (int c = 0; c < NC; ++c) {
#pragma omp simd
      for (int64_t l = 0; l < kLanes; ++l) acc[c][l] += xc[at[l] + c];
    }
  }
  for (int c = 0; c < NC; ++c)
    for (int64_t l = 0; l < n; ++l) out[(r0 + l) * C + col0 + c] = acc[c][l];
}

template <bool VectorHash>
ICL_INLINE void block_totals_in(const double* x, int64_t K, int64_t C, uint64_t key, int64_t r0, int64_t n,
                                double* out) {
  int64_t col = 0;
  for (; col + 4 <= C; col += 4) block_columns<4, VectorHash>(x, K, C, key, r0, n, col, out);
  switch (C - col) {
    case 3: block_columns<3, VectorHash>(x, K, C, key, r0, n, col, out); break;
    case 2: block_columns<2, VectorHash>(x, K, C, key, r0, n, col, out); break;
    case 1: block_columns<1, VectorHash>(x, K, C, key, r0, n, col, out); break;
    default: break;
  }
}

// vector_hash: hash the lanes in vectors (AVX2, AVX-512: measured 1.9 and 0.5 ns a draw); at the
// baseline level the scalar hash is faster (1.4-2.0 against 3.4 ns a draw on SSE2 vectors; AMD Zen 4)
ICL_INLINE void block_totals_body(const double* x, int64_t K, int64_t C, uint64_t key, int64_t r0, int64_t n,
                                  double* out, bool vector_hash) {
  if (vector_hash)
    block_totals_in<true>(x, K, C, key, r0, n, out);
  else
    block_totals_in<false>(x, K, C, key, r0, n, out);
}

ICL_SIMD_DISPATCH(void, block_totals,
                  (const double* x, int64_t K, int64_t C, uint64_t key, int64_t r0, int64_t n, double* out,
                   bool vector_hash),
                  (x, K, C, key, r0, n, out, vector_hash))

py::array_t<double> bootstrap_totals(const py::array& rows, uint64_t seed, int64_t resamples) {
  auto& api = py::detail::npy_api::get();
  if (Py_TYPE(rows.ptr()) != api.PyArray_Type_ || rows.dtype().num() != py::detail::npy_api::NPY_DOUBLE_)
    throw py::type_error("bootstrap_totals: rows must be a float64 numpy array, got " +
                         std::string(py::str(rows.dtype())));
  if (rows.ndim() != 2)
    throw std::invalid_argument("bootstrap_totals: rows must be [K, C], got " + std::to_string(rows.ndim()) +
                                " dimensions");
  if (resamples < 0) throw std::invalid_argument("bootstrap_totals: resamples must be >= 0");
  const int64_t K = rows.shape(0), C = rows.shape(1);
  if (K >= (int64_t(1) << 32)) throw std::invalid_argument("bootstrap_totals: at most 2^32 - 1 rows");
  if (K > 0 && resamples > INT64_MAX / K) throw std::invalid_argument("bootstrap_totals: resamples x rows overflows");
  const icl::carray<double> x = icl::carray<double>::ensure(rows);
  py::array_t<double> out({resamples, C});
  double* o = out.mutable_data();
  if (K == 0 || C == 0) {
    for (int64_t i = 0; i < resamples * C; ++i) o[i] = 0.0;
    return out;
  }
  const double* px = x.data();
  const uint64_t key = mix(seed + kGamma);
  const int64_t blocks = (resamples + kLanes - 1) / kLanes;
  const bool vector_hash = icl::isa_level() != icl::Isa::baseline;
  {
    py::gil_scoped_release nogil;
#pragma omp parallel for schedule(dynamic, 1) if (blocks > 1 && K * C * kLanes >= (1 << 16)) num_threads(icl::team())
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t r0 = b * kLanes;
      block_totals(px, K, C, key, r0, std::min(kLanes, resamples - r0), o, vector_hash);
    }
  }
  return out;
}

}  // namespace

ICL_REGISTER_BINDINGS(bootstrap) {
  m.def("bootstrap_totals", &bootstrap_totals, py::arg("rows"), py::arg("seed"), py::arg("resamples"),
        "bootstrap_totals(rows float64 [K, C], seed uint64, resamples) -> float64 [resamples, C]: each "
        "resample's column totals over K rows drawn with replacement from the counter-based stream of "
        "icl.ops.bootstrap (summed in draw order: the same bits on every CPU level and thread count).");
}
