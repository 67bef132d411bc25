// The blocking of mhc_mix (kernels/mhc.h) shared by the x86 paths: outputs in blocks of up to four
// vectors, one pass over v per block, the index-order sum of squares taken in the first pass.
// A path supplies Path::kLanes (f64 lanes per vector) and
// Path::block<Q, kSquares>(fn_t, n, n_out, o0, o_end, v, sums): the sums of outputs [o0, o_end)
// (o_end - o0 <= Q·kLanes) in index order, returning the sum of squares when kSquares (else 0).
// Include only from files compiled with the path's flags.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace ds::x86_mhc {

template <class Path, bool kSquares>
double mix_pass(int q, const float* fn_t, int64_t n, int64_t n_out, int64_t o0, int64_t o_end, const float* v,
                double* sums) {
  switch (q) {
    case 1:
      return Path::template block<1, kSquares>(fn_t, n, n_out, o0, o_end, v, sums);
    case 2:
      return Path::template block<2, kSquares>(fn_t, n, n_out, o0, o_end, v, sums);
    case 3:
      return Path::template block<3, kSquares>(fn_t, n, n_out, o0, o_end, v, sums);
    default:
      return Path::template block<4, kSquares>(fn_t, n, n_out, o0, o_end, v, sums);
  }
}

template <class Path>
void mhc_mix(const float* fn_t, int64_t n, int64_t n_out, const float* v, double eps, double* mixes) {
  constexpr int64_t kBlock = 4 * Path::kLanes;  // 4 accumulators per pass over v
  double ss = 0;
  for (int64_t o0 = 0; o0 < n_out; o0 += kBlock) {
    const int64_t o_end = std::min(n_out, o0 + kBlock);
    const int q = static_cast<int>((o_end - o0 + Path::kLanes - 1) / Path::kLanes);
    if (o0 == 0) {
      ss = mix_pass<Path, true>(q, fn_t, n, n_out, o0, o_end, v, mixes);
    } else {
      mix_pass<Path, false>(q, fn_t, n, n_out, o0, o_end, v, mixes);
    }
  }
  const double rho = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (int64_t o = 0; o < n_out; ++o) mixes[o] *= rho;
}

}  // namespace ds::x86_mhc
