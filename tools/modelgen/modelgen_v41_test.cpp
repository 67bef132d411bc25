// DeepSeek-V4.1 generation: the tiny preset's config and roles, the V4.1 tensor plan (model-spec
// §6.2: 32×32 FP8 tiles, role-dependent compressor and indexer tensors, no hc_head, no ape), and
// a tiny checkpoint read back through the engine's loaders.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "make_model.h"
#include "model/engram_hash.h"
#include "presets.h"
#include "tensor/dtype.h"
#include "tensor_plan.h"
#include "weights/checkpoint.h"
#include "weights/layer_spec.h"
#include "weights/model_config.h"

namespace ds::modelgen {
namespace {

std::map<std::string, TensorSpec> by_name(const std::vector<TensorSpec>& plan) {
  std::map<std::string, TensorSpec> m;
  for (const TensorSpec& t : plan) m.emplace(t.name, t);
  return m;
}

TEST(PresetV41, TinyParsesAndHasEveryRole) {
  const Result<ModelConfig> c = deepseek_v41_preset("tiny", true);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const Result<ModelConfig> back = parse_model_config(model_config_to_json(*c), "tiny");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, *c);
  EXPECT_EQ(c->rms_norm_eps, 1e-20);
  EXPECT_EQ(c->quantization.block_rows, 32);
  const Result<std::vector<LayerSpec>> s = v41_layer_specs(*c);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const std::vector<LayerSpec>& L = *s;
  EXPECT_TRUE(L[2].owns_compressor() && L[2].owns_indexer() && L[2].compress_ratio == 2);
  EXPECT_TRUE(!L[3].owns_compressor() && L[3].kv_source_layer == 2 && L[3].index_source_layer == 2);
  EXPECT_TRUE(L[4].owns_compressor() && L[4].candidate_source && L[4].compress_ratio == 1);
  EXPECT_EQ(L[5].index_source_layer, 4);
  EXPECT_TRUE(L[6].owns_indexer() && !L[6].owns_compressor() && L[6].candidate_pool &&
              L[6].kv_source_layer == 4);
  EXPECT_EQ(L[7].index_source_layer, 6);
  EXPECT_FALSE(deepseek_v41_preset("huge", true).ok());
}

TEST(PresetV41, SmallAndBenchParseWithEveryRoleAndEngram) {
  for (const char* preset : {"small", "bench"}) {
    SCOPED_TRACE(preset);
    const Result<ModelConfig> c = deepseek_v41_preset(preset, true);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    const Result<ModelConfig> back = parse_model_config(model_config_to_json(*c), preset);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(*back, *c);
    const Result<std::vector<LayerSpec>> s = v41_layer_specs(*c);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    int kv_sources = 0, readers = 0, pool_sources = 0, candidates = 0;
    for (const LayerSpec& l : *s) {
      kv_sources += l.owns_compressor();
      readers += l.compress_ratio > 0 && !l.owns_compressor() && !l.owns_indexer();
      pool_sources += l.candidate_pool && l.owns_indexer();
      candidates += l.candidate_source;
    }
    EXPECT_EQ(kv_sources, 2);
    EXPECT_GE(readers, 2);
    EXPECT_GE(pool_sources, 1);
    EXPECT_EQ(candidates, 1);
    ASSERT_TRUE(c->engram.has_value());
    EXPECT_EQ(c->engram->layer_ids, (std::vector<int>{1, 2}));
    // Table rows are each layer's Σ primes, as the model checks at load.
    EXPECT_TRUE(engram_hash_layers(*c->engram, preset).ok());
  }
}

TEST(TensorPlanV41, TinyHasTheReleasedNamesPerRole) {
  const ModelConfig c = *deepseek_v41_preset("tiny", true);
  const std::map<std::string, TensorSpec> t = by_name(plan_tensors(c));
  // Every Linear F8 weight is tiled 32×32: wq_b [4·128, 64] -> scale [16, 2].
  const TensorSpec& wq_b = t.at("layers.0.attn.wq_b.weight");
  EXPECT_EQ(wq_b.dtype, DType::f8_e4m3);
  EXPECT_EQ(wq_b.scale_shape(), (Shape{16, 2}));
  EXPECT_EQ(t.at("layers.0.ffn.experts.0.w1.weight").dtype, DType::i8);  // packed FP4
  EXPECT_EQ(t.at("layers.0.ffn.experts.0.w1.weight").scale_shape(), (Shape{64, 2}));
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    SCOPED_TRACE(p);
    const bool kv_source = l == 2 || l == 4, index_source = l == 2 || l == 4 || l == 6;
    EXPECT_EQ(t.count(p + "attn.compressor.wkv.weight"), kv_source ? 1u : 0u);
    EXPECT_EQ(t.count(p + "attn.compressor.wgate.weight"), l == 2 ? 1u : 0u);  // ratio 1 has no gate
    EXPECT_EQ(t.count(p + "attn.indexer.wk.weight"), kv_source ? 1u : 0u);
    EXPECT_EQ(t.count(p + "attn.indexer.k_norm.weight"), kv_source ? 1u : 0u);
    EXPECT_EQ(t.count(p + "attn.indexer.wq_b.weight"), index_source ? 1u : 0u);
    EXPECT_EQ(t.count(p + "attn.indexer.weights_proj.weight"), index_source ? 1u : 0u);
    EXPECT_EQ(t.count(p + "attn.compressor.ape"), 0u);
    EXPECT_EQ(t.count(p + "ffn.gate.bias"), 1u);
    EXPECT_EQ(t.count(p + "ffn.gate.bias_vl"), 1u);
    EXPECT_EQ(t.count(p + "ffn.gate.tid2eid"), 0u);
  }
  EXPECT_EQ(t.at("layers.2.attn.indexer.wk.weight").shape, (Shape{c.index_head_dim, c.head_dim}));
  EXPECT_EQ(t.count("hc_head_fn"), 0u);
  // Engram on layers 1 and 2 (model-spec §6.2): the table with one E8M0 scale per 32 columns of
  // each row, wkv [(hc + 1)·d, 3·heads·head_dim] in 32×32 tiles, q/k weights [hc, d].
  const EngramConfig& e = *c.engram;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".engram.";
    const bool on = l == 1 || l == 2;
    EXPECT_EQ(t.count(p + "embed.weight"), on ? 1u : 0u) << p;
    EXPECT_EQ(t.count(p + "wkv.weight"), on ? 1u : 0u) << p;
    EXPECT_EQ(t.count(p + "q_weight"), on ? 1u : 0u) << p;
  }
  const TensorSpec& table = t.at("layers.2.engram.embed.weight");
  EXPECT_EQ(table.shape, (Shape{e.num_embeddings[1], 32}));
  EXPECT_EQ(table.dtype, DType::f8_e4m3);
  EXPECT_EQ(table.scale_name(), "layers.2.engram.embed.scale");
  EXPECT_EQ(table.scale_shape(), (Shape{e.num_embeddings[1], 1}));
  EXPECT_EQ(t.at("layers.1.engram.wkv.weight").shape, (Shape{5 * 64, 3 * 2 * 32}));
  EXPECT_EQ(t.at("layers.1.engram.wkv.weight").scale_shape(), (Shape{10, 6}));
  EXPECT_EQ(t.at("layers.1.engram.k_weight").shape, (Shape{4, 64}));
  // DSpark (docs/dspark.md): three window-only stages with their own experts, stage 0's feature
  // projection over the three target layers, the heads on the last stage.
  ASSERT_TRUE(c.dspark);
  EXPECT_EQ(c.num_draft_layers(), 3);
  EXPECT_EQ(c.dspark->target_layer_ids, (std::vector<int>{5, 6, 7}));
  const int64_t d = c.hidden_size, r = c.dspark->markov_rank;
  for (int k = 0; k < 3; ++k) {
    const std::string p = "mtp." + std::to_string(k) + ".";
    SCOPED_TRACE(p);
    EXPECT_EQ(t.count(p + "attn.wkv.weight"), 1u);
    EXPECT_EQ(t.count(p + "attn.compressor.wkv.weight"), 0u);
    EXPECT_EQ(t.count(p + "hc_ffn_fn"), 1u);
    EXPECT_EQ(t.count(p + "ffn.gate.bias_vl"), 0u);
    EXPECT_EQ(t.at(p + "ffn.gate.weight").shape, (Shape{c.dspark->n_routed_experts, d}));
    EXPECT_EQ(t.count(p + "ffn.experts." + std::to_string(c.dspark->n_routed_experts - 1) + ".w2.weight"),
              1u);
    EXPECT_EQ(t.count(p + "ffn.experts." + std::to_string(c.dspark->n_routed_experts) + ".w2.weight"), 0u);
    EXPECT_EQ(t.count(p + "main_proj.weight"), k == 0 ? 1u : 0u);
    EXPECT_EQ(t.count(p + "markov_head.embed.weight"), k == 2 ? 1u : 0u);
    EXPECT_EQ(t.count(p + "engram.embed.weight"), 0u);
  }
  EXPECT_EQ(t.at("mtp.0.main_proj.weight").shape, (Shape{d, 3 * d}));
  EXPECT_EQ(t.at("mtp.0.main_proj.weight").dtype, DType::f8_e4m3);
  EXPECT_EQ(t.at("mtp.2.markov_head.embed.weight").shape, (Shape{c.vocab_size, r}));
  EXPECT_EQ(t.at("mtp.2.markov_head.head.weight").shape, (Shape{c.vocab_size, r}));
  EXPECT_EQ(t.at("mtp.2.confidence_head.proj.weight").shape, (Shape{1, d + r}));
  EXPECT_EQ(t.count("mtp.2.norm.weight"), 1u);
  // Without DSpark: no stage, and the config has no draft layer.
  ModelConfig plain = c;
  plain.dspark.reset();
  plain.num_nextn_predict_layers = 0;
  plain.compress_ratios.resize(static_cast<size_t>(plain.num_hidden_layers));
  for (const TensorSpec& spec : plan_tensors(plain)) EXPECT_NE(spec.name.rfind("mtp.", 0), 0u) << spec.name;
}

