// Scalar references for the attention kernels (contracts in kernels/attention.h). Each
// (query, head) is computed by one task in a fixed order: scores for every visible row in row
// order, their max, expf(s − max) summed in row order, then Σ_j e_j·v_j in row order, divided by
// the sum at the end. A head with no visible row (cannot happen for valid positions) gives zeros.
#pragma once

#include "base/thread_pool.h"
#include "kernels/attention.h"

namespace ds::ref {

void mla_attention_absorbed(ThreadPool& pool, const MlaAbsorbedArgs& a);
void mha_attention(ThreadPool& pool, const MhaArgs& a);

}  // namespace ds::ref
