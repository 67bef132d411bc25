#include "cluster/router/kv_event_decoding.h"

#include <msgpuck.h>

#include <charconv>
#include <functional>
#include <string>

namespace ds::cluster {
namespace {

Status bad(std::string what) {
  return Status(ErrorCode::invalid_argument, "KV event batch: " + std::move(what));
}

// A cursor over a payload that mp_check() has validated: every read below stays inside it.
struct Reader {
  const char* p;

  mp_type type() const { return mp_typeof(*p); }
  std::string_view str() {
    uint32_t len = 0;
    const char* s = mp_decode_str(&p, &len);
    return {s, len};
  }
  void skip() { mp_next(&p); }
  std::optional<int64_t> integer() {
    if (type() == MP_UINT) return static_cast<int64_t>(mp_decode_uint(&p));
    if (type() == MP_INT) return mp_decode_int(&p);
    return std::nullopt;
  }
  // vLLM's ExternalBlockHash is an int or bytes; bytes are folded into a 64-bit key.
  std::optional<uint64_t> block_hash() {
    if (type() == MP_UINT) return mp_decode_uint(&p);
    if (type() == MP_INT) return static_cast<uint64_t>(mp_decode_int(&p));
    if (type() == MP_BIN || type() == MP_STR) {
      uint32_t len = 0;
      const char* b = type() == MP_BIN ? mp_decode_bin(&p, &len) : mp_decode_str(&p, &len);
      return std::hash<std::string_view>{}(std::string_view(b, len));
    }
    return std::nullopt;
  }
};

Result<std::vector<uint64_t>> read_hashes(Reader& r, const char* field) {
  if (r.type() != MP_ARRAY) return bad(std::string(field) + " is not an array");
  const uint32_t n = mp_decode_array(&r.p);
  std::vector<uint64_t> out;
  out.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    std::optional<uint64_t> h = r.block_hash();
    if (!h) return bad(std::string(field) + " holds a value that is not a hash");
    out.push_back(*h);
  }
  return out;
}

// extra_keys: nil, or one entry per block (nil or an array of keys); the first block's
// "salt_tag:<16 hex>" key is the run's salt tag. Other keys (vLLM's LoRA names, multimodal hashes)
// are skipped.
Result<std::optional<uint64_t>> read_salt_tag(Reader& r) {
  std::optional<uint64_t> tag;
  if (r.type() == MP_NIL) {
    r.skip();
    return tag;
  }
  if (r.type() != MP_ARRAY) return bad("extra_keys is not an array or nil");
  const uint32_t n_blocks = mp_decode_array(&r.p);
  for (uint32_t b = 0; b < n_blocks; ++b) {
    if (b > 0 || r.type() != MP_ARRAY) {
      r.skip();
      continue;
    }
    const uint32_t n_keys = mp_decode_array(&r.p);
    for (uint32_t k = 0; k < n_keys; ++k) {
      if (r.type() != MP_STR) {
        r.skip();
        continue;
      }
      const std::string_view key = r.str();
      if (!key.starts_with("salt_tag:")) continue;
      const std::string_view hex = key.substr(9);
      uint64_t v = 0;
      auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), v, 16);
      if (hex.size() != 16 || ec != std::errc() || end != hex.data() + hex.size())
        return bad("extra_keys holds a salt_tag that is not 16 hex digits");
      tag = v;
    }
  }
  return tag;
}

