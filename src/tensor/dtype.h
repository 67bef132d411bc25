// Element types of checkpoints and activations, with exact scalar conversions.
// These scalar conversions are the reference every vectorised kernel is tested against.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace ds {

enum class DType : uint8_t {
  f64,
  f32,
  f16,
  bf16,
  f8_e4m3,  // FP8 E4M3FN: bias 7, max 448, no inf, S.1111.111 = NaN
  f8_e8m0,  // power-of-two scale byte: 2^(b-127), 255 = NaN
  i64,
  i32,
  i16,
  i8,  // also the storage of packed FP4 E2M1 (two per byte, low nibble first)
  u8,
  boolean,
};

// Bytes per element (packed FP4 is stored as i8: one byte holds two values).
size_t dtype_size(DType t);
// Safetensors spelling: "F32", "BF16", "F8_E4M3", "F8_E8M0", "I64", ...
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);

inline float bits_to_f32(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint32_t f32_to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// ---- bf16 ----
inline float bf16_to_f32(uint16_t h) { return bits_to_f32(static_cast<uint32_t>(h) << 16); }
// Round to nearest even; NaN stays NaN (quiet).
inline uint16_t f32_to_bf16(float f) {
  uint32_t b = f32_to_bits(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((b >> 16) | 0x40u);
  b += 0x7fffu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(b >> 16);
}
inline float round_to_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }
// The bf16 value nearest to a double (ties to even), without the double rounding of
// round_to_bf16(float(d)): d goes to f32 rounded to odd (a sticky last bit), which the f32 -> bf16
// step then rounds correctly (f32 keeps more than 2 bits beyond bf16's 8).
inline float round_to_bf16(double d) {
  float f = static_cast<float>(d);
  if (static_cast<double>(f) != d && std::isfinite(f) && f != 0.0f) {
    uint32_t bits = f32_to_bits(f);
    if ((bits & 1u) == 0) bits = std::fabs(d) > std::fabs(static_cast<double>(f)) ? bits + 1 : bits - 1;
    f = bits_to_f32(bits);
  }
  return round_to_bf16(f);
}

// ---- f16 (IEEE half) ----
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// ---- FP8 E4M3FN ----
inline float fp8_e4m3_to_f32(uint8_t v) {
  const uint32_t sign = (v & 0x80u) << 24;
  const uint32_t em = v & 0x7fu;
  if (em == 0x7fu) return bits_to_f32(sign | 0x7fc00000u);  // NaN
  // Place exponent+mantissa in the f32 field and rescale by 2^(127-7); handles subnormals too.
  const float mag = bits_to_f32(em << 20) * 0x1p120f;
  return sign ? -mag : mag;
}
// Round to nearest even, saturating to ±448 (the reference clamps before casting). NaN -> 0x7f.
uint8_t f32_to_fp8_e4m3(float f);

// ---- E8M0 scale ----
inline float e8m0_to_f32(uint8_t b) {
  if (b == 0xffu) return NAN;
  if (b == 0) return 0x1p-127f;
  return bits_to_f32(static_cast<uint32_t>(b) << 23);
}

// ---- FP4 E2M1 (one nibble; bit 3 is the sign) ----
inline float fp4_e2m1_to_f32(uint8_t nibble) {
  static constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float m = kMag[nibble & 7u];
  return (nibble & 8u) ? -m : m;
}

}  // namespace ds
