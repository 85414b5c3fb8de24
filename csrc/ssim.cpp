// Fused SSIM (skimage structural_similarity with gaussian_weights=True, sigma=1.5,
// truncate=3.5, K1=0.01, K2=0.03, population covariance, channel_axis=-1) per image.
//
// skimage filters with mode='reflect' and then crops (win-1)/2 = 5 pixels from every border;
// every kept output only reads in-image pixels, so we compute exactly the valid region and
// never pad. Channels stay interleaved: a row of W*C values is filtered with taps C apart, and
// since every channel has the same number of valid positions, the mean over channels of the
// per-channel means is the mean over all valid (pixel, channel) values.
//
// Per task (one image, a block of 64 output rows) and per column strip: each input row segment
// is centred, squared/multiplied and filtered horizontally into an 11-row ring of the five
// planes (x, y, xx, yy, xy); each output row is then the vertical 11-tap filter over the ring,
// turned into SSIM and summed, so no full-size intermediate image exists. Blocks and strips
// have fixed sizes, so results do not depend on the thread count.
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
constexpr int kStripBytes = 512;  // per ring row and plane: 11 x 5 x 512 B = 28 KB of L1

// The hot loop is compiled once per instruction-set level (ICL_SIMD_DISPATCH, common.h):
// plain overloads around a force-inlined template body.

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
ICL_INLINE void filter_row(const T* __restrict in, T* __restrict out, int64_t n, int64_t stride,
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
ICL_INLINE void filter_col(T* const* rows, T* __restrict out, int64_t n, const T* w) {
  const T *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3], *r4 = rows[4], *r5 = rows[5],
          *r6 = rows[6], *r7 = rows[7], *r8 = rows[8], *r9 = rows[9], *r10 = rows[10];
  const T w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5];
  for (int64_t j = 0; j < n; ++j) {
    out[j] = w5 * r5[j] + w4 * (r4[j] + r6[j]) + w3 * (r3[j] + r7[j]) + w2 * (r2[j] + r8[j]) +
             w1 * (r1[j] + r9[j]) + w0 * (r0[j] + r10[j]);
  }
}

// The five planes of one row segment: x and y centred on data_range / 2 (smaller magnitudes
// lose less to the cancellation in E[x^2] - E[x]^2), and their products. Every input dtype
// computes in float64: float32 moments drift by 1e-5 on flat or bright low-variance images.
template <typename In, typename T>
ICL_INLINE void load_planes(const In* __restrict x, const In* __restrict y, T* __restrict out,
                            int64_t m, T shift, int64_t stride) {
  T* __restrict px = out;
  T* __restrict py = out + stride;
  T* __restrict pxx = out + 2 * stride;
  T* __restrict pyy = out + 3 * stride;
  T* __restrict pxy = out + 4 * stride;
  for (int64_t j = 0; j < m; ++j) {
    const T a = static_cast<T>(x[j]) - shift, b = static_cast<T>(y[j]) - shift;
    px[j] = a;
    py[j] = b;
    pxx[j] = a * a;
    pyy[j] = b * b;
    pxy[j] = a * b;
  }
}

template <typename T>
struct Workspace {
  std::vector<T> line;  // 5 planes of one strip of an input row (S + 10 C each)
  std::vector<T> ring;  // kTaps rows x 5 planes x S
  std::vector<T> col;   // 5 planes x S
  std::vector<T> acc;   // S running SSIM sums
  int64_t S, M;
  Workspace(int64_t strip, int64_t C)
      : line(5 * (strip + 2 * kRadius * C)), ring(kTaps * 5 * strip), col(5 * strip), acc(strip),
        S(strip), M(strip + 2 * kRadius * C) {}
};

