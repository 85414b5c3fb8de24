// Connected components of binary masks with per-component statistics, run-based.
//
// Each row is cut into runs of foreground pixels; runs of adjacent rows that touch are joined
// in a union-find whose root is always the lowest run index, i.e. the run holding the
// component's first pixel in raster order, so numbering roots in index order numbers the
// components in raster order. A final pass writes the labels and accumulates the statistics
// run by run in raster order.
//
// Value sums are in double and in a fixed order that no thread count changes: the rows are
// grouped in blocks of kBlockRows; a component's runs are summed in raster order within each
// block, and its block sums are then added in block order.
//
// Parallelism: OpenMP over the images of a batch; an image alone is cut into row stripes
// (whole blocks) that are labelled in parallel and joined at their borders. A component that
// crosses a border ("shared") is reduced per block inside each stripe, in parallel; only
// those block partials are merged in order afterwards. Its label is known before: a short
// parallel pass numbers the roots of every stripe first.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "common.h"
#include "output_cache.h"
#include "registry.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace {
namespace py = pybind11;

inline int ctz64(uint64_t v) {
#if defined(__GNUC__) || defined(__clang__)
  return __builtin_ctzll(v);
#else
  int n = 0;
  for (; !(v & 1); v >>= 1) ++n;
  return n;
#endif
}

// bits[k] bit j = (row[64k + j] != 0); bits past w are zero.
inline void row_bits(const uint8_t* row, int w, uint64_t* bits) {
  int x = 0;
#if defined(__SSE2__)
  const __m128i zero = _mm_setzero_si128();
  for (; x + 64 <= w; x += 64) {
    uint64_t b = 0;
    for (int q = 0; q < 4; ++q) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + x + 16 * q));
      const uint32_t z = static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, zero)));
      b |= static_cast<uint64_t>(~z & 0xFFFFu) << (16 * q);
    }
    bits[x >> 6] = b;
  }
#endif
  for (; x < w; x += 64) {
    uint64_t b = 0;
    const int n = std::min(64, w - x);
    for (int j = 0; j < n; ++j) b |= static_cast<uint64_t>(row[x + j] != 0) << j;
    bits[x >> 6] = b;
  }
}

// Appends the runs [x0, x1) of one row, found as 0->1 and 1->0 transitions of its bits.
inline void row_runs(const uint64_t* bits, int w, std::vector<int32_t>& x0, std::vector<int32_t>& x1) {
  uint64_t carry = 0;  // whether the pixel left of the word is foreground
  const int words = (w + 63) >> 6;
  for (int k = 0; k < words; ++k) {
    const uint64_t b = bits[k];
    const uint64_t left = (b << 1) | carry;
    carry = b >> 63;
    for (uint64_t t = b & ~left; t; t &= t - 1) x0.push_back(64 * k + ctz64(t));
    for (uint64_t t = ~b & left; t; t &= t - 1) x1.push_back(64 * k + ctz64(t));
  }
  if (carry) x1.push_back(w);  // only when w is a multiple of 64 and the row ends in foreground
}

constexpr int kBlockShift = 3;  // blocks of 8 rows: the summation order, and the stripe grain
constexpr int kBlockRows = 1 << kBlockShift;

struct Stat {
  int64_t area;  // 0 until the first run
  int32_t x0, y0, x1, y1;
  double sum;        // of the finished blocks, added in block order
  double block_sum;  // of the runs in the current block, in raster order
  double vmax;
  int32_t block, ay, ax;
  double total() const { return sum + block_sum; }
};

// One block's statistics of a component that crosses stripes, merged in order afterwards.
struct SharedPart {
  int32_t root;
  Stat st;
};

struct Stripe {
  int y0 = 0, y1 = 0;
  int32_t base = 0;                // global index of the stripe's first run
  std::vector<int32_t> x0, x1;     // runs, in raster order
  std::vector<int32_t> row_start;  // local index of each row's first run, plus the end
  std::vector<SharedPart> shared;  // block partials of shared components, in block order
  std::vector<Stat> open;          // by shared id: the partial of the current block
  std::vector<int32_t> touched;    // shared ids with an open partial
  std::vector<uint64_t> bits;  // one row of the mask, a bit per pixel
  int64_t roots = 0, label_base = 0;
  bool finite = true;  // the stripe's values hold no NaN or infinity
};

