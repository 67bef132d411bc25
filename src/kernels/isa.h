// Instruction-set paths for the kernels, chosen at run time from CPUID.
// Every kernel family has one implementation per Isa; tests force each path.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace ds {

enum class Isa { reference, avx2, avx512 };

// Every path, in order of preference from last to first: the one list tests and benches iterate
// (a test runs each entry the CPU supports and reports the others as skipped). Adding a path is
// one enum value, one entry here, and its kernel table (kernels/kernel_table.h).
inline constexpr Isa kAllIsas[] = {Isa::reference, Isa::avx2, Isa::avx512};

// avx2: AVX2 + FMA + F16C. avx512: AVX-512 F/BW/DQ/VL (+ BF16/VNNI where a kernel uses them;
// such kernels check has_avx512_bf16()/has_avx512_vnni() themselves).
bool isa_supported(Isa isa);
Isa best_isa();
// The entries of kAllIsas this CPU supports (reference first).
std::vector<Isa> supported_isas();
bool cpu_has_avx512_bf16();
bool cpu_has_avx512_vnni();
bool cpu_has_avx512_fp16();

std::string_view isa_name(Isa isa);  // "reference", "avx2", "avx512"
std::optional<Isa> isa_from_name(std::string_view name);

}  // namespace ds
