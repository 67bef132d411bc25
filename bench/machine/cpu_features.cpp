#include "machine/cpu_features.h"

#include <cpuid.h>

#include <cstdint>
#include <cstring>

#include "kernels/isa.h"

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
  // The ISA answers come from the kernels' own detection (CPUID + XGETBV), so the benches and the
  // kernels can never disagree about which paths exist.
  CpuFeatures f;
  f.brand = brand_string();
  f.avx2 = isa_supported(Isa::avx2);
  f.avx512 = isa_supported(Isa::avx512);
  f.avx512_bf16 = f.avx512 && cpu_has_avx512_bf16();
  f.avx512_vnni = f.avx512 && cpu_has_avx512_vnni();
  f.avx512_fp16 = f.avx512 && cpu_has_avx512_fp16();
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
  return s.empty() ? "baseline" : s;
}

}  // namespace ds::bench