template <typename T>
struct Buffer {  // grows, never initialises: pages are touched only where runs are written
  std::unique_ptr<T[]> data;
  size_t size = 0;
  T* get(size_t n) {
    if (n > size) {
      data.reset(new T[n]);
      size = n;
    }
    return data.get();
  }
};

struct Scratch {
  std::vector<Stripe> stripes;
  Buffer<int32_t> parent, code, root_label, shared_id;
  std::vector<uint8_t> shared_root;  // by run index; all zero between calls
  std::vector<int32_t> crossing, flagged;
};

inline int32_t find(int32_t* parent, int32_t x) {
  while (parent[x] != x) {
    parent[x] = parent[parent[x]];  // path halving
    x = parent[x];
  }
  return x;
}

// Joins the sets of a and b under the lower root; returns the root that stopped being one, or -1.
inline int32_t unite(int32_t* parent, int32_t a, int32_t b) {
  a = find(parent, a);
  b = find(parent, b);
  if (a == b) return -1;
  if (a > b) std::swap(a, b);
  parent[b] = a;
  return b;
}

// Calls fn(p, c) for every run p of the upper row touching a run c of the lower row.
template <typename Fn>
inline void touching(const int32_t* px0, const int32_t* px1, int32_t pbase, int32_t np, const int32_t* cx0,
                     const int32_t* cx1, int32_t cbase, int32_t nc, int d, Fn fn) {
  int32_t i = 0;
  for (int32_t c = 0; c < nc; ++c) {
    while (i < np && px1[i] + d <= cx0[c]) ++i;
    for (int32_t j = i; j < np && px0[j] < cx1[c] + d; ++j) fn(pbase + j, cbase + c);
  }
}

// Joins every run c of the lower row to the runs of the upper row that it touches; returns
// the number of unions. c is still its own root, so its first join needs no find, and its
// root is kept in hand for the rest.
inline int64_t join_rows(int32_t* parent, const int32_t* px0, const int32_t* px1, int32_t pbase, int32_t np,
                         const int32_t* cx0, const int32_t* cx1, int32_t cbase, int32_t nc, int d) {
  int64_t links = 0;
  int32_t i = 0;
  for (int32_t c = 0; c < nc; ++c) {
    while (i < np && px1[i] + d <= cx0[c]) ++i;
    const int32_t end = cx1[c] + d;
    int32_t j = i;
    if (j >= np || px0[j] >= end) continue;
    int32_t root = find(parent, pbase + j);
    parent[cbase + c] = root;
    ++links;
    for (++j; j < np && px0[j] < end; ++j) {
      const int32_t r = find(parent, pbase + j);
      if (r == root) continue;
      if (r < root) {
        parent[root] = r;
        root = r;
      } else {
        parent[r] = root;
      }
      ++links;
    }
  }
  return links;
}

// Runs and local unions of one stripe; run indices start at the stripe's base.
void label_stripe(Stripe& s, const uint8_t* mask, int w, int d, int32_t* parent) {
  s.bits.resize((static_cast<size_t>(w) + 63) / 64);
  uint64_t* bits = s.bits.data();
  s.x0.clear();
  s.x1.clear();
  s.row_start.assign(1, 0);
  s.shared.clear();
  s.finite = true;
  int64_t links = 0;
  for (int y = s.y0; y < s.y1; ++y) {
    const int32_t first = static_cast<int32_t>(s.x0.size());
    row_bits(mask + static_cast<int64_t>(y) * w, w, bits);
    row_runs(bits, w, s.x0, s.x1);
    const int32_t last = static_cast<int32_t>(s.x0.size());
    for (int32_t c = first; c < last; ++c) parent[s.base + c] = s.base + c;
    if (y > s.y0) {
      const int32_t prev = s.row_start[s.row_start.size() - 2];
      links += join_rows(parent, s.x0.data() + prev, s.x1.data() + prev, s.base + prev, first - prev,
                         s.x0.data() + first, s.x1.data() + first, s.base + first, last - first, d);
    }
    s.row_start.push_back(last);
  }
  s.roots = static_cast<int64_t>(s.x0.size()) - links;
}

