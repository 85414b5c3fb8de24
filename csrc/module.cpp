// The icl._C module: build information plus every op registered through registry.h.
#include <cstdlib>

#include "common.h"
#include "output_cache.h"
#include "registry.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "icl native CPU kernels (C++17, OpenMP)";
  py::dict info;
  info["compiler"] = ICL_COMPILER;
  info["build_type"] = ICL_BUILD_TYPE;
#ifdef ICL_WITH_OPENMP
  info["openmp"] = true;
  info["openmp_version"] = _OPENMP;
#else
  info["openmp"] = false;
#endif
  m.attr("build_info") = info;
  if (const char* level = std::getenv("ICL_CPU_LEVEL"); level && *level)
    icl::set_isa_level(level, "ICL_CPU_LEVEL");  // an unknown or unsupported level fails the import
  m.def(
      "cpu_level",
      [](py::object level) {
        if (!level.is_none()) icl::set_isa_level(level.cast<std::string>(), "cpu_level");
        return std::string(icl::isa_name(static_cast<int>(icl::isa_level())));
      },
      py::arg("level") = py::none(),
      "The instruction-set level of the hot loops ('v4': AVX-512, 'v3': AVX2, 'baseline'); "
      "with a name, pin it (the CPU must run it). Default: the best this CPU runs, or ICL_CPU_LEVEL.");
  m.def(
      "cpu_levels", [] {
        py::list out;
        for (int l = 0; l <= icl::isa_supported(); ++l) out.append(icl::isa_name(l));
        return out;
      },
      "The instruction-set levels this CPU runs, lowest first.");
  m.def("max_threads", &icl::max_threads, "OpenMP threads the kernels use at most");
  m.def("team_size", &icl::team, "Threads a parallel region would use now (see thread_policy)");
  m.def(
      "thread_policy",
      [](py::object policy) {
        auto& flag = icl::thread_policy_flag();
        if (!policy.is_none()) {
          const std::string name = policy.cast<std::string>();
          int chosen = -1;
          for (int p = 0; p < 3; ++p)
            if (name == icl::policy_name(p)) chosen = p;
          if (chosen < 0)
            throw std::invalid_argument("thread_policy: expected 'adaptive', 'fixed' or 'single', got '" + name + "'");
          flag.store(chosen);
        }
        return std::string(icl::policy_name(flag.load()));
      },
      py::arg("policy") = py::none(),
      "Get (no argument) or set the thread policy: 'adaptive' (default: use only idle cores, "
      "measured from /proc/loadavg less this process's running threads), 'fixed' (always max_threads()) or 'single' (one thread). "
      "Returns the policy in force.");
  m.def(
      "_output_cache_info",
      [] {
        icl::OutputCache& cache = icl::OutputCache::instance();
        return py::make_tuple(cache.limit(), cache.held());
      },
      "(limit, held) in bytes of the cache of recycled output buffers (ICL_OUTPUT_CACHE_MB)");
  for (auto fn : icl::binding_registry()) fn(m);
}
