#include "kernels/softmax.h"

#include "kernels/ref/ops_ref.h"
#include "kernels/x86/avx2/ops_avx2.h"
#include "kernels/x86/avx512/ops_avx512.h"

namespace ds {

void softmax(Isa isa, float* x, int64_t n) {
  switch (isa) {
    case Isa::avx512:
      return avx512::softmax(x, n);
    case Isa::avx2:
      return avx2::softmax(x, n);
    case Isa::reference:
      return ref::softmax(x, n);
  }
}

}  // namespace ds
