// The sampler loops compiled with avx512 flags; run only where isa_supported(Isa::avx512).
#include "sampling/sampler_loops_impl.h"

namespace ds {

const SamplerLoops& avx512_sampler_loops() { return sampler_loops_impl::kLoops; }

}  // namespace ds
