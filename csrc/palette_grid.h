// Exact nearest-palette-colour search over RGB cubes (used by palette.cpp and turbo.cpp).
//
// The RGB cube is cut into cubic cells; each cell lists the palette colours that can be the
// answer (nearest by squared distance, ties to the lower palette index) at some integer
// point of the cell. Lists are pruned exactly: a distance-bound filter (keep a colour only
// when its minimum distance to the cell is <= the smallest maximum distance of any colour),
// then pairwise dominance: colour b is dropped when some colour a is the answer over b at
// every point of the cell. The difference of two squared distances is linear in the point,
// so its maximum over the cell is reached at a corner and the test is exact in integers.
// Levels are refined coarse to fine (4^3 -> 16^3 cells, optionally 32^3 or 64^3), each
// child starting from its parent's list, so building stays cheap.
#pragma once
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <memory>
#include <vector>

#include "common.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace icl {
namespace palette {

// A palette entry packed as r | g << 8 | b << 16 | index << 24 (index < 256).
inline uint32_t pack(int r, int g, int b, int index) {
  return uint32_t(r) | (uint32_t(g) << 8) | (uint32_t(b) << 16) | (uint32_t(index) << 24);
}
inline int chan(uint32_t e, int k) { return int((e >> (8 * k)) & 255u); }
inline int index_of(uint32_t e) { return int(e >> 24); }

inline int dist2(uint32_t e, int r, int g, int b) {
  const int dr = r - chan(e, 0), dg = g - chan(e, 1), db = b - chan(e, 2);
  return dr * dr + dg * dg + db * db;
}

// Integer points lo[k]..hi[k] (inclusive) per channel.
struct Box {
  int lo[3];
  int hi[3];
};

// True when `a` is the answer over `b` at every point of the box (so b never wins there).
inline bool dominates(uint32_t a, uint32_t b, const Box& box) {
  // d(x,a) - d(x,b) = sum_k 2 x_k (b_k - a_k) + a_k^2 - b_k^2, maximised per channel.
  int worst = 0;
  for (int k = 0; k < 3; ++k) {
    const int ak = chan(a, k), bk = chan(b, k), slope = 2 * (bk - ak);
    worst += slope * (slope > 0 ? box.hi[k] : box.lo[k]) + ak * ak - bk * bk;
  }
  return worst < 0 || (worst == 0 && index_of(a) < index_of(b));
}

// Appends to `out` the entries of `in` (sorted by index) that can win somewhere in `box`.
inline void prune(const uint32_t* in, int n, const Box& box, std::vector<uint32_t>& out) {
  int dmin[256], dmax[256];
  int best_max = INT_MAX;
  for (int i = 0; i < n; ++i) {
    int lo = 0, hi = 0;
    for (int k = 0; k < 3; ++k) {
      const int c = chan(in[i], k);
      const int below = box.lo[k] - c, above = c - box.hi[k];
      const int gap = below > 0 ? below : (above > 0 ? above : 0);
      const int far = std::max(c - box.lo[k], box.hi[k] - c);
      lo += gap * gap;
      hi += far * far;
    }
    dmin[i] = lo;
    dmax[i] = hi;
    best_max = std::min(best_max, hi);
  }
  uint32_t kept[256];
  int key[256], order[256];
  int m = 0;
  for (int i = 0; i < n; ++i) {
    if (dmin[i] <= best_max) {
      order[m] = m;
      key[m] = dmax[i];
      kept[m++] = in[i];
    }
  }
  // Challengers by increasing maximum distance: the colours nearest to the whole cell
  // dominate most others, so a dominated colour is found after a test or two.
  std::sort(order, order + m, [&](int a, int b) { return key[a] < key[b] || (key[a] == key[b] && a < b); });
  for (int i = 0; i < m; ++i) {
    bool keep = true;
    for (int j = 0; j < m && keep; ++j) {
      const int a = order[j];
      if (a != i && dominates(kept[a], kept[i], box)) keep = false;
    }
    if (keep) out.push_back(kept[i]);
  }
}

// Lists hold at least kScan entries (padded with copies of the last one, which never change
// the answer: equal distance and a later position), so the first kScan are scanned without
// a data-dependent loop exit.
constexpr int kScan = 4;

inline void pad_list(std::vector<uint32_t>& part, int n) {
  for (int k = n; k < kScan; ++k) part.push_back(part.back());
}

// One level: cells per axis = 1 << bits. cell[i] is a palette index when one colour wins in
// the whole cell, else kMulti | offset into `lists`, where lists[offset] is the count
// followed by the packed candidates in index order.
struct Grid {
  static constexpr uint32_t kMulti = 0x80000000u;
  int bits = 0;
  std::vector<uint32_t> cell;
  std::vector<uint32_t> lists;

