// One-to-one greedy point matching by increasing distance (PROTOCOL §1.3, keypoints).
//
// Candidate pairs come from a sweep over GT sorted by x (only GT within a slightly widened
// x window of each prediction are tested), the exact test is d2 <= radius^2 in float64, and
// the candidates are then taken by (d2, pred, gt).
#include <algorithm>
#include <cmath>
#include <vector>

#include "common.h"
#include "registry.h"

namespace icl {
namespace {

using i64 = std::int64_t;

struct Pair {
  double d2;
  i64 p, g;
  bool operator<(const Pair& o) const {
    if (d2 != o.d2) return d2 < o.d2;
    if (p != o.p) return p < o.p;
    return g < o.g;
  }
};

py::tuple match_points(const carray<double>& pred, const carray<double>& gt, double radius) {
  require_ndim(pred, 2, "pred");
  require_ndim(gt, 2, "gt");
  if (pred.shape(1) != 2 || gt.shape(1) != 2) throw std::invalid_argument("match_points: points must be [N, 2]");
  if (!(radius >= 0) || !std::isfinite(radius))
    throw std::invalid_argument("match_points: radius must be finite and >= 0");
  const i64 n = pred.shape(0), m = gt.shape(0);
  const double* pp = pred.data();
  const double* gp = gt.data();
  std::vector<i64> out_p, out_g;
  {
    py::gil_scoped_release release;
    const double r2 = radius * radius;
    std::vector<i64> gorder(m);
    for (i64 j = 0; j < m; ++j) gorder[j] = j;
    std::sort(gorder.begin(), gorder.end(), [&](i64 a, i64 b) { return gp[2 * a] < gp[2 * b]; });
    std::vector<double> gx(m);
    for (i64 j = 0; j < m; ++j) gx[j] = gp[2 * gorder[j]];
    // Per prediction, the candidates within the radius (rows filled in parallel).
    std::vector<std::vector<Pair>> rows(n);
#pragma omp parallel for schedule(dynamic, 16) if (n * m > 65536) num_threads(icl::team())
    for (i64 i = 0; i < n; ++i) {
      const double px = pp[2 * i], py_ = pp[2 * i + 1];
      // The window is a superset of the exact test: it is widened for rounding in px - gx,
      // its square and underflow (d2 <= r2 implies |px - gx| <= r (1 + 3e-16) or tiny).
      const double w = radius * (1 + 1e-9) + 1e-9 * std::fabs(px) + 1e-150;
      auto lo = std::lower_bound(gx.begin(), gx.end(), px - w);
      auto hi = std::upper_bound(lo, gx.end(), px + w);
      for (auto it = lo; it != hi; ++it) {
        const i64 j = gorder[it - gx.begin()];
        const double dx = px - gp[2 * j], dy = py_ - gp[2 * j + 1];
        const double d2 = dx * dx + dy * dy;
        if (d2 <= r2) rows[i].push_back({d2, i, j});
      }
    }
    std::vector<Pair> cand;
    std::size_t total = 0;
    for (const auto& r : rows) total += r.size();
    cand.reserve(total);
    for (auto& r : rows) {
      cand.insert(cand.end(), r.begin(), r.end());
      std::vector<Pair>().swap(r);
    }
    std::sort(cand.begin(), cand.end());
    std::vector<unsigned char> pused(n, 0), gused(m, 0);
    const i64 most = std::min(n, m);
    for (const Pair& c : cand) {
      if (pused[c.p] || gused[c.g]) continue;
      pused[c.p] = gused[c.g] = 1;
      out_p.push_back(c.p);
      out_g.push_back(c.g);
      if (static_cast<i64>(out_p.size()) == most) break;
    }
  }
  return py::make_tuple(py::array_t<i64>(out_p.size(), out_p.data()), py::array_t<i64>(out_g.size(), out_g.data()));
}

}  // namespace
}  // namespace icl

ICL_REGISTER_BINDINGS(match_points) {
  m.def("match_points", &icl::match_points, pybind11::arg("pred"), pybind11::arg("gt"), pybind11::arg("radius"),
        "(pred_idx, gt_idx) int64 of the greedy one-to-one matching by increasing distance");
}
