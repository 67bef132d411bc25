// Where the W-row prefetch streams point (kernels/x86/row_prefetch.h). A prefetch never
// changes a result, so the matmul tests cannot see a wrong address: these pin the addresses.
#include "kernels/x86/row_prefetch.h"

#include <gtest/gtest.h>

#include <vector>

namespace ds {
namespace {

using x86_prefetch::RowPrefetch;

TEST(RowPrefetch, StreamingRunsAheadInTheRowThenInTheNextTilesRow) {
  constexpr int kRows = 8;
  constexpr int64_t kRowBytes = 2048;
  std::vector<char> w(kRows * kRowBytes * 3);
  const RowPrefetch p = RowPrefetch::streaming(kRows, kRowBytes, 512);
  for (int j = 0; j < kRows; ++j) {
    const char* row = w.data() + j * kRowBytes;
    EXPECT_EQ(p.target(row, 0), row + 512);
    EXPECT_EQ(p.target(row, 1535), row + 2047);  // the row's last byte
    // Past the row's end: the same row of the next tile, which starts kRows rows further on.
    const char* next_tile_row = row + kRows * kRowBytes;
    EXPECT_EQ(p.target(row, 1536), next_tile_row);
    EXPECT_EQ(p.target(row, 2047), next_tile_row + 511);
  }
}

TEST(RowPrefetch, StreamingOverSingleRowsIsPlainReadAhead) {
  // The ragged tail of a strip runs 1-row tiles: the next tile's row is the next row.
  std::vector<char> w(4096);
  const RowPrefetch p = RowPrefetch::streaming(1, 1000, 512);
  EXPECT_EQ(p.target(w.data(), 600), w.data() + 1112);
}

TEST(RowPrefetch, TileAheadIsTheSameOffsetOneTileOn) {
  std::vector<char> w(6 * 300 * 2);
  const RowPrefetch p = RowPrefetch::tile_ahead(6, 300);
  EXPECT_EQ(p.target(w.data() + 300, 17), w.data() + 300 + 17 + 6 * 300);
  EXPECT_EQ(p.target(w.data(), 299), w.data() + 299 + 6 * 300);
}

}  // namespace
}  // namespace ds
