#include "sampling/sampler_loops.h"

#include "sampling/sampler_loops_impl.h"

namespace ds {

const SamplerLoops& reference_sampler_loops() { return sampler_loops_impl::kLoops; }

const SamplerLoops& sampler_loops(Isa isa) {
  switch (isa) {
    case Isa::avx512:
      return avx512_sampler_loops();
    case Isa::avx2:
      return avx2_sampler_loops();
    case Isa::reference:
      break;
  }
  return reference_sampler_loops();
}

}  // namespace ds
