#include "model/v4_state_codec.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

namespace ds {

namespace {

constexpr char kMagic[8] = {'D', 'S', 'V', '4', 'S', 'T', 'A', 'T'};
constexpr uint32_t kVersion = 2;  // 2: row-trimmed float arrays, bf16 where exact

size_t mask_bytes(int64_t n_bits) { return static_cast<size_t>((std::max<int64_t>(0, n_bits) + 7) / 8); }
bool test(const std::vector<uint8_t>& mask, int64_t i) {
  return (mask[static_cast<size_t>(i / 8)] >> (i % 8) & 1u) != 0;
}
void set(std::vector<uint8_t>& mask, int64_t i) {
  mask[static_cast<size_t>(i / 8)] |= static_cast<uint8_t>(1u << (i % 8));
}
void clear(std::vector<uint8_t>& mask, int64_t i) {
  mask[static_cast<size_t>(i / 8)] &= static_cast<uint8_t>(~(1u << (i % 8)));
}

class Writer {
 public:
  // worst_case: every row written, in f32 (the bound an exported state never exceeds).
  explicit Writer(bool worst_case = false) : worst_case_(worst_case) {}
  template <class T>
  void pod(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  template <class T>
  void vec(const std::vector<T>& v) {
    pod(static_cast<uint64_t>(v.size()));
    const auto* p = reinterpret_cast<const std::byte*>(v.data());
    out_.insert(out_.end(), p, p + v.size() * sizeof(T));
  }
  // A [rows, width] float array: only the rows that differ from `initial` (bitwise); a column whose
  // values in those rows are all bf16 (V4's window KV after the cache's FP8 simulation, except its
  // rope columns) goes as bf16, the others as f32. Layout: u64 count, the row bitmask, the column
  // bitmask (1 = bf16), the kept rows' values.
  void rows(const std::vector<float>& v, int64_t width, float initial) {
    pod(static_cast<uint64_t>(v.size()));
    const int64_t n_rows = width > 0 ? static_cast<int64_t>(v.size()) / width : 0;
    std::vector<uint8_t> live(mask_bytes(n_rows), 0);
    std::vector<uint8_t> bf16(mask_bytes(width), worst_case_ ? 0 : 0xff);
    for (int64_t r = 0; r < n_rows; ++r) {
      const float* row = v.data() + r * width;
      bool differs = worst_case_;
      for (int64_t i = 0; i < width; ++i) differs = differs || bits(row[i]) != bits(initial);
      if (!differs) continue;
      set(live, r);
      for (int64_t i = 0; i < width; ++i)
        if ((bits(row[i]) & 0xffffu) != 0) clear(bf16, i);
    }
    for (const uint8_t b : live) pod(b);
    for (const uint8_t b : bf16) pod(b);
    for (int64_t r = 0; r < n_rows; ++r) {
      if (!test(live, r)) continue;
      for (int64_t i = 0; i < width; ++i) {
        const float x = v[static_cast<size_t>(r * width + i)];
        if (test(bf16, i)) {
          pod(static_cast<uint16_t>(bits(x) >> 16));
        } else {
          pod(x);
        }
      }
    }
  }
  std::vector<std::byte> take() { return std::move(out_); }
  static uint32_t bits(float x) {
    uint32_t b = 0;
    std::memcpy(&b, &x, sizeof b);
    return b;
  }

 private:
  bool worst_case_;
  std::vector<std::byte> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  template <class T>
  bool pod(T& v) {
    if (in_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  // A vector whose length must be `expected` elements (its fresh shape).
  template <class T>
  bool vec(std::vector<T>& v, size_t expected) {
    uint64_t n = 0;
    if (!pod(n) || n != expected || (in_.size() - pos_) / sizeof(T) < n) return false;
    v.resize(n);
    std::memcpy(v.data(), in_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return true;
  }
  // Writer::rows's array, which must hold `expected` values ([expected / width, width]).
  bool rows(std::vector<float>& v, size_t expected, int64_t width, float initial) {
    uint64_t n = 0;
    if (!pod(n) || n != expected) return false;
    const int64_t n_rows = width > 0 ? static_cast<int64_t>(n) / width : 0;
    std::vector<uint8_t> live(mask_bytes(n_rows)), bf16(mask_bytes(width));
    for (uint8_t& b : live)
      if (!pod(b)) return false;
    for (uint8_t& b : bf16)
      if (!pod(b)) return false;
    v.assign(n, initial);
    for (int64_t r = 0; r < n_rows; ++r) {
      if (!test(live, r)) continue;
      for (int64_t i = 0; i < width; ++i) {
        float& x = v[static_cast<size_t>(r * width + i)];
        if (test(bf16, i)) {
          uint16_t h = 0;
          if (!pod(h)) return false;
          const uint32_t b = uint32_t{h} << 16;
          std::memcpy(&x, &b, sizeof x);
        } else if (!pod(x)) {
          return false;
        }
      }
    }
    return true;
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  std::span<const std::byte> in_;
  size_t pos_ = 0;
};

void write_compressor(Writer& w, const V4CompressorState& c) {
  w.pod(c.ratio);
  w.pod(static_cast<uint8_t>(c.overlap));
  w.pod(c.width);
  w.rows(c.kv, c.width, 0.0f);
  w.rows(c.score, c.width, -std::numeric_limits<float>::infinity());
}

bool read_compressor(Reader& r, V4CompressorState& c) {
  int32_t ratio = 0;
  uint8_t overlap = 0;
  int64_t width = 0;
  return r.pod(ratio) && r.pod(overlap) && r.pod(width) && ratio == c.ratio && (overlap != 0) == c.overlap &&
         width == c.width && r.rows(c.kv, c.kv.size(), c.width, 0.0f) &&
         r.rows(c.score, c.score.size(), c.width, -std::numeric_limits<float>::infinity());
}

bool read_layer(Reader& r, V4LayerState& l) {
  int32_t window = 0;
  int64_t head_dim = 0;
  return r.pod(window) && r.pod(head_dim) && window == l.window && head_dim == l.head_dim &&
         r.rows(l.ring_kv, l.ring_kv.size(), l.head_dim, 0.0f) && r.vec(l.ring_pos, l.ring_pos.size()) &&
         read_compressor(r, l.comp) && r.pod(l.n_entries) && read_compressor(r, l.idx_comp) &&
         r.pod(l.n_idx_keys) && l.n_entries >= 0 && l.n_idx_keys >= 0;
}

}  // namespace

namespace {

std::vector<std::byte> encode(const V4SequenceSlot& slot, bool worst_case) {
  Writer w(worst_case);
  w.pod(kMagic);
  w.pod(kVersion);
  w.pod(slot.n_tokens);
  w.pod(static_cast<uint32_t>(slot.layers.size()));
  for (const V4LayerState& l : slot.layers) {
    w.pod(l.window);
    w.pod(l.head_dim);
    w.rows(l.ring_kv, l.head_dim, 0.0f);
    w.vec(l.ring_pos);
    write_compressor(w, l.comp);
    w.pod(l.n_entries);
    write_compressor(w, l.idx_comp);
    w.pod(l.n_idx_keys);
  }
  w.vec(slot.engram_history);
  w.pod(static_cast<int32_t>(slot.published_index_keys));
  return w.take();
}

}  // namespace

std::vector<std::byte> encode_v4_state(const V4SequenceSlot& slot) { return encode(slot, false); }

int64_t max_encoded_v4_state_bytes(const V4SequenceSlot& shape) {
  return static_cast<int64_t>(encode(shape, true).size());
}

Status decode_v4_state(std::span<const std::byte> bytes, V4SequenceSlot& slot) {
  const auto bad = [](const std::string& what) {
    return Status(ErrorCode::model_bad_input, "sequence state: " + what);
  };
  Reader r(bytes);
  char magic[8] = {};
  uint32_t version = 0, n_layers = 0;
  int64_t n_tokens = 0;
  if (!r.pod(magic) || std::memcmp(magic, kMagic, sizeof magic) != 0) return bad("not a V4 sequence state");
  if (!r.pod(version) || version != kVersion) return bad("version " + std::to_string(version) + " is not 1");
  if (!r.pod(n_tokens) || n_tokens < 0 || !r.pod(n_layers) || n_layers != slot.layers.size())
    return bad("truncated, or another number of layers than this model's " +
               std::to_string(slot.layers.size()));
  std::vector<V4LayerState> layers = slot.layers;
  for (V4LayerState& l : layers)
    if (!read_layer(r, l)) return bad("a layer's shape differs from this model's, or the state is truncated");
  uint64_t n_history = 0;
  std::vector<int32_t> history;
  Reader peek = r;
  if (!peek.pod(n_history) || n_history > 64 || !r.vec(history, n_history)) return bad("bad Engram history");
  int32_t published = -1;
  if (!r.pod(published) || published < -1 || published >= static_cast<int32_t>(n_layers) || !r.done())
    return bad("bad index-key publisher or trailing bytes");
  slot.layers = std::move(layers);
  slot.n_tokens = n_tokens;
  slot.engram_history = std::move(history);
  slot.published_index_keys = published;
  return ok_status();
}

}  // namespace ds
