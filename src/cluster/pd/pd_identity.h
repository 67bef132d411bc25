// What a prefill and a decode server must agree on before KV moves (docs/pd.md): the shared secret
// (it authenticates every control frame and seeds the prefix chain hashes, so both sides name a
// block by the same key), the model fingerprint and the tier namespace (model + KV layout + block
// size + bytes per block: kvcache/tier_key.h), which is the control channel's KV layout hash.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "transport/control_message.h"

namespace ds::pd {

enum class PdRole { both, prefill, decode };
Result<PdRole> parse_pd_role(std::string_view text);  // invalid_argument naming the value
const char* pd_role_name(PdRole role);

struct PdIdentity {
  transport::SharedSecret secret;  // --kv-transfer-secret-file's bytes
  uint64_t model_fingerprint = 0;
  uint64_t namespace_id = 0;  // the engine's tier namespace (set once the engine sized its cache)
  int32_t block_size_tokens = 0;
  int64_t block_bytes = 0;
  // The most bytes of sequence state the model exports (ModelRunner::sequence_state_bytes; V4: window
  // rings and compressor partial groups; 0 for V3): the decode server grants that room besides the
  // blocks (state_pages.h), and the prefill server sends the state there.
  int64_t state_bytes = 0;

  transport::PeerIdentity peer_identity() const;
  // The chain hashes of the blocks of `tokens` the engine would look up, under `cache_salt`: the
  // full blocks before the last token (the engine always computes at least the last one).
  std::vector<uint64_t> transfer_keys(std::span<const int32_t> tokens, std::string_view cache_salt) const;
  // Every full block of `tokens` (what a prefill's tier writer stores).
  std::vector<uint64_t> prompt_block_keys(std::span<const int32_t> tokens, std::string_view cache_salt) const;
};

// The secret file's bytes; io_error naming the path, invalid_argument when under 16 bytes.
Result<transport::SharedSecret> load_transfer_secret(const std::string& path);

}  // namespace ds::pd
