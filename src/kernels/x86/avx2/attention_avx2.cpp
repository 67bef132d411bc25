#include "kernels/x86/avx2/attention_avx2.h"

#include "kernels/x86/attention_impl.h"
#include "kernels/x86/avx2/vec_avx2.h"

namespace ds::avx2 {
void mla_attention_absorbed(ThreadPool& pool, const MlaAbsorbedArgs& a) {
  x86_attention::mla_absorbed<Vec8>(pool, a);
}

void mha_attention(ThreadPool& pool, const MhaArgs& a) { x86_attention::mha<Vec8>(pool, a); }

}  // namespace ds::avx2
