#include "model/v41_engram.h"

#include <algorithm>
#include <cmath>

#include "model/v4_scratch.h"
#include "tensor/dtype.h"

namespace ds {

void engram_ngram_ids(const EngramTokenRules& rules, std::vector<int32_t>& history,
                      std::span<const int32_t> tokens, int64_t* ids, uint8_t* gated) {
  const int n_slots = rules.n_slots;
  const std::vector<int32_t>& map = *rules.compressed;
  // window: the history then the chunk; row t's token is window[h + t], slot s is window[h + t − s].
  std::vector<int32_t> window(history);
  const int64_t h = static_cast<int64_t>(window.size());
  window.insert(window.end(), tokens.begin(), tokens.end());
  for (size_t t = 0; t < tokens.size(); ++t) {
    const int64_t at = h + static_cast<int64_t>(t);
    int64_t* row = ids + static_cast<int64_t>(t) * n_slots;
    gated[t] = tokens[t] == rules.dead_token ? 0 : 1;
    row[0] = map[static_cast<size_t>(tokens[t])];
    bool dead = false;  // once a slot is before position 0 or an image token, every longer one is pad
    for (int s = 1; s < n_slots; ++s) {
      const int64_t j = at - s;
      dead = dead || j < 0 || window[static_cast<size_t>(j)] == rules.dead_token;
      row[s] = dead ? rules.pad_compressed : map[static_cast<size_t>(window[static_cast<size_t>(j)])];
    }
  }
  const size_t keep = static_cast<size_t>(std::max(0, n_slots - 1));
  if (window.size() > keep) window.erase(window.begin(), window.end() - static_cast<std::ptrdiff_t>(keep));
  history = std::move(window);
}

Result<V41EngramLayer> V41EngramLayer::load(const Checkpoint& ckpt, const std::string& prefix,
                                            const ModelConfig& c, const EngramHashLayer& hash) {
  const EngramConfig& e = *c.engram;
  V41EngramLayer m;
  m.hash_ = hash;
  m.hidden_ = c.hidden_size;
  m.hc_ = c.hc_mult;
  m.n_heads_ = e.n_heads;
  m.head_dim_ = e.head_dim;
  m.eps_ = c.rms_norm_eps;
  const std::string table = prefix + "embed.weight";
  DS_ASSIGN_OR_RETURN(const TensorEntry* t, ckpt.get(table));
  if (t->shape != Shape{hash.rows, e.head_dim}) {
    return Status(ErrorCode::weights_shape_mismatch, ckpt.dir() + ": " + table + ": shape " +
                                                         t->shape.to_string() + ", expected " +
                                                         Shape{hash.rows, e.head_dim}.to_string() +
                                                         " (the layer's Σ primes rows × engram_head_dim)");
  }
  if (t->dtype == DType::f8_e4m3) {
    DS_ASSIGN_OR_RETURN(const TensorEntry* s,
                        ckpt.get(prefix + "embed.scale", DType::f8_e8m0, Shape{hash.rows, e.head_dim / 32}));
    m.table_scale_ = s->data;
  } else if (t->dtype != DType::bf16 && t->dtype != DType::f32) {
    return Status(ErrorCode::weights_shape_mismatch,
                  ckpt.dir() + ": " + table + ": dtype " + std::string(dtype_name(t->dtype)) +
                      ", expected F8_E4M3 (with embed.scale), BF16 or F32");
  }
  m.table_ = t;
  const int64_t e_dim = int64_t{e.max_ngram_size - 1} * e.n_heads * e.head_dim;
  const int block = c.quantization.block_rows > 0 ? c.quantization.block_rows : 32;
  DS_ASSIGN_OR_RETURN(m.wkv_, load_linear_layer(ckpt, prefix + "wkv", (m.hc_ + 1) * m.hidden_, e_dim, block));
  // q_weight / k_weight: dtype [?] in the spec; whatever float dtype the file has (docs/models.md).
  DS_ASSIGN_OR_RETURN(m.q_weight_, load_f32(ckpt, prefix + "q_weight", Shape{m.hc_, m.hidden_}));
  DS_ASSIGN_OR_RETURN(m.k_weight_, load_f32(ckpt, prefix + "k_weight", Shape{m.hc_, m.hidden_}));
  return m;
}

void V41EngramLayer::gather(const int64_t* rows, float* e) const {
  const int64_t n_rows = static_cast<int64_t>(hash_.primes.size());
  const int64_t w = head_dim_;
  for (int64_t k = 0; k < n_rows; ++k) {
    const int64_t r = rows[k];
    float* out = e + k * w;
    switch (table_->dtype) {
      case DType::f8_e4m3: {
        const uint8_t* q = table_->data + r * w;
        const uint8_t* s = table_scale_ + r * (w / 32);
        for (int64_t c = 0; c < w; ++c) out[c] = fp8_e4m3_to_f32(q[c]) * e8m0_to_f32(s[c / 32]);
        break;
      }
      case DType::bf16: {
        const auto* q = reinterpret_cast<const uint16_t*>(table_->data) + r * w;
        for (int64_t c = 0; c < w; ++c) out[c] = bf16_to_f32(q[c]);
        break;
      }
      default: {
        const auto* q = reinterpret_cast<const float*>(table_->data) + r * w;
        std::copy_n(q, w, out);
      }
    }
  }
}

void V41EngramLayer::forward(const ForwardContext& ctx, float* streams, int64_t n, const int64_t* ids,
                             const uint8_t* gated) {
  const int64_t n_slots = static_cast<int64_t>(hash_.multipliers.size());
  const int64_t per_pos = static_cast<int64_t>(hash_.primes.size());
  const int64_t e_dim = per_pos * head_dim_, d = hidden_, hc = hc_, kv_dim = (hc + 1) * d;
  int64_t* rows = scratch_of(rows_, n * per_pos);
  float* e = scratch_of(e_, n * e_dim);
  float* kv = scratch_of(kv_, n * kv_dim);
  ctx.pool->parallel_range(n, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      engram_rows(hash_, static_cast<int>(n_heads_), ids + t * n_slots, rows + t * per_pos);
      gather(rows + t * per_pos, e + t * e_dim);
    }
  });
  linear(ctx, wkv_.w, e, n, e_dim, kv, kv_dim);
  const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(d));
  ctx.pool->parallel_range(n, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      if (!gated[t]) continue;  // an image token: gate 0
      const float* v = kv + t * kv_dim + hc * d;
      for (int64_t j = 0; j < hc; ++j) {
        float* x = streams + (t * hc + j) * d;
        const float* key = kv + t * kv_dim + j * d;
        const float* qw = q_weight_.data() + j * d;
        const float* kw = k_weight_.data() + j * d;
        double xx = 0, kk = 0, dot = 0;
        for (int64_t c = 0; c < d; ++c) {
          xx += double{x[c]} * x[c];
          kk += double{key[c]} * key[c];
          dot += double{x[c]} * qw[c] * kw[c] * key[c];
        }
        const double delta = dot / std::sqrt(xx / d + eps_) / std::sqrt(kk / d + eps_) * inv_sqrt_d;
        const double sign = delta > 0 ? 1.0 : (delta < 0 ? -1.0 : 0.0);
        const double gate = 1.0 / (1.0 + std::exp(-sign * std::sqrt(std::max(std::fabs(delta), 1e-6))));
        for (int64_t c = 0; c < d; ++c) x[c] = static_cast<float>(x[c] + gate * v[c]);
      }
    }
  });
}

