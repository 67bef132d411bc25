// Quantise-dequantise simulations that are part of the V4 / V4.1 model (model-spec §3): a row is
// cut into blocks; each block gets one scale from its absolute maximum, each element is divided
// by the scale, clamped to the format's range, rounded to nearest-even on the format's grid and
// multiplied back. The output stays f32 (every result is exactly representable in bf16).
//
// Scale rules:
//   pow2 (the official kernels' `fast_round_scale`): a = max(amax, amax_floor) · f32(1/max);
//     s = 2^e with e = (biased exponent of a) − 127 + (mantissa of a ≠ 0), i.e. ⌈log2 a⌉ taken
//     exactly from the bits (a is a normal f32 for every floor below);
//   e4m3 (V4.1 compressed KV, FP4 with 16-element blocks): s = e4m3_rne(max(amax, amax_floor) / max).
// Grids: fp8 E4M3 (max 448, quantum 2^(max(⌊log2|q|⌋, −6) − 3)); fp4 E2M1 (max 6, values
// {0, 0.5, 1, 1.5, 2, 3, 4, 6}). y = round(clamp(x / s, ±max)) · s in f32.
// A block holding NaN or ±Inf becomes all NaN (as in the official code, where amax = Inf makes
// s = Inf and every x / s either 0 · Inf or Inf / Inf).
//
// Every path performs the same f32 operations per element (the division and the final product
// are correctly rounded, the grid rounding is exact), so paths are bit-identical to the
// reference and rows are independent.
#pragma once

#include <cstdint>

#include "kernels/isa.h"

namespace ds {

enum class QuantGrid : uint8_t { fp8_e4m3, fp4_e2m1 };
enum class QuantScaleRule : uint8_t { pow2, e4m3 };

struct QuantSimSpec {
  QuantGrid grid = QuantGrid::fp8_e4m3;
  QuantScaleRule scale_rule = QuantScaleRule::pow2;
  int32_t block = 128;       // elements per scale
  float amax_floor = 1e-4f;  // amax is raised to at least this (keeps s > 0 for all-zero blocks)
};

// The simulations V4 / V4.1 use (model-spec §3).
QuantSimSpec v4_kv_fp8_spec();           // fp8, 64-element blocks, pow2, floor 1e-4 (first 448 channels)
QuantSimSpec v4_indexer_fp4_spec();      // fp4, 32-element blocks, pow2, floor 6 · 2^-126
QuantSimSpec v41_window_fp8_spec();      // fp8, 32-element blocks, pow2, floor 1e-4
QuantSimSpec v41_compressed_fp4_spec();  // fp4, 16-element blocks, e4m3 scales, floor 6 · 2^-9
QuantSimSpec v41_indexer_fp4_spec();     // fp4, 32-element blocks, pow2, floor 6 · 2^-126

// The block's scale (shared by every path; exposed for tests and for code that stores the
// quantised bytes instead of simulating).
float quant_sim_block_scale(const QuantSimSpec& spec, float amax);

// x: [n_rows, n] with row stride ld, in place. n must be a multiple of spec.block (> 0).
void quant_sim_rows(Isa isa, float* x, int64_t n_rows, int64_t n, int64_t ld, const QuantSimSpec& spec);

}  // namespace ds
