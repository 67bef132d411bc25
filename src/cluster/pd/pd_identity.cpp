#include "cluster/pd/pd_identity.h"

#include <fmt/format.h>

#include <fstream>
#include <iterator>

#include "kvcache/prefix_hash.h"
#include "kvcache/tier_key.h"

namespace ds::pd {

Result<PdRole> parse_pd_role(std::string_view text) {
  if (text == "both") return PdRole::both;
  if (text == "prefill") return PdRole::prefill;
  if (text == "decode") return PdRole::decode;
  return Status(ErrorCode::invalid_argument,
                fmt::format("--role {}: expected prefill, decode or both", std::string(text)));
}

const char* pd_role_name(PdRole role) {
  switch (role) {
    case PdRole::both:
      return "both";
    case PdRole::prefill:
      return "prefill";
    case PdRole::decode:
      return "decode";
  }
  return "?";
}

transport::PeerIdentity PdIdentity::peer_identity() const {
  return {fmt::format("{:016x}", model_fingerprint), namespace_id};
}

namespace {

uint64_t salted_key(const transport::SharedSecret& secret, uint64_t namespace_id,
                    std::string_view cache_salt) {
  std::vector<std::byte> seed_secret(secret.size());
  for (size_t i = 0; i < secret.size(); ++i) seed_secret[i] = static_cast<std::byte>(secret[i]);
  return prefix_hash_key(tier_prefix_seed(seed_secret, namespace_id), cache_salt);
}

}  // namespace

std::vector<uint64_t> PdIdentity::transfer_keys(std::span<const int32_t> tokens,
                                                std::string_view cache_salt) const {
  if (tokens.empty() || block_size_tokens <= 0) return {};
  return hash_full_blocks(salted_key(secret, namespace_id, cache_salt), tokens.first(tokens.size() - 1),
                          block_size_tokens);
}

std::vector<uint64_t> PdIdentity::prompt_block_keys(std::span<const int32_t> tokens,
                                                    std::string_view cache_salt) const {
  if (block_size_tokens <= 0) return {};
  return hash_full_blocks(salted_key(secret, namespace_id, cache_salt), tokens, block_size_tokens);
}

Result<transport::SharedSecret> load_transfer_secret(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(ErrorCode::io_error, "--kv-transfer-secret-file " + path + ": cannot read");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 16) {
    return Status(ErrorCode::invalid_argument,
                  "--kv-transfer-secret-file " + path + ": holds fewer than 16 bytes (use 32 random bytes)");
  }
  return bytes;
}

}  // namespace ds::pd
