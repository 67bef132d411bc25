#include "model/mla_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/assert.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "kernels/rope.h"

namespace ds {

namespace {

// rows: [n, row_dim] for positions [pos_begin, pos_begin + n), copied into the blocks that hold
// them (one memcpy per block touched).
void store_rows(const LatentLayerView& cache, const int32_t* block_table, int64_t pos_begin, int64_t n,
                const float* rows) {
  const int64_t bs = cache.block_size;
  const int64_t L = cache.row_dim;
  for (int64_t p = pos_begin; p < pos_begin + n;) {
    const int64_t in_block = p % bs;
    const int64_t run = std::min(bs - in_block, pos_begin + n - p);
    std::memcpy(cache.block(block_table[p / bs]) + in_block * L, rows + (p - pos_begin) * L,
                static_cast<size_t>(run * L) * sizeof(float));
    p += run;
  }
}

// The inverse of store_rows for positions [0, n_ctx): dst [n_ctx, row_dim].
void gather_rows(const LatentLayerView& cache, const int32_t* block_table, int64_t n_ctx, float* dst) {
  const int64_t bs = cache.block_size;
  const int64_t L = cache.row_dim;
  for (int64_t p = 0; p < n_ctx; p += bs) {
    const int64_t run = std::min(bs, n_ctx - p);
    std::memcpy(dst + p * L, cache.block(block_table[p / bs]), static_cast<size_t>(run * L) * sizeof(float));
  }
}

}  // namespace

MlaDims MlaDims::from_config(const ModelConfig& c) {
  MlaDims d;
  d.hidden = c.hidden_size;
  d.n_heads = c.num_attention_heads;
  d.q_lora_rank = c.q_lora_rank;
  d.kv_lora_rank = c.kv_lora_rank;
  d.qk_nope = c.qk_nope_head_dim;
  d.qk_rope = c.qk_rope_head_dim;
  d.v_head = c.v_head_dim;
  d.eps = static_cast<float>(c.rms_norm_eps);
  // numerics.md: scale = (qk_nope + qk_rope)^-½ · m², m = 0.1·mscale_all_dim·ln(factor) + 1 when
  // YaRN is on (independent of any runtime length).
  double scale = 1.0 / std::sqrt(static_cast<double>(d.qk_head()));
  const RopeScaling& rs = c.rope_scaling;
  if (rs.type == "yarn" && rs.mscale_all_dim > 0 && rs.factor > 1) {
    const double m = 0.1 * rs.mscale_all_dim * std::log(rs.factor) + 1.0;
    scale *= m * m;
  }
  d.softmax_scale = static_cast<float>(scale);
  return d;
}

Result<MlaAttention> MlaAttention::load(const Checkpoint& ckpt, const std::string& prefix, const MlaDims& d,
                                        int block) {
  MlaAttention a;
  a.dims_ = d;
  const int64_t q_out = d.n_heads * d.qk_head();
  if (d.q_lora_rank > 0) {
    DS_ASSIGN_OR_RETURN(a.q_a_,
                        load_linear_layer(ckpt, prefix + ".q_a_proj", d.q_lora_rank, d.hidden, block));
    DS_ASSIGN_OR_RETURN(a.q_a_norm_, load_f32(ckpt, prefix + ".q_a_layernorm.weight", Shape{d.q_lora_rank}));
    DS_ASSIGN_OR_RETURN(a.q_b_, load_linear_layer(ckpt, prefix + ".q_b_proj", q_out, d.q_lora_rank, block));
  } else {
    DS_ASSIGN_OR_RETURN(a.q_, load_linear_layer(ckpt, prefix + ".q_proj", q_out, d.hidden, block));
  }
  DS_ASSIGN_OR_RETURN(
      a.kv_a_, load_linear_layer(ckpt, prefix + ".kv_a_proj_with_mqa", d.latent_row(), d.hidden, block));
  DS_ASSIGN_OR_RETURN(a.kv_a_norm_, load_f32(ckpt, prefix + ".kv_a_layernorm.weight", Shape{d.kv_lora_rank}));
  const int64_t per_head = d.qk_nope + d.v_head;
  DS_ASSIGN_OR_RETURN(Linear kv_b, load_linear_layer(ckpt, prefix + ".kv_b_proj", d.n_heads * per_head,
                                                     d.kv_lora_rank, block));
  DS_ASSIGN_OR_RETURN(a.o_,
                      load_linear_layer(ckpt, prefix + ".o_proj", d.hidden, d.n_heads * d.v_head, block));

  a.kv_b_f32_ = dequantize_to_f32(kv_b.w);
  a.kv_b_ = WeightMatrix{WeightFormat::f32, a.kv_b_f32_.data(), d.n_heads * per_head, d.kv_lora_rank};
  const int64_t C = d.kv_lora_rank;
  a.w_uk_t_f32_.resize(static_cast<size_t>(d.n_heads * C * d.qk_nope));
  for (int64_t h = 0; h < d.n_heads; ++h) {
    const float* w_uk = a.kv_b_f32_.data() + h * per_head * C;  // [qk_nope, C]
    float* w_t = a.w_uk_t_f32_.data() + h * C * d.qk_nope;      // [C, qk_nope]
    for (int64_t j = 0; j < d.qk_nope; ++j)
      for (int64_t c = 0; c < C; ++c) w_t[c * d.qk_nope + j] = w_uk[j * C + c];
  }
  for (int64_t h = 0; h < d.n_heads; ++h) {
    a.w_uk_t_.push_back(
        WeightMatrix{WeightFormat::f32, a.w_uk_t_f32_.data() + h * C * d.qk_nope, C, d.qk_nope});
    a.w_uv_.push_back(
        WeightMatrix{WeightFormat::f32, a.kv_b_f32_.data() + (h * per_head + d.qk_nope) * C, d.v_head, C});
  }
  return a;
}

void MlaAttention::forward(const ForwardContext& ctx, MlaMode mode, const AttentionBatch& batch,
                           const std::vector<float>& inv_freq, const float* x, MlaScratch& s,
                           float* out) const {
  const MlaDims& d = dims_;
  const int64_t T = batch.n_rows;
  const int64_t q_row = d.n_heads * d.qk_head();
  const int64_t L = d.latent_row();

  // q: [T, n_heads, qk_nope + qk_rope]
  s.q.reshape(Shape{T, q_row});
  if (d.q_lora_rank > 0) {
    s.cq.reshape(Shape{T, d.q_lora_rank});  // cq: [T, q_lora_rank]
    linear(ctx, q_a_.w, x, T, d.hidden, s.cq.data(), d.q_lora_rank);
    rmsnorm(ctx.isa, s.cq.data(), T, d.q_lora_rank, d.q_lora_rank, q_a_norm_.data(), d.eps, s.cq.data(),
            d.q_lora_rank);
    linear(ctx, q_b_.w, s.cq.data(), T, d.q_lora_rank, s.q.data(), q_row);
  } else {
    linear(ctx, q_.w, x, T, d.hidden, s.q.data(), q_row);
  }
  // kv: [T, kv_lora_rank | qk_rope] -> normalised c_kv and RoPE'd k_pe, the cache row.
  s.kv.reshape(Shape{T, L});
  linear(ctx, kv_a_.w, x, T, d.hidden, s.kv.data(), L);
  rmsnorm(ctx.isa, s.kv.data(), T, d.kv_lora_rank, L, kv_a_norm_.data(), d.eps, s.kv.data(), L);
  rope_interleaved(ctx.isa, s.kv.data(), T, L, 1, L, d.kv_lora_rank, batch.pos, inv_freq);
  rope_interleaved(ctx.isa, s.q.data(), T, q_row, d.n_heads, d.qk_head(), d.qk_nope, batch.pos, inv_freq);

  DS_ASSERT(batch.cache.row_dim == L && batch.block_tables.size() == batch.chunks.size(),
            "the model passes this layer's cache slot and one block table per chunk");
  for (size_t i = 0; i < batch.chunks.size(); ++i) {
    const SeqChunk& c = batch.chunks[i];
    store_rows(batch.cache, batch.block_tables[i], c.pos_begin, c.n_rows, s.kv.row(c.row_begin));
  }

  s.o.reshape(Shape{T, d.n_heads * d.v_head});
  if (mode == MlaMode::absorbed) {
    attend_absorbed(ctx, batch, s);
  } else {
    attend_plain(ctx, batch, s);
  }
  linear(ctx, o_.w, s.o.data(), T, d.n_heads * d.v_head, out, d.hidden);
}

void MlaAttention::attend_absorbed(const ForwardContext& ctx, const AttentionBatch& batch,
                                   MlaScratch& s) const {
  const MlaDims& d = dims_;
  const int64_t T = batch.n_rows;
  const int64_t C = d.kv_lora_rank;
  const int64_t L = d.latent_row();
  // q_lat[t, h] = [q_nope[t, h] · W_uk,h | q_pe[t, h]]: row-wise, so all sequences at once; one
  // head per task keeps each head's product on one thread in a fixed order.
  s.q_lat.reshape(Shape{T, d.n_heads * L});
  // The task lambdas capture one reference each so std::function keeps them inline (no heap
  // allocation per decode step).
  struct HeadTask {
    const MlaAttention* self;
    const ForwardContext* ctx;
    MlaScratch* s;
    int64_t T;
  } task{this, &ctx, &s, T};
  ctx.pool->parallel_for(d.n_heads,
                         [&task](int64_t h) { task.self->absorb_query_head(*task.ctx, *task.s, task.T, h); });
  // o_lat: [T, n_heads, C]
  s.o_lat.reshape(Shape{T, d.n_heads * C});
  for (size_t i = 0; i < batch.chunks.size(); ++i) {
    const SeqChunk& c = batch.chunks[i];
    const int64_t n_ctx = c.pos_begin + c.n_rows;
    s.block_rows.resize(
        static_cast<size_t>(blocks_for_tokens(n_ctx, static_cast<int32_t>(batch.cache.block_size))));
    for (size_t b = 0; b < s.block_rows.size(); ++b)
      s.block_rows[b] = batch.cache.block(batch.block_tables[i][b]);
    MlaAbsorbedArgs a;
    a.q = s.q_lat.row(c.row_begin);
    a.n_q = c.n_rows;
    a.q_pos = batch.pos + c.row_begin;
    a.block_rows = s.block_rows.data();
    a.block_size = batch.cache.block_size;
    a.n_ctx = n_ctx;
    a.n_heads = static_cast<int>(d.n_heads);
    a.latent_dim = static_cast<int>(C);
    a.rope_dim = static_cast<int>(d.qk_rope);
    a.scale = d.softmax_scale;
    a.out = s.o_lat.row(c.row_begin);
    mla_attention_absorbed(ctx.isa, *ctx.pool, a);
  }
  // o[t, h] = W_uv,h · o_lat[t, h]
  ctx.pool->parallel_for(
      d.n_heads, [&task](int64_t h) { task.self->expand_output_head(*task.ctx, *task.s, task.T, h); });
}

void MlaAttention::absorb_query_head(const ForwardContext& ctx, MlaScratch& s, int64_t T, int64_t h) const {
  const MlaDims& d = dims_;
  const int64_t L = d.latent_row();
  const int64_t q_row = d.n_heads * d.qk_head();
  // q_lat[:, h, :C] = q_nope[:, h] · W_uk,h  (W_uk,hᵀ stored [C, qk_nope])
  MatmulArgs a;
  a.x = s.q.data() + h * d.qk_head();
  a.m = T;
  a.ldx = q_row;
  a.w = &w_uk_t_[static_cast<size_t>(h)];
  a.y = s.q_lat.data() + h * L;
  a.ldy = d.n_heads * L;
  matmul_cols(matmul_isa(ctx.isa, *a.w), a, 0, d.kv_lora_rank);
  for (int64_t t = 0; t < T; ++t) {
    std::memcpy(s.q_lat.data() + t * d.n_heads * L + h * L + d.kv_lora_rank,
                s.q.data() + t * q_row + h * d.qk_head() + d.qk_nope,
                static_cast<size_t>(d.qk_rope) * sizeof(float));
  }
}

void MlaAttention::expand_output_head(const ForwardContext& ctx, MlaScratch& s, int64_t T, int64_t h) const {
  const MlaDims& d = dims_;
  // o[:, h] = o_lat[:, h] · W_uv,hᵀ
  MatmulArgs a;
  a.x = s.o_lat.data() + h * d.kv_lora_rank;
  a.m = T;
  a.ldx = d.n_heads * d.kv_lora_rank;
  a.w = &w_uv_[static_cast<size_t>(h)];
  a.y = s.o.data() + h * d.v_head;
  a.ldy = d.n_heads * d.v_head;
  matmul_cols(matmul_isa(ctx.isa, *a.w), a, 0, d.v_head);
}

void MlaAttention::attend_plain(const ForwardContext& ctx, const AttentionBatch& batch, MlaScratch& s) const {
  const MlaDims& d = dims_;
  const int64_t C = d.kv_lora_rank;
  const int64_t L = d.latent_row();
  const int64_t per_head = d.qk_nope + d.v_head;
  for (size_t i = 0; i < batch.chunks.size(); ++i) {
    const SeqChunk& c = batch.chunks[i];
    const int64_t n_ctx = c.pos_begin + c.n_rows;
    // ctx_rows: [n_ctx, L], the chunk's context in position order (this cross-check path gathers
    // rather than teaching the GEMM about blocks).
    s.ctx_rows.reshape(Shape{n_ctx, L});
    gather_rows(batch.cache, batch.block_tables[i], n_ctx, s.ctx_rows.data());
    // kv_up: [n_ctx, n_heads, qk_nope + v_head] = c_kv · W_kvbᵀ over the whole context.
    s.kv_up.reshape(Shape{n_ctx, d.n_heads * per_head});
    linear(ctx, kv_b_, s.ctx_rows.data(), n_ctx, L, s.kv_up.data(), d.n_heads * per_head);
    s.k.reshape(Shape{n_ctx, d.n_heads * d.qk_head()});
    s.v.reshape(Shape{n_ctx, d.n_heads * d.v_head});
    s.kv_pos.resize(static_cast<size_t>(n_ctx));
    for (int64_t j = 0; j < n_ctx; ++j) {
      s.kv_pos[static_cast<size_t>(j)] = static_cast<int32_t>(j);
      for (int64_t h = 0; h < d.n_heads; ++h) {
        const float* up = s.kv_up.row(j) + h * per_head;
        float* k = s.k.row(j) + h * d.qk_head();
        std::memcpy(k, up, static_cast<size_t>(d.qk_nope) * sizeof(float));
        std::memcpy(k + d.qk_nope, s.ctx_rows.row(j) + C, static_cast<size_t>(d.qk_rope) * sizeof(float));
        std::memcpy(s.v.row(j) + h * d.v_head, up + d.qk_nope, static_cast<size_t>(d.v_head) * sizeof(float));
      }
    }
    MhaArgs a;
    a.q = s.q.row(c.row_begin);
    a.n_q = c.n_rows;
    a.q_pos = batch.pos + c.row_begin;
    a.k = s.k.data();
    a.v = s.v.data();
    a.n_kv = n_ctx;
    a.kv_pos = s.kv_pos.data();
    a.n_heads = static_cast<int>(d.n_heads);
    a.qk_dim = static_cast<int>(d.qk_head());
    a.v_dim = static_cast<int>(d.v_head);
    a.scale = d.softmax_scale;
    a.out = s.o.row(c.row_begin);
    mha_attention(ctx.isa, *ctx.pool, a);
  }
}

}  // namespace ds