Result<V41Engram> V41Engram::load(const Checkpoint& ckpt, const ModelConfig& c,
                                  std::shared_ptr<const std::vector<int32_t>> token_map) {
  V41Engram m;
  if (!c.engram) return m;
  const EngramConfig& e = *c.engram;
  if (!token_map) {
    return Status(ErrorCode::model_unsupported,
                  ckpt.dir() +
                      "/config.json: text_config.engram_layer_ids: Engram needs the compressed token map "
                      "of the checkpoint's tokenizer (load the model through the engine's loader)");
  }
  if (token_map->size() != static_cast<size_t>(c.vocab_size)) {
    return Status(ErrorCode::invalid_argument, "Engram token map has " + std::to_string(token_map->size()) +
                                                   " ids, vocab_size is " + std::to_string(c.vocab_size));
  }
  for (size_t id = 0; id < token_map->size(); ++id) {
    const int32_t v = (*token_map)[id];
    if (v < 0 || v >= e.compressed_vocab_size) {
      return Status(ErrorCode::invalid_argument, "Engram token map: token " + std::to_string(id) +
                                                     " maps to " + std::to_string(v) +
                                                     ", outside text_config.engram_compressed_vocab_size " +
                                                     std::to_string(e.compressed_vocab_size));
    }
  }
  DS_ASSIGN_OR_RETURN(std::vector<EngramHashLayer> hashes,
                      engram_hash_layers(e, ckpt.dir() + "/config.json"));
  m.rules_.compressed = std::move(token_map);
  m.rules_.pad_compressed = (*m.rules_.compressed)[static_cast<size_t>(e.pad_token_id)];
  m.rules_.dead_token = c.image_token_id;
  m.rules_.n_slots = e.max_ngram_size;
  m.layer_of_.assign(static_cast<size_t>(c.num_hidden_layers), -1);
  for (size_t i = 0; i < hashes.size(); ++i) {
    const int layer = hashes[i].layer;
    DS_ASSIGN_OR_RETURN(
        V41EngramLayer l,
        V41EngramLayer::load(ckpt, "layers." + std::to_string(layer) + ".engram.", c, hashes[i]));
    m.layer_of_[static_cast<size_t>(layer)] = static_cast<int>(m.layers_.size());
    m.layers_.push_back(std::move(l));
  }
  return m;
}

}  // namespace ds