// First position of vmax in vrow[x0, x1): looked for only when the run's max is the
// component's new max, which is rare once a component has grown.
template <typename V>
inline int32_t first_of(const V* vrow, int32_t x0, int32_t x1, V vmax) {
  int32_t x = x0;
  while (x + 1 < x1 && vrow[x] != vmax) ++x;  // bounded: NaN never compares equal
  return x;
}

template <typename V, bool kValues>
inline void add_run(Stat& st, bool first, int32_t y, int32_t x0, int32_t x1, double sum, V vmax, const V* vrow) {
  if (first) {
    st.area = x1 - x0;
    st.x0 = x0;
    st.y0 = y;
    st.x1 = x1;
    st.y1 = y + 1;
    if (kValues) {
      st.sum = 0.0;
      st.block_sum = sum;
      st.block = y >> kBlockShift;
      st.vmax = vmax;
      st.ay = y;
      st.ax = first_of(vrow, x0, x1, vmax);
    }
    return;
  }
  st.area += x1 - x0;
  st.x0 = std::min(st.x0, x0);
  st.x1 = std::max(st.x1, x1);
  st.y1 = y + 1;
  if (kValues) {
    const int32_t block = y >> kBlockShift;
    if (block != st.block) {
      st.sum += st.block_sum;
      st.block_sum = sum;
      st.block = block;
    } else {
      st.block_sum += sum;
    }
    if (static_cast<double>(vmax) > st.vmax) {  // strict: ties keep the first in raster order
      st.vmax = vmax;
      st.ay = y;
      st.ax = first_of(vrow, x0, x1, vmax);
    }
  }
}

// Adds a later block's partial p (of a block after all of st's) to st, as add_run would have.
template <bool kValues>
inline void merge_part(Stat& st, const Stat& p) {
  if (st.area == 0) {
    st = p;
    return;
  }
  st.area += p.area;
  st.x0 = std::min(st.x0, p.x0);
  st.x1 = std::max(st.x1, p.x1);
  st.y1 = p.y1;
  if (kValues) {
    st.sum += st.block_sum;
    st.block_sum = p.block_sum;
    st.block = p.block;
    if (p.vmax > st.vmax) {
      st.vmax = p.vmax;
      st.ay = p.ay;
      st.ax = p.ax;
    }
  }
}

// Whether no value is NaN or infinite; tests the exponent bits, which vectorises (one
// compilation per instruction-set level, common.h).
template <typename V, typename U>
ICL_INLINE bool all_finite_bits(const V* v, int64_t n, U exponent) {
  U bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    U bits;
    std::memcpy(&bits, v + i, sizeof bits);
    bad |= static_cast<U>((bits & exponent) == exponent);
  }
  return bad == 0;
}

ICL_INLINE bool all_finite_body(const float* v, int64_t n) { return all_finite_bits(v, n, uint32_t{0x7F800000u}); }

ICL_INLINE bool all_finite_body(const double* v, int64_t n) {
  return all_finite_bits(v, n, uint64_t{0x7FF0000000000000ull});
}
ICL_SIMD_DISPATCH(bool, all_finite, (const float* v, int64_t n), (v, n))
ICL_SIMD_DISPATCH(bool, all_finite, (const double* v, int64_t n), (v, n))

#if defined(__SSE2__)
// Eight set lanes then eight clear ones: the 4 lanes loaded from kLaneMask + 8 - n and from
// kLaneMask + 12 - n mask the first n of eight values (1 <= n <= 7).
alignas(16) constexpr int32_t kLaneMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

