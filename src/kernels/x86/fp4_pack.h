// Shared by the x86 FP4 GEMV/GEMM paths: the FP4 lane order and the activation packing it needs.
//
// A weight byte holds columns 2k (low nibble) and 2k+1 (high nibble). The vector paths widen L
// consecutive bytes to L lanes and decode the low nibbles as one vector and the high nibbles as
// a second one, so lane l of a 2L-column chunk sees columns 2l and 2l+1 (in that order). x is
// packed to match once per call: per 2L-column chunk, its L even columns, then its L odd ones.
// Packing only moves floats, so it cannot change a result bit.
#pragma once

#include <cstdint>

namespace ds::x86_fp4 {

// xp[r * ldp + c * 2L + l] = x[r * ldx + c * 2L + 2l], xp[... + L + l] = x[... + 2l + 1]
// (ldp: the packed rows' stride, cols unless given). cols must be a multiple of 2 * kLanes.
template <int kLanes>
inline void pack_x_rows(const float* x, int64_t ldx, int64_t n_rows, int64_t cols, float* xp,
                        int64_t ldp = 0) {
  if (ldp == 0) ldp = cols;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* src = x + r * ldx;
    float* dst = xp + r * ldp;
    for (int64_t c0 = 0; c0 < cols; c0 += 2 * kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        dst[c0 + l] = src[c0 + 2 * l];
        dst[c0 + kLanes + l] = src[c0 + 2 * l + 1];
      }
    }
  }
}

}  // namespace ds::x86_fp4