// One tagged map; nullopt for an event type the router does not know.
Result<std::optional<WorkerKvEvent>> read_event(Reader& r) {
  if (r.type() != MP_MAP) return bad("an event is not a map");
  const uint32_t n_fields = mp_decode_map(&r.p);
  WorkerKvEvent ev;
  std::string_view type;
  bool has_hashes = false, has_tokens = false;
  for (uint32_t i = 0; i < n_fields; ++i) {
    if (r.type() != MP_STR) return bad("an event has a key that is not a string");
    const std::string_view key = r.str();
    if (key == "type" && r.type() == MP_STR) {
      type = r.str();
    } else if (key == "block_hashes") {
      DS_ASSIGN_OR_RETURN(ev.block_hashes, read_hashes(r, "block_hashes"));
      has_hashes = true;
    } else if (key == "parent_block_hash") {
      if (r.type() == MP_NIL) {
        r.skip();
      } else if (std::optional<uint64_t> h = r.block_hash()) {
        ev.parent_hash = *h;
      } else {
        return bad("parent_block_hash is not a hash or nil");
      }
    } else if (key == "token_ids") {
      if (r.type() != MP_ARRAY) return bad("token_ids is not an array");
      const uint32_t n = mp_decode_array(&r.p);
      ev.token_ids.reserve(n);
      for (uint32_t k = 0; k < n; ++k) {
        std::optional<int64_t> id = r.integer();
        if (!id || *id < INT32_MIN || *id > INT32_MAX)
          return bad("token_ids holds a value that is not an id");
        ev.token_ids.push_back(static_cast<int32_t>(*id));
      }
      has_tokens = true;
    } else if (key == "block_size") {
      std::optional<int64_t> bs = r.integer();
      if (!bs || *bs < 1 || *bs > INT32_MAX) return bad("block_size is not a positive integer");
      ev.block_size = static_cast<int32_t>(*bs);
    } else if (key == "extra_keys") {
      DS_ASSIGN_OR_RETURN(ev.salt_tag, read_salt_tag(r));
    } else {
      r.skip();  // lora_id, medium, lora_name, newer fields
    }
  }
  if (type == "BlockStored") {
    ev.kind = WorkerKvEvent::Kind::stored;
    if (!has_hashes || !has_tokens || ev.block_size == 0)
      return bad("BlockStored needs block_hashes, token_ids and block_size");
    if (ev.token_ids.size() != ev.block_hashes.size() * static_cast<size_t>(ev.block_size))
      return bad("BlockStored: token_ids is not block_size ids per block");
  } else if (type == "BlockRemoved") {
    ev.kind = WorkerKvEvent::Kind::removed;
    if (!has_hashes) return bad("BlockRemoved needs block_hashes");
  } else if (type == "AllBlocksCleared") {
    ev.kind = WorkerKvEvent::Kind::all_cleared;
  } else if (type.empty()) {
    return bad("an event has no type");
  } else {
    return std::optional<WorkerKvEvent>();
  }
  return std::optional(std::move(ev));
}

}  // namespace

Result<WorkerKvEventBatch> decode_kv_event_batch(std::string_view payload) {
  const char* check = payload.data();
  if (payload.empty() || mp_check(&check, payload.data() + payload.size()) != 0)
    return bad("not one valid msgpack value");
  Reader r{payload.data()};
  if (r.type() != MP_ARRAY) return bad("not an array [ts, events]");
  const uint32_t n = mp_decode_array(&r.p);
  if (n < 2) return bad("not an array [ts, events]");
  WorkerKvEventBatch batch;
  if (r.type() == MP_DOUBLE) {
    batch.ts_unix_s = mp_decode_double(&r.p);
  } else if (r.type() == MP_FLOAT) {
    batch.ts_unix_s = mp_decode_float(&r.p);
  } else if (std::optional<int64_t> ts = r.integer()) {
    batch.ts_unix_s = static_cast<double>(*ts);
  } else {
    return bad("ts is not a number");
  }
  if (r.type() != MP_ARRAY) return bad("events is not an array");
  const uint32_t n_events = mp_decode_array(&r.p);
  batch.events.reserve(n_events);
  for (uint32_t i = 0; i < n_events; ++i) {
    DS_ASSIGN_OR_RETURN(std::optional<WorkerKvEvent> ev, read_event(r));
    if (ev) batch.events.push_back(std::move(*ev));
  }
  return batch;
}

}  // namespace ds::cluster
