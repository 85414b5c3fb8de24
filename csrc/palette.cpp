// nearest_palette: exact nearest palette colour per pixel (squared RGB distance, ties to the
// lower palette index), with an optional candidate subset per image. See palette_grid.h.
#include <algorithm>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common.h"
#include "output_cache.h"
#include "palette_grid.h"
#include "registry.h"

namespace icl {
namespace palette {
namespace {

// Finer grids cost more to build (~0.6, 1.4, 3.7 ms for 16^3, 32^3, 64^3 cells at 150
// colours on one core) and less per pixel (fewer pixels fall in cells with several
// candidates): the measured break-even points, by the pixels a candidate set serves.
int fine_bits_for(int64_t pixels) {
  if (pixels < (int64_t(1) << 19)) return 4;
  if (pixels < (int64_t(1) << 21)) return 5;
  return 6;
}

// A grid compiled for per-pixel lookup with 2 bytes per cell (64^3 cells: 512 KB, in L2): a
// cell below 256 is the label, else 256 + the id of its candidate list.
struct Table {
  static constexpr size_t kMaxLists = 65536 - 256;
  int bits = 0;
  std::vector<uint16_t> cell;
  std::vector<uint32_t> offset;  // list id -> position in `lists`
  std::vector<uint32_t> lists;   // as in Grid

  const uint32_t* list(uint32_t e) const { return lists.data() + offset[e - 256]; }
  int lookup(int r, int g, int b) const {
    const int shift = 8 - bits;
    const uint32_t e = cell[size_t(((r >> shift) << (2 * bits)) | ((g >> shift) << bits) | (b >> shift))];
    return e < 256 ? int(e) : Grid::scan(list(e), r, g, b);
  }
};

// The table of `colours` with 2^bits cells per axis, or coarser when the finer grid has more
// lists than 2-byte cells can name (a 16^3 grid has at most 4096).
std::shared_ptr<const Table> build_table(const std::vector<uint32_t>& colours, int bits) {
  for (;; bits -= 1) {
    const Grid grid = build_grid(colours, bits);
    auto table = std::make_shared<Table>();
    std::vector<uint32_t> id(grid.lists.size());
    for (size_t at = 0; at < grid.lists.size(); at += 1 + std::max<size_t>(grid.lists[at], kScan)) {
      id[at] = uint32_t(table->offset.size());
      table->offset.push_back(uint32_t(at));
    }
    if (table->offset.size() > Table::kMaxLists) continue;
    table->bits = grid.bits;
    table->lists = grid.lists;
    table->cell.resize(grid.cell.size());
    for (size_t c = 0; c < grid.cell.size(); ++c) {
      const uint32_t e = grid.cell[c];
      table->cell[c] = uint16_t(e & Grid::kMulti ? 256 + id[e & ~Grid::kMulti] : e);
    }
    return table;
  }
}

// What a candidate set is labelled with: its grid table and, once the set has served enough
// pixels, its full table (palette_grid.h's Lut), which makes a pixel one gather.
struct Lookup {
  std::shared_ptr<const Table> table;
  std::shared_ptr<const uint8_t> lut;
};

// A full table costs 16 MB and 45-300 ms to build (ADE20K's 150 colours; quiet one core to a
// load of 8 on 2 cores) and saves 2.6 ns a pixel on noise-free predictions, 5.4 on noisy ones
// (256^2 images, grid 3.9-7.3 ns/px against 1.2-1.9 with the table; bench/bench_peers.py and
// the measurement in its history): it pays back after 50-100 Mpx. So it is built as rent or
// buy: for a set earlier calls used for 2^26 pixels (67 Mpx, 64 images of 1024^2), never more
// than twice the best choice in hindsight; a short run never pays for it. A set whose table
// was dropped needs 8x more pixels for each drop before it gets one again, so rotating through
// more sets than kLuts does not rebuild tables on every call.
constexpr int64_t kLutAfterPixels = int64_t(1) << 26;
constexpr size_t kEntries = 16;  // candidate sets kept (a 64^3 grid table takes about 0.7 MB)
constexpr size_t kLuts = 2;      // full tables kept, on the most recent sets that have one

struct Entry {
  std::vector<uint32_t> colours;  // packed colour and index: the key, by content
  int64_t pixels;                 // served over all calls (since the last drop of its table)
  int drops;                      // times its full table was dropped
  int bits;                       // requested; the table may be coarser (see build_table)
  std::shared_ptr<const Table> table;
  std::shared_ptr<const uint8_t> lut;
};

std::mutex cache_mutex;
std::list<Entry> cache_entries;  // most recent first

// Keeps at most kLuts full tables: the least recent sets' are dropped (a call still using one
// holds its own reference).
void trim_luts() {
  size_t kept = 0;
  for (auto& entry : cache_entries) {
    if (entry.lut && ++kept > kLuts) {
      entry.lut.reset();
      entry.pixels = 0;
      entry.drops += 1;
    }
  }
}

// The lookup of a candidate set, reused across calls: evaluation decodes many predictions
// against the same palette and often the same candidate sets. A set's grid table is refined
// as the pixels it has served (over all calls) pass the break-even points of fine_bits_for.
Lookup lookup_for(const std::vector<uint32_t>& colours, int64_t pixels) {
  int bits = fine_bits_for(pixels);
  bool want_lut = false;
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    for (auto it = cache_entries.begin(); it != cache_entries.end(); ++it) {
      if (it->colours != colours) continue;
      cache_entries.splice(cache_entries.begin(), cache_entries, it);
      if (it->lut) return {nullptr, it->lut};
      want_lut = it->pixels >= kLutAfterPixels << (3 * std::min(it->drops, 8));
      it->pixels += pixels;
      bits = fine_bits_for(it->pixels);
      if (!want_lut && it->bits >= bits) return {it->table, nullptr};
      break;
    }
  }
  if (want_lut) {
    std::shared_ptr<const uint8_t> lut(build_full_lut(colours).release(), FreeLut());
    std::lock_guard<std::mutex> lock(cache_mutex);
    for (auto it = cache_entries.begin(); it != cache_entries.end(); ++it) {
      if (it->colours != colours) continue;
      cache_entries.splice(cache_entries.begin(), cache_entries, it);
      if (!it->lut) it->lut = lut;
      trim_luts();
      break;
    }
    return {nullptr, lut};
  }
  std::shared_ptr<const Table> table = build_table(colours, bits);
  std::lock_guard<std::mutex> lock(cache_mutex);
  for (auto& entry : cache_entries) {
    if (entry.colours != colours) continue;
    if (entry.bits < bits) {
      entry.bits = bits;
      entry.table = table;
    }
    return {table, nullptr};
  }
  cache_entries.push_front(Entry{colours, pixels, 0, bits, table, nullptr});
  if (cache_entries.size() > kEntries) cache_entries.pop_back();
  return {table, nullptr};
}

// (candidate sets cached, full tables cached), for tests of the cache.
py::tuple cache_info() {
  std::lock_guard<std::mutex> lock(cache_mutex);
  size_t luts = 0;
  for (const auto& entry : cache_entries) luts += entry.lut ? 1 : 0;
  return py::make_tuple(cache_entries.size(), luts);
}

// Direct-mapped cache of exact colours for pixels in cells with several candidates:
// predictions repeat colours a lot. An entry is rgb << 8 | label; every slot starts as
// black's entry, which is valid whatever slot a lookup of black lands in, so no "empty"
// marker is needed. Noisy images repeat few colours; the cache is then switched off for a
// while (a miss costs more than it saves).
struct ColourCache {
  static constexpr int kBits = 14;
  static constexpr int kRetry = 32;  // rows without the cache before trying it again
  std::vector<uint32_t> slots = std::vector<uint32_t>(size_t(1) << kBits);
  int skip = 0;

