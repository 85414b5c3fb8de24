// Fused SSIM (skimage structural_similarity with gaussian_weights=True, sigma=1.5,
// truncate=3.5, K1=0.01, K2=0.03, population covariance, channel_axis=-1) per image.
//
// skimage filters with mode='reflect' and then crops (win-1)/2 = 5 pixels from every border;
// every kept output only reads in-image pixels, so we compute exactly the valid region and
// never pad. Channels stay interleaved: a row of W*C values is filtered with taps C apart, and
// since every channel has the same number of valid positions, the mean over channels of the
// per-channel means is the mean over all valid (pixel, channel) values.
//
// Per row block: each input row is centred, squared/multiplied and filtered horizontally into
// an 11-row ring of the five planes (x, y, xx, yy, xy); each output row is then the vertical
// 11-tap filter over the ring, turned into SSIM and summed, so no full-size intermediate
// image exists. Blocks have a fixed height, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common.h"
#include "registry.h"

namespace {

namespace py = pybind11;

constexpr int kRadius = 5;  // int(3.5 * 1.5 + 0.5), as scipy.ndimage and skimage compute it
constexpr int kTaps = 2 * kRadius + 1;
constexpr int kBlockRows = 64;  // valid output rows per task (fixed: deterministic sums)
constexpr int kChunk = 512;     // columns per vertical-pass chunk (stays in L1)

#if defined(__GNUC__) && defined(__x86_64__)
#define ICL_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ICL_SIMD_CLONES
#endif

// scipy.ndimage's 1-D Gaussian: exp(-x^2 / (2 sigma^2)) for |x| <= radius, normalised.
template <typename T>
void gaussian_weights(T* w) {
  double phi[kTaps], sum = 0.0;
  for (int k = 0; k < kTaps; ++k) {
    const double x = k - kRadius;
    phi[k] = std::exp(-0.5 / (1.5 * 1.5) * x * x);
    sum += phi[k];
  }
  for (int k = 0; k < kTaps; ++k) w[k] = static_cast<T>(phi[k] / sum);
}

template <typename T>
struct Params {
  T w[kTaps];
  T shift, c1, c2;
};

// Symmetric 11-tap filter: out[j] = sum_k w[k] * in[j + k * stride], for j < n.
template <typename T>
inline void filter_row(const T* __restrict in, T* __restrict out, int64_t n, int64_t stride,
                       const T* w) {
  const T* __restrict p[kTaps];
  for (int k = 0; k < kTaps; ++k) p[k] = in + k * stride;
  const T w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5];
  for (int64_t j = 0; j < n; ++j) {
    out[j] = w5 * p[5][j] + w4 * (p[4][j] + p[6][j]) + w3 * (p[3][j] + p[7][j]) +
             w2 * (p[2][j] + p[8][j]) + w1 * (p[1][j] + p[9][j]) + w0 * (p[0][j] + p[10][j]);
  }
}

// Vertical pass over the 11 ring rows of one plane.
template <typename T>
inline void filter_col(T* const* rows, int64_t off, T* __restrict out, int64_t n, const T* w) {
  const T *r0 = rows[0] + off, *r1 = rows[1] + off, *r2 = rows[2] + off, *r3 = rows[3] + off,
          *r4 = rows[4] + off, *r5 = rows[5] + off, *r6 = rows[6] + off, *r7 = rows[7] + off,
          *r8 = rows[8] + off, *r9 = rows[9] + off, *r10 = rows[10] + off;
  const T w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5];
  for (int64_t j = 0; j < n; ++j) {
    out[j] = w5 * r5[j] + w4 * (r4[j] + r6[j]) + w3 * (r3[j] + r7[j]) + w2 * (r2[j] + r8[j]) +
             w1 * (r1[j] + r9[j]) + w0 * (r0[j] + r10[j]);
  }
}

template <typename T>
struct Workspace {
  std::vector<T> line;  // 5 planes of one full input row (L each)
  std::vector<T> ring;  // kTaps rows x 5 planes x Lv
  std::vector<T> col;   // 5 planes x kChunk
  std::vector<T> acc;   // Lv running SSIM sums
  Workspace(int64_t L, int64_t Lv)
      : line(5 * L), ring(static_cast<size_t>(kTaps) * 5 * Lv), col(5 * kChunk), acc(Lv) {}
};

