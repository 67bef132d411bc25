#include "kernels/quant_sim.h"

#include <algorithm>

#include "base/assert.h"
#include "kernels/kernel_table.h"
#include "tensor/dtype.h"

namespace ds {

QuantSimSpec v4_kv_fp8_spec() { return {QuantGrid::fp8_e4m3, QuantScaleRule::pow2, 64, 1e-4f}; }
QuantSimSpec v4_indexer_fp4_spec() {
  return {QuantGrid::fp4_e2m1, QuantScaleRule::pow2, 32, 6.0f * 0x1p-126f};
}
QuantSimSpec v41_window_fp8_spec() { return {QuantGrid::fp8_e4m3, QuantScaleRule::pow2, 32, 1e-4f}; }
QuantSimSpec v41_compressed_fp4_spec() {
  return {QuantGrid::fp4_e2m1, QuantScaleRule::e4m3, 16, 6.0f * 0x1p-9f};
}
QuantSimSpec v41_indexer_fp4_spec() {
  return {QuantGrid::fp4_e2m1, QuantScaleRule::pow2, 32, 6.0f * 0x1p-126f};
}

float quant_sim_block_scale(const QuantSimSpec& spec, float amax) {
  const float grid_max = spec.grid == QuantGrid::fp8_e4m3 ? 448.0f : 6.0f;
  const float a = std::max(amax, spec.amax_floor);
  if (spec.scale_rule == QuantScaleRule::e4m3) return fp8_e4m3_to_f32(f32_to_fp8_e4m3(a / grid_max));
  // fast_round_scale: the multiply by the f32 reciprocal, then ⌈log2⌉ from the bits.
  const uint32_t bits = f32_to_bits(a * (1.0f / grid_max));
  const int32_t e = static_cast<int32_t>((bits >> 23) & 0xffu) - 127 + ((bits & 0x7fffffu) != 0 ? 1 : 0);
  return bits_to_f32(static_cast<uint32_t>(std::clamp(e + 127, 1, 254)) << 23);
}

void quant_sim_rows(Isa isa, float* x, int64_t n_rows, int64_t n, int64_t ld, const QuantSimSpec& spec) {
  DS_ASSERT(spec.block > 0 && n % spec.block == 0, "quant_sim_rows: n must be a multiple of the block");
  kernel_table(isa).quant_sim_rows(x, n_rows, n, ld, spec);
}

}  // namespace ds
