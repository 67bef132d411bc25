// What the CPU (and the OS, via XCR0) lets this process execute, read once from CPUID.
// The benches carry their own detection so the peak measurements do not depend on the
// kernels library being built; it answers the same questions as kernels/isa.h.
#pragma once

#include <string>

namespace ds::bench {

struct CpuFeatures {
  std::string brand;    // "AMD EPYC 9B45" (CPUID brand string, trimmed)
  bool avx2 = false;    // AVX2 + FMA + F16C, OS saves ymm state
  bool avx512 = false;  // AVX-512 F/BW/DQ/VL, OS saves zmm state
  bool avx512_bf16 = false;
  bool avx512_vnni = false;
  bool avx512_fp16 = false;
  bool amx = false;  // AMX-TILE/BF16/INT8 (reported only; no loop uses it)

  std::string summary() const;  // "avx2 avx512 avx512_bf16 avx512_vnni"
};

CpuFeatures detect_cpu_features();

}  // namespace ds::bench
