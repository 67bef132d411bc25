// AVX512 attention kernels; same contracts as kernels/ref/attention_ref.h (fixed per-(query,
// head) operation order, independent of the batch and of the pool size).
// Compiled with AVX512 flags: call only when isa_supported(Isa::avx512).
#pragma once

#include "base/thread_pool.h"
#include "kernels/attention.h"

namespace ds::avx512 {

void mla_attention_absorbed(ThreadPool& pool, const MlaAbsorbedArgs& a);
void mha_attention(ThreadPool& pool, const MhaArgs& a);

}  // namespace ds::avx512
