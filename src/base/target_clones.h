// DS_TARGET_CLONES: compiles a plain loop for AVX-512, AVX2 and the baseline and lets the loader
// pick one (GCC/Clang ifunc), for small hot loops not worth hand-written kernels. Off under
// ThreadSanitizer: the ifunc resolvers run before the TSan runtime starts and crash the process
// before main.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define DS_TSAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DS_TSAN_BUILD 1
#endif
#endif

#if defined(DS_TSAN_BUILD)
#define DS_TARGET_CLONES
#else
#define DS_TARGET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
