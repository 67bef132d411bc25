#include "machine/cpu_features.h"

#include <cpuid.h>

#include <cstdint>
#include <cstring>

namespace ds::bench {
namespace {

struct Regs {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Regs cpuid(uint32_t leaf, uint32_t subleaf) {
  Regs r;
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

uint64_t xgetbv0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

bool bit(uint32_t reg, int i) { return (reg >> i) & 1u; }

std::string brand_string() {
  if (cpuid(0x80000000u, 0).eax < 0x80000004u) return "unknown";
  char buf[49] = {};
  for (uint32_t i = 0; i < 3; ++i) {
    const Regs r = cpuid(0x80000002u + i, 0);
    std::memcpy(buf + 16 * i + 0, &r.eax, 4);
    std::memcpy(buf + 16 * i + 4, &r.ebx, 4);
    std::memcpy(buf + 16 * i + 8, &r.ecx, 4);
    std::memcpy(buf + 16 * i + 12, &r.edx, 4);
  }
  std::string s(buf);
  const auto first = s.find_first_not_of(' ');
  const auto last = s.find_last_not_of(' ');
  return first == std::string::npos ? "unknown" : s.substr(first, last - first + 1);
}

}  // namespace

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
  f.brand = brand_string();
  const uint32_t max_leaf = cpuid(0, 0).eax;
  if (max_leaf < 7) return f;
  const Regs l1 = cpuid(1, 0);
  const bool osxsave = bit(l1.ecx, 27);
  if (!osxsave) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool os_ymm = (xcr0 & 0x6) == 0x6;              // SSE + AVX state
  const bool os_zmm = os_ymm && (xcr0 & 0xe0) == 0xe0;  // opmask + ZMM_Hi256 + Hi16_ZMM
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;      // XTILECFG + XTILEDATA
  const Regs l7 = cpuid(7, 0);
  const Regs l7s1 = cpuid(7, 1);
  const bool fma = bit(l1.ecx, 12), f16c = bit(l1.ecx, 29), avx = bit(l1.ecx, 28);
  f.avx2 = os_ymm && avx && fma && f16c && bit(l7.ebx, 5);
  f.avx512 = os_zmm && bit(l7.ebx, 16) && bit(l7.ebx, 17) && bit(l7.ebx, 30) && bit(l7.ebx, 31);
  f.avx512_vnni = f.avx512 && bit(l7.ecx, 11);
  f.avx512_bf16 = f.avx512 && bit(l7s1.eax, 5);
  f.avx512_fp16 = f.avx512 && bit(l7.edx, 23);
  f.amx = os_amx && bit(l7.edx, 24) && bit(l7.edx, 22) && bit(l7.edx, 25);
  return f;
}

std::string CpuFeatures::summary() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(avx2, "avx2");
  add(avx512, "avx512");
  add(avx512_bf16, "avx512_bf16");
  add(avx512_vnni, "avx512_vnni");
  add(avx512_fp16, "avx512_fp16");
  add(amx, "amx");
  return s.empty() ? "baseline" : s;
}

}  // namespace ds::bench
