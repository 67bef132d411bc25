// Same-host shared pages (shared_pages.h): what a decode server allocates from its segment, a peer
// maps through /proc/<pid>/fd/<fd> and writes; the writes are the owner's bytes. A reference with
// another token, pid or size is refused, and released ranges are no longer shared.
#include "transport/shared_pages.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace ds::transport {
namespace {

TEST(SharedPages, APeerWritesTheOwnersPagesThroughItsMapping) {
  Result<std::shared_ptr<SharedPageMemory>> memory = SharedPageMemory::create("deepinfer-test");
  ASSERT_TRUE(memory.ok()) << memory.status().to_string();
  // Two allocations: a small one and one big enough to start on a huge-page boundary.
  PageBuffer small(*memory, 10'000);
  PageBuffer big(*memory, size_t{3} << 20);
  ASSERT_NE(small.data(), nullptr);
  ASSERT_NE(big.data(), nullptr);
  EXPECT_EQ((*memory)->heap_bytes(), 0u);
  const auto small_at = reinterpret_cast<uint64_t>(small.data());
  const auto big_at = reinterpret_cast<uint64_t>(big.data());
  const std::optional<uint64_t> small_off = (*memory)->offset_of(small_at, 10'000);
  const std::optional<uint64_t> big_off = (*memory)->offset_of(big_at + 4096, 8192);
  ASSERT_TRUE(small_off && big_off);
  EXPECT_EQ(*small_off, 4096u);  // after the token's page
  EXPECT_EQ((*big_off - 4096) % (uint64_t{2} << 20), 0u);
  EXPECT_FALSE((*memory)->offset_of(small_at, small.bytes() + 4096).has_value());  // runs past it
  EXPECT_FALSE((*memory)->offset_of(0x1000, 8).has_value());

  const SharedSegmentRef ref = (*memory)->ref();
  EXPECT_EQ(ref.pid, static_cast<uint32_t>(::getpid()));
  EXPECT_GE(ref.bytes, *big_off + (uint64_t{3} << 20) - 4096);

  // Another process (as a prefill server is) maps the segment and writes a pattern into both.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Result<std::unique_ptr<SharedPageMapping>> m = SharedPageMapping::open(ref);
    if (!m.ok()) ::_exit(2);
    std::byte* s = (*m)->at(*small_off, 10'000);
    std::byte* b = (*m)->at(*big_off, 8192);
    if (s == nullptr || b == nullptr) ::_exit(3);
    for (int i = 0; i < 10'000; ++i) s[i] = static_cast<std::byte>(i * 7);
    std::memset(b, 0x5A, 8192);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  for (int i = 0; i < 10'000; ++i) ASSERT_EQ(small.data()[i], static_cast<std::byte>(i * 7)) << i;
  EXPECT_EQ(big.data()[4096], std::byte{0x5A});
  EXPECT_EQ(big.data()[4096 + 8191], std::byte{0x5A});

  // A released range is no longer shared.
  big = PageBuffer();
  EXPECT_FALSE((*memory)->offset_of(big_at + 4096, 8192).has_value());
  EXPECT_TRUE((*memory)->offset_of(small_at, 10'000).has_value());
}

TEST(SharedPages, AReferenceToAnotherSegmentIsRefused) {
  Result<std::shared_ptr<SharedPageMemory>> memory = SharedPageMemory::create("deepinfer-test");
  ASSERT_TRUE(memory.ok());
  PageBuffer pages(*memory, 65536);
  const SharedSegmentRef ref = (*memory)->ref();
  ASSERT_TRUE(SharedPageMapping::open(ref).ok());

  SharedSegmentRef other_token = ref;
  other_token.token[5] ^= 1;
  EXPECT_EQ(SharedPageMapping::open(other_token).status().code(), ErrorCode::transport_peer_mismatch);
  SharedSegmentRef other_fd = ref;
  other_fd.fd = 999'999;
  EXPECT_EQ(SharedPageMapping::open(other_fd).status().code(), ErrorCode::transport_peer_mismatch);
  SharedSegmentRef too_big = ref;
  too_big.bytes += 4096;
  EXPECT_EQ(SharedPageMapping::open(too_big).status().code(), ErrorCode::transport_peer_mismatch);

  Result<std::unique_ptr<SharedPageMapping>> m = SharedPageMapping::open(ref);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)->at(0, 8), nullptr);  // the token's page is not a page to write
  EXPECT_EQ((*m)->at(ref.bytes - 8, 16), nullptr);
  EXPECT_NE((*m)->at(ref.bytes - 16, 16), nullptr);
}

}  // namespace
}  // namespace ds::transport
