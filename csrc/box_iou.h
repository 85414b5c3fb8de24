// IoU of xyxy boxes, shared by box_iou.cpp and average_precision.cpp.
// Operation order follows pycocotools' bbIou (union = area_a + area_b - inter), so float64
// results agree with it bit for bit whenever x0 + (x1 - x0) == x1 exactly.
#pragma once
#include <algorithm>
#include <cstddef>

namespace icl {

template <typename T>
struct Box {
  T x0, y0, x1, y1;
  T area() const { return (x1 - x0) * (y1 - y0); }
};

// One row of the IoU matrix: box a against m boxes given as separate coordinate arrays.
// Disjoint pairs and zero-area boxes give exactly 0.
template <typename T>
inline void iou_row(const Box<T>& a, const T* bx0, const T* by0, const T* bx1, const T* by1,
                    const T* barea, std::ptrdiff_t m, T* __restrict__ out) {
  const T area_a = a.area();
  for (std::ptrdiff_t j = 0; j < m; ++j) {
    const T w = std::max(std::min(a.x1, bx1[j]) - std::max(a.x0, bx0[j]), T(0));
    const T h = std::max(std::min(a.y1, by1[j]) - std::max(a.y0, by0[j]), T(0));
    const T inter = w * h;
    // inter > 0 implies a positive union; inter == 0 gives 0 / positive = 0, or 0 / 0 = NaN
    // when both boxes have zero area, which max(0, NaN) turns into 0. Branch-free, so the
    // loop vectorises (a select on inter > 0 around the division does not).
    out[j] = std::max(T(0), inter / (area_a + barea[j] - inter));
  }
}

}  // namespace icl