  Box box(int c) const {
    const int mask = (1 << bits) - 1, shift = 8 - bits, w = 1 << shift;
    const int lo[3] = {(c >> (2 * bits)) << shift, ((c >> bits) & mask) << shift, (c & mask) << shift};
    return Box{{lo[0], lo[1], lo[2]}, {lo[0] + w - 1, lo[1] + w - 1, lo[2] + w - 1}};
  }

  // The nearest colour of a count-prefixed, padded list; ties keep the lower index (lists
  // are in index order). Branch-free, as the comparisons are unpredictable.
  static int scan(const uint32_t* list, int r, int g, int b) {
#ifdef __SSE2__
    // The first four at once: 16-bit channel differences, squares summed by madd, then the
    // minimum of distance * 4 + position, so equal distances keep the earlier position.
    const __m128i rgb = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(list + 1)),
                                      _mm_set1_epi32(0x00FFFFFF));
    const __m128i zero = _mm_setzero_si128();
    const __m128i pixel = _mm_set_epi16(0, short(b), short(g), short(r), 0, short(b), short(g), short(r));
    const __m128i d01 = _mm_sub_epi16(_mm_unpacklo_epi8(rgb, zero), pixel);
    const __m128i d23 = _mm_sub_epi16(_mm_unpackhi_epi8(rgb, zero), pixel);
    const __m128 sq01 = _mm_castsi128_ps(_mm_madd_epi16(d01, d01));  // r^2+g^2, b^2 per entry
    const __m128 sq23 = _mm_castsi128_ps(_mm_madd_epi16(d23, d23));
    const __m128i dist = _mm_add_epi32(_mm_castps_si128(_mm_shuffle_ps(sq01, sq23, _MM_SHUFFLE(2, 0, 2, 0))),
                                       _mm_castps_si128(_mm_shuffle_ps(sq01, sq23, _MM_SHUFFLE(3, 1, 3, 1))));
    static_assert(kScan == 4, "the SSE2 path scans four entries");
    auto keep_min = [](__m128i key, __m128i other) {
      const __m128i less = _mm_cmplt_epi32(other, key);
      return _mm_or_si128(_mm_and_si128(less, other), _mm_andnot_si128(less, key));
    };
    __m128i key = _mm_or_si128(_mm_slli_epi32(dist, 2), _mm_set_epi32(3, 2, 1, 0));
    key = keep_min(key, _mm_shuffle_epi32(key, _MM_SHUFFLE(1, 0, 3, 2)));
    key = keep_min(key, _mm_shuffle_epi32(key, _MM_SHUFFLE(2, 3, 0, 1)));
    const int k = _mm_cvtsi128_si32(key);
    int best = k >> 2, label = index_of(list[1 + (k & 3)]);
#else
    int best = dist2(list[1], r, g, b), label = index_of(list[1]);
    for (int k = 2; k <= kScan; ++k) {
      const int d = dist2(list[k], r, g, b);
      const bool nearer = d < best;
      best = nearer ? d : best;
      label = nearer ? index_of(list[k]) : label;
    }
#endif
    const int n = int(list[0]);
    for (int k = kScan + 1; k <= n; ++k) {
      const int d = dist2(list[k], r, g, b);
      const bool nearer = d < best;  // strict: later entries have higher indices
      best = nearer ? d : best;
      label = nearer ? index_of(list[k]) : label;
    }
    return label;
  }
};

