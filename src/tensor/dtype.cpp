#include "tensor/dtype.h"

namespace ds {

namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
};
constexpr DTypeInfo kInfo[] = {
    {DType::f64, "F64", 8},   {DType::f32, "F32", 4},         {DType::f16, "F16", 2},
    {DType::bf16, "BF16", 2}, {DType::f8_e4m3, "F8_E4M3", 1}, {DType::f8_e8m0, "F8_E8M0", 1},
    {DType::i64, "I64", 8},   {DType::i32, "I32", 4},         {DType::i16, "I16", 2},
    {DType::i8, "I8", 1},     {DType::u8, "U8", 1},           {DType::boolean, "BOOL", 1},
};
}  // namespace

size_t dtype_size(DType t) {
  for (const auto& i : kInfo)
    if (i.type == t) return i.size;
  return 0;
}

std::string_view dtype_name(DType t) {
  for (const auto& i : kInfo)
    if (i.type == t) return i.name;
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& i : kInfo)
    if (i.name == name) return i.type;
  return std::nullopt;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_f32(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    const float mag = static_cast<float>(man) * 0x1p-24f;
    return sign ? -mag : mag;
  }
  return bits_to_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t f32_to_f16(float f) {
  const uint32_t b = f32_to_bits(f);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  const float a = std::fabs(f);
  if (std::isnan(f)) return sign | 0x7e00u;
  if (a >= 65520.0f) return sign | 0x7c00u;  // rounds to inf
  if (a < 0x1p-14f) {
    // Subnormal: value = m * 2^-24, round to nearest even via nearbyint (default mode RNE).
    const float m = std::nearbyint(a * 0x1p24f);
    return sign | static_cast<uint16_t>(m);
  }
  uint32_t ab = b & 0x7fffffffu;
  ab += 0xfffu + ((ab >> 13) & 1u);  // RNE on the 13 dropped bits
  const uint32_t exp = (ab >> 23) - 112;
  return sign | static_cast<uint16_t>((exp << 10) | ((ab >> 13) & 0x3ffu));
}

uint8_t f32_to_fp8_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  float a = std::fabs(f);
  if (a >= 448.0f) return sign | 0x7e;  // saturate to max finite
  if (a < 0x1p-6f) {
    // Subnormals: step 2^-9. nearbyint rounds half to even in the default rounding mode.
    const float m = std::nearbyint(a * 0x1p9f);  // 0..8 (8 == smallest normal 2^-6)
    return sign | static_cast<uint8_t>(m);
  }
  uint32_t ab = f32_to_bits(a);
  ab += 0x7ffffu + ((ab >> 20) & 1u);     // RNE on the 20 dropped mantissa bits
  const uint32_t exp = (ab >> 23) - 120;  // rebias 127 -> 7
  const uint32_t code = (exp << 3) | ((ab >> 20) & 7u);
  if (code > 0x7e) return sign | 0x7e;
  return sign | static_cast<uint8_t>(code);
}

}  // namespace ds
