// Pairwise IoU of xyxy boxes, computed in the input dtype (float32 or float64).
#include <vector>

#include "box_iou.h"
#include "common.h"
#include "registry.h"

namespace icl {
namespace {

template <typename T>
py::array_t<T> box_iou_t(const py::array& a_in, const py::array& b_in) {
  carray<T> a = carray<T>::ensure(a_in), b = carray<T>::ensure(b_in);
  require_ndim(a, 2, "a");
  require_ndim(b, 2, "b");
  if (a.shape(1) != 4 || b.shape(1) != 4) throw std::invalid_argument("box_iou: boxes must be [N, 4]");
  const py::ssize_t n = a.shape(0), m = b.shape(0);
  py::array_t<T> out({n, m});
  const T* pa = a.data();
  const T* pb = b.data();
  T* po = out.mutable_data();
  {
    py::gil_scoped_release release;
    // Structure-of-arrays copy of b so the inner loop vectorises.
    std::vector<T> bx0(m), by0(m), bx1(m), by1(m), barea(m);
    for (py::ssize_t j = 0; j < m; ++j) {
      bx0[j] = pb[4 * j];
      by0[j] = pb[4 * j + 1];
      bx1[j] = pb[4 * j + 2];
      by1[j] = pb[4 * j + 3];
      barea[j] = (bx1[j] - bx0[j]) * (by1[j] - by0[j]);
    }
    const long long work = static_cast<long long>(n) * m;
#pragma omp parallel for schedule(static) if (work > 32768) num_threads(icl::team())
    for (py::ssize_t i = 0; i < n; ++i) {
      const Box<T> box{pa[4 * i], pa[4 * i + 1], pa[4 * i + 2], pa[4 * i + 3]};
      iou_row(box, bx0.data(), by0.data(), bx1.data(), by1.data(), barea.data(), m, po + i * m);
    }
  }
  return out;
}

py::array box_iou(const py::array& a, const py::array& b) {
  if (a.dtype().is(py::dtype::of<double>())) return box_iou_t<double>(a, b);
  return box_iou_t<float>(a, b);
}

}  // namespace
}  // namespace icl

ICL_REGISTER_BINDINGS(box_iou) {
  m.def("box_iou", &icl::box_iou, pybind11::arg("a"), pybind11::arg("b"),
        "IoU [N, M] of xyxy boxes a [N, 4] and b [M, 4] (float32 or float64, as a)");
}
