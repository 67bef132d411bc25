#include "tensor/dtype.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ds {
namespace {

TEST(DType, NamesRoundTrip) {
  for (auto t : {DType::f32, DType::bf16, DType::f16, DType::f8_e4m3, DType::f8_e8m0, DType::i64, DType::i8,
                 DType::u8, DType::i32}) {
    auto back = dtype_from_name(dtype_name(t));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, t);
  }
  EXPECT_FALSE(dtype_from_name("F7").has_value());
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::f8_e4m3), 1u);
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between 1 and 1+2^-7: ties to even (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  // 1 + 3·2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6: rounds up to even.
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_f32(static_cast<uint16_t>(h));
    if (!std::isnan(f)) {
      EXPECT_EQ(f32_to_bf16(f), h);
    }
  }
}

TEST(DType, Fp8E4M3DecodesEveryCodeAndRoundTrips) {
  EXPECT_EQ(fp8_e4m3_to_f32(0x00), 0.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x38), 1.0f);     // exp 7, mant 0
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);   // max finite
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), 0x1p-9f);  // smallest subnormal
  EXPECT_EQ(fp8_e4m3_to_f32(0xb8), -1.0f);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0xff)));
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    const float f = fp8_e4m3_to_f32(static_cast<uint8_t>(c));
    if (f == 0.0f) continue;  // ±0 both decode to zero
    EXPECT_EQ(f32_to_fp8_e4m3(f), c) << "code " << c;
  }
  EXPECT_EQ(f32_to_fp8_e4m3(1000.0f), 0x7e);  // saturates
  EXPECT_EQ(f32_to_fp8_e4m3(-1000.0f), 0xfe);
  // 1.0625 is halfway between 1.0 (mant 0, even) and 1.125 (mant 1): ties to even.
  EXPECT_EQ(f32_to_fp8_e4m3(1.0625f), 0x38);
  EXPECT_EQ(f32_to_fp8_e4m3(1.1875f), 0x3a);  // halfway 1.125/1.25 -> 1.25 (even mant 2)
}

TEST(DType, E8M0AndFp4) {
  EXPECT_EQ(e8m0_to_f32(127), 1.0f);
  EXPECT_EQ(e8m0_to_f32(128), 2.0f);
  EXPECT_EQ(e8m0_to_f32(120), 0x1p-7f);
  EXPECT_TRUE(std::isnan(e8m0_to_f32(255)));
  EXPECT_EQ(fp4_e2m1_to_f32(0x7), 6.0f);
  EXPECT_EQ(fp4_e2m1_to_f32(0xf), -6.0f);
  EXPECT_EQ(fp4_e2m1_to_f32(0x3), 1.5f);
}

TEST(DType, F16RoundTrip) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (!std::isnan(f)) {
      EXPECT_EQ(f32_to_f16(f), h) << h;
    }
  }
}

}  // namespace
}  // namespace ds
