#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

#include "counter_rng.h"
#include "fp8_block_quant.h"
#include "make_model.h"
#include "presets.h"
#include "tensor/dtype.h"
#include "tensor_fill.h"
#include "tensor_plan.h"
#include "weights/checkpoint.h"
#include "weights/model_config.h"

namespace ds::modelgen {
namespace {

TEST(CounterRng, PureFunctionOfKeyAndIndexWithUnitMoments) {
  const uint64_t key = tensor_key(7, "model.layers.0.mlp.up_proj.weight");
  EXPECT_EQ(key, tensor_key(7, "model.layers.0.mlp.up_proj.weight"));
  EXPECT_NE(key, tensor_key(8, "model.layers.0.mlp.up_proj.weight"));
  EXPECT_NE(key, tensor_key(7, "model.layers.1.mlp.up_proj.weight"));
  constexpr int kN = 200000;
  double sum = 0, sum_sq = 0, sum_4 = 0;
  for (int i = 0; i < kN; ++i) {
    const double z = normal_at(key, static_cast<uint64_t>(i));
    ASSERT_EQ(normal_at(key, static_cast<uint64_t>(i)), static_cast<float>(z));
    ASSERT_LE(std::fabs(z), 3.4642) << "Irwin-Hall(4) is bounded by 2*sqrt(3)";
    sum += z;
    sum_sq += z * z;
    sum_4 += z * z * z * z;
  }
  // Standard errors at n = 2e5: mean 0.0022, variance 0.0032; bounds are ~4.5 sigma.
  EXPECT_NEAR(sum / kN, 0.0, 0.01);
  EXPECT_NEAR(sum_sq / kN, 1.0, 0.015);
  // Fourth moment of Irwin-Hall(4) scaled to unit variance: 3 - 0.3 = 2.7 (normal: 3).
  EXPECT_NEAR(sum_4 / kN, 2.7, 0.05);
}

TEST(Fp8BlockQuant, RoundTripWithinHalfUlpAndTileMaxIs448) {
  const int64_t rows = 300, cols = 200;  // partial edge tiles in both directions
  std::vector<float> w(static_cast<size_t>(rows * cols));
  const uint64_t key = tensor_key(1, "w");
  for (size_t i = 0; i < w.size(); ++i) w[i] = normal_at(key, i) * (1.0f + static_cast<float>(i % 7));
  ThreadPool pool1(1), pool3(3);
  const Fp8BlockWeights a = quantize_fp8_blocks(w.data(), rows, cols, 128, pool1);
  const Fp8BlockWeights b = quantize_fp8_blocks(w.data(), rows, cols, 128, pool3);
  EXPECT_EQ(a.q, b.q);
  EXPECT_EQ(a.scale_inv, b.scale_inv);
  ASSERT_EQ(a.scale_inv.size(), 3u * 2u);
  std::vector<float> tile_max(a.scale_inv.size(), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const size_t tile = static_cast<size_t>((r / 128) * 2 + c / 128);
      const float s = a.scale_inv[tile];
      const float x = w[static_cast<size_t>(r * cols + c)];
      const float deq = fp8_e4m3_to_f32(a.q[static_cast<size_t>(r * cols + c)]) * s;
      // E4M3 has 3 mantissa bits: |error| <= 2^-4·|x| for normals, <= 2^-10·s for subnormals.
      EXPECT_LE(std::fabs(deq - x), std::max(std::fabs(x) * 0x1p-4f, s * 0x1p-10f) * 1.0001f)
          << "at " << r << "," << c;
      tile_max[tile] =
          std::max(tile_max[tile], std::fabs(fp8_e4m3_to_f32(a.q[static_cast<size_t>(r * cols + c)])));
    }
  }
  for (float m : tile_max) EXPECT_EQ(m, 448.0f);
}

TEST(TensorPlan, TinyHasTheHfNamesShapesAndDtypes) {
  const ModelConfig c = deepseek_v3_preset("tiny", /*fp8=*/true).value();
  const std::vector<TensorSpec> plan = plan_deepseek_v3_tensors(c);
  std::map<std::string, const TensorSpec*> by_name;
  for (const TensorSpec& t : plan) {
    EXPECT_TRUE(by_name.emplace(t.name, &t).second) << "duplicate " << t.name;
  }
  auto expect = [&](const std::string& name, Shape shape, DType dtype) {
    auto it = by_name.find(name);
    ASSERT_NE(it, by_name.end()) << name;
    EXPECT_EQ(it->second->shape, shape) << name;
    EXPECT_EQ(it->second->dtype, dtype) << name;
  };
  expect("model.embed_tokens.weight", {129280, 64}, DType::bf16);
  expect("lm_head.weight", {129280, 64}, DType::bf16);
  expect("model.norm.weight", {64}, DType::bf16);
  expect("model.layers.0.mlp.gate_proj.weight", {128, 64}, DType::f8_e4m3);
  expect("model.layers.0.self_attn.q_a_proj.weight", {48, 64}, DType::f8_e4m3);
  expect("model.layers.0.self_attn.q_a_layernorm.weight", {48}, DType::bf16);
  expect("model.layers.0.self_attn.q_b_proj.weight", {4 * 32, 48}, DType::f8_e4m3);
  expect("model.layers.0.self_attn.kv_a_proj_with_mqa.weight", {32 + 16, 64}, DType::f8_e4m3);
  expect("model.layers.0.self_attn.kv_b_proj.weight", {4 * 32, 32}, DType::f8_e4m3);
  expect("model.layers.0.self_attn.o_proj.weight", {64, 64}, DType::f8_e4m3);
  expect("model.layers.1.mlp.gate.weight", {8, 64}, DType::bf16);
  expect("model.layers.1.mlp.gate.e_score_correction_bias", {8}, DType::f32);
  expect("model.layers.2.mlp.experts.7.down_proj.weight", {64, 32}, DType::f8_e4m3);
  expect("model.layers.2.mlp.shared_experts.up_proj.weight", {32, 64}, DType::f8_e4m3);
  expect("model.layers.3.embed_tokens.weight", {129280, 64}, DType::bf16);
  expect("model.layers.3.eh_proj.weight", {64, 128}, DType::bf16);
  expect("model.layers.3.enorm.weight", {64}, DType::bf16);
  expect("model.layers.3.hnorm.weight", {64}, DType::bf16);
  expect("model.layers.3.shared_head.norm.weight", {64}, DType::bf16);
  expect("model.layers.3.shared_head.head.weight", {129280, 64}, DType::bf16);
  expect("model.layers.3.mlp.experts.0.gate_proj.weight", {32, 64}, DType::f8_e4m3);
  EXPECT_EQ(by_name.count("model.layers.0.mlp.gate.weight"), 0u);  // layer 0 is dense
  EXPECT_EQ(by_name.count("model.layers.4.input_layernorm.weight"), 0u);
  // Per layer: 2 norms + 7 attention; dense +3; MoE +2 (router) + 3·8 experts + 3 shared.
  // Globals 3; MTP extras 6.
  EXPECT_EQ(plan.size(), size_t{3 + (9 + 3) + 2 * (9 + 29) + (6 + 9 + 29)});

  const ModelConfig bf = deepseek_v3_preset("tiny", /*fp8=*/false).value();
  for (const TensorSpec& t : plan_deepseek_v3_tensors(bf)) EXPECT_NE(t.dtype, DType::f8_e4m3) << t.name;
}

TEST(TensorPlan, ActiveBytesCountTopKExpertsAndOneEmbeddingRow) {
  const ModelConfig c = deepseek_v3_preset("tiny", false).value();
  const ModelBytes b = model_bytes(c, plan_deepseek_v3_tensors(c));
  const size_t expert_bytes = 3 * 32 * 64 * 2;
  const size_t head_bytes = size_t{129280} * 64 * 2;
  // Total minus the (8 - 2) idle experts of each of the 3 MoE blocks, minus the two embedding
  // tables except one row each.
  const size_t expected_active_all = b.total - 3 * 6 * expert_bytes - 2 * (head_bytes - 64 * 2);
  EXPECT_EQ(b.active_per_token + b.mtp_active_per_token, expected_active_all);
  EXPECT_GT(b.mtp_active_per_token, head_bytes);
}

TEST(TensorFill, BytesIndependentOfThreadsAndKeyedBySeed) {
  const ModelConfig c = deepseek_v3_preset("small", true).value();
  ThreadPool pool1(1), pool3(3);
  for (const TensorSpec& t : plan_deepseek_v3_tensors(c)) {
    if (t.name != "model.layers.0.mlp.down_proj.weight" && t.name != "model.norm.weight" &&
        t.name != "model.layers.1.mlp.gate.e_score_correction_bias") {
      continue;
    }
    const FilledTensor a = fill_tensor(t, 5, pool1);
    const FilledTensor b = fill_tensor(t, 5, pool3);
    const FilledTensor other = fill_tensor(t, 6, pool3);
    EXPECT_EQ(a.bytes.size(), static_cast<size_t>(t.shape.numel()) * dtype_size(t.dtype)) << t.name;
    EXPECT_EQ(a.bytes, b.bytes) << t.name;
    EXPECT_EQ(a.scale_bytes, b.scale_bytes) << t.name;
    EXPECT_NE(a.bytes, other.bytes) << t.name;
    EXPECT_EQ(a.scale_bytes.size(), t.block_quantized() ? 4u * 2u * 4u : 0u) << t.name;  // [2, 4] tiles
  }
}

TEST(TensorFill, LinearWeightsHaveStdGainOverSqrtFanIn) {
  const ModelConfig c = deepseek_v3_preset("small", false).value();
  ThreadPool pool(2);
  for (const TensorSpec& t : plan_deepseek_v3_tensors(c)) {
    if (t.name != "model.layers.0.mlp.down_proj.weight" && t.name != "model.layers.0.mlp.up_proj.weight") {
      continue;
    }
    const FilledTensor f = fill_tensor(t, 1, pool);
    const auto* v = reinterpret_cast<const uint16_t*>(f.bytes.data());
    double sum_sq = 0;
    for (int64_t i = 0; i < t.shape.numel(); ++i) sum_sq += std::pow(bf16_to_f32(v[i]), 2);
    const double want = t.gain / std::sqrt(static_cast<double>(t.shape[1]));
    // 131072 samples: the relative standard error of the RMS is ~0.2%.
    EXPECT_NEAR(std::sqrt(sum_sq / static_cast<double>(t.shape.numel())), want, 0.01 * want) << t.name;
  }
}

TEST(MakeModel, RejectsUnknownPresetAndMissingTokenizer) {
  ThreadPool pool(1);
  const std::string out = (std::filesystem::temp_directory_path() / "modelgen_test_out").string();
  MakeModelOptions o;
  o.out_dir = out;
  o.preset = "huge";
  o.tokenizer_dir = out;
  EXPECT_EQ(make_model(o, pool).status().code(), ErrorCode::invalid_argument);
  o.preset = "tiny";
  o.tokenizer_dir = out + "/no_such_dir";
  const Status s = make_model(o, pool).status();
  EXPECT_EQ(s.code(), ErrorCode::not_found);
  EXPECT_NE(s.message().find("no_such_dir"), std::string::npos) << s.message();
  std::filesystem::remove_all(out);
}

// Generates tiny fp8 and reads it back through the engine's own loader: every planned tensor is
// where the index says, with its dtype, shape and block scales; config.json round-trips.
TEST(MakeModel, TinyFp8ReadsBackThroughCheckpoint) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / "modelgen_test_tiny_fp8";
  fs::remove_all(root);
  fs::create_directories(root / "tok");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    std::FILE* fp = std::fopen((root / "tok" / f).c_str(), "w");
    ASSERT_NE(fp, nullptr);
    std::fputs("{}", fp);
    std::fclose(fp);
  }
  // A shard left by an earlier, larger model in the same directory must not survive.
  fs::create_directories(root / "model");
  const fs::path stale = root / "model" / "model-00007-of-00009.safetensors";
  std::FILE* stale_file = std::fopen(stale.c_str(), "w");
  ASSERT_NE(stale_file, nullptr);
  std::fclose(stale_file);
  MakeModelOptions o;
  o.preset = "tiny";
  o.fp8 = true;
  o.seed = 3;
  o.out_dir = (root / "model").string();
  o.tokenizer_dir = (root / "tok").string();
  ThreadPool pool(2);
  const Result<MakeModelReport> report = make_model(o, pool);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_GE(report->n_shards, 2);
  EXPECT_TRUE(fs::exists(root / "model" / "tokenizer.json"));
  EXPECT_FALSE(fs::exists(stale));

  const Result<ModelConfig> cfg = load_model_config(o.out_dir);
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
  EXPECT_EQ(cfg->hidden_size, 64);
  EXPECT_EQ(cfg->n_group, 4);
  EXPECT_EQ(cfg->quantization.quant_method, "fp8");
  EXPECT_EQ(cfg->rope_scaling.type, "yarn");

  const Result<Checkpoint> ckpt = Checkpoint::open(o.out_dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  const std::vector<TensorSpec> plan = plan_deepseek_v3_tensors(report->config);
  size_t n_expected = 0;
  for (const TensorSpec& t : plan) {
    ++n_expected;
    EXPECT_TRUE(ckpt->get(t.name, t.dtype, t.shape).ok()) << t.name;
    if (t.block_quantized()) {
      ++n_expected;
      const Shape grid{(t.shape[0] + 127) / 128, (t.shape[1] + 127) / 128};
      EXPECT_TRUE(ckpt->get(t.scale_name(), DType::f32, grid).ok()) << t.scale_name();
    }
  }
  EXPECT_EQ(ckpt->tensors().size(), n_expected);
  EXPECT_EQ(ckpt->total_bytes(), report->bytes.total);
  // A norm weight decodes to 1 + 0.1·z, within the Irwin-Hall bound.
  const Result<std::vector<float>> norm = load_f32(*ckpt, "model.norm.weight", Shape{64});
  ASSERT_TRUE(norm.ok());
  for (float v : *norm) EXPECT_LE(std::fabs(v - 1.0f), 0.35f);
  fs::remove_all(root);
}

}  // namespace
}  // namespace ds::modelgen
