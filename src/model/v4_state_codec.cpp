#include "model/v4_state_codec.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace ds {

namespace {

constexpr char kMagic[8] = {'D', 'S', 'V', '4', 'S', 'T', 'A', 'T'};
constexpr uint32_t kVersion = 1;

class Writer {
 public:
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
  std::vector<std::byte> take() { return std::move(out_); }

 private:
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
  bool done() const { return pos_ == in_.size(); }

 private:
  std::span<const std::byte> in_;
  size_t pos_ = 0;
};

void write_compressor(Writer& w, const V4CompressorState& c) {
  w.pod(c.ratio);
  w.pod(static_cast<uint8_t>(c.overlap));
  w.pod(c.width);
  w.vec(c.kv);
  w.vec(c.score);
}

bool read_compressor(Reader& r, V4CompressorState& c) {
  int32_t ratio = 0;
  uint8_t overlap = 0;
  int64_t width = 0;
  return r.pod(ratio) && r.pod(overlap) && r.pod(width) && ratio == c.ratio && (overlap != 0) == c.overlap &&
         width == c.width && r.vec(c.kv, c.kv.size()) && r.vec(c.score, c.score.size());
}

bool read_layer(Reader& r, V4LayerState& l) {
  int32_t window = 0;
  int64_t head_dim = 0;
  return r.pod(window) && r.pod(head_dim) && window == l.window && head_dim == l.head_dim &&
         r.vec(l.ring_kv, l.ring_kv.size()) && r.vec(l.ring_pos, l.ring_pos.size()) &&
         read_compressor(r, l.comp) && r.pod(l.n_entries) && read_compressor(r, l.idx_comp) &&
         r.pod(l.n_idx_keys) && l.n_entries >= 0 && l.n_idx_keys >= 0;
}

}  // namespace

std::vector<std::byte> encode_v4_state(const V4SequenceSlot& slot) {
  Writer w;
  w.pod(kMagic);
  w.pod(kVersion);
  w.pod(slot.n_tokens);
  w.pod(static_cast<uint32_t>(slot.layers.size()));
  for (const V4LayerState& l : slot.layers) {
    w.pod(l.window);
    w.pod(l.head_dim);
    w.vec(l.ring_kv);
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