// The coarsest level, 2^bits cells per axis, with exact lists from `colours` (packed, index
// order). Few cells, so no threads.
inline Grid build_root(int bits, const std::vector<uint32_t>& colours) {
  const int cells = 1 << (3 * bits);
  Grid g;
  g.bits = bits;
  g.cell.resize(size_t(cells));
  std::vector<uint32_t> list;
  for (int c = 0; c < cells; ++c) {
    list.clear();
    prune(colours.data(), int(colours.size()), g.box(c), list);
    if (list.size() == 1) {
      g.cell[size_t(c)] = uint32_t(index_of(list[0]));
      continue;
    }
    g.cell[size_t(c)] = Grid::kMulti | uint32_t(g.lists.size());
    g.lists.push_back(uint32_t(list.size()));
    g.lists.insert(g.lists.end(), list.begin(), list.end());
    pad_list(g.lists, int(list.size()));
  }
  return g;
}

// Level `bits` with exact lists from `parent` (coarser, exact lists). The children of a cell
// share the parent's list; for each ordered pair (a, b) of it the test "a dominates b" is
// sum_k g_k lo_k + c < 0 over each child's corner lo, separable per channel, so it runs over
// all children at once and clears b's bit in the children where it holds.
inline Grid refine_exact(int bits, const Grid& parent) {
  const int up = bits - parent.bits, side = 1 << up, kids = 1 << (3 * up);
  const int w = 1 << (8 - bits);
  const int parents = int(parent.cell.size());
  Grid g;
  g.bits = bits;
  g.cell.resize(size_t(1) << (3 * bits));
  auto child_index = [&](int p, int i, int j, int k) {
    const int pb = parent.bits, mask = (1 << pb) - 1;
    const int r = ((p >> (2 * pb)) << up) + i, gg = (((p >> pb) & mask) << up) + j, b = ((p & mask) << up) + k;
    return (r << (2 * bits)) | (gg << bits) | b;
  };
  // Pieces of parent cells, taken dynamically by the threads (a thread descheduled on a busy
  // machine does not hold the others up); each piece stores its lists with piece-local
  // offsets, fixed up once all pieces are done.
  const int pieces = std::min(parents, 64);
  std::vector<std::vector<uint32_t>> parts(static_cast<size_t>(pieces));
  auto piece_range = [&](int piece) {
    return std::make_pair(int(int64_t(parents) * piece / pieces), int(int64_t(parents) * (piece + 1) / pieces));
  };
#ifdef ICL_WITH_OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(icl::team())
#endif
  for (int piece = 0; piece < pieces; ++piece) {
    const auto [begin, end] = piece_range(piece);
    std::vector<uint32_t>& part = parts[size_t(piece)];
    std::vector<uint32_t> list;
    uint32_t alive[512];
    int lo[3][8];
    for (int p = begin; p < end; ++p) {
      const uint32_t e = parent.cell[size_t(p)];
      if (!(e & Grid::kMulti)) {
        for (int i = 0; i < side; ++i)
          for (int j = 0; j < side; ++j)
            for (int k = 0; k < side; ++k) g.cell[size_t(child_index(p, i, j, k))] = e;
        continue;
      }
      const uint32_t* pl = parent.lists.data() + (e & ~Grid::kMulti);
      const int n = int(pl[0]);
      const Box pbox = parent.box(p);
      if (n > 32) {  // long lists (coarse levels, big palettes): per-child pruning
        for (int i = 0; i < side; ++i)
          for (int j = 0; j < side; ++j)
            for (int k = 0; k < side; ++k) {
              const int c = child_index(p, i, j, k);
              list.clear();
              prune(pl + 1, n, g.box(c), list);
              if (list.size() == 1) {
                g.cell[size_t(c)] = uint32_t(index_of(list[0]));
              } else {
                g.cell[size_t(c)] = Grid::kMulti | uint32_t(part.size());
                part.push_back(uint32_t(list.size()));
                part.insert(part.end(), list.begin(), list.end());
                pad_list(part, int(list.size()));
              }
            }
        continue;
      }
      for (int ch = 0; ch < 3; ++ch)
        for (int i = 0; i < side; ++i) lo[ch][i] = pbox.lo[ch] + i * w;
      const uint32_t all = n == 32 ? ~0u : ((1u << n) - 1);
      std::fill(alive, alive + kids, all);
      for (int a = 0; a < n; ++a) {
        for (int b = 0; b < n; ++b) {
          if (a == b) continue;
          int gk[3], c = (a < b) ? -1 : 0;  // a wins ties when its index is lower
          for (int ch = 0; ch < 3; ++ch) {
            const int ak = chan(pl[1 + a], ch), bk = chan(pl[1 + b], ch);
            gk[ch] = 2 * (bk - ak);
            c += ak * ak - bk * bk + (gk[ch] > 0 ? gk[ch] * (w - 1) : 0);
          }
          const uint32_t clear = ~(1u << b);
          int t0[8], t1[8], t2[8];
          for (int i = 0; i < side; ++i) {
            t0[i] = gk[0] * lo[0][i] + c;
            t1[i] = gk[1] * lo[1][i];
            t2[i] = gk[2] * lo[2][i];
          }
          for (int i = 0; i < side; ++i)
            for (int j = 0; j < side; ++j) {
              uint32_t* row = alive + ((i * side + j) * side);
              const int base_ij = t0[i] + t1[j];
              for (int k = 0; k < side; ++k) row[k] &= (base_ij + t2[k] < 0) ? clear : ~0u;
            }
        }
      }
      // Children of one cell have few distinct masks: each distinct list is stored once.
      uint32_t seen_mask[16], seen_entry[16];
      int seen = 0;
      for (int i = 0; i < side; ++i)
        for (int j = 0; j < side; ++j)
          for (int k = 0; k < side; ++k) {
            const uint32_t m = alive[(i * side + j) * side + k];
            uint32_t& ce = g.cell[size_t(child_index(p, i, j, k))];
            int s = 0;
            while (s < seen && seen_mask[s] != m) ++s;
            if (s < seen) {
              ce = seen_entry[s];
              continue;
            }
            if ((m & (m - 1)) == 0) {
              ce = uint32_t(index_of(pl[1 + __builtin_ctz(m)]));
            } else {
              ce = Grid::kMulti | uint32_t(part.size());
              const size_t head = part.size();
              part.push_back(0);
              for (uint32_t r = m; r; r &= r - 1) part.push_back(pl[1 + __builtin_ctz(r)]);
              part[head] = uint32_t(part.size() - head - 1);
              pad_list(part, int(part[head]));
            }
            if (seen < 16) {
              seen_mask[seen] = m;
              seen_entry[seen++] = ce;
            }
          }
    }
  }
  std::vector<size_t> base(parts.size() + 1, 0);
  for (size_t t = 0; t < parts.size(); ++t) base[t + 1] = base[t] + parts[t].size();
  g.lists.resize(base.back());
#ifdef ICL_WITH_OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(icl::team())
#endif
  for (int piece = 0; piece < pieces; ++piece) {
    const auto [begin, end] = piece_range(piece);
    const uint32_t shift = uint32_t(base[size_t(piece)]);
    std::copy(parts[size_t(piece)].begin(), parts[size_t(piece)].end(), g.lists.begin() + base[size_t(piece)]);
    for (int p = begin; p < end; ++p) {
      if (!(parent.cell[size_t(p)] & Grid::kMulti)) continue;
      for (int i = 0; i < side; ++i)
        for (int j = 0; j < side; ++j)
          for (int k = 0; k < side; ++k) {
            uint32_t& ce = g.cell[size_t(child_index(p, i, j, k))];
            if (ce & Grid::kMulti) ce += shift;
          }
    }
  }
  return g;
}

