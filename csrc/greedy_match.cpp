// Score-free greedy box matching (PROTOCOL §2): all pred/GT pairs by descending IoU (ties: lower
// pred, then lower GT index), each box used once, pairs with IoU >= t are true positives.
//
// Accepting pairs in descending IoU order means the matching at threshold t is exactly the
// prefix of the full greedy sequence down to t, so one sort per sample serves every threshold.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
// IoU must be bit-identical to the reference backend (exact ties decide matches): no FMA.
#pragma GCC optimize("fp-contract=off")
#endif

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.h"
#include "registry.h"

namespace {
namespace py = pybind11;

constexpr int64_t kParallelPairs = 1 << 18;

struct Pair {
  double iou;
  int64_t pred;
  int64_t gt;
};

inline bool before(const Pair& a, const Pair& b) {
  if (a.iou != b.iou) return a.iou > b.iou;
  if (a.pred != b.pred) return a.pred < b.pred;
  return a.gt < b.gt;
}

// Same operations, in the same order, as the reference backend (icl/ops/greedy_match.py).
inline double box_iou(const double* a, const double* b) {
  const double iw = std::min(a[2], b[2]) - std::max(a[0], b[0]);
  const double ih = std::min(a[3], b[3]) - std::max(a[1], b[1]);
  const double inter = (iw > 0.0 && ih > 0.0) ? iw * ih : 0.0;
  const double area_a = (a[2] - a[0]) * (a[3] - a[1]);
  const double area_b = (b[2] - b[0]) * (b[3] - b[1]);
  const double uni = (area_a + area_b) - inter;
  return uni > 0.0 ? inter / uni : 0.0;
}

py::tuple greedy_match(icl::carray<double> iou, double threshold) {
  icl::require_ndim(iou, 2, "iou");
  const int64_t n = iou.shape(0), m = iou.shape(1);
  const double* v = iou.data();
  std::vector<int64_t> pred_idx, gt_idx;
  {
    py::gil_scoped_release release;
    std::vector<Pair> pairs;
    pairs.reserve(static_cast<size_t>(n * m));
    for (int64_t p = 0; p < n; ++p)
      for (int64_t g = 0; g < m; ++g)
        if (v[p * m + g] >= threshold) pairs.push_back({v[p * m + g], p, g});
    std::sort(pairs.begin(), pairs.end(), before);
    std::vector<char> pred_used(n, 0), gt_used(m, 0);
    const int64_t most = std::min(n, m);
    for (const Pair& q : pairs) {
      if (static_cast<int64_t>(pred_idx.size()) == most) break;
      if (pred_used[q.pred] || gt_used[q.gt]) continue;
      pred_used[q.pred] = gt_used[q.gt] = 1;
      pred_idx.push_back(q.pred);
      gt_idx.push_back(q.gt);
    }
  }
  py::array_t<int64_t> out_p(static_cast<py::ssize_t>(pred_idx.size()));
  py::array_t<int64_t> out_g(static_cast<py::ssize_t>(gt_idx.size()));
  std::copy(pred_idx.begin(), pred_idx.end(), out_p.mutable_data());
  std::copy(gt_idx.begin(), gt_idx.end(), out_g.mutable_data());
  return py::make_tuple(out_p, out_g);
}

void check_offsets(const icl::carray<int64_t>& off, int64_t rows, const char* what) {
  const int64_t len = off.shape(0);
  const int64_t* o = off.data();
  bool ok = len >= 1 && o[0] == 0 && o[len - 1] == rows;
  for (int64_t i = 1; ok && i < len; ++i) ok = o[i] >= o[i - 1];
  if (!ok)
    throw std::invalid_argument(std::string(what) + ": expected non-decreasing offsets from 0 to " +
                                std::to_string(rows));
}

py::tuple greedy_match_counts(icl::carray<double> pred_boxes, icl::carray<int64_t> pred_offsets,
                              icl::carray<double> gt_boxes, icl::carray<int64_t> gt_offsets,
                              icl::carray<double> thresholds) {
  icl::require_ndim(pred_boxes, 2, "pred_boxes");
  icl::require_ndim(gt_boxes, 2, "gt_boxes");
  icl::require_ndim(pred_offsets, 1, "pred_offsets");
  icl::require_ndim(gt_offsets, 1, "gt_offsets");
  icl::require_ndim(thresholds, 1, "thresholds");
  // The Python wrapper validates; these checks only keep a direct call from reading out of bounds.
  check_offsets(pred_offsets, pred_boxes.shape(0), "pred_offsets");
  check_offsets(gt_offsets, gt_boxes.shape(0), "gt_offsets");
  if (pred_offsets.shape(0) != gt_offsets.shape(0))
    throw std::invalid_argument("pred_offsets and gt_offsets must have the same length");
  if (pred_boxes.shape(1) != 4 || gt_boxes.shape(1) != 4)
    throw std::invalid_argument("boxes must have shape [N, 4]");
  const int64_t s_count = pred_offsets.shape(0) - 1;
  const int64_t t_count = thresholds.shape(0);
  const int64_t g_total = gt_boxes.shape(0);
  py::array_t<int64_t> tp({s_count, t_count});
  py::array_t<double> tp_sum({s_count, t_count});
  py::array_t<double> best(g_total);
  const double* pb = pred_boxes.data();
  const double* gb = gt_boxes.data();
  const int64_t* po = pred_offsets.data();
  const int64_t* go = gt_offsets.data();
  const double* thr = thresholds.data();
  int64_t* tp_out = tp.mutable_data();
  double* sum_out = tp_sum.mutable_data();
  double* best_out = best.mutable_data();
  const double t_min = t_count ? *std::min_element(thr, thr + t_count) : 0.0;
  // Typical batches (1,600 samples of a few boxes) take well under a millisecond on one core;
  // waking a team costs more than that on a busy machine, so only large batches go parallel.
  int64_t work = 0;
  for (int64_t s = 0; s < s_count; ++s) work += (po[s + 1] - po[s]) * (go[s + 1] - go[s]) + 1;
  [[maybe_unused]] const bool parallel = work >= kParallelPairs;
  {
    py::gil_scoped_release release;
#ifdef ICL_WITH_OPENMP
#pragma omp parallel if (parallel) num_threads(icl::team())
#endif
    {
      std::vector<Pair> pairs;
      std::vector<char> pred_used, gt_used;
#ifdef ICL_WITH_OPENMP
#pragma omp for schedule(dynamic, 32)
#endif
      for (int64_t s = 0; s < s_count; ++s) {
        const int64_t p0 = po[s], n = po[s + 1] - p0;
        const int64_t g0 = go[s], m = go[s + 1] - g0;
        int64_t* tp_row = tp_out + s * t_count;
        double* sum_row = sum_out + s * t_count;
        std::fill(tp_row, tp_row + t_count, 0);
        std::fill(sum_row, sum_row + t_count, 0.0);
        pairs.clear();
        for (int64_t g = 0; g < m; ++g) {
          double b = 0.0;
          for (int64_t p = 0; p < n; ++p) {
            const double v = box_iou(pb + 4 * (p0 + p), gb + 4 * (g0 + g));
            b = std::max(b, v);
            if (v >= t_min) pairs.push_back({v, p, g});
          }
          best_out[g0 + g] = b;
        }
        std::sort(pairs.begin(), pairs.end(), before);
        pred_used.assign(n, 0);
        gt_used.assign(m, 0);
        const int64_t most = std::min(n, m);
        int64_t accepted = 0;
        for (const Pair& q : pairs) {
          if (accepted == most) break;
          if (pred_used[q.pred] || gt_used[q.gt]) continue;
          pred_used[q.pred] = gt_used[q.gt] = 1;
          ++accepted;
          for (int64_t t = 0; t < t_count; ++t) {
            if (q.iou >= thr[t]) {
              ++tp_row[t];
              sum_row[t] += q.iou;
            }
          }
        }
      }
    }
  }
  return py::make_tuple(tp, tp_sum, best);
}

}  // namespace

ICL_REGISTER_BINDINGS(greedy_match) {
  m.def("greedy_match", &greedy_match, py::arg("iou"), py::arg("threshold"),
        "Greedy one-to-one matching of an [N, M] float64 IoU matrix; returns (pred_idx, gt_idx) "
        "int64 in selection order (descending IoU, ties to lower pred then lower gt).");
  m.def("greedy_match_counts", &greedy_match_counts, py::arg("pred_boxes"), py::arg("pred_offsets"),
        py::arg("gt_boxes"), py::arg("gt_offsets"), py::arg("thresholds"),
        "Ragged batched greedy matching of xyxy float64 boxes at every threshold; returns "
        "(tp int64 [S, T], tp_iou_sum float64 [S, T], best_iou float64 [G]).");
}
