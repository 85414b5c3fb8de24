// Shared helpers for the CPU kernels: array checks and OpenMP shims.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#if defined(__linux__)
#include <dirent.h>
#endif

#ifdef ICL_WITH_OPENMP
#include <omp.h>
#endif

namespace icl {
namespace py = pybind11;

// Instruction-set levels of the hot loops: baseline x86-64, x86-64-v3 (AVX2, FMA) and
// x86-64-v4 (AVX-512). The best level the CPU runs is chosen once; ICL_CPU_LEVEL=v4|v3|baseline
// (read when the module loads) or cpu_level() pins a lower one, so every path can be tested on
// one machine (the results of float kernels may differ between levels in the last bits).
enum class Isa : int { baseline = 0, v3 = 1, v4 = 2 };

inline const char* isa_name(int level) {
  static const char* names[] = {"baseline", "v3", "v4"};
  return names[level];
}

inline int isa_supported() {
#if defined(__GNUC__) && defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) return 2;
  if (__builtin_cpu_supports("x86-64-v3")) return 1;
#endif
  return 0;
}

inline std::atomic<int>& isa_flag() {
  static std::atomic<int> flag{isa_supported()};
  return flag;
}

inline Isa isa_level() { return static_cast<Isa>(isa_flag().load(std::memory_order_relaxed)); }

// Pin the level by name; throws for an unknown name or a level this CPU cannot run.
inline void set_isa_level(const std::string& name, const char* where) {
  int chosen = -1;
  for (int l = 0; l < 3; ++l)
    if (name == isa_name(l)) chosen = l;
  if (chosen < 0)
    throw std::invalid_argument(std::string(where) + ": expected 'v4', 'v3' or 'baseline', got '" + name + "'");
  if (chosen > isa_supported())
    throw std::invalid_argument(std::string(where) + "=" + name + ": this CPU runs at most '" +
                                isa_name(isa_supported()) + "'");
  isa_flag().store(chosen);
}

}  // namespace icl

#if defined(__GNUC__)
#define ICL_INLINE __attribute__((always_inline)) inline
#else
#define ICL_INLINE inline
#endif

// ICL_SIMD_DISPATCH(ret, name, params, args): ``name params`` runs ``name##_body args`` (a
// force-inlined function) compiled for the level isa_level() says: the body is inlined into one
// function per level, each compiled for its instruction set.
#if defined(__GNUC__) && defined(__x86_64__)
#define ICL_SIMD_DISPATCH(ret, name, params, args)                                             \
  __attribute__((target("arch=x86-64-v4"))) ret name##_v4 params { return name##_body args; } \
  __attribute__((target("arch=x86-64-v3"))) ret name##_v3 params { return name##_body args; } \
  ret name##_baseline params { return name##_body args; }                                      \
  inline ret name params {                                                                     \
    switch (::icl::isa_level()) {                                                              \
      case ::icl::Isa::v4: return name##_v4 args;                                              \
      case ::icl::Isa::v3: return name##_v3 args;                                              \
      default: return name##_baseline args;                                                    \
    }                                                                                          \
  }