// Sum in double and max of v[0, n), n >= 1, with v[0, avail) readable: eight lanes (lane j
// takes j, j + 8, ...) in registers, the last chunk's lanes from n on set to 0 for the sum and
// -inf for the max (or, where fewer than eight values remain readable, a scalar tail into lane
// 0); the lanes added pairwise at the end. Runs of noisy masks are a few pixels long, and a
// loop whose length noise decides mispredicts its exit: most runs take no branch at all.
inline double run_sum_max(const float* v, int32_t n, int64_t avail, float& vmax) {
  const __m128 ninf = _mm_set1_ps(-std::numeric_limits<float>::infinity());
  __m128d s0 = _mm_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
  __m128 m0 = ninf, m1 = ninf;
  int32_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m128 lo = _mm_loadu_ps(v + k), hi = _mm_loadu_ps(v + k + 4);
    s0 = _mm_add_pd(s0, _mm_cvtps_pd(lo));
    s1 = _mm_add_pd(s1, _mm_cvtps_pd(_mm_movehl_ps(lo, lo)));
    s2 = _mm_add_pd(s2, _mm_cvtps_pd(hi));
    s3 = _mm_add_pd(s3, _mm_cvtps_pd(_mm_movehl_ps(hi, hi)));
    m0 = _mm_max_ps(m0, lo);
    m1 = _mm_max_ps(m1, hi);
  }
  const int32_t rem = n - k;
  double tail = 0.0;
  if (rem > 0 && k + 8 <= avail) {
    const __m128 lo = _mm_loadu_ps(v + k), hi = _mm_loadu_ps(v + k + 4);
    const __m128 mlo = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kLaneMask + 8 - rem)));
    const __m128 mhi = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kLaneMask + 12 - rem)));
    const __m128 slo = _mm_and_ps(lo, mlo), shi = _mm_and_ps(hi, mhi);
    s0 = _mm_add_pd(s0, _mm_cvtps_pd(slo));
    s1 = _mm_add_pd(s1, _mm_cvtps_pd(_mm_movehl_ps(slo, slo)));
    s2 = _mm_add_pd(s2, _mm_cvtps_pd(shi));
    s3 = _mm_add_pd(s3, _mm_cvtps_pd(_mm_movehl_ps(shi, shi)));
    m0 = _mm_max_ps(m0, _mm_or_ps(slo, _mm_andnot_ps(mlo, ninf)));
    m1 = _mm_max_ps(m1, _mm_or_ps(shi, _mm_andnot_ps(mhi, ninf)));
  } else {
    float m = -std::numeric_limits<float>::infinity();
    for (; k < n; ++k) {
      tail += static_cast<double>(v[k]);
      m = v[k] > m ? v[k] : m;
    }
    m0 = _mm_max_ps(m0, _mm_set1_ps(m));
  }
  const __m128d s = _mm_add_pd(_mm_add_pd(s0, s1), _mm_add_pd(s2, s3));
  const double total = _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s))) + tail;
  __m128 m = _mm_max_ps(m0, m1);
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  vmax = _mm_cvtss_f32(m);
  return total;
}
#endif

// Sum in double and max of vrow[x0, x1) (w: the row's length): float in the eight lanes
// above; double runs under 8 pixels in one sequential pass, longer ones four partial sums.
template <typename V>
inline void run_values(const V* vrow, int32_t x0, int32_t x1, int32_t w, double& sum, V& vmax) {
#if defined(__SSE2__)
  if constexpr (std::is_same_v<V, float>) {
    sum = run_sum_max(vrow + x0, x1 - x0, w - x0, vmax);
    return;
  }
#endif
  if (x1 - x0 < 8) {
    double s = static_cast<double>(vrow[x0]);
    V m = vrow[x0];
    for (int32_t x = x0 + 1; x < x1; ++x) {
      const V v = vrow[x];
      s += static_cast<double>(v);
      m = v > m ? v : m;
    }
    sum = s;
    vmax = m;
    return;
  }
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;  // independent chains: 4x the throughput
  V m0 = vrow[x0], m1 = m0, m2 = m0, m3 = m0;
  int32_t x = x0;
  for (; x + 4 <= x1; x += 4) {
    s0 += static_cast<double>(vrow[x]);
    s1 += static_cast<double>(vrow[x + 1]);
    s2 += static_cast<double>(vrow[x + 2]);
    s3 += static_cast<double>(vrow[x + 3]);
    m0 = std::max(m0, vrow[x]);
    m1 = std::max(m1, vrow[x + 1]);
    m2 = std::max(m2, vrow[x + 2]);
    m3 = std::max(m3, vrow[x + 3]);
  }
  for (; x < x1; ++x) {
    s0 += static_cast<double>(vrow[x]);
    m0 = std::max(m0, vrow[x]);
  }
  sum = (s0 + s1) + (s2 + s3);
  vmax = std::max(std::max(m0, m1), std::max(m2, m3));
}

