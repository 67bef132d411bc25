// Software prefetch of W rows for tiles that stream them from DRAM.
//
// A tile reads NR consecutive W rows side by side, and the next tile the NR rows after them.
// RowPrefetch::streaming keeps each row's prefetch `distance` bytes ahead of its reads, and past the
// row's end continues in the matching row of the next tile ((NR - 1) rows further on): every stream
// runs ahead across tile boundaries instead of starting cold there. That matters for short rows: the
// hardware prefetchers stop at 4 KiB page boundaries, and a 2-4 KiB row (a 2048-column bf16 or FP8
// matrix) is a page or less, so without it each tile began with NR demand misses
// (matmul_cpu_bench --paired-reads: bf16 GEMV at 2048 columns 0.77-0.83 -> 0.90-0.96 of the read
// rate of the same moment, Zen 5). tile_ahead prefetches the same offset one tile ahead.
// Prefetches past the end of W are harmless (a prefetch never faults).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <limits>

namespace ds::x86_prefetch {

struct RowPrefetch {
  int64_t distance = 0;
  int64_t row_bytes = std::numeric_limits<int64_t>::max();  // past this offset: the next tile's row
  int64_t next_tile_skip = 0;                               // (NR - 1) rows

  static RowPrefetch streaming(int nr, int64_t row_bytes, int64_t distance) {
    return {distance, row_bytes, (nr - 1) * row_bytes};
  }
  static RowPrefetch tile_ahead(int nr, int64_t row_bytes) { return {nr * row_bytes}; }

  // The byte to prefetch for a row that has been read up to byte `at`.
  inline __attribute__((always_inline)) const char* target(const void* row, int64_t at) const {
    int64_t off = at + distance;
    if (off >= row_bytes) off += next_tile_skip;
    return static_cast<const char*>(row) + off;
  }
  inline __attribute__((always_inline)) void touch(const void* row, int64_t at) const {
    _mm_prefetch(target(row, at), _MM_HINT_T0);
  }
};

// The in-row distance the streaming prefetch uses for GEMV tiles (m = 1 or a few rows): swept at
// 256-2048 B on bf16 rows of 1408-7168 columns, 512 B was best or within noise of it everywhere.
inline constexpr int64_t kStreamDistance = 512;

}  // namespace ds::x86_prefetch
