// Mean squared error per image for PSNR (skimage peak_signal_noise_ratio semantics).
//
// uint8: exact integer sum of squared differences (int64), so the MSE is exact.
// float32: difference and square in float32 as skimage does, summed in double.
// float64: double throughout. Chunks have a fixed size, so sums do not depend on threads.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "common.h"
#include "registry.h"

namespace {

namespace py = pybind11;

constexpr int64_t kChunk = 1 << 16;     // elements per task
// Memory-bound: one thread streams ~16M elements in a few ms, less than waking a team can
// cost on a busy machine, so smaller inputs stay on the calling thread.
constexpr int64_t kParallelMin = 1 << 24;

ICL_INLINE int64_t sse_chunk_body(const uint8_t* a, const uint8_t* b, int64_t n) {
  // 32-bit lanes vectorise best; 2^15 squares of at most 255^2 fit in uint32, so flush to
  // int64 every 2^15 elements and the sum stays exact.
  int64_t total = 0;
  for (int64_t s = 0; s < n; s += 1 << 15) {
    const int64_t e = std::min<int64_t>(n, s + (1 << 15));
    uint32_t part = 0;
    for (int64_t j = s; j < e; ++j) {
      const int32_t d = static_cast<int32_t>(a[j]) - static_cast<int32_t>(b[j]);
      part += static_cast<uint32_t>(d * d);
    }
    total += part;
  }
  return total;
}

ICL_INLINE double sse_chunk_body(const float* a, const float* b, int64_t n) {
  double total = 0.0;
#pragma omp simd reduction(+ : total)
  for (int64_t j = 0; j < n; ++j) {
    const float d = a[j] - b[j];
    total += static_cast<double>(d * d);
  }
  return total;
}

ICL_INLINE double sse_chunk_body(const double* a, const double* b, int64_t n) {
  double total = 0.0;
#pragma omp simd reduction(+ : total)
  for (int64_t j = 0; j < n; ++j) {
    const double d = a[j] - b[j];
    total += d * d;
  }
  return total;
}

// one compilation per instruction-set level (common.h)
ICL_SIMD_DISPATCH(int64_t, sse_chunk, (const uint8_t* a, const uint8_t* b, int64_t n), (a, b, n))
ICL_SIMD_DISPATCH(double, sse_chunk, (const float* a, const float* b, int64_t n), (a, b, n))
ICL_SIMD_DISPATCH(double, sse_chunk, (const double* a, const double* b, int64_t n), (a, b, n))

template <typename In>
py::array_t<double> mse_impl(icl::carray<In> a, icl::carray<In> b) {
  if (a.ndim() < 1 || a.ndim() != b.ndim())
    throw std::invalid_argument("a and b must have the same shape [B, ...]");
  for (int d = 0; d < a.ndim(); ++d)
    if (a.shape(d) != b.shape(d)) throw std::invalid_argument("a and b must have the same shape");
  const int64_t B = a.shape(0);
  const int64_t n = B == 0 ? 0 : a.size() / B;
  if (n == 0) throw std::invalid_argument("images must not be empty");
  const int64_t nchunk = (n + kChunk - 1) / kChunk, ntask = B * nchunk;
  using Acc = decltype(sse_chunk(a.data(), b.data(), 0));
  std::vector<Acc> part(ntask);
  const In* pa = a.data();
  const In* pb = b.data();
  {
    py::gil_scoped_release nogil;
#pragma omp parallel for schedule(static) if (B * n >= kParallelMin) num_threads(icl::team())
    for (int64_t t = 0; t < ntask; ++t) {
      const int64_t bi = t / nchunk, s = (t % nchunk) * kChunk;
      const int64_t e = std::min(n, s + kChunk);
      part[t] = sse_chunk(pa + bi * n + s, pb + bi * n + s, e - s);
    }
  }
  py::array_t<double> out(B);
  double* o = out.mutable_data();
  for (int64_t bi = 0; bi < B; ++bi) {
    Acc s = 0;
    for (int64_t k = 0; k < nchunk; ++k) s += part[bi * nchunk + k];
    o[bi] = static_cast<double>(s) / static_cast<double>(n);
  }
  return out;
}

}  // namespace

ICL_REGISTER_BINDINGS(psnr) {
  const char* doc =
      "mse(a, b) -> float64 [B]: mean squared error per image of [B, ...] arrays (uint8 exact, "
      "float32 squared in float32 and summed in double, float64 in double).";
  m.def("mse", &mse_impl<uint8_t>, py::arg("a"), py::arg("b"), doc);
  m.def("mse", &mse_impl<float>, py::arg("a"), py::arg("b"), doc);
  m.def("mse", &mse_impl<double>, py::arg("a"), py::arg("b"), doc);
}