// Writes v over p[x0, x1), and possibly over p[x1, x1 + 3) too when that stays below limit:
// the row's runs and gaps are written left to right, each starting exactly where the one
// before ended, so the next write covers that overshoot. Four labels a store; runs and gaps
// are a few pixels long in noisy masks, where a plain fill spent more on its ends than inside.
inline void fill_over(int32_t* p, int32_t x0, int32_t x1, int32_t limit, int32_t v) {
  int32_t x = x0;
#if defined(__SSE2__)
  const __m128i vv = _mm_set1_epi32(v);
  if (x1 + 3 <= limit) {
    for (; x < x1; x += 4) _mm_storeu_si128(reinterpret_cast<__m128i*>(p + x), vv);
    return;
  }
  for (; x + 4 <= x1; x += 4) _mm_storeu_si128(reinterpret_cast<__m128i*>(p + x), vv);
#endif
  for (; x < x1; ++x) p[x] = v;
}

// Numbers the stripe's roots, writes its labels and accumulates its runs in raster order.
// code[i] is a run's label, or -1 - root for a component that crosses stripes (labelled
// root_label[root]); those runs are reduced into per-block partials (s.open, by shared id,
// pushed to s.shared when their block ends).
template <typename V, bool kValues>
void finish_stripe(Stripe& s, int w, const int32_t* parent, int32_t* code, const uint8_t* shared_root,
                   const int32_t* shared_id, const int32_t* flagged, const int32_t* root_label, int32_t* labels,
                   const V* values, Stat* stats) {
  const int32_t base = s.base;
  int32_t next = static_cast<int32_t>(s.label_base);
  auto flush = [&] {
    for (const int32_t id : s.touched) {
      s.shared.push_back({flagged[id], s.open[id]});
      s.open[id].area = 0;
    }
    s.touched.clear();
  };
  for (int y = s.y0; y < s.y1; ++y) {
    if (y > s.y0 && (y & (kBlockRows - 1)) == 0) flush();
    int32_t* lrow = labels + static_cast<int64_t>(y) * w;
    const V* vrow = kValues ? values + static_cast<int64_t>(y) * w : nullptr;
    if (kValues && !all_finite(vrow, w)) s.finite = false;  // the whole row, now in cache
    int32_t prev = 0;
    const int r = y - s.y0;
    for (int32_t k = s.row_start[r]; k < s.row_start[r + 1]; ++k) {
      const int32_t i = base + k;
      const int32_t x0 = s.x0[k], x1 = s.x1[k];
      const bool first = parent[i] == i;
      int32_t c;
      if (first) {
        c = ++next;
        if (shared_root[i]) c = -1 - i;
      } else if (parent[i] >= base) {
        c = code[parent[i]];
      } else {  // the root lies in an earlier stripe: follow parents, which no thread writes now
        int32_t p = parent[i];
        while (parent[p] != p) p = parent[p];
        c = -1 - p;
      }
      code[i] = c;
      fill_over(lrow, prev, x0, w, 0);
      prev = x1;
      double sum = 0.0;
      V vmax{};
      if (kValues) run_values(vrow, x0, x1, w, sum, vmax);
      if (c > 0) {
        fill_over(lrow, x0, x1, w, c);
        add_run<V, kValues>(stats[c - 1], first, y, x0, x1, sum, vmax, vrow);
        continue;
      }
      const int32_t root = -1 - c;
      fill_over(lrow, x0, x1, w, root_label[root]);
      const int32_t id = shared_id[root];
      Stat& part = s.open[id];
      const bool opened = part.area == 0;
      if (opened) s.touched.push_back(id);
      add_run<V, kValues>(part, opened, y, x0, x1, sum, vmax, vrow);
    }
    fill_over(lrow, prev, w, w, 0);
  }
  flush();
}

