// IoU of xyxy boxes, shared by box_iou.cpp and average_precision.cpp.
// Operation order follows pycocotools' bbIou (union = area_a + area_b - inter), so float64
// results agree with it bit for bit whenever x0 + (x1 - x0) == x1 exactly.
#pragma once
#include <cstddef>

namespace icl {

template <typename T>
struct Box {
  T x0, y0, x1, y1;
  T area() const { return (x1 - x0) * (y1 - y0); }
};

// One row of the IoU matrix: box a against m boxes given as separate coordinate arrays.
// Disjoint pairs and zero-area boxes give exactly 0 (never 0 / 0).
template <typename T>
inline void iou_row(const Box<T>& a, const T* bx0, const T* by0, const T* bx1, const T* by1,
                    const T* barea, std::ptrdiff_t m, T* __restrict__ out) {
  const T area_a = a.area();
#pragma omp simd
  for (std::ptrdiff_t j = 0; j < m; ++j) {
    T w = (a.x1 < bx1[j] ? a.x1 : bx1[j]) - (a.x0 > bx0[j] ? a.x0 : bx0[j]);
    T h = (a.y1 < by1[j] ? a.y1 : by1[j]) - (a.y0 > by0[j] ? a.y0 : by0[j]);
    w = w > 0 ? w : 0;
    h = h > 0 ? h : 0;
    const T inter = w * h;
    const T uni = area_a + barea[j] - inter;
    // Branch-free so the loop vectorises; inter > 0 implies uni > 0.
    out[j] = inter / (inter > 0 ? uni : T(1));
  }
}

}  // namespace icl
