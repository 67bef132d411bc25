// DeepSeek-V4 generation: FP4 / E8M0 quantisers, the V4 tensor plan, hash-routing tables, and a
// tiny checkpoint read back through the engine's loaders.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "counter_rng.h"
#include "fp4_quant.h"
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

const float kE2m1Grid[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

TEST(Fp4Quant, CodesAreNearestWithTiesToEvenAndSaturate) {
  for (uint8_t code = 0; code < 8; ++code) {
    EXPECT_EQ(f32_to_fp4_e2m1(kE2m1Grid[code]), code);
    if (code > 0) {
      EXPECT_EQ(f32_to_fp4_e2m1(-kE2m1Grid[code]), code | 8u);
    }
  }
  // Midpoints go to the neighbour with the even code (0, 2, 4, 6 are the even codes).
  const std::vector<std::pair<float, uint8_t>> ties = {{0.25f, 0}, {0.75f, 2}, {1.25f, 2}, {1.75f, 4},
                                                       {2.5f, 4},  {3.5f, 6},  {5.0f, 6}};
  for (const auto& [x, code] : ties) {
    EXPECT_EQ(f32_to_fp4_e2m1(x), code) << x;
    EXPECT_EQ(f32_to_fp4_e2m1(-x), code == 0 ? 8u : code | 8u) << -x;
  }
  // Sweep every multiple of 1/64 in [-8, 8] (all midpoints included) against a brute-force
  // nearest search with ties to the even code.
  for (int i = -512; i <= 512; ++i) {
    const float x = static_cast<float>(i) / 64.0f;
    const float a = std::min(std::fabs(x), 6.0f);
    uint8_t want = 0;
    for (uint8_t code = 1; code < 8; ++code) {
      const float d = std::fabs(a - kE2m1Grid[code]), best = std::fabs(a - kE2m1Grid[want]);
      if (d < best || (d == best && code % 2 == 0)) want = code;
    }
    if (x < 0) want |= 8u;
    ASSERT_EQ(f32_to_fp4_e2m1(x), want) << x;
  }
  EXPECT_EQ(f32_to_fp4_e2m1(0.26f), 1u);
  EXPECT_EQ(f32_to_fp4_e2m1(6.9f), 7u);
  EXPECT_EQ(f32_to_fp4_e2m1(1e30f), 7u);
  EXPECT_EQ(f32_to_fp4_e2m1(-1e30f), 15u);
}

TEST(Fp4Quant, EachCodeIsANearestGridPointUnderTheSmallestPowerOfTwoScale) {
  const int64_t rows = 3, cols = 128;
  std::vector<float> w(static_cast<size_t>(rows * cols));
  const uint64_t key = tensor_key(2, "fp4");
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = normal_at(key, i) * std::ldexp(1.0f, static_cast<int>(i / 32) % 9 - 4);
  for (int i = 32; i < 64; ++i) w[static_cast<size_t>(i)] = 0.0f;  // an all-zero group
  ThreadPool pool1(1), pool3(3);
  const Fp4Weights a = quantize_fp4_rows(w.data(), rows, cols, pool1);
  const Fp4Weights b = quantize_fp4_rows(w.data(), rows, cols, pool3);
  EXPECT_EQ(a.packed, b.packed);
  EXPECT_EQ(a.scales, b.scales);
  ASSERT_EQ(a.packed.size(), static_cast<size_t>(rows * cols / 2));
  ASSERT_EQ(a.scales.size(), static_cast<size_t>(rows * cols / 32));
  EXPECT_EQ(a.scales[1], 127);  // zero group: scale 1
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < cols / 32; ++g) {
      const uint8_t byte = a.scales[static_cast<size_t>(r * cols / 32 + g)];
      ASSERT_NE(byte, 255);
      const double s = std::ldexp(1.0, byte - 127);
      double amax = 0;
      for (int64_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(double{w[r * cols + g * 32 + i]}));
      if (amax > 0) {
        EXPECT_LE(amax / s, 6.0) << r << "," << g;
        EXPECT_GT(amax / (s / 2), 6.0) << "scale not minimal at " << r << "," << g;
      }
      for (int64_t i = 0; i < 32; ++i) {
        const int64_t c = g * 32 + i;
        const uint8_t packed = a.packed[static_cast<size_t>((r * cols + c) / 2)];
        const uint8_t nibble = c % 2 == 0 ? (packed & 0x0f) : (packed >> 4);  // element 2k low
        const double x = w[r * cols + c] / s;
        double best = INFINITY;
        for (float grid : kE2m1Grid) best = std::min(best, std::fabs(std::fabs(x) - grid));
        EXPECT_EQ(std::fabs(std::fabs(x) - fp4_e2m1_to_f32(nibble & 7u)), best) << r << "," << c;
        if (nibble & 7u) {
          EXPECT_EQ(nibble & 8u ? -1.0 : 1.0, x < 0 ? -1.0 : 1.0) << r << "," << c;
        }
      }
    }
  }
}

