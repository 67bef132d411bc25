// What the CPU lets this process execute (from kernels/isa.h) plus its brand string, for the
// bench reports.
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

  std::string summary() const;  // "avx2 avx512 avx512_bf16 avx512_vnni"
};

CpuFeatures detect_cpu_features();

}  // namespace ds::bench
