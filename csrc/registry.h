// Each op file registers its own bindings, so adding an op never edits a shared file:
//   ICL_REGISTER_BINDINGS(palette) { m.def("nearest_palette", ...); }
#pragma once
#include <pybind11/pybind11.h>

#include <functional>
#include <vector>

namespace icl {

using BindingFn = void (*)(pybind11::module_&);

inline std::vector<BindingFn>& binding_registry() {
  static std::vector<BindingFn> fns;
  return fns;
}

struct BindingRegistrar {
  explicit BindingRegistrar(BindingFn fn) { binding_registry().push_back(fn); }
};

}  // namespace icl

#define ICL_REGISTER_BINDINGS(name)                                        \
  static void icl_bind_##name(pybind11::module_& m);                       \
  static const ::icl::BindingRegistrar icl_registrar_##name(icl_bind_##name); \
  static void icl_bind_##name(pybind11::module_& m)