// Sum of the SSIM map over valid output rows [r0, r1) of one image (H x W x C, row length L).
template <typename In, typename T>
ICL_SIMD_CLONES double ssim_block(const In* x, const In* y, int64_t W, int64_t C, int64_t r0,
                                  int64_t r1, const Params<T>& prm, Workspace<T>& ws) {
  const int64_t L = W * C, Lv = (W - 2 * kRadius) * C;
  const T* w = prm.w;
  const T shift = prm.shift, c1 = prm.c1, c2 = prm.c2;
  T* lx = ws.line.data();
  T *ly = lx + L, *lxx = ly + L, *lyy = lxx + L, *lxy = lyy + L;
  T* acc = ws.acc.data();
  std::fill(acc, acc + Lv, T(0));
  auto ring_row = [&](int64_t i, int plane) { return ws.ring.data() + ((i % kTaps) * 5 + plane) * Lv; };

  // Horizontal pass of input rows [r0 - 5, r1 + 5) into the ring, lagging the vertical pass.
  for (int64_t i = r0 - kRadius; i < r1 + kRadius; ++i) {
    const In* xr = x + i * L;
    const In* yr = y + i * L;
    // Centring on data_range / 2 keeps xx - x*x from cancelling badly in float32.
    for (int64_t j = 0; j < L; ++j) {
      const T a = static_cast<T>(xr[j]) - shift, b = static_cast<T>(yr[j]) - shift;
      lx[j] = a;
      ly[j] = b;
      lxx[j] = a * a;
      lyy[j] = b * b;
      lxy[j] = a * b;
    }
    for (int plane = 0; plane < 5; ++plane) filter_row(lx + plane * L, ring_row(i, plane), Lv, C, w);

    const int64_t r = i - kRadius;  // output row whose window is now complete
    if (r < r0) continue;
    T* rows[5][kTaps];
    for (int plane = 0; plane < 5; ++plane)
      for (int k = 0; k < kTaps; ++k) rows[plane][k] = ring_row(r - kRadius + k, plane);
    T* cx = ws.col.data();
    T *cy = cx + kChunk, *cxx = cy + kChunk, *cyy = cxx + kChunk, *cxy = cyy + kChunk;
    for (int64_t j0 = 0; j0 < Lv; j0 += kChunk) {
      const int64_t n = std::min<int64_t>(kChunk, Lv - j0);
      for (int plane = 0; plane < 5; ++plane) filter_col(rows[plane], j0, cx + plane * kChunk, n, w);
      T* a = acc + j0;
      for (int64_t j = 0; j < n; ++j) {
        const T mx = cx[j], my = cy[j];
        const T vx = cxx[j] - mx * mx, vy = cyy[j] - my * my, vxy = cxy[j] - mx * my;
        const T ux = mx + shift, uy = my + shift;
        const T num = (T(2) * ux * uy + c1) * (T(2) * vxy + c2);
        const T den = (ux * ux + uy * uy + c1) * (vx + vy + c2);
        a[j] += num / den;
      }
    }
  }
  double total = 0.0;
  for (int64_t j = 0; j < Lv; ++j) total += static_cast<double>(acc[j]);
  return total;
}

template <typename In, typename T>
py::array_t<double> ssim_impl(icl::carray<In> a, icl::carray<In> b, double data_range) {
  icl::require_ndim(a, 4, "a");
  icl::require_ndim(b, 4, "b");
  for (int d = 0; d < 4; ++d)
    if (a.shape(d) != b.shape(d)) throw std::invalid_argument("a and b must have the same shape");
  const int64_t B = a.shape(0), H = a.shape(1), W = a.shape(2), C = a.shape(3);
  if (H < kTaps || W < kTaps || C < 1)
    throw std::invalid_argument("images must be at least 11x11 with at least one channel");
  if (!(data_range > 0.0) || !std::isfinite(data_range))
    throw std::invalid_argument("data_range must be a positive finite number");

  Params<T> prm;
  gaussian_weights(prm.w);
  prm.shift = static_cast<T>(data_range / 2);
  prm.c1 = static_cast<T>((0.01 * data_range) * (0.01 * data_range));
  prm.c2 = static_cast<T>((0.03 * data_range) * (0.03 * data_range));

  const int64_t Hv = H - 2 * kRadius, Lv = (W - 2 * kRadius) * C;
  const int64_t nblk = (Hv + kBlockRows - 1) / kBlockRows, ntask = B * nblk;
  std::vector<double> part(ntask);
  const In* pa = a.data();
  const In* pb = b.data();
  const int64_t img = H * W * C;
  {
    py::gil_scoped_release nogil;
#pragma omp parallel
    {
      Workspace<T> ws(W * C, Lv);
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < ntask; ++t) {
        const int64_t bi = t / nblk, r0 = kRadius + (t % nblk) * kBlockRows;
        const int64_t r1 = std::min(r0 + kBlockRows, H - kRadius);
        part[t] = ssim_block<In, T>(pa + bi * img, pb + bi * img, W, C, r0, r1, prm, ws);
      }
    }
  }
  py::array_t<double> out(B);
  double* o = out.mutable_data();
  const double count = static_cast<double>(Hv) * static_cast<double>(Lv);
  for (int64_t bi = 0; bi < B; ++bi) {
    double s = 0.0;
    for (int64_t k = 0; k < nblk; ++k) s += part[bi * nblk + k];
    o[bi] = s / count;
  }
  return out;
}

}  // namespace

ICL_REGISTER_BINDINGS(ssim) {
  const char* doc =
      "ssim(a, b, data_range) -> float64 [B]: mean SSIM per image of [B, H, W, C] arrays "
      "(skimage gaussian_weights=True, sigma=1.5, population covariance, channels averaged). "
      "uint8 and float32 compute in float32, float64 in float64.";
  m.def("ssim", &ssim_impl<uint8_t, float>, py::arg("a"), py::arg("b"), py::arg("data_range"), doc);
  m.def("ssim", &ssim_impl<float, float>, py::arg("a"), py::arg("b"), py::arg("data_range"), doc);
  m.def("ssim", &ssim_impl<double, double>, py::arg("a"), py::arg("b"), py::arg("data_range"), doc);
}
