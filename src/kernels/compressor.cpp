#include "kernels/compressor.h"

#include <algorithm>

#include "base/assert.h"
#include "kernels/ref/v4_attention_ref.h"
#include "kernels/x86/avx2/v4_attention_avx2.h"
#include "kernels/x86/avx512/v4_attention_avx512.h"

namespace ds {

int64_t compressor_n_entries(const CompressorArgs& a) {
  if (a.ratio <= 0) return 0;
  const int64_t prev_rows = (a.overlap && a.first_has_prev) ? a.ratio : 0;
  return std::max<int64_t>(0, (a.n_rows - prev_rows) / a.ratio);
}

void compressor_pool(Isa isa, ThreadPool& pool, const CompressorArgs& a) {
  DS_ASSERT(a.ratio >= 1 && a.ratio <= kCompressorMaxRatio, "compressor ratio outside [1, 128]");
  DS_ASSERT(a.d_c >= 1 && a.ld >= (a.overlap ? 2 : 1) * int64_t{a.d_c}, "compressor row stride too small");
  const int64_t n_entries = compressor_n_entries(a);
  if (n_entries == 0) return;
  auto run = [&](int64_t entry) {
    switch (isa) {
      case Isa::avx512:
        return avx512::compressor_entry(a, entry);
      case Isa::avx2:
        return avx2::compressor_entry(a, entry);
      case Isa::reference:
        return ref::compressor_entry(a, entry);
    }
  };
  if (n_entries == 1) return run(0);
  pool.parallel_for(n_entries, run);
}

}  // namespace ds
