// Detection matching and average precision over many images (PROTOCOL §1.3).
//
// Predictions are ranked once (counting sort on dense image ids, then a stable radix sort by
// score), regrouped by image with a stable counting pass, which leaves each image's
// predictions in descending score order, and matched greedily to its GT in parallel over
// images.
// Orders and tie rules are pycocotools' (see icl/ops/average_precision.py).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "box_iou.h"
#include "common.h"
#include "registry.h"

namespace icl {
namespace {

using i64 = std::int64_t;

// Stable grouping of indices by dense key: order lists the indices with key 0 first, each
// bucket in increasing index order; bucket b is order[offsets[b] .. offsets[b + 1]).
void counting_sort(const std::vector<i64>& key, i64 buckets, std::vector<i64>& order, std::vector<i64>& offsets) {
  offsets.assign(buckets + 1, 0);
  for (i64 k : key) ++offsets[k + 1];
  for (i64 b = 0; b < buckets; ++b) offsets[b + 1] += offsets[b];
  std::vector<i64> fill(offsets.begin(), offsets.end() - 1);
  order.resize(key.size());
  for (std::size_t i = 0; i < key.size(); ++i) order[fill[key[i]]++] = static_cast<i64>(i);
}

// Image ids -> dense ids preserving their order: a shift when the ids span a small range,
// else ranks among the sorted distinct ids.
i64 dense_images(const i64* pimg, i64 np, const i64* gimg, i64 ng, std::vector<i64>& pd, std::vector<i64>& gd) {
  pd.resize(np);
  gd.resize(ng);
  if (np + ng == 0) return 0;
  i64 lo = np ? pimg[0] : gimg[0], hi = lo;
  for (i64 i = 0; i < np; ++i) lo = std::min(lo, pimg[i]), hi = std::max(hi, pimg[i]);
  for (i64 i = 0; i < ng; ++i) lo = std::min(lo, gimg[i]), hi = std::max(hi, gimg[i]);
  // Unsigned difference: the span of two int64 values may overflow int64.
  const unsigned long long span = static_cast<unsigned long long>(hi) - static_cast<unsigned long long>(lo);
  if (span <= static_cast<unsigned long long>(4 * (np + ng) + 1024)) {
    for (i64 i = 0; i < np; ++i) pd[i] = pimg[i] - lo;
    for (i64 i = 0; i < ng; ++i) gd[i] = gimg[i] - lo;
    return static_cast<i64>(span) + 1;
  }
  std::vector<i64> ids(pimg, pimg + np);
  ids.insert(ids.end(), gimg, gimg + ng);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (i64 i = 0; i < np; ++i) pd[i] = std::lower_bound(ids.begin(), ids.end(), pimg[i]) - ids.begin();
  for (i64 i = 0; i < ng; ++i) gd[i] = std::lower_bound(ids.begin(), ids.end(), gimg[i]) - ids.begin();
  return static_cast<i64>(ids.size());
}

// Order-preserving map of a double to uint64, inverted so that ascending keys mean
// descending scores (-0.0 and 0.0 map alike, as they compare equal).
inline std::uint64_t descending_key(double s) {
  if (s == 0) s = 0;  // folds -0.0 into +0.0
  std::uint64_t u;
  std::memcpy(&u, &s, sizeof u);
  u = (u >> 63) ? ~u : (u | 0x8000000000000000ULL);
  return ~u;
}

// Stable LSD radix sort of items by key, 11-bit digits; a pass where every key has the same
// digit is skipped.
void radix_sort(std::vector<std::uint64_t>& key, std::vector<i64>& item) {
  const std::size_t n = key.size();
  std::vector<std::uint64_t> key2(n);
  std::vector<i64> item2(n);
  std::vector<std::size_t> count(2048);
  for (int shift = 0; shift < 64; shift += 11) {
    std::fill(count.begin(), count.end(), 0);
    for (std::size_t i = 0; i < n; ++i) ++count[(key[i] >> shift) & 2047];
    if (n == 0 || count[(key[0] >> shift) & 2047] == n) continue;
    std::size_t sum = 0;
    for (auto& c : count) {
      const std::size_t c0 = c;
      c = sum;
      sum += c0;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t d = count[(key[i] >> shift) & 2047]++;
      key2[d] = key[i];
      item2[d] = item[i];
    }
    key.swap(key2);
    item.swap(item2);
  }
}

struct Ranked {
  std::vector<i64> matched;  // per prediction (input order): GT index or -1
  std::vector<i64> order;    // kept predictions by rank
  i64 num_gt = 0;
};

Ranked match_and_rank(const py::array_t<double>& pbox, const py::array_t<double>& pscore,
                      const py::array_t<i64>& pimg, const py::array_t<double>& gbox,
                      const py::array_t<i64>& gimg, double threshold, i64 max_det) {
  const i64 np = pscore.shape(0), ng = gimg.shape(0);
  const double* pb = pbox.data();
  const double* ps = pscore.data();
  const double* gb = gbox.data();
  Ranked r;
  r.num_gt = ng;
  r.matched.assign(np, -1);
  std::vector<i64> pd, gd, porder, poff, gorder, goff;
  const i64 nimg = dense_images(pimg.data(), np, gimg.data(), ng, pd, gd);
  counting_sort(gd, nimg, gorder, goff);
  // Global rank: group by image (stable), then a stable sort by descending score, giving
  // (score desc, image id asc, index asc), pycocotools' order of its concatenated images.
  counting_sort(pd, nimg, porder, poff);
  std::vector<std::uint64_t> key(np);
  for (i64 k = 0; k < np; ++k) key[k] = descending_key(ps[porder[k]]);
  std::vector<i64> ranked = porder;
  radix_sort(key, ranked);
  // Regroup by image, stably: each image's predictions by descending score, ties in input
  // order (numpy's mergesort in evaluateImg).
  {
    std::vector<i64> fill(poff.begin(), poff.end() - 1);
    for (i64 p : ranked) porder[fill[pd[p]]++] = p;
  }
  std::vector<unsigned char> kept(np, 0);
  // pycocotools clamps the threshold so that t = 1 still matches boxes equal up to rounding.
  const double thr = std::min(threshold, 1.0 - 1e-10);
#pragma omp parallel if (np > 4096) num_threads(icl::team())
  {
    // Per image: the image's predictions as coordinate arrays, so that each GT's IoU row
    // over them is one vectorised loop (IoU is symmetric bit for bit: + commutes), then the
    // greedy pass. A matched GT gets a penalty of -2, which puts it below any threshold.
    std::vector<double> px0, py0, px1, py1, parea, penalty, iou;
#pragma omp for schedule(dynamic, 64)
    for (i64 im = 0; im < nimg; ++im) {
      const i64* first = porder.data() + poff[im];
      i64 n = poff[im + 1] - poff[im];
      if (max_det > 0 && n > max_det) n = max_det;
      for (i64 i = 0; i < n; ++i) kept[first[i]] = 1;
      const i64 g0 = goff[im], gn = goff[im + 1] - g0;
      if (gn == 0 || n == 0) continue;
      for (auto* v : {&px0, &py0, &px1, &py1, &parea}) v->resize(n);
      for (i64 i = 0; i < n; ++i) {
        const double* q = pb + 4 * first[i];
        px0[i] = q[0], py0[i] = q[1], px1[i] = q[2], py1[i] = q[3];
        parea[i] = (q[2] - q[0]) * (q[3] - q[1]);
      }
      iou.resize(gn * n);
      for (i64 k = 0; k < gn; ++k) {
        const double* q = gb + 4 * gorder[g0 + k];
        iou_row(Box<double>{q[0], q[1], q[2], q[3]}, px0.data(), py0.data(), px1.data(), py1.data(), parea.data(),
                n, iou.data() + k * n);
      }
      penalty.assign(gn, 0.0);
      for (i64 i = 0; i < n; ++i) {
        double best = thr;
        i64 m = -1;
        for (i64 k = 0; k < gn; ++k) {
          const double v = iou[k * n + i] + penalty[k];
          // ">=": among equal IoUs the later GT wins, as in pycocotools' evaluateImg.
          if (v >= best) best = v, m = k;
        }
        if (m >= 0) {
          penalty[m] = -2.0;
          r.matched[first[i]] = gorder[g0 + m];
        }
      }
    }
  }
  r.order.reserve(np);
  for (i64 p : ranked)
    if (kept[p]) r.order.push_back(p);
  return r;
}

// AP from TP flags in rank order. interpolation 0: all-point (VOC 2010+), 1: COCO at the
// given recall thresholds (precision at the first rank reaching each threshold, 0 if none).
double ap_from_ranked(const std::vector<unsigned char>& tp, i64 num_gt, int interpolation, const double* rec_thrs,
                      i64 n_thrs) {
  if (num_gt == 0) return std::nan("");
  const std::size_t n = tp.size();
  std::vector<double> prec(n), rec(n);
  i64 ntp = 0;
  for (std::size_t k = 0; k < n; ++k) {
    ntp += tp[k];
    prec[k] = static_cast<double>(ntp) / static_cast<double>(k + 1);
    rec[k] = static_cast<double>(ntp) / static_cast<double>(num_gt);
  }
  for (std::size_t k = n; k-- > 1;) prec[k - 1] = std::max(prec[k - 1], prec[k]);
  // Neumaier-compensated sum: the result does not drift with the number of terms.
  double sum = 0, comp = 0;
  auto add = [&](double x) {
    const double t = sum + x;
    comp += std::fabs(sum) >= std::fabs(x) ? (sum - t) + x : (x - t) + sum;
    sum = t;
  };
  if (interpolation == 0) {
    for (std::size_t k = 0; k < n; ++k)
      if (tp[k]) add(prec[k]);
    return (sum + comp) / static_cast<double>(num_gt);
  }
  for (i64 t = 0; t < n_thrs; ++t) {
    const std::size_t k = std::lower_bound(rec.begin(), rec.end(), rec_thrs[t]) - rec.begin();
    if (k < n) add(prec[k]);
  }
  return (sum + comp) / static_cast<double>(n_thrs);
}

void check_inputs(const py::array_t<double>& pbox, const py::array_t<double>& pscore, const py::array_t<i64>& pimg,
                  const py::array_t<double>& gbox, const py::array_t<i64>& gimg) {
  require_ndim(pbox, 2, "pred_boxes");
  require_ndim(gbox, 2, "gt_boxes");
  require_ndim(pscore, 1, "pred_scores");
  require_ndim(pimg, 1, "pred_image");
  require_ndim(gimg, 1, "gt_image");
  if (pbox.shape(1) != 4 || gbox.shape(1) != 4 || pbox.shape(0) != pscore.shape(0) ||
      pimg.shape(0) != pscore.shape(0) || gimg.shape(0) != gbox.shape(0))
    throw std::invalid_argument("average_precision: inconsistent input shapes");
}

py::tuple detection_matches(const carray<double>& pbox, const carray<double>& pscore, const carray<i64>& pimg,
                            const carray<double>& gbox, const carray<i64>& gimg, double threshold, i64 max_det) {
  check_inputs(pbox, pscore, pimg, gbox, gimg);
  Ranked r;
  {
    py::gil_scoped_release release;
    r = match_and_rank(pbox, pscore, pimg, gbox, gimg, threshold, max_det);
  }
  py::array_t<i64> matched(r.matched.size(), r.matched.data());
  py::array_t<i64> order(r.order.size(), r.order.data());
  return py::make_tuple(matched, order);
}

double average_precision(const carray<double>& pbox, const carray<double>& pscore, const carray<i64>& pimg,
                         const carray<double>& gbox, const carray<i64>& gimg, double threshold, i64 max_det,
                         int interpolation, const carray<double>& rec_thrs) {
  check_inputs(pbox, pscore, pimg, gbox, gimg);
  require_ndim(rec_thrs, 1, "rec_thrs");
  py::gil_scoped_release release;
  const Ranked r = match_and_rank(pbox, pscore, pimg, gbox, gimg, threshold, max_det);
  std::vector<unsigned char> tp(r.order.size());
  for (std::size_t k = 0; k < tp.size(); ++k) tp[k] = r.matched[r.order[k]] >= 0;
  return ap_from_ranked(tp, r.num_gt, interpolation, rec_thrs.data(), rec_thrs.shape(0));
}

}  // namespace
}  // namespace icl

ICL_REGISTER_BINDINGS(average_precision) {
  namespace py = pybind11;
  m.def("detection_matches", &icl::detection_matches, py::arg("pred_boxes"), py::arg("pred_scores"),
        py::arg("pred_image"), py::arg("gt_boxes"), py::arg("gt_image"), py::arg("threshold"), py::arg("max_det"),
        "(matched GT index or -1 per prediction, kept predictions by rank)");
  m.def("average_precision", &icl::average_precision, py::arg("pred_boxes"), py::arg("pred_scores"),
        py::arg("pred_image"), py::arg("gt_boxes"), py::arg("gt_image"), py::arg("threshold"), py::arg("max_det"),
        py::arg("interpolation"), py::arg("rec_thrs"),
        "AP at one IoU threshold; interpolation 0 = all-point, 1 = at the recall thresholds rec_thrs");
}