TEST(Fp8E8m0Quant, ScaleIsTheSmallestPowerOfTwoAndRoundTripWithinHalfUlp) {
  EXPECT_EQ(e8m0_scale_for(0.0f, 448.0f), 127);
  EXPECT_EQ(e8m0_scale_for(448.0f, 448.0f), 127);
  EXPECT_EQ(e8m0_scale_for(449.0f, 448.0f), 128);
  EXPECT_EQ(e8m0_scale_for(224.0f, 448.0f), 126);
  EXPECT_EQ(e8m0_scale_for(225.0f, 448.0f), 127);
  EXPECT_EQ(e8m0_scale_for(6.0f, 6.0f), 127);
  EXPECT_EQ(e8m0_scale_for(0.75f, 6.0f), 124);   // 0.75/6 = 2^-3
  EXPECT_EQ(e8m0_scale_for(1e-45f, 448.0f), 0);  // clamped to the smallest finite scale
  const int64_t rows = 200, cols = 300;
  std::vector<float> w(static_cast<size_t>(rows * cols));
  const uint64_t key = tensor_key(3, "fp8");
  for (size_t i = 0; i < w.size(); ++i) w[i] = normal_at(key, i) * 0.01f * (1.0f + static_cast<float>(i % 5));
  ThreadPool pool1(1), pool2(2);
  const Fp8BlockWeightsE8m0 a = quantize_fp8_blocks_e8m0(w.data(), rows, cols, 128, pool1);
  const Fp8BlockWeightsE8m0 b = quantize_fp8_blocks_e8m0(w.data(), rows, cols, 128, pool2);
  EXPECT_EQ(a.q, b.q);
  EXPECT_EQ(a.scales, b.scales);
  ASSERT_EQ(a.scales.size(), 2u * 3u);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float s = e8m0_to_f32(a.scales[static_cast<size_t>((r / 128) * 3 + c / 128)]);
      const float x = w[static_cast<size_t>(r * cols + c)];
      const float deq = fp8_e4m3_to_f32(a.q[static_cast<size_t>(r * cols + c)]) * s;
      // E4M3: |error| <= 2^-4·|x| for normals, <= 2^-10·s for subnormals (half an ulp each).
      EXPECT_LE(std::fabs(deq - x), std::max(std::fabs(x) * 0x1p-4f, s * 0x1p-10f)) << r << "," << c;
    }
  }
}

std::map<std::string, const TensorSpec*> by_name(const std::vector<TensorSpec>& plan) {
  std::map<std::string, const TensorSpec*> out;
  for (const TensorSpec& t : plan) EXPECT_TRUE(out.emplace(t.name, &t).second) << "duplicate " << t.name;
  return out;
}