#else
#define ICL_SIMD_DISPATCH(ret, name, params, args) \
  inline ret name params { return name##_body args; }
#endif

namespace icl {

template <typename T>
using carray = py::array_t<T, py::array::c_style | py::array::forcecast>;

inline void require_ndim(const py::array& a, int ndim, const char* what) {
  if (a.ndim() != ndim) {
    throw std::invalid_argument(std::string(what) + ": expected " + std::to_string(ndim) +
                                " dimensions, got " + std::to_string(a.ndim()));
  }
}

inline int max_threads() {
#ifdef ICL_WITH_OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// Thread policy. "fixed": every parallel region uses max_threads(); "single": one thread (for
// comparisons); "adaptive" (default): a
// region uses only the cores nobody else is running on. On a loaded machine a woken OpenMP
// thread can wait milliseconds for a core, and the region's closing barrier waits for it:
// measured 2.4x slower than one thread at load 11 on 2 cores. The contention measure is the
// kernel's count of runnable tasks (/proc/loadavg, 4th field) less this process's own running
// threads (/proc/self/task, read only when others seem to run): OpenMP workers spin for a
// while after each region and are runnable then, and counting them made the policy choose one
// thread on an idle machine right after a parallel region (measured: half of the calls of a
// 2-stripe labelling ran on one thread). Re-read at most every 10 ms, and a load counts once two
// readings in a row see it; where /proc/loadavg cannot be read the policy is "fixed".
enum class ThreadPolicy { kAdaptive = 0, kFixed = 1, kSingle = 2 };

inline const char* policy_name(int policy) {
  return policy == int(ThreadPolicy::kFixed) ? "fixed" : policy == int(ThreadPolicy::kSingle) ? "single" : "adaptive";
}

inline std::atomic<int>& thread_policy_flag() {
  static std::atomic<int> flag{int(ThreadPolicy::kAdaptive)};
  return flag;
}

// Runnable tasks on the machine right now, or -1 when unknown.
inline int runnable_tasks() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return -1;
  double l1, l5, l15;
  int running = -1, total = 0;
  const int got = std::fscanf(f, "%lf %lf %lf %d/%d", &l1, &l5, &l15, &running, &total);
  std::fclose(f);
  return got == 5 ? running : -1;
}

// Running threads of this process (the caller included), or -1 when unknown.
inline int own_running_threads() {
#if defined(__linux__)
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return -1;
  int running = 0;
  char path[64];
  char buf[512];
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::snprintf(path, sizeof path, "/proc/self/task/%.20s/stat", e->d_name);
    std::FILE* f = std::fopen(path, "r");
    if (!f) continue;  // the thread has ended
    const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = 0;
    const char* close = std::strrchr(buf, ')');  // the name may hold spaces and parentheses
    if (close && close[1] == ' ' && close[2] == 'R') ++running;
  }
  closedir(dir);
  return running;
#else
  return -1;
#endif
}

// Threads for a parallel region: max_threads() under "fixed"; under "adaptive" the idle cores
// (plus this thread's own), at least 1 and at most max_threads().
inline int team() {
  const int most = max_threads();
  const int policy = thread_policy_flag().load(std::memory_order_relaxed);
  if (policy == int(ThreadPolicy::kSingle)) return 1;
  if (most <= 1 || policy == int(ThreadPolicy::kFixed)) return most;
  static std::atomic<int64_t> read_at{-1};
  static std::atomic<int> cached{0};
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now().time_since_epoch()).count();
  const int64_t last = read_at.load(std::memory_order_relaxed);
  if (last < 0 || now - last >= 10) {
    read_at.store(now, std::memory_order_relaxed);
    int running = runnable_tasks();
    if (running > 1) {
      const int own = own_running_threads();
      if (own > 1) running -= own - 1;  // keep this thread, as /proc/loadavg counts it
    }
    // Others count only as many as two readings in a row saw: a kernel worker that ran at one
    // reading would otherwise halve the team for the next 10 ms (seen on 1% of readings on an
    // idle machine); a lasting load is seen by the second reading, 10 ms later.
    static std::atomic<int> seen_before{0};
    const int others_now = running < 0 ? -1 : running - 1;
    const int others = others_now < 0 ? -1 : std::min(others_now, seen_before.load(std::memory_order_relaxed));
    seen_before.store(others_now < 0 ? 0 : others_now, std::memory_order_relaxed);
#ifdef ICL_WITH_OPENMP
    const int cpus = omp_get_num_procs();
#else
    const int cpus = 1;
#endif
    const int idle = others < 0 ? most : cpus - others;
    cached.store(idle < 1 ? 1 : (idle > most ? most : idle), std::memory_order_relaxed);
  }
  return cached.load(std::memory_order_relaxed);
}

}  // namespace icl
