// DS_ASSERT: invariants only (never reachable from user input); always with a message.
#pragma once

#include <cstdio>
#include <cstdlib>

#define DS_ASSERT(cond, msg)                                                                     \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      std::fprintf(stderr, "%s:%d: invariant failed: %s: %s\n", __FILE__, __LINE__, #cond, msg); \
      std::abort();                                                                              \
    }                                                                                            \
  } while (0)