// Sum of the SSIM map over valid output rows [r0, r1) of one image (H x W x C, row length L).
// The columns are cut into strips of S values so that the ring (11 x 5 x S) stays in L1:
// the vertical pass reads 55 ring rows per output value.
template <typename In, typename T>
ICL_INLINE double ssim_block_body(const In* x, const In* y, int64_t W, int64_t C, int64_t r0,
                                  int64_t r1, const Params<T>& prm, Workspace<T>& ws) {
  const int64_t L = W * C, Lv = (W - 2 * kRadius) * C, S = ws.S, M = ws.M;
  const T* w = prm.w;
  const T shift = prm.shift, c1 = prm.c1, c2 = prm.c2;
  T* lx = ws.line.data();
  T* ring = ws.ring.data();
  T* acc = ws.acc.data();
  T* cx = ws.col.data();
  T *cy = cx + S, *cxx = cy + S, *cyy = cxx + S, *cxy = cyy + S;
  double total = 0.0;

  for (int64_t s0 = 0; s0 < Lv; s0 += S) {
    const int64_t n = std::min(S, Lv - s0), m = n + 2 * kRadius * C;
    std::fill(acc, acc + n, T(0));
    // Horizontal pass of input rows [r0 - 5, r1 + 5) into the ring, lagging the vertical pass.
    for (int64_t i = r0 - kRadius; i < r1 + kRadius; ++i) {
      load_planes(x + i * L + s0, y + i * L + s0, lx, m, shift, M);
      T* slot = ring + (i % kTaps) * 5 * S;
      for (int plane = 0; plane < 5; ++plane) filter_row(lx + plane * M, slot + plane * S, n, C, w);

      const int64_t r = i - kRadius;  // output row whose window is now complete
      if (r < r0) continue;
      for (int plane = 0; plane < 5; ++plane) {
        T* rows[kTaps];
        for (int k = 0; k < kTaps; ++k)
          rows[k] = ring + (((r - kRadius + k) % kTaps) * 5 + plane) * S;
        filter_col(rows, cx + plane * S, n, w);
      }
      for (int64_t j = 0; j < n; ++j) {
        const T mx = cx[j], my = cy[j];
        const T vx = cxx[j] - mx * mx, vy = cyy[j] - my * my, vxy = cxy[j] - mx * my;
        const T ux = mx + shift, uy = my + shift;
        const T num = (T(2) * ux * uy + c1) * (T(2) * vxy + c2);
        const T den = (ux * ux + uy * uy + c1) * (vx + vy + c2);
        acc[j] += num / den;
      }
    }
    for (int64_t j = 0; j < n; ++j) total += static_cast<double>(acc[j]);
  }
  return total;
}

#define ICL_SSIM_PARAMS(In)                                                                  \
  (const In* x, const In* y, int64_t W, int64_t C, int64_t r0, int64_t r1, const Params<double>& prm, \
   Workspace<double>& ws)
ICL_SIMD_DISPATCH(double, ssim_block, ICL_SSIM_PARAMS(uint8_t), (x, y, W, C, r0, r1, prm, ws))
ICL_SIMD_DISPATCH(double, ssim_block, ICL_SSIM_PARAMS(float), (x, y, W, C, r0, r1, prm, ws))
ICL_SIMD_DISPATCH(double, ssim_block, ICL_SSIM_PARAMS(double), (x, y, W, C, r0, r1, prm, ws))
#undef ICL_SSIM_PARAMS

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
#pragma omp parallel if (ntask > 1) num_threads(icl::team())
    {
      Workspace<T> ws(std::min<int64_t>(kStripBytes / sizeof(T), Lv), C);
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < ntask; ++t) {
        const int64_t bi = t / nblk, r0 = kRadius + (t % nblk) * kBlockRows;
        const int64_t r1 = std::min(r0 + kBlockRows, H - kRadius);
        part[t] = ssim_block(pa + bi * img, pb + bi * img, W, C, r0, r1, prm, ws);
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
      "Computed in float64 for every input dtype, as skimage does.";
  m.def("ssim", &ssim_impl<uint8_t, double>, py::arg("a"), py::arg("b"), py::arg("data_range"), doc);
  m.def("ssim", &ssim_impl<float, double>, py::arg("a"), py::arg("b"), py::arg("data_range"), doc);
  m.def("ssim", &ssim_impl<double, double>, py::arg("a"), py::arg("b"), py::arg("data_range"), doc);
}
