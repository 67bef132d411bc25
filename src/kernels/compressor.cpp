#include "kernels/compressor.h"

#include <algorithm>

#include "base/assert.h"
#include "kernels/kernel_table.h"

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
  const auto entry_fn = kernel_table(isa).compressor_entry;
  auto run = [&](int64_t entry) { entry_fn(a, entry); };
  if (n_entries == 1) return run(0);
  pool.parallel_for(n_entries, run);
}

}  // namespace ds
