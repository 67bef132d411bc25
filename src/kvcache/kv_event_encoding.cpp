#include "kvcache/kv_event_encoding.h"

#include <fmt/format.h>
#include <msgpuck.h>

namespace ds {

namespace {

// Appends msgpack values to a string (msgpuck encodes into a small scratch buffer: no value's
// header is longer than 9 bytes).
class MsgpackWriter {
 public:
  explicit MsgpackWriter(std::string& out) : out_(out) {}
  void array(uint32_t n) { append(mp_encode_array(buf_, n)); }
  void map(uint32_t n) { append(mp_encode_map(buf_, n)); }
  void uint(uint64_t v) { append(mp_encode_uint(buf_, v)); }
  void sint(int64_t v) {
    append(v >= 0 ? mp_encode_uint(buf_, static_cast<uint64_t>(v)) : mp_encode_int(buf_, v));
  }
  void f64(double v) { append(mp_encode_double(buf_, v)); }
  void nil() { append(mp_encode_nil(buf_)); }
  void str(std::string_view s) {
    append(mp_encode_strl(buf_, static_cast<uint32_t>(s.size())));
    out_.append(s);
  }

 private:
  void append(const char* end) { out_.append(buf_, static_cast<size_t>(end - buf_)); }
  std::string& out_;
  char buf_[16];
};

void write_hashes(MsgpackWriter& w, const std::vector<uint64_t>& hashes) {
  w.array(static_cast<uint32_t>(hashes.size()));
  for (const uint64_t h : hashes) w.uint(h);
}

void write_event(MsgpackWriter& w, const KvCacheEvent& ev, const KvEventBatchFormat& format) {
  switch (ev.kind) {
    case KvCacheEvent::Kind::stored: {
      const bool salted_root = ev.salt_tag.has_value() && !ev.parent_hash.has_value();
      w.map(salted_root ? 9 : 8);
      w.str("type");
      w.str("BlockStored");
      w.str("block_hashes");
      write_hashes(w, ev.block_hashes);
      w.str("parent_block_hash");
      if (ev.parent_hash.has_value()) {
        w.uint(*ev.parent_hash);
      } else {
        w.nil();
      }
      w.str("token_ids");
      w.array(static_cast<uint32_t>(ev.token_ids.size()));
      for (const TokenId t : ev.token_ids) w.sint(t);
      w.str("block_size");
      w.sint(format.block_size_tokens);
      w.str("lora_id");
      w.nil();
      w.str("medium");
      w.str(format.medium);
      w.str("lora_name");
      w.nil();
      if (salted_root) {
        w.str("extra_keys");
        w.array(static_cast<uint32_t>(ev.block_hashes.size()));
        w.array(1);
        w.str(fmt::format("salt_tag:{:016x}", *ev.salt_tag));
        for (size_t b = 1; b < ev.block_hashes.size(); ++b) w.nil();
      }
      return;
    }
    case KvCacheEvent::Kind::removed:
      w.map(3);
      w.str("type");
      w.str("BlockRemoved");
      w.str("block_hashes");
      write_hashes(w, ev.block_hashes);
      w.str("medium");
      w.str(format.medium);
      return;
    case KvCacheEvent::Kind::all_cleared:
      w.map(1);
      w.str("type");
      w.str("AllBlocksCleared");
      return;
  }
}

}  // namespace

std::string encode_kv_event_batch(double ts_unix_s, std::span<const KvCacheEvent> events,
                                  const KvEventBatchFormat& format) {
  std::string out;
  MsgpackWriter w(out);
  w.array(format.data_parallel_rank.has_value() ? 3 : 2);
  w.f64(ts_unix_s);
  w.array(static_cast<uint32_t>(events.size()));
  for (const KvCacheEvent& ev : events) write_event(w, ev, format);
  if (format.data_parallel_rank.has_value()) w.sint(*format.data_parallel_rank);
  return out;
}

}  // namespace ds