// The names, shapes and dtypes of model-spec §6.1 at tiny's dims (hidden 64, 4 heads of 128,
// q_lora 64, 2 output groups of 32, 4 index heads of 128, 8 experts of width 64, hc_mult 4).
TEST(TensorPlanV4, TinyHasTheReleasedNamesShapesAndDtypes) {
  const ModelConfig c = deepseek_v4_preset("tiny", /*fp8=*/true).value();
  ASSERT_EQ(c.compress_ratios, (std::vector<int>{0, 0, 4, 16, 4, 0}));
  const auto plan = plan_deepseek_v4_tensors(c);
  const auto t = by_name(plan);
  auto expect = [&](const std::string& name, Shape shape, DType dtype) {
    auto it = t.find(name);
    ASSERT_NE(it, t.end()) << name;
    EXPECT_EQ(it->second->shape, shape) << name;
    EXPECT_EQ(it->second->dtype, dtype) << name;
  };
  expect("embed.weight", {129280, 64}, DType::bf16);
  expect("head.weight", {129280, 64}, DType::bf16);
  expect("norm.weight", {64}, DType::bf16);
  expect("hc_head_fn", {4, 256}, DType::f32);
  expect("hc_head_base", {4}, DType::f32);
  expect("hc_head_scale", {1}, DType::f32);
  expect("layers.0.attn_norm.weight", {64}, DType::bf16);
  expect("layers.0.hc_attn_fn", {24, 256}, DType::f32);
  expect("layers.0.hc_ffn_base", {24}, DType::f32);
  expect("layers.0.hc_ffn_scale", {3}, DType::f32);
  expect("layers.0.attn.wq_a.weight", {64, 64}, DType::f8_e4m3);
  expect("layers.0.attn.q_norm.weight", {64}, DType::bf16);
  expect("layers.0.attn.wq_b.weight", {512, 64}, DType::f8_e4m3);
  expect("layers.0.attn.wkv.weight", {128, 64}, DType::f8_e4m3);
  expect("layers.0.attn.kv_norm.weight", {128}, DType::bf16);
  expect("layers.0.attn.wo_a.weight", {64, 256}, DType::f8_e4m3);
  expect("layers.0.attn.wo_b.weight", {64, 64}, DType::f8_e4m3);
  expect("layers.0.attn.attn_sink", {4}, DType::f32);
  expect("layers.0.ffn.gate.weight", {8, 64}, DType::bf16);
  expect("layers.0.ffn.gate.tid2eid", {129280, 2}, DType::i64);
  expect("layers.0.ffn.experts.7.w1.weight", {64, 32}, DType::i8);
  expect("layers.0.ffn.experts.7.w2.weight", {64, 32}, DType::i8);
  expect("layers.0.ffn.shared_experts.w1.weight", {64, 64}, DType::f8_e4m3);
  expect("layers.0.ffn.shared_experts.w2.weight", {64, 64}, DType::f8_e4m3);
  // CSA (ratio 4): overlapping compressor (2·d_c) plus the indexer and its own compressor.
  expect("layers.2.attn.compressor.wkv.weight", {256, 64}, DType::bf16);
  expect("layers.2.attn.compressor.wgate.weight", {256, 64}, DType::bf16);
  expect("layers.2.attn.compressor.ape", {4, 256}, DType::f32);
  expect("layers.2.attn.compressor.norm.weight", {128}, DType::bf16);
  expect("layers.2.attn.indexer.wq_b.weight", {512, 64}, DType::f8_e4m3);
  expect("layers.2.attn.indexer.weights_proj.weight", {4, 64}, DType::bf16);
  expect("layers.2.attn.indexer.compressor.wkv.weight", {256, 64}, DType::bf16);
  expect("layers.2.attn.indexer.compressor.ape", {4, 256}, DType::f32);
  expect("layers.2.attn.indexer.compressor.norm.weight", {128}, DType::bf16);
  expect("layers.2.ffn.gate.tid2eid", {129280, 2}, DType::i64);
  // HCA (ratio 16): one half, no indexer; first scored (non-hash) layer.
  expect("layers.3.attn.compressor.wkv.weight", {128, 64}, DType::bf16);
  expect("layers.3.attn.compressor.ape", {16, 128}, DType::f32);
  expect("layers.3.ffn.gate.bias", {8}, DType::f32);
  // The MTP block: SWA, scored MoE, its own projections, norms and hyper-head.
  expect("mtp.0.e_proj.weight", {64, 64}, DType::f8_e4m3);
  expect("mtp.0.h_proj.weight", {64, 64}, DType::f8_e4m3);
  expect("mtp.0.enorm.weight", {64}, DType::bf16);
  expect("mtp.0.hnorm.weight", {64}, DType::bf16);
  expect("mtp.0.norm.weight", {64}, DType::bf16);
  expect("mtp.0.hc_head_fn", {4, 256}, DType::f32);
  expect("mtp.0.ffn.gate.bias", {8}, DType::f32);
  expect("mtp.0.attn.wq_b.weight", {512, 64}, DType::f8_e4m3);

  EXPECT_EQ(t.at("layers.0.attn.wq_b.weight")->scale_name(), "layers.0.attn.wq_b.scale");
  EXPECT_EQ(t.at("layers.0.attn.wq_b.weight")->scale_shape(), (Shape{4, 1}));
  EXPECT_EQ(t.at("layers.0.attn.wq_b.weight")->scale_dtype(), DType::f8_e8m0);
  EXPECT_EQ(t.at("layers.0.ffn.experts.7.w1.weight")->scale_shape(), (Shape{64, 2}));
  EXPECT_EQ(t.at("layers.0.ffn.experts.7.w1.weight")->in_features(), 64);

  for (const TensorSpec& s : plan) {
    EXPECT_EQ(s.name.find("model."), std::string::npos) << s.name;
    if (s.name.rfind("mtp.", 0) == 0) {  // shared with the main model, not stored
      EXPECT_EQ(s.name.find("embed"), std::string::npos) << s.name;
      EXPECT_FALSE(s.name.ends_with("head.weight")) << s.name;
    }
  }
  // Per block: 2 norms + 6 mHC + SWA attention (wq_a, q_norm, wq_b, wkv, kv_norm, wo_a, wo_b,
  // attn_sink = 8) + FFN.
  // Compressor: ape, wkv, wgate, norm = 4; CSA adds indexer wq_b, weights_proj + compressor 4.
  // FFN: gate.weight + (tid2eid | bias) + 8·3 experts + 3 shared = 29.
  const size_t block = 2 + 6 + 8 + 29;
  const size_t expected = 6 /* embed, head, norm, hc_head_* */ + 5 * block + 4 /* compressor, layer 3 */ +
                          2 * (4 + 2 + 4) /* CSA layers 2 and 4 */ + block + 8 /* mtp extras */;
  EXPECT_EQ(plan.size(), expected);

  // bf16: the same names, no quantised dtype.
  const ModelConfig bf = deepseek_v4_preset("tiny", /*fp8=*/false).value();
  const auto bf_plan = plan_deepseek_v4_tensors(bf);
  EXPECT_EQ(bf_plan.size(), plan.size());
  for (const TensorSpec& s : bf_plan) EXPECT_FALSE(s.block_quantized()) << s.name;
}

