// V4.1 prefill FLOPs layer by layer (prefill_flops_v41.h) against a hand count, exact and with
// decoder replay: a 2-layer model (layer 0 encoder window-only, layer 1 the decoder's ratio-1 KV and
// index source) with one matmul each, a compressor on layer 1 and the head.
#include "prefill_flops_v41.h"

#include <gtest/gtest.h>

namespace ds::bench {
namespace {

TensorInfo t(std::string name, Shape shape) {
  TensorInfo ti;
  ti.name = std::move(name);
  ti.dtype = DType::bf16;
  ti.shape = shape;
  ti.nbytes = shape.numel() * 2;
  return ti;
}

TEST(V41PrefillFlops, HandCountExactAndWithDecoderReplay) {
  ModelConfig c;
  c.model_type = "deepseek_v41";
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.head_dim = 8;
  c.sliding_window = 4;
  c.index_topk = 2;
  c.index_n_heads = 3;
  c.index_head_dim = 5;
  std::vector<LayerSpec> specs(2);
  specs[0].layer = 0;
  specs[1].layer = 1;
  specs[1].compress_ratio = 1;
  specs[1].kv_source_layer = specs[1].index_source_layer = specs[1].index_keys_layer = 1;
  const std::vector<TensorInfo> tensors = {
      t("layers.0.attn.wq_a.weight", Shape{10, 10}),           // 100 params
      t("layers.1.attn.wq_a.weight", Shape{10, 20}),           // 200
      t("layers.1.attn.compressor.wkv.weight", Shape{10, 3}),  // 30, every prompt row
      t("layers.1.attn.indexer.wk.weight", Shape{2, 5}),       // 10, every prompt row
      t("head.weight", Shape{7, 10}),                          // 70, one row
  };
  const int64_t P = 6;
  // attention per row p: window min(4, p - start + 1) (+ min(2, p + 1) top-k and 2·3·5·(p + 1)
  // index scores on layer 1), 4·2·8 = 64 FLOPs per key
  auto attention = [&](int64_t start, bool compressed) {
    double f = 0;
    for (int64_t p = start; p < P; ++p) {
      double keys = static_cast<double>(std::min<int64_t>(4, p - start + 1));
      if (compressed) {
        keys += static_cast<double>(std::min<int64_t>(2, p + 1));
        f += 30.0 * static_cast<double>(p + 1);
      }
      f += 64.0 * keys;
    }
    return f;
  };
  const V41PrefillFlops exact = v41_prefill_flops(tensors, c, specs, /*split=*/1, P, P);
  EXPECT_DOUBLE_EQ(exact.encoder, 2.0 * 100 * P + attention(0, false));
  EXPECT_DOUBLE_EQ(exact.source, 2.0 * 40 * P);
  EXPECT_DOUBLE_EQ(exact.decoder, 2.0 * 200 * P + attention(0, true));
  EXPECT_DOUBLE_EQ(exact.head, 2.0 * 70);
  // Decoder on the last 2 rows: the source compressor still sees all 6, the decoder's window starts at 4.
  const V41PrefillFlops replay = v41_prefill_flops(tensors, c, specs, 1, P, 2);
  EXPECT_DOUBLE_EQ(replay.encoder, exact.encoder);
  EXPECT_DOUBLE_EQ(replay.source, exact.source);
  EXPECT_DOUBLE_EQ(replay.decoder, 2.0 * 200 * 2 + attention(4, true));
  EXPECT_LT(replay.total(), exact.total());
}

}  // namespace
}  // namespace ds::bench
