// PatchMatch nearest-neighbour field (Barnes et al. 2009) in a deterministic, parallel form.
//
// The algorithm is defined in icl/ops/patch_match.py (the torch reference implements the same
// steps); in short, per iteration: propagation passes (jump flooding with steps 8, 4, 2, 1 in
// the first iteration, step 1 afterwards; each a Jacobi pass over a snapshot of the field,
// candidates from the 4 neighbours at that step in the fixed order left, right, up, down), then
// a random search around each pixel's match with halving radii. Random offsets come from a counter-based hash of (seed, stream, pixel), so
// the result does not depend on the thread count. Candidates replace the current match only
// when strictly better; random-search candidates pay the coherence factor (1 + kappa).
//
// Distances are sums of squared differences over P x P patches with edge-replicated borders:
// exact in int64 for uint8 features, accumulated in double for float32 features.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "common.h"
#include "registry.h"

namespace {

namespace py = pybind11;

inline uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

inline uint32_t draw(uint32_t key, uint32_t stream, uint32_t pixel) {
  return hash32(key ^ hash32(stream ^ hash32(pixel)));
}

inline int64_t uniform(uint32_t u, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(u % static_cast<uint32_t>(hi - lo + 1));
}

constexpr int kFirstSteps[4] = {8, 4, 2, 1};
constexpr int kLaterSteps[1] = {1};
// Below this many target pixels a thread team costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;
constexpr int kNeighbours[4][2] = {{0, -1}, {0, 1}, {-1, 0}, {1, 0}};  // (dy, dx): left, right, up, down

template <typename T>
std::vector<T> pad_edges(const T* src, int64_t H, int64_t W, int64_t C, int64_t r) {
  const int64_t PW = W + 2 * r;
  std::vector<T> out(static_cast<size_t>((H + 2 * r) * PW * C));
  for (int64_t y = 0; y < H + 2 * r; ++y) {
    const int64_t sy = std::clamp<int64_t>(y - r, 0, H - 1);
    for (int64_t x = 0; x < PW; ++x) {
      const int64_t sx = std::clamp<int64_t>(x - r, 0, W - 1);
      std::copy_n(src + (sy * W + sx) * C, C, out.data() + (y * PW + x) * C);
    }
  }
  return out;
}

// Acc sums a whole patch; Part sums one patch row (int32 is exact for uint8 rows < 33025 values).
template <typename T, typename Acc, typename Part>
struct Field {
  const T* src;  // padded source, row stride sPW * C
  const T* tgt;  // padded target
  int64_t Hs, Ws, Ht, Wt, C, P, sPW, tPW;

