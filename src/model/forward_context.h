// What every block's forward needs besides its weights: the kernel path and the worker threads.
#pragma once

#include "base/thread_pool.h"
#include "kernels/isa.h"

namespace ds {

struct ForwardContext {
  Isa isa = Isa::reference;
  ThreadPool* pool = nullptr;  // never null during a forward
  // Numerics option `bf16_activations=on` (docs/numerics.md): bf16-weight linears round their input
  // to bf16 and use the bf16 dot product (MatmulArgs::bf16_activations).
  bool bf16_activations = false;
};

}  // namespace ds
