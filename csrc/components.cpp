// Connected components of binary masks with per-component statistics, run-based.
//
// Each row is cut into runs of foreground pixels; runs of adjacent rows that touch are joined
// in a union-find whose root is always the lowest run index, i.e. the run holding the
// component's first pixel in raster order, so numbering roots in index order numbers the
// components in raster order. A final pass writes the labels and accumulates the statistics
// run by run in raster order (sums in double), so the results do not depend on the threads.
//
// Parallelism: OpenMP over the images of a batch; an image alone is cut into row stripes
// that are labelled in parallel and joined at their borders. Components that cross a border
// ("shared") have their runs collected per stripe and reduced in stripe order afterwards.
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "common.h"
#include "registry.h"

namespace {
namespace py = pybind11;

inline int ctz64(uint64_t v) {
#if defined(__GNUC__) || defined(__clang__)
  return __builtin_ctzll(v);
#else
  int n = 0;
  while (!(v & 1)) { v >>= 1; ++n; }
  return n;
#endif
}

// High bit of every nonzero byte of w (SWAR, exact, no carries across bytes).
inline uint64_t nonzero_bytes(uint64_t w) {
  const uint64_t lo7 = 0x7F7F7F7F7F7F7F7FULL;
  return (((w & lo7) + lo7) | w) & ~lo7;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr bool kSwar = true;
#else
constexpr bool kSwar = false;
#endif

// First x >= from with (row[x] != 0) == want, or w when there is none.
template <bool want>
inline int scan(const uint8_t* row, int x, int w) {
  if (kSwar) {
    for (; x + 8 <= w; x += 8) {
      uint64_t word;
      std::memcpy(&word, row + x, 8);
      uint64_t hits = nonzero_bytes(word);
      if (!want) hits ^= 0x8080808080808080ULL;
      if (hits) return x + (ctz64(hits) >> 3);
    }
  }
  while (x < w && (row[x] != 0) != want) ++x;
  return x;
}

struct Stat {
  int64_t area;
  int32_t x0, y0, x1, y1;
  double sum;
  double vmax;
  int32_t ay, ax;
};

// One run of one shared component, kept for the ordered reduction after the parallel pass.
struct SharedRun {
  int32_t label, y, x0, x1, ax;
  bool root;
  double sum, vmax;
};

struct Stripe {
  int y0 = 0, y1 = 0;
  int64_t base = 0;                // global index of the stripe's first run
  std::vector<int32_t> x0, x1;     // runs, in raster order
  std::vector<int32_t> row_start;  // local index of each row's first run, plus the end
  std::vector<SharedRun> shared;
  int64_t roots = 0, label_base = 0;
};

template <typename T>
struct Buffer {  // grows, never initialises: pages are touched only where runs are written
  std::unique_ptr<T[]> data;
  size_t size = 0;
  T* get(size_t n) {
    if (n > size) { data.reset(new T[n]); size = n; }
    return data.get();
  }
};

struct Scratch {
  std::vector<Stripe> stripes;
  Buffer<int32_t> parent, lab;
  std::vector<uint8_t> shared;
  std::vector<int32_t> crossing;
};

inline int32_t find(int32_t* parent, int32_t x) {
  while (parent[x] != x) {
    parent[x] = parent[parent[x]];  // path halving
    x = parent[x];
  }
  return x;
}

inline void unite(int32_t* parent, int32_t a, int32_t b) {
  a = find(parent, a);
  b = find(parent, b);
  if (a < b) parent[b] = a;
  else if (b < a) parent[a] = b;
}

// Calls fn(p, c) for every run p of the upper row touching a run c of the lower row.
template <typename Fn>
inline void touching(const int32_t* px0, const int32_t* px1, int32_t pbase, int32_t np,
                     const int32_t* cx0, const int32_t* cx1, int32_t cbase, int32_t nc, int d, Fn fn) {
  int32_t i = 0;
  for (int32_t c = 0; c < nc; ++c) {
    while (i < np && px1[i] + d <= cx0[c]) ++i;
    for (int32_t j = i; j < np && px0[j] < cx1[c] + d; ++j) fn(pbase + j, cbase + c);
  }
}

// Runs and local unions of one stripe; run indices start at the stripe's base.
void label_stripe(Stripe& s, const uint8_t* mask, int w, int d, int32_t* parent) {
  s.x0.clear();
  s.x1.clear();
  s.row_start.assign(1, 0);
  s.shared.clear();
  for (int y = s.y0; y < s.y1; ++y) {
    const uint8_t* row = mask + static_cast<int64_t>(y) * w;
    const int32_t first = static_cast<int32_t>(s.x0.size());
    for (int x = scan<true>(row, 0, w); x < w; x = scan<true>(row, x, w)) {
      const int e = scan<false>(row, x, w);
      s.x0.push_back(x);
      s.x1.push_back(e);
      x = e;
    }
    const int32_t last = static_cast<int32_t>(s.x0.size());
    const int32_t base = static_cast<int32_t>(s.base);
    for (int32_t c = first; c < last; ++c) parent[base + c] = base + c;
    if (y > s.y0) {
      const int32_t prev = s.row_start[s.row_start.size() - 2];
      touching(s.x0.data() + prev, s.x1.data() + prev, base + prev, first - prev, s.x0.data() + first,
               s.x1.data() + first, base + first, last - first, d,
               [&](int32_t p, int32_t c) { unite(parent, p, c); });
    }
    s.row_start.push_back(last);
  }
}

template <typename V, bool kValues>
inline void add_run(Stat& st, bool root, int32_t y, int32_t x0, int32_t x1, double sum, V vmax, int32_t ax) {
  if (root) {
    st.area = x1 - x0;
    st.x0 = x0;
    st.y0 = y;
    st.x1 = x1;
    st.y1 = y + 1;
    if (kValues) {
      st.sum = sum;
      st.vmax = vmax;
      st.ay = y;
      st.ax = ax;
    }
    return;
  }
  st.area += x1 - x0;
  st.x0 = std::min(st.x0, x0);
  st.x1 = std::max(st.x1, x1);
  st.y1 = y + 1;
  if (kValues) {
    st.sum += sum;
    if (static_cast<double>(vmax) > st.vmax) {  // strict: ties keep the first in raster order
      st.vmax = vmax;
      st.ay = y;
      st.ax = ax;
    }
  }
}

// Writes the labels of one stripe and accumulates its runs into the statistics.
template <typename V, bool kValues>
void finish_stripe(Stripe& s, int w, const int32_t* parent, int32_t* lab, const uint8_t* shared,
                   int32_t* labels, const V* values, Stat* stats) {
  const int32_t base = static_cast<int32_t>(s.base);
  for (int y = s.y0; y < s.y1; ++y) {
    int32_t* lrow = labels + static_cast<int64_t>(y) * w;
    const V* vrow = kValues ? values + static_cast<int64_t>(y) * w : nullptr;
    int32_t prev = 0;
    const int r = y - s.y0;
    for (int32_t k = s.row_start[r]; k < s.row_start[r + 1]; ++k) {
      const int32_t i = base + k;
      const int32_t x0 = s.x0[k], x1 = s.x1[k];
      const bool root = parent[i] == i;
      if (!root) {
        int32_t p = parent[i];
        if (p < base) {  // another stripe: its non-roots are being labelled concurrently
          while (parent[p] != p) p = parent[p];
        }
        lab[i] = lab[p];
      }
      const int32_t label = lab[i];
      std::fill(lrow + prev, lrow + x0, 0);
      std::fill(lrow + x0, lrow + x1, label);
      prev = x1;
      double sum = 0.0;
      V vmax{};
      int32_t ax = x0;
      if (kValues) {
        vmax = vrow[x0];
        for (int32_t x = x0; x < x1; ++x) {
          const V v = vrow[x];
          sum += static_cast<double>(v);
          if (v > vmax) {
            vmax = v;
            ax = x;
          }
        }
      }
      if (shared[label]) {
        s.shared.push_back({label, y, x0, x1, ax, root, sum, static_cast<double>(vmax)});
      } else {
        add_run<V, kValues>(stats[label - 1], root, y, x0, x1, sum, vmax, ax);
      }
    }
    std::fill(lrow + prev, lrow + w, 0);
  }
}

// Labels one image into `labels` and returns its statistics (index = label - 1).
template <typename V, bool kValues>
std::vector<Stat> label_image(Scratch& sc, const uint8_t* mask, const V* values, int32_t* labels, int h, int w,
                              int d, int nstripes) {
  const int64_t cap = (static_cast<int64_t>(w) + 1) / 2;  // most runs a row can hold
  int32_t* parent = sc.parent.get(static_cast<size_t>(h * cap));
  int32_t* lab = sc.lab.get(static_cast<size_t>(h * cap));
  sc.stripes.resize(nstripes);
  for (int s = 0; s < nstripes; ++s) {
    Stripe& st = sc.stripes[s];
    st.y0 = static_cast<int>(static_cast<int64_t>(h) * s / nstripes);
    st.y1 = static_cast<int>(static_cast<int64_t>(h) * (s + 1) / nstripes);
    st.base = st.y0 * cap;  // indices stay increasing in raster order across stripes
  }
  const bool par = nstripes > 1;
#pragma omp parallel for schedule(static) if (par)
  for (int s = 0; s < nstripes; ++s) label_stripe(sc.stripes[s], mask, w, d, parent);

  sc.crossing.clear();
  for (int s = 1; s < nstripes; ++s) {
    Stripe& up = sc.stripes[s - 1];
    Stripe& lo = sc.stripes[s];
    const size_t ur = up.row_start.size() - 2;
    const int32_t p0 = up.row_start[ur], p1 = up.row_start[ur + 1];
    touching(up.x0.data() + p0, up.x1.data() + p0, static_cast<int32_t>(up.base) + p0, p1 - p0, lo.x0.data(),
             lo.x1.data(), static_cast<int32_t>(lo.base), lo.row_start[1], d, [&](int32_t p, int32_t c) {
               unite(parent, p, c);
               sc.crossing.push_back(c);
             });
  }

#pragma omp parallel for schedule(static) if (par)
  for (int s = 0; s < nstripes; ++s) {
    Stripe& st = sc.stripes[s];
    const int32_t b = static_cast<int32_t>(st.base), e = b + static_cast<int32_t>(st.x0.size());
    int64_t n = 0;
    for (int32_t i = b; i < e; ++i) n += parent[i] == i;
    st.roots = n;
  }
  int64_t total = 0;
  for (Stripe& st : sc.stripes) {
    st.label_base = total;
    total += st.roots;
  }
#pragma omp parallel for schedule(static) if (par)
  for (int s = 0; s < nstripes; ++s) {
    Stripe& st = sc.stripes[s];
    const int32_t b = static_cast<int32_t>(st.base), e = b + static_cast<int32_t>(st.x0.size());
    int32_t next = static_cast<int32_t>(st.label_base);
    for (int32_t i = b; i < e; ++i)
      if (parent[i] == i) lab[i] = ++next;
  }

  sc.shared.assign(static_cast<size_t>(total) + 1, 0);
  for (int32_t c : sc.crossing) sc.shared[lab[find(parent, c)]] = 1;

  std::vector<Stat> stats(static_cast<size_t>(total));
#pragma omp parallel for schedule(static) if (par)
  for (int s = 0; s < nstripes; ++s)
    finish_stripe<V, kValues>(sc.stripes[s], w, parent, lab, sc.shared.data(), labels, values, stats.data());
  for (const Stripe& st : sc.stripes)
    for (const SharedRun& r : st.shared)
      add_run<double, kValues>(stats[r.label - 1], r.root, r.y, r.x0, r.x1, r.sum, r.vmax, r.ax);
  return stats;
}

template <typename V, bool kValues>
py::tuple run(const icl::carray<uint8_t>& mask, int connectivity, const V* values) {
  const int64_t b = mask.shape(0), h = mask.shape(1), w = mask.shape(2);
  if (h * ((w + 1) / 2) >= std::numeric_limits<int32_t>::max())
    throw std::invalid_argument("mask: image too large for int32 run indices");
  icl::carray<int32_t> labels({b, h, w});
  std::vector<std::vector<Stat>> stats(static_cast<size_t>(b));
  const uint8_t* m = mask.data();
  int32_t* l = labels.mutable_data();
  const int d = connectivity == 8 ? 1 : 0;
  const int64_t hw = h * w;
  {
    py::gil_scoped_release release;
    const int threads = icl::max_threads();
    if (hw > 0 && b < threads && hw >= (int64_t{1} << 16)) {
      // Few large images: stripes of at least 32 rows, one per thread.
      static thread_local Scratch sc;
      const int nstripes = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, h / 32)));
      for (int64_t i = 0; i < b; ++i)
        stats[i] = label_image<V, kValues>(sc, m + i * hw, kValues ? values + i * hw : nullptr, l + i * hw,
                                           static_cast<int>(h), static_cast<int>(w), d, nstripes);
    } else if (hw > 0) {
#pragma omp parallel for schedule(dynamic)
      for (int64_t i = 0; i < b; ++i) {
        static thread_local Scratch sc;
        stats[i] = label_image<V, kValues>(sc, m + i * hw, kValues ? values + i * hw : nullptr, l + i * hw,
                                           static_cast<int>(h), static_cast<int>(w), d, 1);
      }
    }
  }
  int64_t n = 0;
  py::array_t<int64_t> num(b);
  for (int64_t i = 0; i < b; ++i) {
    num.mutable_at(i) = static_cast<int64_t>(stats[i].size());
    n += num.at(i);
  }
  py::array_t<int64_t> image(n), area(n), argmax({n, int64_t{2}});
  py::array_t<int32_t> box({n, int64_t{4}});
  py::array_t<float> vsum(n), vmean(n);
  int64_t* im = image.mutable_data();
  int64_t* ar = area.mutable_data();
  int64_t* am = argmax.mutable_data();
  int32_t* bx = box.mutable_data();
  float* vs = vsum.mutable_data();
  float* vm = vmean.mutable_data();
  int64_t k = 0;
  for (int64_t i = 0; i < b; ++i) {
    for (const Stat& st : stats[i]) {
      im[k] = i;
      ar[k] = st.area;
      bx[4 * k] = st.x0;
      bx[4 * k + 1] = st.y0;
      bx[4 * k + 2] = st.x1;
      bx[4 * k + 3] = st.y1;
      if (kValues) {
        vs[k] = static_cast<float>(st.sum);
        vm[k] = static_cast<float>(st.sum / static_cast<double>(st.area));
        am[2 * k] = st.ay;
        am[2 * k + 1] = st.ax;
      }
      ++k;
    }
  }
  if (!kValues) return py::make_tuple(labels, num, image, area, box, py::none(), py::none(), py::none());
  return py::make_tuple(labels, num, image, area, box, vsum, vmean, argmax);
}