TEST(TensorPlanV4, EveryPresetParsesAndItsLayerKindsDecideTheTensors) {
  for (std::string_view preset : preset_names()) {
    const ModelConfig c = deepseek_v4_preset(preset, true).value();
    SCOPED_TRACE(std::string(preset));
    const auto reparsed = parse_model_config(model_config_to_json(c), "preset");
    ASSERT_TRUE(reparsed.ok()) << reparsed.status().to_string();
    EXPECT_EQ(*reparsed, c);
    const auto plan = plan_deepseek_v4_tensors(c);  // by_name points into it: keep it alive
    const auto t = by_name(plan);
    for (int layer = 0; layer < c.num_hidden_layers + c.num_draft_layers(); ++layer) {
      const std::string p = layer < c.num_hidden_layers
                                ? "layers." + std::to_string(layer) + "."
                                : "mtp." + std::to_string(layer - c.num_hidden_layers) + ".";
      const AttentionKind kind = c.attention_kind(layer);
      EXPECT_EQ(t.count(p + "attn.compressor.ape"), kind == AttentionKind::sliding_window ? 0u : 1u) << p;
      EXPECT_EQ(t.count(p + "attn.indexer.wq_b.weight"), kind == AttentionKind::csa ? 1u : 0u) << p;
      EXPECT_EQ(t.count(p + "ffn.gate.tid2eid"), c.is_hash_layer(layer) ? 1u : 0u) << p;
      EXPECT_EQ(t.count(p + "ffn.gate.bias"), c.is_hash_layer(layer) ? 0u : 1u) << p;
      EXPECT_EQ(t.at(p + "ffn.experts.0.w1.weight")->dtype, DType::i8) << p;
    }
    // The real schedule scaled down: SWA first, CSA and HCA both present, hash layers first.
    EXPECT_EQ(c.attention_kind(0), AttentionKind::sliding_window);
    EXPECT_EQ(c.attention_kind(c.num_hidden_layers - 1), AttentionKind::csa);
    EXPECT_EQ(c.attention_kind(c.num_hidden_layers), AttentionKind::sliding_window);
    EXPECT_EQ(c.num_hash_layers, 3);
    EXPECT_GT(c.kv_block_size_multiple(), kCsaCompressRatio);
  }
}

