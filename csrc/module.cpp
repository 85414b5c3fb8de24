// The icl._C module: build information plus every op registered through registry.h.
#include "common.h"
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
#ifdef ICL_WITH_CUDA
  info["cuda"] = true;
#else
  info["cuda"] = false;
#endif
  m.attr("build_info") = info;
  m.def("max_threads", &icl::max_threads, "OpenMP threads the kernels use");
  for (auto fn : icl::binding_registry()) fn(m);
}
