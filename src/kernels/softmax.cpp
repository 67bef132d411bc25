#include "kernels/softmax.h"

#include "kernels/kernel_table.h"

namespace ds {

void softmax(Isa isa, float* x, int64_t n) { kernel_table(isa).softmax(x, n); }

}  // namespace ds