  static uint32_t slot_of(uint32_t key) { return (key * 0x9E3779B1u) >> (32 - kBits); }
  void reset(uint32_t black_label) {
    std::fill(slots.begin(), slots.end(), black_label);
    skip = 0;
  }
};

// One image row in two passes: the first writes every single-colour cell's label and queues
// the other pixels without branching on the data; the second resolves the queue.
template <int BITS>
void label_row(const uint8_t* px, int32_t* out, int64_t width, const Table& table, int32_t* queue,
               ColourCache& cache) {
  constexpr int kShift = 8 - BITS;
  const uint16_t* cells = table.cell.data();
  int64_t queued = 0;
  for (int64_t x = 0; x < width; ++x) {
    const uint32_t e = cells[((px[3 * x] >> kShift) << (2 * BITS)) | ((px[3 * x + 1] >> kShift) << BITS) |
                             (px[3 * x + 2] >> kShift)];
    out[x] = int32_t(e);
    queue[queued] = int32_t(x);
    queued += e > 255;
  }
  if (cache.skip > 0) {
    --cache.skip;
    for (int64_t i = 0; i < queued; ++i) {
      const int64_t x = queue[i];
      out[x] = Grid::scan(table.list(uint32_t(out[x])), px[3 * x], px[3 * x + 1], px[3 * x + 2]);
    }
    return;
  }
  int64_t hits = 0;
  uint32_t* slots = cache.slots.data();
  for (int64_t i = 0; i < queued; ++i) {
    const int64_t x = queue[i];
    const int r = px[3 * x], g = px[3 * x + 1], b = px[3 * x + 2];
    const uint32_t key = uint32_t(r) | (uint32_t(g) << 8) | (uint32_t(b) << 16);
    uint32_t& slot = slots[ColourCache::slot_of(key)];
    if ((slot >> 8) == key) {
      out[x] = int32_t(slot & 255u);
      ++hits;
      continue;
    }
    const int label = Grid::scan(table.list(uint32_t(out[x])), r, g, b);
    slot = (key << 8) | uint32_t(label);
    out[x] = label;
  }
  if (queued >= 64 && hits * 4 < queued) cache.skip = ColourCache::kRetry;
}

void label_images(const uint8_t* img, int32_t* dst, int64_t B, int64_t H, int64_t W,
                  const std::vector<int>& set_of, const std::vector<Lookup>& lookups) {
  const int64_t rows = B * H;
  const int64_t chunk_rows = std::max<int64_t>(1, 16384 / std::max<int64_t>(W, 1));
  const int64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
#ifdef ICL_WITH_OPENMP
#pragma omp parallel if (chunks > 1) num_threads(icl::team())
#endif
  {
    ColourCache cache;
    std::vector<int32_t> queue(static_cast<size_t>(W));
    int current = -1;
    // Dynamic chunks of rows (about 16K pixels): a thread descheduled on a busy machine does
    // not hold the others up.
#ifdef ICL_WITH_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      for (int64_t row = chunk * chunk_rows; row < std::min(rows, (chunk + 1) * chunk_rows); ++row) {
        const int s = set_of[size_t(row / H)];
        if (const uint8_t* lut = lookups[size_t(s)].lut.get()) {
          gather_lut(img, row * W, (row + 1) * W, rows * W, lut, [dst](uint8_t v, int64_t i) { dst[i] = v; });
          continue;
        }
        const Table& table = *lookups[size_t(s)].table;
        if (s != current) {
          cache.reset(uint32_t(table.lookup(0, 0, 0)));
          current = s;
        }
        auto* fn = table.bits == 6 ? &label_row<6> : table.bits == 5 ? &label_row<5> : &label_row<4>;
        fn(img + row * W * 3, dst + row * W, W, table, queue.data(), cache);
      }
    }
  }
}

