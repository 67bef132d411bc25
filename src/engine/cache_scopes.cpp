#include "engine/cache_scopes.h"

namespace ds {

bool CacheClearFilter::matches(const std::string& salt_of_block, const std::string& key_of_block) const {
  if (salt.has_value() && *salt != salt_of_block) return false;
  if (key_prefix.has_value() && !key_of_block.starts_with(*key_prefix)) return false;
  return true;
}

uint32_t CacheScopes::intern(std::pair<std::string, std::string> scope) {
  // A length prefix keeps (salt, key) pairs apart whatever bytes they hold.
  std::string id_key = std::to_string(scope.first.size()) + ':' + scope.first + scope.second;
  const auto [it, inserted] =
      id_of_scope_.try_emplace(std::move(id_key), static_cast<uint32_t>(scopes_.size()));
  if (inserted) scopes_.push_back(std::move(scope));
  return it->second;
}

void CacheScopes::on_events(
    std::span<const KvCacheEvent> events,
    const std::function<std::optional<std::pair<std::string, std::string>>(SeqId)>& scope_of) {
  for (const KvCacheEvent& ev : events) {
    switch (ev.kind) {
      case KvCacheEvent::Kind::stored: {
        const uint32_t id = intern(scope_of(ev.seq_id).value_or(std::pair<std::string, std::string>{}));
        for (const uint64_t h : ev.block_hashes) scope_of_hash_[h] = id;
        break;
      }
      case KvCacheEvent::Kind::removed:
        for (const uint64_t h : ev.block_hashes) scope_of_hash_.erase(h);
        break;
      case KvCacheEvent::Kind::all_cleared:
        scope_of_hash_.clear();
        break;
    }
  }
}

std::vector<uint64_t> CacheScopes::matching(const CacheClearFilter& filter) const {
  std::vector<uint64_t> out;
  for (const auto& [hash, id] : scope_of_hash_) {
    if (filter.matches(scopes_[id].first, scopes_[id].second)) out.push_back(hash);
  }
  return out;
}

}  // namespace ds