// Labels one image into `labels` and returns its statistics (index = label - 1); clears
// `finite` when a value is NaN or infinite.
template <typename V, bool kValues>
std::vector<Stat> label_image(Scratch& sc, const uint8_t* mask, const V* values, int32_t* labels, int h, int w,
                              int d, int nstripes, char& finite) {
  const int64_t cap = (static_cast<int64_t>(w) + 1) / 2;  // most runs a row can hold
  const size_t nidx = static_cast<size_t>(h * cap);
  int32_t* parent = sc.parent.get(nidx);
  int32_t* code = sc.code.get(nidx);
  int32_t* root_label = sc.root_label.get(nidx);
  int32_t* shared_id = sc.shared_id.get(nidx);
  if (sc.shared_root.size() < nidx) sc.shared_root.resize(nidx, 0);
  uint8_t* shared_root = sc.shared_root.data();
  // Stripes of whole blocks, so that no block is split between two stripes.
  const int64_t blocks = (static_cast<int64_t>(h) + kBlockRows - 1) / kBlockRows;
  nstripes = static_cast<int>(std::min<int64_t>(nstripes, blocks));
  sc.stripes.resize(nstripes);
  for (int s = 0; s < nstripes; ++s) {
    Stripe& st = sc.stripes[s];
    st.y0 = static_cast<int>(std::min<int64_t>(h, blocks * s / nstripes * kBlockRows));
    st.y1 = static_cast<int>(std::min<int64_t>(h, blocks * (s + 1) / nstripes * kBlockRows));
    st.base = static_cast<int32_t>(st.y0 * cap);  // increasing in raster order across stripes
  }
  const bool par = nstripes > 1;
#pragma omp parallel for schedule(dynamic, 1) if (par) num_threads(icl::team())
  for (int s = 0; s < nstripes; ++s) {
    Stripe& st = sc.stripes[s];
    label_stripe(st, mask, w, d, parent);
  }

  // Join the stripes at their borders; a root that stops being one leaves its stripe's count.
  sc.crossing.clear();
  for (int s = 1; s < nstripes; ++s) {
    Stripe& up = sc.stripes[s - 1];
    Stripe& lo = sc.stripes[s];
    const size_t ur = up.row_start.size() - 2;
    const int32_t p0 = up.row_start[ur], p1 = up.row_start[ur + 1];
    touching(up.x0.data() + p0, up.x1.data() + p0, up.base + p0, p1 - p0, lo.x0.data(), lo.x1.data(), lo.base,
             lo.row_start[1], d, [&](int32_t p, int32_t c) {
               const int32_t gone = unite(parent, p, c);
               if (gone >= 0) {
                 int t = s;
                 while (sc.stripes[t].base > gone) --t;
                 --sc.stripes[t].roots;
               }
               sc.crossing.push_back(c);
             });
  }
  sc.flagged.clear();
  for (int32_t c : sc.crossing) {
    const int32_t r = find(parent, c);
    if (!shared_root[r]) {
      shared_root[r] = 1;
      shared_id[r] = static_cast<int32_t>(sc.flagged.size());
      sc.flagged.push_back(r);
    }
  }
  for (Stripe& st : sc.stripes) {
    st.open.assign(sc.flagged.size(), Stat{});
    st.touched.clear();
  }
  int64_t total = 0;
  for (Stripe& st : sc.stripes) {
    st.label_base = total;
    total += st.roots;
  }

  if (!sc.flagged.empty()) {  // the labels of the crossing components, before any run needs one
#pragma omp parallel for schedule(dynamic, 1) if (par) num_threads(icl::team())
    for (int s = 0; s < nstripes; ++s) {
      const Stripe& st = sc.stripes[s];
      int32_t next = static_cast<int32_t>(st.label_base);
      const int32_t end = st.base + static_cast<int32_t>(st.x0.size());
      for (int32_t i = st.base; i < end; ++i) {
        if (parent[i] != i) continue;
        ++next;
        if (shared_root[i]) root_label[i] = next;
      }
    }
  }
  std::vector<Stat> stats(static_cast<size_t>(total));
#pragma omp parallel for schedule(dynamic, 1) if (par) num_threads(icl::team())
  for (int s = 0; s < nstripes; ++s)
    finish_stripe<V, kValues>(sc.stripes[s], w, parent, code, shared_root, shared_id, sc.flagged.data(),
                              root_label, labels, values, stats.data());
  // Block partials of crossing components, in stripe order, hence in block order.
  for (const Stripe& st : sc.stripes)
    for (const SharedPart& part : st.shared) merge_part<kValues>(stats[root_label[part.root] - 1], part.st);
  for (int32_t r : sc.flagged) shared_root[r] = 0;
  for (const Stripe& st : sc.stripes) finite = finite && st.finite;
  return stats;
}