py::array_t<int32_t> nearest_palette(carray<uint8_t> images, carray<uint8_t> palette,
                                     py::object candidates) {
  require_ndim(images, 4, "images");
  require_ndim(palette, 2, "palette");
  if (images.shape(3) != 3) throw std::invalid_argument("images: expected 3 channels");
  const int64_t B = images.shape(0), H = images.shape(1), W = images.shape(2);
  const int P = int(palette.shape(0));
  if (palette.shape(1) != 3 || P < 1 || P > 256) {
    throw std::invalid_argument("palette: expected shape [P, 3] with 1 <= P <= 256");
  }
  const uint8_t* pal = palette.data();
  auto entry = [&](int i) { return pack(pal[3 * i], pal[3 * i + 1], pal[3 * i + 2], i); };

  // Group images by candidate set; each distinct set gets its own grid.
  std::vector<int> set_of(size_t(B), 0);
  std::vector<std::vector<uint32_t>> colours;
  if (candidates.is_none()) {
    colours.emplace_back();
    for (int i = 0; i < P; ++i) colours[0].push_back(entry(i));
  } else {
    auto cand = candidates.cast<carray<uint8_t>>();
    require_ndim(cand, 2, "candidates");
    if (cand.shape(0) != B || cand.shape(1) != P) {
      throw std::invalid_argument("candidates: expected shape [B, P]");
    }
    std::map<std::string, int> seen;
    for (int64_t b = 0; b < B; ++b) {
      const uint8_t* row = cand.data() + b * P;
      std::string key(size_t(P), '\0');
      for (int i = 0; i < P; ++i) key[size_t(i)] = row[i] ? 1 : 0;
      auto it = seen.find(key);
      if (it == seen.end()) {
        std::vector<uint32_t> set;
        for (int i = 0; i < P; ++i) {
          if (key[size_t(i)]) set.push_back(entry(i));
        }
        if (set.empty()) {
          throw std::invalid_argument("candidates: image " + std::to_string(b) + " has no candidate colour");
        }
        it = seen.emplace(key, int(colours.size())).first;
        colours.push_back(std::move(set));
      }
      set_of[size_t(b)] = it->second;
    }
  }

  py::array_t<int32_t> out = output_array<int32_t>({B, H, W});
  const uint8_t* img = images.data();
  int32_t* dst = out.mutable_data();
  {
    py::gil_scoped_release release;
    std::vector<int64_t> pixels(colours.size(), 0);
    for (int64_t b = 0; b < B; ++b) pixels[size_t(set_of[size_t(b)])] += H * W;
    std::vector<Lookup> lookups;
    for (size_t s = 0; s < colours.size(); ++s) lookups.push_back(lookup_for(colours[s], pixels[s]));
    label_images(img, dst, B, H, W, set_of, lookups);
  }
  return out;
}

}  // namespace
}  // namespace palette
}  // namespace icl

ICL_REGISTER_BINDINGS(palette) {
  m.def("nearest_palette", &icl::palette::nearest_palette, pybind11::arg("images"),
        pybind11::arg("palette"), pybind11::arg("candidates") = pybind11::none(),
        "Nearest palette index per pixel: images uint8 [B,H,W,3], palette uint8 [P,3], "
        "candidates uint8 [B,P] (nonzero = allowed) or None -> int32 [B,H,W]. Exact squared RGB "
        "distance, ties to the lower index.");
  m.def("_palette_cache_info", &icl::palette::cache_info,
        "(candidate sets, full lookup tables) held by nearest_palette's cache");
}
