// What every block's forward needs besides its weights: the kernel path, the worker threads and,
// under expert parallelism, the exchange the MoE layers send their routed rows through.
#pragma once

#include "base/thread_pool.h"
#include "kernels/isa.h"

namespace ds {

class ExpertExchange;

struct ForwardContext {
  Isa isa = Isa::reference;
  ThreadPool* pool = nullptr;  // never null during a forward
  // Set under expert parallelism (not owned; outlives the model): where routed experts run.
  ExpertExchange* expert_exchange = nullptr;
  // Numerics option `bf16_activations=on` (docs/numerics.md): linears over bf16, fp8 and fp4 weights
  // round their input and weights to bf16 and use the bf16 dot product (MatmulArgs::bf16_activations).
  bool bf16_activations = false;
};

}  // namespace ds
