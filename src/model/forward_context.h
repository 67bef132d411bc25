// What every block's forward needs besides its weights: the kernel path and the worker threads.
#pragma once

#include "base/thread_pool.h"
#include "kernels/isa.h"

namespace ds {

struct ForwardContext {
  Isa isa = Isa::reference;
  ThreadPool* pool = nullptr;  // never null during a forward
};

}  // namespace ds
