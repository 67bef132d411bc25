#include "kernels/kernel_table.h"

namespace ds {

const KernelTable& kernel_table(Isa isa) {
  switch (isa) {
    case Isa::avx512:
      return avx512_kernel_table();
    case Isa::avx2:
      return avx2_kernel_table();
    case Isa::reference:
      break;
  }
  return reference_kernel_table();
}

}  // namespace ds
