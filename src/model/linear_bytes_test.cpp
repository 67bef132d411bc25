// A linear layer through append_linear_bytes / read_linear_bytes (live EPLB moves routed experts
// between ranks this way): for every weight format the copy must compute the original's bits, own
// its bytes (the source may go away), and a bad record must be refused, not read out of bounds.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/isa.h"
#include "model/linear.h"

namespace ds {
namespace {

// A matrix of the given format with random contents, in storage the test owns.
struct RandomWeight {
  Linear l;
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> e8m0;
};

RandomWeight random_weight(WeightFormat f, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  RandomWeight r;
  WeightMatrix& w = r.l.w;
  w.format = f;
  w.rows = rows;
  w.cols = cols;
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  switch (f) {
    case WeightFormat::f32: {
      r.bytes.resize(static_cast<size_t>(rows * cols) * 4);
      for (int64_t i = 0; i < rows * cols; ++i) {
        const float v = uni(rng);
        std::memcpy(r.bytes.data() + i * 4, &v, 4);
      }
      break;
    }
    case WeightFormat::bf16:
      r.bytes.resize(static_cast<size_t>(rows * cols) * 2);
      for (size_t i = 0; i < r.bytes.size(); i += 2) {
        r.bytes[i] = static_cast<uint8_t>(byte(rng));
        r.bytes[i + 1] = static_cast<uint8_t>(0x3c + byte(rng) % 4);  // |v| ~ 2^-7 .. 2^0
      }
      break;
    case WeightFormat::fp8_e4m3_block:
      w.block_rows = w.block_cols = 32;
      r.bytes.resize(static_cast<size_t>(rows * cols));
      for (uint8_t& b : r.bytes) b = static_cast<uint8_t>(byte(rng) & 0xf7);  // no NaN (0x7f / 0xff)
      r.l.scale_storage.resize(static_cast<size_t>(w.scale_rows() * w.scale_cols()));
      for (float& s : r.l.scale_storage) s = 0.01f + 0.1f * (uni(rng) + 1.0f);
      w.scales = r.l.scale_storage.data();
      break;
    case WeightFormat::fp4_e2m1_block:
      w.block_rows = 1;
      w.block_cols = kFp4BlockCols;
      r.bytes.resize(static_cast<size_t>(rows * cols / 2));
      for (uint8_t& b : r.bytes) b = static_cast<uint8_t>(byte(rng));
      r.e8m0.resize(static_cast<size_t>(rows * w.scale_cols()));
      for (uint8_t& s : r.e8m0) s = static_cast<uint8_t>(120 + byte(rng) % 8);
      w.scales_e8m0 = r.e8m0.data();
      break;
  }
  w.data = r.bytes.data();
  return r;
}

std::vector<float> apply(const WeightMatrix& w, const std::vector<float>& x, int64_t m, Isa isa) {
  ThreadPool pool(2);
  ForwardContext ctx;
  ctx.isa = isa;
  ctx.pool = &pool;
  std::vector<float> y(static_cast<size_t>(m * w.rows));
  linear(ctx, w, x.data(), m, w.cols, y.data(), w.rows);
  return y;
}

class LinearBytesTest : public ::testing::TestWithParam<WeightFormat> {};

TEST_P(LinearBytesTest, CopyComputesTheOriginalsBitsAndOwnsItsBytes) {
  const int64_t rows = 96, cols = 160, m = 5;
  RandomWeight src = random_weight(GetParam(), rows, cols, 7);
  std::vector<std::byte> bytes;
  append_linear_bytes(src.l, bytes);
  append_linear_bytes(src.l, bytes);  // two records back to back: offsets must chain

  std::vector<float> x(static_cast<size_t>(m * cols));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (float& v : x) v = uni(rng);
  const std::vector<float> want_ref = apply(src.l.w, x, m, Isa::reference);
  const std::vector<float> want_best = apply(src.l.w, x, m, best_isa());
  const std::vector<float> want_f32 = dequantize_to_f32(src.l.w);

  size_t at = 0;
  Result<Linear> a = read_linear_bytes(bytes, at, rows, cols);
  ASSERT_TRUE(a.ok()) << a.status().message();
  Result<Linear> b = read_linear_bytes(bytes, at);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(at, bytes.size());
  // The copies must not point into the record or the source.
  std::fill(bytes.begin(), bytes.end(), std::byte{0});
  std::fill(src.bytes.begin(), src.bytes.end(), uint8_t{0});
  std::fill(src.e8m0.begin(), src.e8m0.end(), uint8_t{0});
  std::fill(src.l.scale_storage.begin(), src.l.scale_storage.end(), 0.0f);
  for (const Linear* l : {&*a, &*b}) {
    EXPECT_EQ(l->w.format, GetParam());
    EXPECT_EQ(dequantize_to_f32(l->w), want_f32);
    EXPECT_EQ(apply(l->w, x, m, Isa::reference), want_ref);
    EXPECT_EQ(apply(l->w, x, m, best_isa()), want_best);
  }
  // Moving a Linear keeps its views valid (std::vector keeps its buffer on move).
  Linear moved = std::move(*a);
  EXPECT_EQ(apply(moved.w, x, m, best_isa()), want_best);
}

TEST_P(LinearBytesTest, BadRecordsAreRefused) {
  RandomWeight src = random_weight(GetParam(), 32, 64, 1);
  std::vector<std::byte> bytes;
  append_linear_bytes(src.l, bytes);
  size_t at = 0;
  Result<Linear> wrong_shape = read_linear_bytes(bytes, at, 64, 32);
  ASSERT_FALSE(wrong_shape.ok());
  EXPECT_EQ(wrong_shape.status().code(), ErrorCode::model_bad_input);
  EXPECT_NE(wrong_shape.status().message().find("expected [64, 32]"), std::string::npos);
  for (size_t cut : {size_t{0}, size_t{10}, bytes.size() - 1}) {
    std::vector<std::byte> truncated(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(cut));
    at = 0;
    Result<Linear> r = read_linear_bytes(truncated, at);
    ASSERT_FALSE(r.ok()) << "cut at " << cut;
    EXPECT_EQ(r.status().code(), ErrorCode::model_bad_input);
    EXPECT_EQ(at, 0u);
  }
  std::vector<std::byte> bad_magic = bytes;
  bad_magic[0] ^= std::byte{1};
  at = 0;
  EXPECT_FALSE(read_linear_bytes(bad_magic, at).ok());
  std::vector<std::byte> bad_rows = bytes;
  bad_rows[8] ^= std::byte{1};  // rows 32 -> 33: payload sizes no longer match
  at = 0;
  EXPECT_FALSE(read_linear_bytes(bad_rows, at).ok());
}

INSTANTIATE_TEST_SUITE_P(Formats, LinearBytesTest,
                         ::testing::Values(WeightFormat::f32, WeightFormat::bf16,
                                           WeightFormat::fp8_e4m3_block, WeightFormat::fp4_e2m1_block));

}  // namespace
}  // namespace ds
