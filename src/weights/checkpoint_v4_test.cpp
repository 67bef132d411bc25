// V4 tensor formats through the loader: packed FP4 experts (nibble order, E8M0 exactness, no
// copy), E8M0 NaN scales, hash-routing tables and F32 parameters.
#include <gtest/gtest.h>

#include <cmath>

#include "weights/checkpoint.h"
#include "weights/safetensors_writer.h"
#include "weights/weights_test_util.h"

namespace ds {
namespace {

using testing_util::ScratchDir;
using testing_util::to_bytes;

// The value model-spec §3/§6.3 defines for an FP4 element, written out independently of dtype.h:
// sign bit 3, magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6}, times 2^(scale_byte - 127).
double spec_fp4(uint8_t nibble, uint8_t scale_byte) {
  static const double kMag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  const double m = kMag[nibble & 7] * std::ldexp(1.0, scale_byte - 127);
  return (nibble & 8) ? -m : m;
}

// W[r, c] through the WeightMatrix contract for fp4_e2m1_block (weight_matrix.h).
float fp4_element(const WeightMatrix& m, int64_t r, int64_t c) {
  const auto* bytes = static_cast<const uint8_t*>(m.data);
  const uint8_t byte = bytes[r * (m.cols / 2) + c / 2];
  const uint8_t nibble = (c % 2 == 0) ? (byte & 0x0f) : (byte >> 4);
  return fp4_e2m1_to_f32(nibble) * e8m0_to_f32(m.scales_e8m0[r * m.scale_cols() + c / m.block_cols]);
}

class V4Tensors : public ::testing::Test {
 protected:
  Checkpoint open() {
    EXPECT_TRUE(w_.write(dir_.file("model.safetensors")).ok());
    auto c = Checkpoint::open(dir_.path().string());
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return std::move(*c);
  }
  void add(const std::string& name, DType dtype, const Shape& shape, std::vector<uint8_t> bytes) {
    ASSERT_TRUE(w_.add(name, dtype, shape, std::move(bytes)).ok()) << name;
  }
  void expect_error(const Status& s, ErrorCode code, const std::vector<std::string>& parts) {
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), code) << s.to_string();
    for (const auto& p : parts) EXPECT_NE(s.message().find(p), std::string::npos) << s.message();
  }

  ScratchDir dir_;
  SafetensorsWriter w_;
};

// [2, 64]: byte k of a row holds element 2k in its low nibble, 2k+1 in its high nibble. Scales
// span the E8M0 range (0 = 2^-127 up to 252 = 2^125, whose ×6 is still a finite float) so
// conversion must be exact.
TEST_F(V4Tensors, Fp4NibbleOrderAndE8m0ScalesAreExactAndNotCopied) {
  constexpr int64_t kRows = 2, kCols = 64;
  std::vector<uint8_t> packed(kRows * kCols / 2);
  for (size_t k = 0; k < packed.size(); ++k) {
    const uint8_t lo = static_cast<uint8_t>(k % 16);
    const uint8_t hi = static_cast<uint8_t>((k * 7 + 3) % 16);
    packed[k] = static_cast<uint8_t>(lo | (hi << 4));
  }
  const std::vector<uint8_t> scales = {127, 0, 252, 120};  // [2, 2]: 1, 2^-127, 2^125, 2^-7
  add("experts.0.w1.weight", DType::i8, {kRows, kCols / 2}, packed);
  add("experts.0.w1.scale", DType::f8_e8m0, {kRows, kCols / 32}, scales);
  Checkpoint c = open();
  std::vector<float> storage;
  auto m = load_linear(c, "experts.0.w1", kRows, kCols, /*block=*/128, storage);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->format, WeightFormat::fp4_e2m1_block);
  EXPECT_EQ(m->rows, kRows);
  EXPECT_EQ(m->cols, kCols);
  EXPECT_EQ(m->block_rows, 1);
  EXPECT_EQ(m->block_cols, 32);
  EXPECT_EQ(m->data, c.find("experts.0.w1.weight")->data);
  EXPECT_EQ(m->scales_e8m0, c.find("experts.0.w1.scale")->data);  // straight into the mapping
  EXPECT_EQ(m->scales, nullptr);
  EXPECT_TRUE(storage.empty());
  EXPECT_EQ(m->stored_bytes(), kRows * kCols / 2 + 4);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t col = 0; col < kCols; ++col) {
      const size_t k = static_cast<size_t>(r * kCols / 2 + col / 2);
      const uint8_t nibble =
          col % 2 == 0 ? static_cast<uint8_t>(k % 16) : static_cast<uint8_t>((k * 7 + 3) % 16);
      const uint8_t scale = scales[static_cast<size_t>(r * 2 + col / 32)];
      EXPECT_EQ(static_cast<double>(fp4_element(*m, r, col)), spec_fp4(nibble, scale)) << r << "," << col;
    }
  }
  // Spot values: row 0 byte 1 = 0x?1 | hi (1*7+3)%16 = 10 -> element 2 = +0.5, element 3 = -1.0.
  EXPECT_EQ(fp4_element(*m, 0, 2), 0.5f);
  EXPECT_EQ(fp4_element(*m, 0, 3), -1.0f);
}

