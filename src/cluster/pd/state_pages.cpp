#include "cluster/pd/state_pages.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace ds::pd {

int64_t state_pages_for(int64_t state_bytes, int64_t block_bytes) {
  if (state_bytes <= 0 || block_bytes <= 0) return 0;
  const auto total = static_cast<int64_t>(sizeof(uint64_t)) + state_bytes;
  return (total + block_bytes - 1) / block_bytes;
}

Result<std::vector<std::vector<std::byte>>> pack_state_pages(std::span<const std::byte> state,
                                                             int64_t block_bytes, int64_t n_pages) {
  const auto count = static_cast<uint64_t>(state.size());
  if (block_bytes <= 0 || static_cast<int64_t>(sizeof count + state.size()) > n_pages * block_bytes) {
    return Status(ErrorCode::transport_peer_mismatch, "a sequence state of " + std::to_string(state.size()) +
                                                          " bytes does not fit the " +
                                                          std::to_string(n_pages) + " state blocks granted");
  }
  std::vector<std::byte> flat(static_cast<size_t>(n_pages * block_bytes), std::byte{0});
  std::memcpy(flat.data(), &count, sizeof count);
  if (!state.empty()) std::memcpy(flat.data() + sizeof count, state.data(), state.size());
  std::vector<std::vector<std::byte>> pages;
  const auto bb = static_cast<size_t>(block_bytes);
  for (int64_t p = 0; p < n_pages; ++p) {
    const auto begin = flat.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(p) * bb);
    pages.emplace_back(begin, begin + static_cast<std::ptrdiff_t>(bb));
  }
  return pages;
}

Result<std::vector<std::byte>> unpack_state_pages(std::span<const std::byte* const> pages,
                                                  int64_t block_bytes, int64_t max_bytes) {
  const auto bb = static_cast<size_t>(std::max<int64_t>(0, block_bytes));
  if (pages.empty() || bb < sizeof(uint64_t))
    return Status(ErrorCode::transport_bad_message, "no state blocks to read the sequence state from");
  uint64_t count = 0;
  std::memcpy(&count, pages[0], sizeof count);
  if (count > static_cast<uint64_t>(max_bytes) || sizeof count + count > pages.size() * bb) {
    return Status(ErrorCode::transport_bad_message, "the state blocks announce " + std::to_string(count) +
                                                        " bytes of sequence state (at most " +
                                                        std::to_string(max_bytes) + ")");
  }
  std::vector<std::byte> state(static_cast<size_t>(count));
  size_t at = sizeof count;  // offset in the pages' concatenation
  for (size_t done = 0; done < state.size();) {
    const size_t page = at / bb, off = at % bb;
    const size_t n = std::min(bb - off, state.size() - done);
    std::memcpy(state.data() + done, pages[page] + off, n);
    done += n;
    at += n;
  }
  return state;
}

}  // namespace ds::pd
