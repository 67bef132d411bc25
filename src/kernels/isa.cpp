// CPUID-based ISA detection. A feature counts only when the CPU reports it AND the OS saves the
// matching register state (XGETBV), otherwise the first wide instruction would fault.
#include "kernels/isa.h"

#include <cpuid.h>

#include <cstdint>
#include <iterator>

namespace ds {
namespace {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512dq = false;
  bool avx512vl = false;
  bool avx512_bf16 = false;
  bool avx512_vnni = false;
  bool avx512_fp16 = false;
  bool os_ymm = false;  // XCR0 bits 1,2: SSE + AVX state
  bool os_zmm = false;  // XCR0 bits 5,6,7: opmask + ZMM0-15 upper + ZMM16-31
};

uint64_t read_xcr0() {
  uint32_t eax = 0;
  uint32_t edx = 0;
  // xgetbv with ecx=0; encoded as bytes so baseline x86-64 flags suffice (no -mxsave).
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(1, 0, eax, ebx, ecx, edx);
  const bool osxsave = (ecx >> 27) & 1u;
  f.fma = (ecx >> 12) & 1u;
  f.f16c = (ecx >> 29) & 1u;
  const bool avx = (ecx >> 28) & 1u;
  if (osxsave && avx) {
    const uint64_t xcr0 = read_xcr0();
    f.os_ymm = (xcr0 & 0x6u) == 0x6u;
    f.os_zmm = f.os_ymm && (xcr0 & 0xe0u) == 0xe0u;
  }
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  f.avx2 = (ebx >> 5) & 1u;
  f.avx512f = (ebx >> 16) & 1u;
  f.avx512dq = (ebx >> 17) & 1u;
  f.avx512bw = (ebx >> 30) & 1u;
  f.avx512vl = (ebx >> 31) & 1u;
  f.avx512_vnni = (ecx >> 11) & 1u;
  f.avx512_fp16 = (edx >> 23) & 1u;
  const unsigned max_sub = eax;
  if (max_sub >= 1) {
    __cpuid_count(7, 1, eax, ebx, ecx, edx);
    f.avx512_bf16 = (eax >> 5) & 1u;
  }
  return f;
}

// Detection is a pure function of the CPU; cached in a function-local constant (initialised
// once, thread-safe, never mutated), not mutable global state.
const CpuFeatures& features() {
  static const CpuFeatures kFeatures = detect();
  return kFeatures;
}

bool has_avx2_path(const CpuFeatures& f) { return f.os_ymm && f.avx2 && f.fma && f.f16c; }
bool has_avx512_path(const CpuFeatures& f) {
  return has_avx2_path(f) && f.os_zmm && f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl;
}

}  // namespace

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::reference:
      return true;
    case Isa::avx2:
      return has_avx2_path(features());
    case Isa::avx512:
      return has_avx512_path(features());
  }
  return false;
}

Isa best_isa() {
  for (auto it = std::rbegin(kAllIsas); it != std::rend(kAllIsas); ++it) {
    if (isa_supported(*it)) return *it;
  }
  return Isa::reference;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> isas;
  for (Isa isa : kAllIsas) {
    if (isa_supported(isa)) isas.push_back(isa);
  }
  return isas;
}

bool cpu_has_avx512_bf16() { return has_avx512_path(features()) && features().avx512_bf16; }
bool cpu_has_avx512_vnni() { return has_avx512_path(features()) && features().avx512_vnni; }
bool cpu_has_avx512_fp16() { return has_avx512_path(features()) && features().avx512_fp16; }

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::reference:
      return "reference";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "unknown";
}

std::optional<Isa> isa_from_name(std::string_view name) {
  for (Isa isa : kAllIsas) {
    if (isa_name(isa) == name) return isa;
  }
  return std::nullopt;
}

}  // namespace ds
