// The sampler loops compiled with avx2 flags; run only where isa_supported(Isa::avx2).
#include "sampling/sampler_loops_impl.h"

namespace ds {

const SamplerLoops& avx2_sampler_loops() { return sampler_loops_impl::kLoops; }

}  // namespace ds
