// Top-k of a score row: indices of the k largest values, in descending value order; ties go to
// the lower index, NaN ranks below every number. Deterministic and independent of other rows.
#pragma once

#include <cstdint>

#include "kernels/isa.h"

namespace ds {

// k <= n. out_idx[k]; out_val[k] may be nullptr.
void topk(Isa isa, const float* scores, int64_t n, int64_t k, int32_t* out_idx, float* out_val);

}  // namespace ds