template <typename V, bool kValues>
py::tuple run(const icl::carray<uint8_t>& mask, int connectivity, const V* values, int stripes) {
  const int64_t b = mask.shape(0), h = mask.shape(1), w = mask.shape(2);
  if (h * ((w + 1) / 2) >= std::numeric_limits<int32_t>::max())
    throw std::invalid_argument("mask: image too large for int32 run indices");
  py::array_t<int32_t> labels = icl::output_array<int32_t>({b, h, w});
  std::vector<std::vector<Stat>> stats(static_cast<size_t>(b));
  std::vector<char> finite(static_cast<size_t>(b), 1);
  const uint8_t* m = mask.data();
  int32_t* l = labels.mutable_data();
  const int d = connectivity == 8 ? 1 : 0;
  const int64_t hw = h * w;
  {
    py::gil_scoped_release release;
    const int threads = icl::max_threads();
    if (hw > 0 && (stripes > 0 || (b < threads && hw >= (int64_t{1} << 16)))) {
      // Few large images: stripes of at least 32 rows, one per thread (or as many as asked).
      static thread_local Scratch sc;
      const int64_t want = stripes > 0 ? stripes : std::min<int64_t>(threads, h / 32);
      const int nstripes = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(want, h)));
      for (int64_t i = 0; i < b; ++i)
        stats[i] = label_image<V, kValues>(sc, m + i * hw, kValues ? values + i * hw : nullptr, l + i * hw,
                                           static_cast<int>(h), static_cast<int>(w), d, nstripes, finite[i]);
    } else if (hw > 0) {
#pragma omp parallel for schedule(dynamic) num_threads(icl::team())
      for (int64_t i = 0; i < b; ++i) {
        static thread_local Scratch sc;
        stats[i] = label_image<V, kValues>(sc, m + i * hw, kValues ? values + i * hw : nullptr, l + i * hw,
                                           static_cast<int>(h), static_cast<int>(w), d, 1, finite[i]);
      }
    }
  }
  if (std::find(finite.begin(), finite.end(), 0) != finite.end())
    throw std::invalid_argument("values: contains NaN or infinite values");
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
        vs[k] = static_cast<float>(st.total());
        vm[k] = static_cast<float>(st.total() / static_cast<double>(st.area));
        am[2 * k] = st.ay;
        am[2 * k + 1] = st.ax;
      }
      ++k;
    }
  }
  if (!kValues) return py::make_tuple(labels, num, image, area, box, py::none(), py::none(), py::none());
  return py::make_tuple(labels, num, image, area, box, vsum, vmean, argmax);
}

py::tuple connected_components(const icl::carray<uint8_t>& mask, int connectivity, const py::object& values,
                               int stripes) {
  icl::require_ndim(mask, 3, "mask");
  if (connectivity != 4 && connectivity != 8) throw std::invalid_argument("connectivity: expected 4 or 8");
  if (values.is_none()) return run<float, false>(mask, connectivity, nullptr, stripes);
  const py::array v = py::reinterpret_borrow<py::array>(values);
  icl::require_ndim(v, 3, "values");
  for (int a = 0; a < 3; ++a)
    if (v.shape(a) != mask.shape(a)) throw std::invalid_argument("values: expected the shape of mask");
  if (!(v.flags() & py::array::c_style)) throw std::invalid_argument("values: expected a C-contiguous array");
  if (v.dtype().is(py::dtype::of<float>()))
    return run<float, true>(mask, connectivity, static_cast<const float*>(v.data()), stripes);
  if (v.dtype().is(py::dtype::of<double>()))
    return run<double, true>(mask, connectivity, static_cast<const double*>(v.data()), stripes);
  throw std::invalid_argument("values: expected float32 or float64");
}

}  // namespace

ICL_REGISTER_BINDINGS(components) {
  m.def("connected_components", &connected_components, py::arg("mask"), py::arg("connectivity"),
        py::arg("values") = py::none(), py::arg("stripes") = 0,
        "Labels uint8 masks [B,H,W] (nonzero = foreground) with 4/8 connectivity; returns (labels int32, "
        "num, image, area, box int32 [N,4] x0 y0 x1 y1, value_sum, value_mean, argmax [N,2] y x). "
        "stripes > 0 cuts each image into that many row stripes (else chosen from the threads), which "
        "changes nothing in the results.");
}
