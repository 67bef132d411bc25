// DeepSeekV3 forward on generated tiny checkpoints (tools/modelgen, preset tiny): chunking and
// batching invariance, absorbed vs plain MLA, ISA paths, MTP, and input validation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "model/deepseek_v3.h"
#include "model/model_registry.h"
#include "model/model_test_support.h"
#include "modelgen/tensor_fill.h"
#include "modelgen/tensor_plan.h"
#include "weights/safetensors_writer.h"

namespace ds {
namespace {

using namespace model_test;  // NOLINT(google-build-using-namespace): the shared test helpers

// Absorbed MLA gives every token the same arithmetic whatever the chunking, and the kernels are
// batch-invariant by contract, so prefill, chunked prefill and token-by-token decode must agree
// bit for bit, on every ISA path and for both weight formats.
TEST(DeepSeekV3, ChunkingIsBitwiseInvariant) {
  for (bool fp8 : {false, true}) {
    for (Isa isa : supported_isas()) {
      auto m = load(fp8, isa);
      ASSERT_TRUE(m);
      const SeqRun all = run(*m, kIds, {kIds.size()}, true);
      expect_sane(all.logits);
      expect_sane(all.mtp);
      for (const auto& chunks : std::vector<std::vector<size_t>>{{1}, {3, 1}, {5, 4, 2}}) {
        const SeqRun r = run(*m, kIds, chunks, true);
        EXPECT_EQ(r.logits, all.logits)
            << "isa " << isa_name(isa) << " fp8 " << fp8 << " first chunk " << chunks[0];
        EXPECT_EQ(r.mtp, all.mtp) << "isa " << isa_name(isa) << " fp8 " << fp8 << " first chunk "
                                  << chunks[0];
      }
    }
  }
}

// Several sequences in one forward produce exactly what each produces alone.
TEST(DeepSeekV3, BatchedSequencesEqualSeparateRuns) {
  auto m = load(false, best_isa());
  ASSERT_TRUE(m);
  const std::vector<int32_t> a = {0, 5, 6, 7, 8}, b = {0, 900, 901};
  const SeqRun ra = run(*m, {0, 5, 6, 7, 8, 11}, {5, 1});
  const SeqRun rb = run(*m, {0, 900, 901, 12}, {3, 1});

  SequenceState sa = blocks_from(0), sb = blocks_from(kSeqBlocks);
  LogitsOutput out;
  ForwardRequest prefill[2] = {{&sa, a, true}, {&sb, b, true}};
  ASSERT_TRUE(m->forward(prefill, out).ok());
  const int64_t V = m->config().vocab_size;
  ASSERT_EQ(out.row_begin, (std::vector<int64_t>{0, 5, 8}));
  EXPECT_EQ(std::vector<float>(out.logits.data(), out.logits.data() + 5 * V),
            std::vector<float>(ra.logits.begin(), ra.logits.begin() + 5 * V));
  EXPECT_EQ(std::vector<float>(out.logits.row(5), out.logits.row(5) + 3 * V),
            std::vector<float>(rb.logits.begin(), rb.logits.begin() + 3 * V));

  const int32_t ta = 11, tb = 12;
  ForwardRequest step[2] = {{&sb, {&tb, 1}, false}, {&sa, {&ta, 1}, false}};
  ASSERT_TRUE(m->forward(step, out).ok());
  EXPECT_EQ(std::vector<float>(out.logits.row(0), out.logits.row(0) + V),
            std::vector<float>(rb.logits.begin() + 3 * V, rb.logits.end()));
  EXPECT_EQ(std::vector<float>(out.logits.row(1), out.logits.row(1) + V),
            std::vector<float>(ra.logits.begin() + 5 * V, ra.logits.end()));
}

// The two MLA forms are the same math in a different order: they agree to f32 rounding.
// Measured worst error (relative to max(1, max |logit|)) on the tiny model: 5e-7 (logits) and
// 7e-7 (MTP); the bound 1e-5 leaves a 15× margin and still catches any real formula slip
// (a wrong scale, position or head layout moves logits by 1e-2 or more).
TEST(DeepSeekV3, AbsorbedMatchesPlain) {
  for (bool fp8 : {false, true}) {
    auto ma = load(fp8, Isa::reference, MlaMode::absorbed);
    auto mp = load(fp8, Isa::reference, MlaMode::plain);
    ASSERT_TRUE(ma && mp);
    const SeqRun a = run(*ma, kIds, {4, 1}, true);
    const SeqRun p = run(*mp, kIds, {4, 1}, true);
    std::printf("absorbed vs plain, fp8 %d: logits %.3g, mtp %.3g\n", fp8, rel_max_err(a.logits, p.logits),
                rel_max_err(a.mtp, p.mtp));
    EXPECT_LT(rel_max_err(a.logits, p.logits), 1e-5) << "fp8 " << fp8;
    EXPECT_LT(rel_max_err(a.mtp, p.mtp), 1e-5) << "fp8 " << fp8;
  }
}

// Vector paths differ from the reference only in summation order (measured 5e-7, bound as above).
TEST(DeepSeekV3, IsaPathsAgreeWithReference) {
  auto ref = load(false, Isa::reference);
  ASSERT_TRUE(ref);
  const SeqRun r = run(*ref, kIds, {kIds.size()}, true);
  for (Isa isa : supported_isas()) {
    auto m = load(false, isa);
    const SeqRun v = run(*m, kIds, {kIds.size()}, true);
    std::printf("%s vs reference: logits %.3g, mtp %.3g\n", std::string(isa_name(isa)).c_str(),
                rel_max_err(r.logits, v.logits), rel_max_err(r.mtp, v.mtp));
    EXPECT_LT(rel_max_err(r.logits, v.logits), 1e-5) << isa_name(isa);
    EXPECT_LT(rel_max_err(r.mtp, v.mtp), 1e-5) << isa_name(isa);
  }
}

// Numerics option bf16_activations=on (docs/numerics.md): linears over bf16 and fp8 weights round x
// and W to bf16. The option keeps batch invariance (chunked = whole, bitwise, on every path),
// changes the logits by a bf16-sized amount only, and is parsed from --numerics for V3 by the registry.
TEST(DeepSeekV3, Bf16ActivationsOptionIsInvariantAndNearTheDefault) {
  for (bool fp8 : {false, true}) {
    auto ref = load(fp8, Isa::reference);
    ASSERT_TRUE(ref);
    const SeqRun exact = run(*ref, kIds, {kIds.size()}, true);
    for (Isa isa : supported_isas()) {
      const std::string what = std::string(isa_name(isa)) + (fp8 ? " fp8" : " bf16");
      ModelOptions o;
      o.isa = isa;
      o.n_threads = 2;
      o.max_seq_len = 64;
      o.bf16_activations = true;
      Result<std::unique_ptr<DeepSeekV3>> m = DeepSeekV3::load(tiny_dir(fp8), o);
      ASSERT_TRUE(m.ok()) << m.status().to_string();
      ASSERT_TRUE((*m)->init_kv_cache({kBlockSize, kSeqSlots * kSeqBlocks}).ok());
      const SeqRun all = run(**m, kIds, {kIds.size()}, true);
      EXPECT_EQ(run(**m, kIds, {5, 4, 2}, true).logits, all.logits) << what;
      EXPECT_EQ(run(**m, kIds, {1}, true).logits, all.logits) << what;
      // Each bf16 rounding is a relative 2^-8 at most on one input; through the tiny model's few layers the
      // logits move by a few 2^-8 relative to their scale, far above f32 noise (1e-5 above).
      const double err = rel_max_err(exact.logits, all.logits);
      std::printf("%s bf16_activations vs exact reference: logits %.3g\n", what.c_str(), err);
      EXPECT_LT(err, 0x1p-8 * 8) << what;
      EXPECT_GT(err, 1e-6) << what << ": the option changed nothing";
    }
  }
  ModelOptions o;
  o.max_seq_len = 64;
  o.numerics = "bf16_activations=on";
  EXPECT_TRUE(load_model_runner(tiny_dir(false), o).ok());
  o.numerics = "bf16_activations=maybe";
  const auto bad = load_model_runner(tiny_dir(false), o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().to_string().find("bf16_activations=maybe"), std::string::npos);
}

TEST(DeepSeekV3, ThreadCountDoesNotChangeResults) {
  auto m1 = load(false, best_isa(), MlaMode::absorbed, 1);
  auto m2 = load(false, best_isa(), MlaMode::absorbed, 2);
  ASSERT_TRUE(m1 && m2);
  EXPECT_EQ(run(*m1, kIds, {5, 1}).logits, run(*m2, kIds, {5, 1}).logits);
}

TEST(DeepSeekV3, RejectsBadInputWithoutSideEffects) {
  auto m = load(false);
  ASSERT_TRUE(m);
  SequenceState seq = blocks_from(0);
  LogitsOutput out;
  const std::vector<int32_t> bad = {0, 5, m->config().vocab_size};
  ForwardRequest req{&seq, bad, false};
  Status st = m->forward({&req, 1}, out);
  EXPECT_EQ(st.code(), ErrorCode::model_bad_input);
  EXPECT_NE(st.message().find("129280"), std::string::npos) << st.message();
  EXPECT_EQ(seq.n_tokens, 0);

  const std::vector<int32_t> negative = {-1};
  req.tokens = negative;
  EXPECT_EQ(m->forward({&req, 1}, out).code(), ErrorCode::model_bad_input);

  req.tokens = {};
  EXPECT_EQ(m->forward({&req, 1}, out).code(), ErrorCode::model_bad_input);

  const std::vector<int32_t> ok = {0, 5};
  ForwardRequest twice[2] = {{&seq, ok, false}, {&seq, ok, false}};
  EXPECT_EQ(m->forward(twice, out).code(), ErrorCode::model_bad_input);
  EXPECT_EQ(seq.n_tokens, 0);

  // max_seq_len is 64 in these tests.
  std::vector<int32_t> long_ids(65, 7);
  req.tokens = long_ids;
  st = m->forward({&req, 1}, out);
  EXPECT_EQ(st.code(), ErrorCode::model_bad_input);
  EXPECT_NE(st.message().find("max_seq_len"), std::string::npos) << st.message();

  // MTP rows need the main model's positions first.
  std::vector<float> hidden(static_cast<size_t>(m->config().hidden_size), 0.0f);
  MtpRequest mreq{&seq, ok, hidden.data()};
  EXPECT_EQ(m->forward_mtp({&mreq, 1}, out).code(), ErrorCode::model_bad_input);
}

TEST(DeepSeekV3, TruncateRewindsTheSequence) {
  auto m = load(false, best_isa());
  ASSERT_TRUE(m);
  const SeqRun ref = run(*m, kIds, {kIds.size()});
  SequenceState seq = blocks_from(0);
  LogitsOutput out;
  ForwardRequest req{&seq, {kIds.data(), 6}, false};
  ASSERT_TRUE(m->forward({&req, 1}, out).ok());
  truncate_sequence(seq, 4);
  EXPECT_EQ(seq.n_tokens, 4);
  req.tokens = {kIds.data() + 4, kIds.size() - 4};
  req.all_logits = true;
  ASSERT_TRUE(m->forward({&req, 1}, out).ok());
  const int64_t V = m->config().vocab_size;
  EXPECT_EQ(std::vector<float>(out.logits.data(), out.logits.data() + out.logits.numel()),
            std::vector<float>(ref.logits.begin() + 4 * V, ref.logits.end()));
}

// ModelOptions::mtp_input switches which hidden state feeds the MTP layer; the main logits do
// not depend on it, the MTP logits do, and pre_norm hands out the un-normalised residual rows.
TEST(DeepSeekV3, MtpInputSwitch) {
  ModelOptions o;
  o.isa = best_isa();
  o.n_threads = 2;
  o.mtp_input = MtpInput::pre_norm;
  Result<std::unique_ptr<DeepSeekV3>> pre = DeepSeekV3::load(tiny_dir(false), o);
  ASSERT_TRUE(pre.ok()) << pre.status().to_string();
  ASSERT_TRUE((*pre)->init_kv_cache({kBlockSize, kSeqBlocks}).ok());
  auto post = load(false, best_isa());
  const SeqRun a = run(**pre, kIds, {kIds.size()}, true);
  const SeqRun b = run(*post, kIds, {kIds.size()}, true);
  EXPECT_EQ(a.logits, b.logits);
  EXPECT_GT(rel_max_err(a.mtp, b.mtp), 1e-3);
  // post-norm rows have mean square ≈ mean(w²) of the final norm; pre-norm rows do not.
  double ms_pre = 0, ms_post = 0;
  for (size_t i = 0; i < a.hidden.size(); ++i) {
    ms_pre += static_cast<double>(a.hidden[i]) * a.hidden[i];
    ms_post += static_cast<double>(b.hidden[i]) * b.hidden[i];
  }
  EXPECT_GT(std::abs(ms_pre - ms_post) / ms_post, 1e-2);
}

// A V2-style checkpoint the presets do not cover: plain q_proj (q_lora_rank null), softmax
// scoring with group_limited_greedy, no shared experts, no YaRN, no MTP, and widths that are not
// multiples of 16 (those matmuls take the reference path; the other kernels handle tails).
std::string make_v2_style() {
  ModelConfig c;
  c.model_type = "deepseek_v3";
  c.vocab_size = 300;
  c.hidden_size = 40;
  c.num_hidden_layers = 2;
  c.first_k_dense_replace = 1;
  c.num_attention_heads = 3;
  c.num_key_value_heads = 3;
  c.q_lora_rank = 0;
  c.kv_lora_rank = 24;
  c.qk_nope_head_dim = 12;
  c.qk_rope_head_dim = 8;
  c.v_head_dim = 12;
  c.intermediate_size = 56;
  c.moe_intermediate_size = 20;
  c.n_routed_experts = 6;
  c.n_shared_experts = 0;
  c.num_experts_per_tok = 2;
  c.n_group = 3;
  c.topk_group = 2;
  c.scoring_func = "softmax";
  c.topk_method = "group_limited_greedy";
  c.norm_topk_prob = false;
  c.routed_scaling_factor = 1.0;
  c.max_position_embeddings = 1024;
  const std::string dir = ::testing::TempDir() + "/ds_model_test_v2_style";
  std::filesystem::create_directories(dir);
  ThreadPool pool(1);
  SafetensorsWriter w;
  for (const modelgen::TensorSpec& spec : modelgen::plan_deepseek_v3_tensors(c)) {
    modelgen::FilledTensor t = modelgen::fill_tensor(spec, 11, pool);
    EXPECT_TRUE(w.add(spec.name, spec.dtype, spec.shape, std::move(t.bytes)).ok()) << spec.name;
  }
  EXPECT_TRUE(w.write(dir + "/model.safetensors").ok());
  const std::string json = model_config_to_json(c);
  FILE* f = std::fopen((dir + "/config.json").c_str(), "w");
  EXPECT_NE(f, nullptr);
  std::fwrite(json.data(), 1, json.size(), f);
  std::fclose(f);
  return dir;
}

TEST(DeepSeekV3, V2StyleConfigIsInvariantAndFormsAgree) {
  static const std::string dir = make_v2_style();
  std::vector<int32_t> ids;
  for (int i = 0; i < 11; ++i) ids.push_back((i * 37 + 5) % 300);
  auto load_v2 = [&](Isa isa, MlaMode mode) {
    ModelOptions o;
    o.isa = isa;
    o.n_threads = 2;
    o.mla_mode = mode;
    Result<std::unique_ptr<DeepSeekV3>> m = DeepSeekV3::load(dir, o);
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    if (!m.ok()) return std::unique_ptr<DeepSeekV3>();
    EXPECT_TRUE((*m)->init_kv_cache({kBlockSize, kSeqBlocks}).ok());
    return std::move(m).value();
  };
  auto ref = load_v2(Isa::reference, MlaMode::absorbed);
  ASSERT_TRUE(ref);
  EXPECT_FALSE(ref->has_mtp());
  const SeqRun base = run(*ref, ids, {ids.size()});
  expect_sane(base.logits);
  EXPECT_EQ(run(*ref, ids, {1}).logits, base.logits);
  EXPECT_EQ(run(*ref, ids, {4, 3, 1}).logits, base.logits);
  auto plain = load_v2(Isa::reference, MlaMode::plain);
  EXPECT_LT(rel_max_err(base.logits, run(*plain, ids, {3, 1}).logits), 1e-5);
  for (Isa isa : supported_isas()) {
    auto m = load_v2(isa, MlaMode::absorbed);
    const SeqRun r = run(*m, ids, {ids.size()});
    EXPECT_LT(rel_max_err(base.logits, r.logits), 1e-5) << isa_name(isa);
    EXPECT_EQ(run(*m, ids, {2, 1}).logits, r.logits) << isa_name(isa);
  }
  SequenceState seq = blocks_from(0);
  LogitsOutput out;
  std::vector<float> hidden(40, 0.0f);
  MtpRequest mreq{&seq, {ids.data(), 1}, hidden.data()};
  EXPECT_EQ(ref->forward_mtp({&mreq, 1}, out).code(), ErrorCode::model_unsupported);
}

}  // namespace
}  // namespace ds