// The lookup grid for `colours` (packed, index order, non-empty) with 2^fine_bits cells per
// axis, fine_bits in {4, 5, 6}.
inline Grid build_grid(const std::vector<uint32_t>& colours, int fine_bits) {
  // Jumping 16^3 -> 64^3 directly is cheaper than through 32^3.
  Grid mid = refine_exact(4, build_root(2, colours));
  return fine_bits <= 4 ? mid : refine_exact(fine_bits, mid);
}

// A full table: the label of every RGB colour at index r | g << 8 | b << 16 (a pixel's three
// bytes read as one little-endian word), 16 MB on 2 MB-aligned memory advised for huge pages:
// gathers spread over 8 TLB entries instead of 4096 (measured 2-3x faster per pixel).
struct FreeLut {
  void operator()(uint8_t* p) const { std::free(p); }
};
using Lut = std::unique_ptr<uint8_t[], FreeLut>;
constexpr size_t kLutBytes = size_t(1) << 24;

inline Lut alloc_lut() {
  constexpr size_t kHuge = size_t(1) << 21;
  void* p = std::aligned_alloc(kHuge, kLutBytes);
  if (!p) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  madvise(p, kLutBytes, MADV_HUGEPAGE);  // advice only: without it the table still works
#endif
  return Lut(static_cast<uint8_t*>(p));
}