py::tuple connected_components(const icl::carray<uint8_t>& mask, int connectivity, const py::object& values) {
  icl::require_ndim(mask, 3, "mask");
  if (connectivity != 4 && connectivity != 8) throw std::invalid_argument("connectivity: expected 4 or 8");
  if (values.is_none()) return run<float, false>(mask, connectivity, nullptr);
  const py::array v = py::reinterpret_borrow<py::array>(values);
  icl::require_ndim(v, 3, "values");
  for (int a = 0; a < 3; ++a)
    if (v.shape(a) != mask.shape(a)) throw std::invalid_argument("values: expected the shape of mask");
  if (!(v.flags() & py::array::c_style)) throw std::invalid_argument("values: expected a C-contiguous array");
  if (v.dtype().is(py::dtype::of<float>()))
    return run<float, true>(mask, connectivity, static_cast<const float*>(v.data()));
  if (v.dtype().is(py::dtype::of<double>()))
    return run<double, true>(mask, connectivity, static_cast<const double*>(v.data()));
  throw std::invalid_argument("values: expected float32 or float64");
}

}  // namespace

ICL_REGISTER_BINDINGS(components) {
  m.def("connected_components", &connected_components, py::arg("mask"), py::arg("connectivity"),
        py::arg("values") = py::none(),
        "Labels uint8 masks [B,H,W] (nonzero = foreground) with 4/8 connectivity; returns (labels int32, num, "
        "image, area, box int32 [N,4] x0 y0 x1 y1, value_sum, value_mean, argmax [N,2] y x).");
}