TEST(TensorFillV4, ExpertIdRowsAreDistinctInRangeAndKeyedBySeed) {
  const ModelConfig c = deepseek_v4_preset("tiny", true).value();
  const auto plan = plan_deepseek_v4_tensors(c);
  const TensorSpec& spec = *by_name(plan).at("layers.1.ffn.gate.tid2eid");
  ThreadPool pool1(1), pool3(3);
  const FilledTensor a = fill_tensor(spec, 4, pool1);
  EXPECT_EQ(a.bytes, fill_tensor(spec, 4, pool3).bytes);
  EXPECT_NE(a.bytes, fill_tensor(spec, 5, pool3).bytes);
  ASSERT_EQ(a.bytes.size(), size_t{129280} * 2 * 8);
  std::vector<int64_t> ids(a.bytes.size() / 8);
  std::memcpy(ids.data(), a.bytes.data(), a.bytes.size());
  std::vector<int64_t> hits(8, 0);
  for (size_t t = 0; t < 129280; ++t) {
    ASSERT_NE(ids[2 * t], ids[2 * t + 1]) << t;
    for (int j = 0; j < 2; ++j) {
      ASSERT_GE(ids[2 * t + j], 0);
      ASSERT_LT(ids[2 * t + j], 8);
      ++hits[static_cast<size_t>(ids[2 * t + j])];
    }
  }
  // Uniform: each expert gets 2·129280/8 = 32320 hits; binomial sd ≈ 170, bound ≈ 6 sd.
  for (int64_t h : hits) EXPECT_NEAR(static_cast<double>(h), 32320.0, 1000.0);
}

