// Mean squared error per image for PSNR (skimage peak_signal_noise_ratio semantics).
//
// uint8: exact integer sum of squared differences (int64), so the MSE is exact.
// float32: difference and square in float32 as skimage does, summed in double.
// float64: double throughout. Chunks have a fixed size, so sums do not depend on threads.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
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

// MSE of B images of n elements each, into out[B].
template <typename In>
void mse_core(const In* pa, const In* pb, int64_t B, int64_t n, double* out) {
  const int64_t nchunk = (n + kChunk - 1) / kChunk, ntask = B * nchunk;
  using Acc = decltype(sse_chunk(pa, pb, 0));
  Acc one[1];  // a single chunk (small images) needs no allocation and keeps the GIL: a
  std::vector<Acc> part(ntask > 1 ? ntask : 0);  // microsecond matters at 72x96
  Acc* parts = ntask > 1 ? part.data() : one;
  if (ntask == 1) {
    parts[0] = sse_chunk(pa, pb, n);
  } else {
    py::gil_scoped_release nogil;
#pragma omp parallel for schedule(static) if (B * n >= kParallelMin) num_threads(icl::team())
    for (int64_t t = 0; t < ntask; ++t) {
      const int64_t bi = t / nchunk, s = (t % nchunk) * kChunk;
      const int64_t e = std::min(n, s + kChunk);
      parts[t] = sse_chunk(pa + bi * n + s, pb + bi * n + s, e - s);
    }
  }
  for (int64_t bi = 0; bi < B; ++bi) {
    Acc s = 0;
    for (int64_t k = 0; k < nchunk; ++k) s += parts[bi * nchunk + k];
    out[bi] = static_cast<double>(s) / static_cast<double>(n);
  }
}

template <typename In>
py::array_t<double> mse_impl(icl::carray<In> a, icl::carray<In> b) {
  if (a.ndim() < 1 || a.ndim() != b.ndim())
    throw std::invalid_argument("a and b must have the same shape [B, ...]");
  for (int d = 0; d < a.ndim(); ++d)
    if (a.shape(d) != b.shape(d)) throw std::invalid_argument("a and b must have the same shape");
  const int64_t B = a.shape(0);
  const int64_t n = B == 0 ? 0 : a.size() / B;
  if (n == 0) throw std::invalid_argument("images must not be empty");
  py::array_t<double> out(B);
  mse_core(a.data(), b.data(), B, n, out.mutable_data());
  return out;
}

// icl.ops.psnr for the common numpy call, whole in C++: a small image costs about a
// microsecond, as cv2.PSNR, where the Python checks alone cost several. Serves C-contiguous,
// aligned, native-order uint8/float32/float64 numpy arrays [B, H, W, C] or [H, W, C] (C = 1 or
// 3, B >= 1) of one shape, data_range None (uint8) or a positive finite Python float/int, with
// ICL_BACKEND unset or "cpu"; returns None for anything else, and for a non-finite MSE (NaN or
// infinite inputs): the Python front end then checks and words the error.
template <typename In>
py::object psnr_of(const py::array& a, const py::array& b, double dr, bool single) {
  const int64_t B = single ? 1 : a.shape(0);
  const int64_t n = a.size() / B;
  py::array_t<double> out = single ? py::array_t<double>(py::array::ShapeContainer{}) : py::array_t<double>(B);
  double* o = out.mutable_data();
  mse_core(static_cast<const In*>(a.data()), static_cast<const In*>(b.data()), B, n, o);
  for (int64_t i = 0; i < B; ++i) {
    if (!std::isfinite(o[i])) return py::none();
    o[i] = 10.0 * std::log10((dr * dr) / o[i]);
  }
  return std::move(out);
}

py::object psnr_numpy(py::handle a, py::handle b, py::handle data_range) {
  const char* forced = std::getenv("ICL_BACKEND");
  if (forced && *forced && std::strcmp(forced, "cpu") != 0) return py::none();
  auto& api = py::detail::npy_api::get();
  if (Py_TYPE(a.ptr()) != api.PyArray_Type_ || Py_TYPE(b.ptr()) != api.PyArray_Type_) return py::none();
  const auto x = py::reinterpret_borrow<py::array>(a), y = py::reinterpret_borrow<py::array>(b);
  const int nd = static_cast<int>(x.ndim());
  if ((nd != 3 && nd != 4) || y.ndim() != nd) return py::none();
  for (int d = 0; d < nd; ++d)
    if (x.shape(d) != y.shape(d) || x.shape(d) == 0) return py::none();
  if (x.shape(nd - 1) != 1 && x.shape(nd - 1) != 3) return py::none();
  constexpr int kReady = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ | py::detail::npy_api::NPY_ARRAY_ALIGNED_;
  for (const py::array* t : {&x, &y})
    if ((py::detail::array_proxy(t->ptr())->flags & kReady) != kReady) return py::none();
  const py::dtype dt = x.dtype(), dy = y.dtype();
  const int num = dt.num();
  for (const py::dtype* d : {&dt, &dy})
    if (d->num() != num || (d->byteorder() != '=' && d->byteorder() != '|')) return py::none();
  double dr;
  if (data_range.is_none()) {
    if (num != py::detail::npy_api::NPY_UBYTE_) return py::none();
    dr = 255.0;
  } else if (PyFloat_Check(data_range.ptr()) || (PyLong_Check(data_range.ptr()) && !PyBool_Check(data_range.ptr()))) {
    dr = PyFloat_AsDouble(data_range.ptr());
    if (PyErr_Occurred()) {  // an int too large for a double: the front end words it
      PyErr_Clear();
      return py::none();
    }
    if (!std::isfinite(dr) || dr <= 0.0) return py::none();
  } else {
    return py::none();
  }
  const bool single = nd == 3;
  switch (num) {
    case py::detail::npy_api::NPY_UBYTE_: return psnr_of<uint8_t>(x, y, dr, single);
    case py::detail::npy_api::NPY_FLOAT_: return psnr_of<float>(x, y, dr, single);
    case py::detail::npy_api::NPY_DOUBLE_: return psnr_of<double>(x, y, dr, single);
    default: return py::none();
  }
}

}  // namespace

ICL_REGISTER_BINDINGS(psnr) {
  const char* doc =
      "mse(a, b) -> float64 [B]: mean squared error per image of [B, ...] arrays (uint8 exact, "
      "float32 squared in float32 and summed in double, float64 in double).";
  m.def("mse", &mse_impl<uint8_t>, py::arg("a"), py::arg("b"), doc);
  m.def("mse", &mse_impl<float>, py::arg("a"), py::arg("b"), doc);
  m.def("mse", &mse_impl<double>, py::arg("a"), py::arg("b"), doc);
  m.def("psnr_numpy", &psnr_numpy, py::arg("a"), py::arg("b"), py::arg("data_range"),
        "icl.ops.psnr of a common numpy call in C++, or None when the Python front end must serve it.");
}