// The full table of `colours`: each cell of a 64^3 grid is filled with its single label or,
// for cells with several candidates, by scanning the cell's list per colour. Exact, like
// every other lookup here.
inline Lut build_full_lut(const std::vector<uint32_t>& colours) {
  const Grid grid = build_grid(colours, 6);
  Lut lut = alloc_lut();
  uint8_t* dst = lut.get();
  const int cells = int(grid.cell.size());
#ifdef ICL_WITH_OPENMP
#pragma omp parallel for schedule(dynamic, 256) num_threads(icl::team())
#endif
  for (int c = 0; c < cells; ++c) {
    const Box box = grid.box(c);
    const uint32_t e = grid.cell[size_t(c)];
    for (int b = box.lo[2]; b <= box.hi[2]; ++b)
      for (int g = box.lo[1]; g <= box.hi[1]; ++g) {
        uint8_t* row = dst + ((size_t(b) << 16) | (size_t(g) << 8));
        if (!(e & Grid::kMulti)) {
          std::fill(row + box.lo[0], row + box.hi[0] + 1, uint8_t(e));
          continue;
        }
        for (int r = box.lo[0]; r <= box.hi[0]; ++r) {
          row[r] = uint8_t(Grid::scan(grid.lists.data() + (e & ~Grid::kMulti), r, g, b));
        }
      }
  }
  return lut;
}

// Calls fn(lut_value, i) for pixels [begin, end) of `px` (RGB bytes, `n` pixels in all): one
// 4-byte load per pixel, except the buffer's last pixel (its 4th byte lies past the end).
template <typename Fn>
inline void gather_lut(const uint8_t* px, int64_t begin, int64_t end, int64_t n, const uint8_t* lut, Fn fn) {
  const int64_t safe = std::min(end, n - 1);
  int64_t i = begin;
  for (; i < safe; ++i) {
    uint32_t word;
    std::memcpy(&word, px + 3 * i, 4);
    fn(lut[word & 0xFFFFFFu], i);
  }
  for (; i < end; ++i) fn(lut[uint32_t(px[3 * i]) | (uint32_t(px[3 * i + 1]) << 8) | (uint32_t(px[3 * i + 2]) << 16)], i);
}

}  // namespace palette
}  // namespace icl
