// Large output arrays on buffers recycled from arrays the caller has dropped.
//
// A fresh large numpy array pays for its pages on first touch: the kernel zeroes each page
// it faults in, measured 4 ms of a 12-17 ms nearest_palette call at batch 8 x 1024^2 (a 32 MB
// int32 output, which glibc always maps fresh). Evaluations call a kernel on image after
// image of one size, so the buffer of a dropped output array is kept and handed to the next
// array of the same size: its pages are already mapped. At most ICL_OUTPUT_CACHE_MB (default
// 128) is kept; 0 turns the cache off. Arrays under 1 MB come from malloc as usual.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstdlib>
#include <deque>
#include <iterator>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace icl {

class OutputCache {
 public:
  static constexpr size_t kMinBytes = size_t(1) << 20;
  static constexpr size_t kAlign = size_t(1) << 21;  // huge-page aligned, advised for huge pages

  struct Block {
    void* data;
    size_t bytes;  // a multiple of kAlign
  };

  static OutputCache& instance() {
    static OutputCache* cache = new OutputCache();  // never destroyed: capsules may outlive statics
    return *cache;
  }

  Block* take(size_t want) {
    const size_t bytes = (want + kAlign - 1) / kAlign * kAlign;
    {
      const std::lock_guard<std::mutex> hold(mutex_);
      // the newest block of the size first: its pages are the likeliest still in cache
      for (auto it = free_.rbegin(); it != free_.rend(); ++it) {
        if ((*it)->bytes == bytes) {
          Block* b = *it;
          free_.erase(std::next(it).base());
          held_ -= bytes;
          return b;
        }
      }
    }
    void* p = std::aligned_alloc(kAlign, bytes);
    if (!p) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE);  // advice only
#endif
    return new Block{p, bytes};
  }

  void give(Block* b) {
    std::vector<Block*> drop;
    {
      const std::lock_guard<std::mutex> hold(mutex_);
      if (b->bytes > limit_) {
        drop.push_back(b);
      } else {
        free_.push_back(b);
        held_ += b->bytes;
        while (held_ > limit_) {  // the oldest go first
          drop.push_back(free_.front());
          held_ -= free_.front()->bytes;
          free_.pop_front();
        }
      }
    }
    for (Block* d : drop) {
      std::free(d->data);
      delete d;
    }
  }

  size_t limit() const { return limit_; }
  size_t held() {
    const std::lock_guard<std::mutex> hold(mutex_);
    return held_;
  }

 private:
  OutputCache() {
    const char* env = std::getenv("ICL_OUTPUT_CACHE_MB");
    if (env && *env) {
      char* end = nullptr;
      const long long mb = std::strtoll(env, &end, 10);
      if (!end || *end != 0 || mb < 0 || mb > (1ll << 30))
        throw std::invalid_argument(std::string("ICL_OUTPUT_CACHE_MB: expected a whole number of MB (0 = off), got '") +
                                    env + "'");
      limit_ = size_t(mb) << 20;
    }
  }

  std::mutex mutex_;
  std::deque<Block*> free_;
  size_t held_ = 0;
  size_t limit_ = size_t(128) << 20;
};

// A C-contiguous array of `shape`, uninitialised, on a recycled buffer when it is large.
template <typename T>
pybind11::array_t<T> output_array(const std::vector<pybind11::ssize_t>& shape) {
  size_t n = 1;
  for (const pybind11::ssize_t s : shape) n *= size_t(s);
  OutputCache& cache = OutputCache::instance();
  if (n * sizeof(T) < OutputCache::kMinBytes || cache.limit() == 0) return pybind11::array_t<T>(shape);
  OutputCache::Block* block = cache.take(n * sizeof(T));
  pybind11::capsule owner(block, [](void* b) { OutputCache::instance().give(static_cast<OutputCache::Block*>(b)); });
  return pybind11::array_t<T>(shape, static_cast<T*>(block->data), owner);
}

}  // namespace icl
