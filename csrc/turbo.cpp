// Turbo depth encoding (PROTOCOL §1.2) and decoding (§1.3). Decoding is the nearest of the
// 256 turbo colours (ties to the lower bin), read from a full 2^24-entry lookup table (16 MB)
// built once, exactly, from the palette grid of palette_grid.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "common.h"
#include "output_cache.h"
#include "palette_grid.h"
#include "registry.h"

namespace icl {
namespace turbo {
namespace {

using palette::Grid;

// The bin of every RGB colour (see palette::Lut) for `table` [256, 3].
palette::Lut build_lut(const uint8_t* table) {
  std::vector<uint32_t> colours;
  for (int i = 0; i < 256; ++i) colours.push_back(palette::pack(table[3 * i], table[3 * i + 1], table[3 * i + 2], i));
  return palette::build_full_lut(colours);
}

// The table for `table`, built on first use and rebuilt only if the table changes.
const uint8_t* lut_for(const uint8_t* table) {
  static std::mutex mutex;
  static uint8_t built_for[768];
  static palette::Lut lut;
  std::lock_guard<std::mutex> lock(mutex);
  if (!lut || std::memcmp(built_for, table, sizeof built_for) != 0) {
    lut = build_lut(table);
    std::memcpy(built_for, table, sizeof built_for);
  }
  return lut.get();
}

void check_table(const carray<uint8_t>& table) {
  require_ndim(table, 2, "table");
  if (table.shape(0) != 256 || table.shape(1) != 3) throw std::invalid_argument("table: expected shape [256, 3]");
}

void check_images(const carray<uint8_t>& images) {
  require_ndim(images, 4, "images");
  if (images.shape(3) != 3) throw std::invalid_argument("images: expected 3 channels");
}

// Calls fn(lut_value, i) for every pixel, in parallel.
template <typename Fn>
void for_each_bin(const carray<uint8_t>& images, const uint8_t* lut, Fn fn) {
  const uint8_t* px = images.data();
  const int64_t n = images.shape(0) * images.shape(1) * images.shape(2);
  constexpr int64_t kChunk = 16384;  // dynamic chunks: a descheduled thread holds no one up
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#ifdef ICL_WITH_OPENMP
#pragma omp parallel for schedule(dynamic, 1) if (chunks > 1) num_threads(icl::team())
#endif
  for (int64_t c = 0; c < chunks; ++c) {
    palette::gather_lut(px, c * kChunk, std::min(n, (c + 1) * kChunk), n, lut, fn);
  }
}

py::array_t<int32_t> turbo_bins(carray<uint8_t> images, carray<uint8_t> table) {
  check_images(images);
  check_table(table);
  py::array_t<int32_t> out = output_array<int32_t>({images.shape(0), images.shape(1), images.shape(2)});
  int32_t* dst = out.mutable_data();
  {
    py::gil_scoped_release release;
    const uint8_t* lut = lut_for(table.data());
    for_each_bin(images, lut, [dst](uint8_t bin, int64_t i) { dst[i] = bin; });
  }
  return out;
}

py::array_t<float> turbo_decode(carray<uint8_t> images, carray<uint8_t> table, carray<float> depth_of_bin) {
  check_images(images);
  check_table(table);
  require_ndim(depth_of_bin, 1, "depth_of_bin");
  if (depth_of_bin.shape(0) != 256) throw std::invalid_argument("depth_of_bin: expected 256 values");
  py::array_t<float> out = output_array<float>({images.shape(0), images.shape(1), images.shape(2)});
  float* dst = out.mutable_data();
  const float* depth = depth_of_bin.data();
  {
    py::gil_scoped_release release;
    const uint8_t* lut = lut_for(table.data());
    for_each_bin(images, lut, [dst, depth](uint8_t bin, int64_t i) { dst[i] = depth[bin]; });
  }
  return out;
}

// bin = clip(floor((d - d_min) / (d_max - d_min) * 256), 0, 255) in float64; NaN or
// d <= 0 is invalid and drawn black.
py::array_t<uint8_t> turbo_encode(carray<double> depth, double d_min, double d_max, carray<uint8_t> table) {
  require_ndim(depth, 1, "depth");
  check_table(table);
  if (!(std::isfinite(d_min) && std::isfinite(d_max) && d_max > d_min)) {
    throw std::invalid_argument("d_min, d_max: expected finite values with d_max > d_min");
  }
  const int64_t n = depth.shape(0);
  py::array_t<uint8_t> out({n, int64_t(3)});
  uint8_t* dst = out.mutable_data();
  const double* d = depth.data();
  const uint8_t* tab = table.data();
  {
    py::gil_scoped_release release;
    const double range = d_max - d_min;
#ifdef ICL_WITH_OPENMP
#pragma omp parallel for schedule(static) if (n >= 16384) num_threads(icl::team())
#endif
    for (int64_t i = 0; i < n; ++i) {
      const double v = d[i];
      if (!(v > 0.0)) {  // NaN compares false
        dst[3 * i] = dst[3 * i + 1] = dst[3 * i + 2] = 0;
        continue;
      }
      const double t = std::floor((v - d_min) / range * 256.0);
      const int bin = t < 0.0 ? 0 : (t > 255.0 ? 255 : int(t));
      std::memcpy(dst + 3 * i, tab + 3 * bin, 3);
    }
  }
  return out;
}

}  // namespace
}  // namespace turbo
}  // namespace icl

ICL_REGISTER_BINDINGS(turbo) {
  namespace py = pybind11;
  m.def("turbo_bins", &icl::turbo::turbo_bins, py::arg("images"), py::arg("table"),
        "Nearest turbo bin per pixel: images uint8 [B,H,W,3], table uint8 [256,3] -> int32 [B,H,W] "
        "(ties to the lower bin).");
  m.def("turbo_decode", &icl::turbo::turbo_decode, py::arg("images"), py::arg("table"), py::arg("depth_of_bin"),
        "Depth per pixel: depth_of_bin float32 [256] at the nearest turbo bin -> float32 [B,H,W].");
  m.def("turbo_encode", &icl::turbo::turbo_encode, py::arg("depth"), py::arg("d_min"), py::arg("d_max"),
        py::arg("table"), "Turbo colour per depth value: float64 [N] -> uint8 [N,3]; NaN or <= 0 -> black.");
}