  // SSD of target patch at (ty, tx) and source patch at (sy, sx); stops early once the
  // partial sum times `factor` reaches `bound` (the candidate can no longer win).
  Acc ssd(int64_t ty, int64_t tx, int64_t sy, int64_t sx, double factor, double bound,
                          bool& exceeded) const {
    Acc total = 0;
    const int64_t row = P * C;
    for (int64_t dy = 0; dy < P; ++dy) {
      const T* a = tgt + ((ty + dy) * tPW + tx) * C;
      const T* b = src + ((sy + dy) * sPW + sx) * C;
      Part part = 0;
      for (int64_t k = 0; k < row; ++k) {
        const Part d = static_cast<Part>(a[k]) - static_cast<Part>(b[k]);
        part += d * d;
      }
      total += part;
      if (static_cast<double>(total) * factor >= bound) {
        exceeded = true;
        return total;
      }
    }
    exceeded = false;
    return total;
  }
};

template <typename T, typename Acc, typename Part>
py::tuple patch_match_impl(icl::carray<T> source, icl::carray<T> target, icl::carray<int32_t> init,
                           bool has_init, int64_t patch, int64_t iterations, double kappa, uint64_t seed) {
  icl::require_ndim(source, 3, "source");
  icl::require_ndim(target, 3, "target");
  const int64_t Hs = source.shape(0), Ws = source.shape(1), C = source.shape(2);
  const int64_t Ht = target.shape(0), Wt = target.shape(1);
  if (target.shape(2) != C) throw std::invalid_argument("source and target must have the same channel count");
  if (Hs < 1 || Ws < 1 || Ht < 1 || Wt < 1 || C < 1) throw std::invalid_argument("images must not be empty");
  if (patch < 1 || patch % 2 == 0) throw std::invalid_argument("patch_size must be a positive odd integer");
  if (patch * patch * C > (int64_t{1} << 24)) throw std::invalid_argument("patch_size * patch_size * channels is too large");
  if (patch * C >= 33025) throw std::invalid_argument("patch_size * channels must be below 33025");
  const int64_t r = patch / 2, n = Ht * Wt;
  if (has_init) {
    icl::require_ndim(init, 3, "init");
    if (init.shape(0) != Ht || init.shape(1) != Wt || init.shape(2) != 2)
      throw std::invalid_argument("init must have shape [Ht, Wt, 2]");
  }

  py::array_t<int32_t> nnf_out({Ht, Wt, static_cast<int64_t>(2)});
  py::array_t<double> dist_out({Ht, Wt});
  int32_t* nnf = nnf_out.mutable_data();
  double* dist = dist_out.mutable_data();
  const int32_t* init_ptr = has_init ? init.data() : nullptr;
  const T* sp = source.data();
  const T* tp = target.data();
  {
    py::gil_scoped_release nogil;
    const std::vector<T> spad = pad_edges(sp, Hs, Ws, C, r);
    const std::vector<T> tpad = pad_edges(tp, Ht, Wt, C, r);
    const Field<T, Acc, Part> f{spad.data(), tpad.data(), Hs, Ws, Ht, Wt, C, patch, Ws + 2 * r, Wt + 2 * r};
    const uint32_t key = hash32(static_cast<uint32_t>(seed) ^ hash32(static_cast<uint32_t>(seed >> 32)));
    const double coherence = 1.0 + kappa;
    std::vector<double> eff(n);  // cost the current match was accepted with
    std::vector<int32_t> prev(2 * n);
    bool exceeded = false;

#pragma omp parallel for schedule(static) firstprivate(exceeded) if (n >= kParallelMin)
    for (int64_t p = 0; p < n; ++p) {
      const int64_t y = p / Wt, x = p % Wt;
      int64_t sy, sx;
      if (init_ptr) {
        sy = init_ptr[2 * p];
        sx = init_ptr[2 * p + 1];
      } else {
        sy = uniform(draw(key, 0, static_cast<uint32_t>(p)), 0, Hs - 1);
        sx = uniform(draw(key, 1, static_cast<uint32_t>(p)), 0, Ws - 1);
      }
      nnf[2 * p] = static_cast<int32_t>(sy);
      nnf[2 * p + 1] = static_cast<int32_t>(sx);
      const Acc d = f.ssd(y, x, sy, sx, 1.0, std::numeric_limits<double>::infinity(), exceeded);
      dist[p] = static_cast<double>(d);
      eff[p] = static_cast<double>(d);
    }

    const bool parallel = n >= kParallelMin;
    for (int64_t it = 0; it < iterations; ++it) {
      const int* steps = it == 0 ? kFirstSteps : kLaterSteps;
      const int nsteps = it == 0 ? 4 : 1;
      for (int si = 0; si < nsteps; ++si) {
        const int step = steps[si];
        std::copy(nnf, nnf + 2 * n, prev.begin());
#pragma omp parallel for schedule(static) firstprivate(exceeded) if (parallel)
        for (int64_t p = 0; p < n; ++p) {
          const int64_t y = p / Wt, x = p % Wt;
          for (const auto& nb : kNeighbours) {
            const int64_t qy = y + nb[0] * step, qx = x + nb[1] * step;
            if (qy < 0 || qy >= Ht || qx < 0 || qx >= Wt) continue;
            const int64_t q = qy * Wt + qx;
            const int64_t cy = prev[2 * q] - nb[0] * step, cx = prev[2 * q + 1] - nb[1] * step;
            if (cy < 0 || cy >= Hs || cx < 0 || cx >= Ws) continue;
            if (cy == nnf[2 * p] && cx == nnf[2 * p + 1]) continue;
            const Acc d = f.ssd(y, x, cy, cx, 1.0, eff[p], exceeded);
            if (!exceeded && static_cast<double>(d) < eff[p]) {
              nnf[2 * p] = static_cast<int32_t>(cy);
              nnf[2 * p + 1] = static_cast<int32_t>(cx);
              dist[p] = static_cast<double>(d);
              eff[p] = static_cast<double>(d);
            }
          }
        }
      }
      const int64_t radius0 = std::max(Hs, Ws);
#pragma omp parallel for schedule(static) firstprivate(exceeded) if (parallel)
      for (int64_t p = 0; p < n; ++p) {
        const int64_t y = p / Wt, x = p % Wt;
        int64_t i = 0;
        for (int64_t rad = radius0; rad >= 1; rad /= 2, ++i) {
          const int64_t by = nnf[2 * p], bx = nnf[2 * p + 1];
          const uint32_t stream = static_cast<uint32_t>((it + 1) * 128 + i * 2);
          const int64_t cy = uniform(draw(key, stream, static_cast<uint32_t>(p)),
                                     std::max<int64_t>(0, by - rad), std::min<int64_t>(Hs - 1, by + rad));
          const int64_t cx = uniform(draw(key, stream + 1, static_cast<uint32_t>(p)),
                                     std::max<int64_t>(0, bx - rad), std::min<int64_t>(Ws - 1, bx + rad));
          if (cy == by && cx == bx) continue;
          const Acc d = f.ssd(y, x, cy, cx, coherence, eff[p], exceeded);
          const double cost = static_cast<double>(d) * coherence;
          if (!exceeded && cost < eff[p]) {
            nnf[2 * p] = static_cast<int32_t>(cy);
            nnf[2 * p + 1] = static_cast<int32_t>(cx);
            dist[p] = static_cast<double>(d);
            eff[p] = cost;
          }
        }
      }
    }
  }
  return py::make_tuple(nnf_out, dist_out);
}

}  // namespace

ICL_REGISTER_BINDINGS(patch_match) {
  const char* doc =
      "patch_match(source [Hs,Ws,C], target [Ht,Wt,C], init int32 [Ht,Wt,2], has_init, patch_size, "
      "iterations, kappa, seed) -> (nnf int32 [Ht,Wt,2] (y, x), ssd float64 [Ht,Wt]); uint8 or float32.";
  m.def("patch_match", &patch_match_impl<uint8_t, int64_t, int32_t>, py::arg("source"), py::arg("target"), py::arg("init"),
        py::arg("has_init"), py::arg("patch_size"), py::arg("iterations"), py::arg("kappa"), py::arg("seed"), doc);
  m.def("patch_match", &patch_match_impl<float, double, double>, py::arg("source"), py::arg("target"), py::arg("init"),
        py::arg("has_init"), py::arg("patch_size"), py::arg("iterations"), py::arg("kappa"), py::arg("seed"), doc);
}
