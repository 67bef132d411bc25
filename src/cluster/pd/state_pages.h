// The sequence state's trip through a landing region (docs/pd.md, V4/V4.1): a prefill server's
// exported state (ModelRunner::export_sequence_state: window rings, compressor partial groups) is
// cut into block-sized pages — a u64 byte count, then the bytes, zero-padded — and put into the
// last KvGrant::state_blocks of the grant; the decode server reads it back from those blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace ds::pd {

// Pages of `block_bytes` that hold `state_bytes` bytes of state and its count (0 when the model
// keeps no state).
int64_t state_pages_for(int64_t state_bytes, int64_t block_bytes);

// `state` in `n_pages` pages; transport_peer_mismatch when it does not fit (the peers disagree on
// the model's state size).
Result<std::vector<std::vector<std::byte>>> pack_state_pages(std::span<const std::byte> state,
                                                             int64_t block_bytes, int64_t n_pages);

// The state back from its pages (each block_bytes long), at most max_bytes; transport_bad_message
// for a count beyond that or beyond the pages.
Result<std::vector<std::byte>> unpack_state_pages(std::span<const std::byte* const> pages,
                                                  int64_t block_bytes, int64_t max_bytes);

}  // namespace ds::pd