TEST_F(V4Tensors, Fp4ShapeDtypeAndMissingScaleErrorsNameTheTensor) {
  add("a.weight", DType::i8, {4, 16}, std::vector<uint8_t>(64, 0x11));  // no scale
  add("b.weight", DType::i8, {4, 16}, std::vector<uint8_t>(64, 0x11));
  add("b.scale", DType::f8_e8m0, {4, 2}, std::vector<uint8_t>(8, 127));  // should be [4, 1]
  add("c.weight", DType::i8, {4, 16}, std::vector<uint8_t>(64, 0x11));
  add("c.scale", DType::u8, {4, 1}, std::vector<uint8_t>(4, 127));
  add("d.weight", DType::i8, {4, 16}, std::vector<uint8_t>(64, 0x11));
  add("d.scale", DType::f8_e8m0, {4, 1}, {127, 127, 255, 127});
  Checkpoint c = open();
  std::vector<float> storage;
  expect_error(load_linear(c, "a", 4, 32, 128, storage).status(), ErrorCode::weights_missing_tensor,
               {"'a.weight' is packed FP4 (I8)", "'a.scale' does not exist"});
  expect_error(load_linear(c, "b", 4, 32, 128, storage).status(), ErrorCode::weights_shape_mismatch,
               {"'b.scale'", "expected F8_E8M0 [4, 1], got F8_E8M0 [4, 2]"});
  expect_error(load_linear(c, "c", 4, 32, 128, storage).status(), ErrorCode::weights_shape_mismatch,
               {"'c.scale'", "expected F8_E8M0 [4, 1], got U8 [4, 1]"});
  expect_error(load_linear(c, "a", 4, 64, 128, storage).status(), ErrorCode::weights_shape_mismatch,
               {"'a.weight'", "expected I8 [4, 32] (packed FP4 E2M1), got I8 [4, 16]"});
  expect_error(load_linear(c, "a", 8, 16, 128, storage).status(), ErrorCode::weights_shape_mismatch,
               {"'a.weight'", "in_features a multiple of 32"});
  // A NaN scale byte is a load error naming the scale tensor and the tile.
  expect_error(load_linear(c, "d", 4, 32, 128, storage).status(), ErrorCode::weights_bad_tensor,
               {"'d.scale'", "E8M0 scale byte 255 (NaN) at [2, 0]"});
}

TEST_F(V4Tensors, Fp8WithANanE8m0ScaleIsALoadError) {
  add("l.weight", DType::f8_e4m3, {5, 9}, std::vector<uint8_t>(45, 0x38));
  add("l.scale", DType::f8_e8m0, {2, 3}, {127, 127, 127, 127, 127, 255});
  Checkpoint c = open();
  std::vector<float> storage;
  expect_error(load_linear(c, "l", 5, 9, 4, storage).status(), ErrorCode::weights_bad_tensor,
               {"'l.scale'", "E8M0 scale byte 255 (NaN) at [1, 2]"});
}

TEST_F(V4Tensors, ExpertIdTablesAcceptI64AndI32AndCheckEveryId) {
  const std::vector<int64_t> ids64 = {0, 5, 7, 1, 3, 3};  // [3 tokens, 2]
  add("l0.tid2eid", DType::i64, {3, 2}, to_bytes(ids64));
  add("l1.tid2eid", DType::i32, {3, 2}, to_bytes(std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  add("bad.tid2eid", DType::i64, {3, 2}, to_bytes(std::vector<int64_t>{0, 1, 2, 3, 8, 0}));
  add("neg.tid2eid", DType::i64, {3, 2}, to_bytes(std::vector<int64_t>{0, -1, 2, 3, 4, 0}));
  Checkpoint c = open();
  auto a = load_expert_id_table(c, "l0.tid2eid", 3, 2, 8);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(*a, (std::vector<int32_t>{0, 5, 7, 1, 3, 3}));
  auto b = load_expert_id_table(c, "l1.tid2eid", 3, 2, 8);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(*b, (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  expect_error(load_expert_id_table(c, "bad.tid2eid", 3, 2, 8).status(), ErrorCode::weights_bad_tensor,
               {"'bad.tid2eid'", "token 2 routes to expert 8, outside [0, 8)"});
  expect_error(load_expert_id_table(c, "neg.tid2eid", 3, 2, 8).status(), ErrorCode::weights_bad_tensor,
               {"token 0 routes to expert -1"});
  expect_error(load_expert_id_table(c, "l0.tid2eid", 3, 3, 8).status(), ErrorCode::weights_shape_mismatch,
               {"'l0.tid2eid'", "expected I64 [3, 3] (or I32), got I64 [3, 2]"});
  expect_error(load_expert_id_table(c, "none", 3, 2, 8).status(), ErrorCode::weights_missing_tensor,
               {"'none'"});
}

TEST_F(V4Tensors, F32ParamsMustBeF32AndFinite) {
  const std::vector<float> fn = {0.5f, -1.25f, 3.0f, 0.0f, 1e-3f, -7.0f};
  add("hc_attn_fn", DType::f32, {2, 3}, to_bytes(fn));
  add("attn_sink", DType::bf16, {2}, testing_util::bf16_bytes({1.0f, 2.0f}));
  add("ape", DType::f32, {2, 2}, to_bytes(std::vector<float>{1.0f, NAN, 0.0f, 2.0f}));
  Checkpoint c = open();
  auto a = load_f32_param(c, "hc_attn_fn", {2, 3});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(*a, fn);
  expect_error(load_f32_param(c, "hc_attn_fn", {3, 2}).status(), ErrorCode::weights_shape_mismatch,
               {"'hc_attn_fn'", "expected F32 [3, 2], got F32 [2, 3]"});
  expect_error(load_f32_param(c, "attn_sink", {2}).status(), ErrorCode::weights_shape_mismatch,
               {"'attn_sink'", "expected F32 [2], got BF16 [2]"});
  expect_error(load_f32_param(c, "ape", {2, 2}).status(), ErrorCode::weights_bad_tensor,
               {"'ape'", "element 1 is nan"});
}

}  // namespace
}  // namespace ds