TEST(MakeModelV41, TinyReadsBackThroughTheLoaders) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / "modelgen_v41_test_tiny";
  fs::remove_all(root);
  fs::create_directories(root / "tok");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    std::FILE* fp = std::fopen((root / "tok" / f).c_str(), "w");
    ASSERT_NE(fp, nullptr);
    std::fputs(
        std::string(f) == "tokenizer.json"
            ? R"({"added_tokens":[],"model":{"type":"BPE","vocab":{},"merges":[]},"decoder":{"type":"ByteLevel"}})"
            : "{}",
        fp);
    std::fclose(fp);
  }
  MakeModelOptions o;
  o.arch = "deepseek_v41";
  o.preset = "tiny";
  o.fp8 = true;
  o.out_dir = (root / "model").string();
  o.tokenizer_dir = (root / "tok").string();
  ThreadPool pool(2);
  const Result<MakeModelReport> report = make_model(o, pool);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  const Result<ModelConfig> cfg = load_model_config(o.out_dir);
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
  EXPECT_EQ(*cfg, report->config);
  const Result<Checkpoint> ckpt = Checkpoint::open(o.out_dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  size_t n_expected = 0;
  for (const TensorSpec& t : plan_tensors(*cfg)) {
    ++n_expected;
    SCOPED_TRACE(t.name);
    ASSERT_TRUE(ckpt->get(t.name, t.dtype, t.shape).ok());
    if (!t.block_quantized()) continue;
    ++n_expected;
    ASSERT_TRUE(ckpt->get(t.scale_name(), DType::f8_e8m0, t.scale_shape()).ok());
    if (t.fp8_tile_rows > 0) continue;  // an Engram table (row scales): read by V41EngramLayer
    const std::string prefix = t.name.substr(0, t.name.size() - std::string(".weight").size());
    std::vector<float> storage;
    const Result<WeightMatrix> m = load_linear(*ckpt, prefix, t.shape[0], t.in_features(), 32, storage);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    EXPECT_EQ(m->format, t.fp4() ? WeightFormat::fp4_e2m1_block : WeightFormat::fp8_e4m3_block);
    if (!t.fp4()) {
      EXPECT_EQ(m->block_rows, 32);
      // 128×128 tiles would not load with this scale shape.
      std::vector<float> other;
      if (t.shape[0] > 128 || t.shape[1] > 128) {
        EXPECT_FALSE(load_linear(*ckpt, prefix, t.shape[0], t.in_features(), 128, other).ok());
      }
    }
  }
  EXPECT_EQ(ckpt->tensors().size(), n_expected);
  // The V4.1 markers, <｜System｜> and the image placeholder at config.json's image_token_id.
  std::FILE* fp = std::fopen((fs::path(o.out_dir) / "tokenizer.json").c_str(), "r");
  ASSERT_NE(fp, nullptr);
  std::string text;
  for (int ch; (ch = std::fgetc(fp)) != EOF;) text.push_back(static_cast<char>(ch));
  std::fclose(fp);
  EXPECT_NE(text.find("<｜System｜>"), std::string::npos);
  EXPECT_NE(text.find("<｜deepseek_image｜>"), std::string::npos);
  EXPECT_NE(text.find("129264"), std::string::npos);
  fs::remove_all(root);
}

}  // namespace
}  // namespace ds::modelgen
