// Test payloads in the KV event publisher's layout (kvcache/kv_event_encoding.h, docs/kvcache.md), written
// with msgpuck directly, independent of the router's decoder.
#pragma once

#include <msgpuck.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ds::cluster::testing {

// A msgpack writer for test payloads (independent of the router's decoder).
class Pack {
 public:
  Pack& array(uint32_t n) { return put(mp_encode_array(buf_, n)); }
  Pack& map(uint32_t n) { return put(mp_encode_map(buf_, n)); }
  Pack& uint(uint64_t v) { return put(mp_encode_uint(buf_, v)); }
  Pack& f64(double v) { return put(mp_encode_double(buf_, v)); }
  Pack& nil() { return put(mp_encode_nil(buf_)); }
  Pack& str(std::string_view s) {
    put(mp_encode_strl(buf_, static_cast<uint32_t>(s.size())));
    out_.append(s);
    return *this;
  }
  Pack& uints(const std::vector<uint64_t>& v) {
    array(static_cast<uint32_t>(v.size()));
    for (uint64_t x : v) uint(x);
    return *this;
  }
  const std::string& bytes() const { return out_; }

 private:
  Pack& put(const char* end) {
    out_.append(buf_, static_cast<size_t>(end - buf_));
    return *this;
  }
  std::string out_;
  char buf_[16];
};

inline void stored(Pack& p, const std::vector<uint64_t>& hashes, std::optional<uint64_t> parent,
                   const std::vector<int32_t>& ids, int block_size = 4) {
  p.map(8).str("type").str("BlockStored").str("block_hashes").uints(hashes).str("parent_block_hash");
  parent ? p.uint(*parent) : p.nil();
  p.str("token_ids").array(static_cast<uint32_t>(ids.size()));
  for (int32_t id : ids) p.uint(static_cast<uint64_t>(id));
  p.str("block_size").uint(static_cast<uint64_t>(block_size)).str("lora_id").nil();
  p.str("medium").str("CPU").str("lora_name").nil();
}
// A run from position 0 of a salted request: extra_keys [[salt_key], nil, ...] (salt_key is
// "salt_tag:<16 hex>" as the publisher writes it, or anything else to test the decoder).
inline void stored_salted(Pack& p, const std::vector<uint64_t>& hashes, const std::vector<int32_t>& ids,
                          std::string_view salt_key, int block_size = 4) {
  p.map(9).str("type").str("BlockStored").str("block_hashes").uints(hashes).str("parent_block_hash").nil();
  p.str("token_ids").array(static_cast<uint32_t>(ids.size()));
  for (int32_t id : ids) p.uint(static_cast<uint64_t>(id));
  p.str("block_size").uint(static_cast<uint64_t>(block_size)).str("lora_id").nil();
  p.str("medium").str("CPU").str("lora_name").nil();
  p.str("extra_keys").array(static_cast<uint32_t>(hashes.size())).array(1).str(salt_key);
  for (size_t i = 1; i < hashes.size(); ++i) p.nil();
}
inline void removed(Pack& p, const std::vector<uint64_t>& hashes) {
  p.map(3).str("type").str("BlockRemoved").str("block_hashes").uints(hashes).str("medium").str("CPU");
}

}  // namespace ds::cluster::testing