// Generates tiny V4 and reads every tensor back through the engine's loaders: quantised weights
// through load_linear (FP8 with E8M0 scales, packed FP4), tid2eid through load_expert_id_table,
// F32 parameters through load_f32_param; the dequantised values have the planned scale.
TEST(MakeModelV4, TinyReadsBackThroughTheLoaders) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / "modelgen_v4_test_tiny";
  fs::remove_all(root);
  fs::create_directories(root / "tok");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    std::FILE* fp = std::fopen((root / "tok" / f).c_str(), "w");
    ASSERT_NE(fp, nullptr);
    // A minimal tokenizer.json: V4 make-model adds its template markers to it.
    std::fputs(std::string(f) == "tokenizer.json" ? R"({"added_tokens":[],"model":{"vocab":{}}})" : "{}", fp);
    std::fclose(fp);
  }
  MakeModelOptions o;
  o.arch = "deepseek_v4";
  o.preset = "tiny";
  o.fp8 = true;
  o.seed = 1;
  o.out_dir = (root / "model").string();
  o.tokenizer_dir = (root / "tok").string();
  ThreadPool pool(2);
  const Result<MakeModelReport> report = make_model(o, pool);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_GE(report->n_shards, 2);

  const Result<ModelConfig> cfg = load_model_config(o.out_dir);
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
  EXPECT_EQ(*cfg, report->config);
  const Result<Checkpoint> ckpt = Checkpoint::open(o.out_dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  const ModelConfig& c = *cfg;

  size_t n_expected = 0;
  for (const TensorSpec& t : plan_deepseek_v4_tensors(c)) {
    ++n_expected;
    SCOPED_TRACE(t.name);
    ASSERT_TRUE(ckpt->get(t.name, t.dtype, t.shape).ok());
    if (t.block_quantized()) {
      ++n_expected;
      ASSERT_TRUE(ckpt->get(t.scale_name(), DType::f8_e8m0, t.scale_shape()).ok());
      const std::string prefix = t.name.substr(0, t.name.size() - std::string(".weight").size());
      std::vector<float> storage;
      const Result<WeightMatrix> m = load_linear(*ckpt, prefix, t.shape[0], t.in_features(), 128, storage);
      ASSERT_TRUE(m.ok()) << m.status().to_string();
      EXPECT_EQ(m->format, t.fp4() ? WeightFormat::fp4_e2m1_block : WeightFormat::fp8_e4m3_block);
      // RMS of the dequantised weight: gain/sqrt(in) up to quantisation noise (FP4 rounding with
      // power-of-two group scales adds up to ~15% in RMS; FP8 ~3%).
      double sum_sq = 0;
      const auto* bytes = static_cast<const uint8_t*>(m->data);
      for (int64_t r = 0; r < m->rows; ++r) {
        for (int64_t col = 0; col < m->cols; ++col) {
          float v;
          if (t.fp4()) {
            const uint8_t byte = bytes[r * m->cols / 2 + col / 2];
            v = fp4_e2m1_to_f32(col % 2 == 0 ? (byte & 0x0f) : (byte >> 4)) *
                e8m0_to_f32(m->scales_e8m0[r * m->scale_cols() + col / 32]);
          } else {
            v = fp8_e4m3_to_f32(bytes[r * m->cols + col]) *
                m->scales[(r / 128) * m->scale_cols() + col / 128];
          }
          sum_sq += double{v} * v;
        }
      }
      const double rms = std::sqrt(sum_sq / static_cast<double>(m->rows * m->cols));
      const double want = t.gain / std::sqrt(static_cast<double>(t.in_features()));
      EXPECT_NEAR(rms, want, (t.fp4() ? 0.2 : 0.08) * want);
    } else if (t.dtype == DType::i64) {
      const auto ids =
          load_expert_id_table(*ckpt, t.name, c.vocab_size, c.num_experts_per_tok, c.n_routed_experts);
      ASSERT_TRUE(ids.ok()) << ids.status().to_string();
    } else if (t.dtype == DType::f32) {
      const auto v = load_f32_param(*ckpt, t.name, t.shape);
      ASSERT_TRUE(v.ok()) << v.status().to_string();
      if (t.init == InitKind::hc_scale) {
        for (float x : *v) EXPECT_NEAR(x, 0.5f, 0.35f);  // 0.5 + 0.1·z, |z| <= 2√3
      }
    }
  }
  EXPECT_EQ(ckpt->tensors().size(), n_expected);
  EXPECT_EQ(ckpt->total_bytes(), report->bytes.total);
  fs::remove_all(root);
}

}  // namespace
}  // namespace ds::modelgen
