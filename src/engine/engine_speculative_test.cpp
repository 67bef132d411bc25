// Speculative decoding end to end on a generated tiny DeepSeek-V3 checkpoint (docs/speculative.md):
// with the checkpoint's MTP layer drafting k tokens (random weights: mostly rejected) and with a
// scripted drafter that proposes the reference continuation with every third guess wrong (many
// accepted runs, many rejections), the engine must give exactly the tokens and log-probabilities of a
// run without speculation — greedy and seeded sampling, several requests at once, chunked prefill,
// prefix caching, stop strings and stop ids — and leave the same KV rows behind for every finished
// sequence (the rejected positions rolled back exactly). Penalised and grammar-constrained requests
// draft too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "engine/engine.h"
#include "engine/mtp_drafter.h"
#include "engine/speculation_policy.h"
#include "engine/testing/seeded_prompt.h"
#include "model/model_registry.h"
#include "modelgen/testing/tiny_model.h"

namespace ds {
namespace {

// Generated tiny checkpoints: DeepSeek-V3 (MTP layer) by default; DeepSeek-V4.1 with its DSpark
// stages (docs/dspark.md: the target rolls its window rings and compressor groups back over rejected
// drafts, model/v4_chunk_undo.h); DeepSeek-V4 with its MTP layer (window-only: its ring's draft writes
// are undone, model-spec §4.10).
struct Fixture : modelgen::TinyModel {
  explicit Fixture(const char* arch = "deepseek_v3")
      : TinyModel({.arch = arch,
                   .seed = 5,
                   .max_seq_len = 256,
                   .tokenizer_dir = DS_DEFAULT_TOKENIZER_DIR,
                   .tag = "engine_spec"}) {}
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

Fixture& v41_fixture() {
  static Fixture f("deepseek_v41");
  return f;
}

Fixture& v4_fixture() {
  static Fixture f("deepseek_v4");
  return f;
}

std::vector<int32_t> prompt_of(int32_t n, uint32_t salt) { return ds::testing::seeded_prompt(n, salt); }

// Proposes the reference continuation of the sequence (looked up by its context), with the guess at
// about one position in four (a hash of position and sequence) replaced by a wrong token: accepted
// runs of every length and rejections at every draft depth.
bool wrong_at(size_t pos, uint64_t seq) { return (((pos * 2654435761u) ^ (seq * 40503u)) >> 7) % 4 == 0; }

class ScriptedDrafter final : public Drafter {
 public:
  explicit ScriptedDrafter(std::vector<std::vector<int32_t>> references)
      : references_(std::move(references)) {}
  bool needs_hidden() const override { return false; }
  Status propose(std::span<DraftChunk> chunks, int64_t other_rows) override {
    other_rows_seen.push_back(other_rows);
    for (DraftChunk& c : chunks) {
      c.n_filled = 0;
      const std::vector<int32_t>* ref = find(c.context);
      if (ref == nullptr) continue;
      for (size_t j = 0; j < c.draft.size(); ++j) {
        const size_t pos = static_cast<size_t>(c.pos_begin) + 1 + j;
        const int32_t want = pos < ref->size() ? (*ref)[pos] : 0;
        c.draft[j] = wrong_at(pos, c.seq_id) ? (want + 1) % 1000 : want;
      }
      c.n_filled = static_cast<int32_t>(c.draft.size());
      ++n_proposals;
    }
    return ok_status();
  }
  Status observe(std::span<const ObservedChunk>) override { return ok_status(); }
  void forget(SeqId) override {}
  int64_t n_proposals = 0;
  std::vector<int64_t> other_rows_seen;  // per propose() call

 private:
  const std::vector<int32_t>* find(std::span<const int32_t> context) const {
    for (const auto& ref : references_) {
      if (ref.size() >= context.size() && std::equal(context.begin(), context.end(), ref.begin()))
        return &ref;
    }
    return nullptr;
  }
  std::vector<std::vector<int32_t>> references_;
};

struct Outcome {
  std::vector<TokenEvent> events;  // per request, in submission order (collected)
  // Per request: the main layers' KV rows of its positions [0, n_computed) when it was released,
  // and the MTP layer's (empty without one), [n_computed, row_dim] per layer, layers concatenated.
  std::vector<std::vector<float>> main_rows;
  std::vector<std::vector<float>> mtp_rows;
  std::vector<int64_t> n_computed;
  EngineStats stats;
};

struct SpecSetup {
  bool speculate = false;
  int32_t k = 3;
  std::shared_ptr<Drafter> drafter;  // null: the checkpoint's MTP layer
  bool async = true;
  int32_t n_kv_blocks = 96;
  // The policy would turn drafts off on this model (random weights accept nothing, and its cost is
  // all lm_head rows): the mechanics are tested at a fixed k unless a test asks for it.
  bool adaptive = false;
  DraftSampling draft_sampling = DraftSampling::greedy;
  SpeculativeMethod method = SpeculativeMethod::mtp;
  bool confidence_scheduling = false;
  bool confidence_delayed = false;
  bool prefix_caching = true;
};
SpecSetup no_spec() { return SpecSetup{}; }
SpecSetup mtp_spec(int32_t k) { return SpecSetup{true, k, nullptr, true, 96}; }
SpecSetup scripted_spec(int32_t k, std::shared_ptr<Drafter> d) {
  return SpecSetup{true, k, std::move(d), true};
}

std::vector<Request> requests(float temperature) {
  // Prompts 1 and 2 share prompt 0's first 40 tokens (2 blocks of 16 from the cache after the warm-up).
  std::vector<Request> out;
  const std::vector<int32_t> shared = prompt_of(40, 3);
  for (int i = 0; i < 6; ++i) {
    Request r;
    r.prompt_tokens = prompt_of(13 + 9 * i, 100 + static_cast<uint32_t>(i));
    if (i < 3) r.prompt_tokens.insert(r.prompt_tokens.begin(), shared.begin(), shared.end());
    r.stop.max_tokens = 20 + 3 * i;
    r.stop.ignore_eos = true;
    r.sampling.logprobs = true;
    r.sampling.temperature = temperature;
    r.sampling.seed = 77 + static_cast<uint64_t>(i);
    r.detokenize = false;
    out.push_back(r);
  }
  return out;
}

// The KV rows are captured for V3 (MLA rows per layer); V4-family runs compare outputs only.
Outcome run(const SpecSetup& s, const std::vector<Request>& reqs, modelgen::TinyModel& f = fixture()) {
  EngineConfig cfg;
  cfg.scheduler.max_step_tokens = 16;  // chunked prefill, and a budget that cuts drafts short
  cfg.scheduler.max_running = 8;
  cfg.block_size_tokens = 16;
  cfg.n_kv_blocks = s.n_kv_blocks;
  cfg.async_scheduling = s.async;
  cfg.check_integrity = true;
  cfg.enable_prefix_caching = s.prefix_caching;
  if (s.speculate) {
    cfg.speculative.method = s.method;
    cfg.speculative.confidence_scheduling = s.confidence_scheduling;
    cfg.speculative.confidence_delayed = s.confidence_delayed;
    cfg.speculative.num_speculative_tokens = s.k;
    cfg.speculative.adaptive = s.adaptive;
    cfg.speculative.draft_sampling = s.draft_sampling;
    cfg.drafter = s.drafter;
  }
  const ModelConfig& mc = f.model->config();
  const int64_t row_dim = mc.kv_lora_rank + mc.qk_rope_head_dim;
  const int64_t bs = cfg.block_size_tokens;
  std::mutex mu;
  std::map<uint64_t, std::vector<float>> main_by_id, mtp_by_id;
  std::map<uint64_t, int64_t> n_by_id;
  cfg.on_sequence_release = [&](uint64_t id, std::span<const int32_t> table, int64_t n_computed) {
    if (mc.is_v4_family()) return;
    const int64_t block_bytes = f.model->kv_block_bytes();
    const int64_t n_slots = block_bytes / (bs * row_dim * static_cast<int64_t>(sizeof(float)));
    std::vector<float> block(static_cast<size_t>(block_bytes) / sizeof(float));
    std::vector<std::vector<float>> by_slot(static_cast<size_t>(n_slots));
    for (int64_t b = 0; b * bs < n_computed; ++b) {
      const Status st = f.model->export_kv_block(table[static_cast<size_t>(b)],
                                                 std::as_writable_bytes(std::span<float>(block)));
      EXPECT_TRUE(st.ok()) << st.to_string();
      const int64_t n_rows = std::min(bs, n_computed - b * bs);
      for (int64_t slot = 0; slot < n_slots; ++slot) {
        const float* rows = block.data() + slot * bs * row_dim;
        by_slot[static_cast<size_t>(slot)].insert(by_slot[static_cast<size_t>(slot)].end(), rows,
                                                  rows + n_rows * row_dim);
      }
    }
    std::vector<float> main_rows, mtp_rows;
    for (int64_t slot = 0; slot < n_slots; ++slot) {
      std::vector<float>& dst = slot < mc.num_hidden_layers ? main_rows : mtp_rows;
      dst.insert(dst.end(), by_slot[static_cast<size_t>(slot)].begin(),
                 by_slot[static_cast<size_t>(slot)].end());
    }
    std::lock_guard<std::mutex> lock(mu);
    main_by_id[id] = std::move(main_rows);
    mtp_by_id[id] = std::move(mtp_rows);
    n_by_id[id] = n_computed;
  };
  Result<std::unique_ptr<Engine>> created = Engine::create(cfg, *f.model, f.tokenizer.get());
  EXPECT_TRUE(created.ok()) << created.status().to_string();
  if (!created.ok()) return {};
  Engine& engine = **created;
  std::vector<uint64_t> ids;
  std::vector<RequestStream> streams(reqs.size());
  // The first request alone, so the two that share its prefix find it in the cache.
  Result<RequestId> first = engine.submit(reqs[0], streams[0].sink());
  EXPECT_TRUE(first.ok());
  ids.push_back(first.ok() ? *first : 0);
  Outcome o;
  o.events.resize(reqs.size());
  o.events[0] = streams[0].collect();
  for (size_t i = 1; i < reqs.size(); ++i) {
    Result<RequestId> id = engine.submit(reqs[i], streams[i].sink());
    EXPECT_TRUE(id.ok());
    ids.push_back(id.ok() ? *id : 0);
  }
  for (size_t i = 1; i < reqs.size(); ++i) o.events[i] = streams[i].collect();
  engine.shutdown();
  o.stats = engine.stats();
  std::lock_guard<std::mutex> lock(mu);
  for (const uint64_t id : ids) {
    o.main_rows.push_back(main_by_id[id]);
    o.mtp_rows.push_back(mtp_by_id[id]);
    o.n_computed.push_back(n_by_id[id]);
  }
  return o;
}

void expect_same_outputs(const Outcome& got, const Outcome& want, const std::string& name) {
  ASSERT_EQ(got.events.size(), want.events.size());
  for (size_t i = 0; i < want.events.size(); ++i) {
    const TokenEvent& g = got.events[i];
    const TokenEvent& w = want.events[i];
    EXPECT_TRUE(g.error.ok()) << name << " request " << i << ": " << g.error.to_string();
    EXPECT_EQ(g.tokens, w.tokens) << name << " request " << i;
    EXPECT_EQ(g.text, w.text) << name << " request " << i;
    EXPECT_EQ(g.finish_reason, w.finish_reason) << name << " request " << i;
    ASSERT_EQ(g.chosen_logprobs.size(), w.chosen_logprobs.size()) << name << " request " << i;
    for (size_t t = 0; t < w.chosen_logprobs.size(); ++t) {
      EXPECT_EQ(g.chosen_logprobs[t].token_id, w.chosen_logprobs[t].token_id) << name;
      EXPECT_EQ(std::memcmp(&g.chosen_logprobs[t].logprob, &w.chosen_logprobs[t].logprob, sizeof(float)), 0)
          << name << " request " << i << " token " << t << ": log-probabilities differ in their bits";
    }
    EXPECT_EQ(g.usage.completion_tokens, w.usage.completion_tokens) << name << " request " << i;
  }
}

void expect_same_kv(const Outcome& got, const Outcome& want, const std::string& name) {
  for (size_t i = 0; i < want.main_rows.size(); ++i) {
    ASSERT_GT(want.n_computed[i], 0) << name << " request " << i;
    EXPECT_EQ(got.n_computed[i], want.n_computed[i]) << name << " request " << i;
    ASSERT_EQ(got.main_rows[i].size(), want.main_rows[i].size()) << name << " request " << i;
    EXPECT_EQ(std::memcmp(got.main_rows[i].data(), want.main_rows[i].data(),
                          want.main_rows[i].size() * sizeof(float)),
              0)
        << name << " request " << i
        << ": the KV rows of its final sequence differ from a run that never drafted";
  }
}

std::vector<std::vector<int32_t>> references_of(const std::vector<Request>& reqs, const Outcome& base) {
  std::vector<std::vector<int32_t>> refs;
  for (size_t i = 0; i < reqs.size(); ++i) {
    std::vector<int32_t> full = reqs[i].prompt_tokens;
    full.insert(full.end(), base.events[i].tokens.begin(), base.events[i].tokens.end());
    refs.push_back(std::move(full));
  }
  return refs;
}

void expect_lossless(float temperature) {
  ASSERT_NE(fixture().model, nullptr);
  ASSERT_TRUE(fixture().model->supports_mtp_drafting());
  const std::vector<Request> reqs = requests(temperature);
  const Outcome base = run(no_spec(), reqs);
  EXPECT_EQ(base.events[1].usage.cached_prompt_tokens, 32) << "the shared prefix should come from the cache";
  EXPECT_EQ(base.stats.spec_decode_draft_ns_total + base.stats.spec_decode_verify_ns_total, 0);

  // The checkpoint's MTP layer (k = 3 and 5).
  for (const int32_t k : {3, 5}) {
    const Outcome mtp = run(mtp_spec(k), reqs);
    const std::string name = "mtp k=" + std::to_string(k);
    expect_same_outputs(mtp, base, name);
    expect_same_kv(mtp, base, name);
    EXPECT_GT(mtp.stats.spec_decode_num_drafts, 0) << name;
    EXPECT_GT(mtp.stats.spec_decode_num_draft_tokens, mtp.stats.spec_decode_num_accepted_tokens) << name;
    ASSERT_EQ(mtp.stats.spec_decode_num_accepted_tokens_per_pos.size(), static_cast<size_t>(k));
    EXPECT_EQ(mtp.events[1].usage.cached_prompt_tokens, 32) << name;
    EXPECT_GT(mtp.stats.spec_decode_draft_ns_total, 0) << name << ": drafting time is counted";
    EXPECT_GT(mtp.stats.spec_decode_verify_ns_total, 0) << name << ": verification time is counted";
    std::printf("%s: %lld drafts, %lld draft tokens, %lld accepted\n", name.c_str(),
                static_cast<long long>(mtp.stats.spec_decode_num_drafts),
                static_cast<long long>(mtp.stats.spec_decode_num_draft_tokens),
                static_cast<long long>(mtp.stats.spec_decode_num_accepted_tokens));
  }

  // Scripted drafts: long accepted runs and rejections at every depth.
  auto drafter = std::make_shared<ScriptedDrafter>(references_of(reqs, base));
  const Outcome scripted = run(scripted_spec(4, drafter), reqs);
  expect_same_outputs(scripted, base, "scripted k=4");
  expect_same_kv(scripted, base, "scripted k=4");
  const EngineStats& st = scripted.stats;
  EXPECT_GT(drafter->n_proposals, 20);
  EXPECT_GT(st.spec_decode_num_accepted_tokens, st.spec_decode_num_drafts) << "mean acceptance length > 2";
  EXPECT_LT(st.spec_decode_num_accepted_tokens, st.spec_decode_num_draft_tokens) << "some drafts rejected";
  ASSERT_EQ(st.spec_decode_num_accepted_tokens_per_pos.size(), 4u);
  EXPECT_GT(st.spec_decode_num_accepted_tokens_per_pos[0], st.spec_decode_num_accepted_tokens_per_pos[3]);
  EXPECT_GT(st.spec_decode_num_accepted_tokens_per_pos[3], 0);
  int64_t sum = 0;
  for (const int64_t n : st.spec_decode_num_accepted_tokens_per_pos) sum += n;
  EXPECT_EQ(sum, st.spec_decode_num_accepted_tokens);
  std::printf("scripted k=4: %lld drafts, %lld draft tokens, %lld accepted (mean acceptance length %.2f)\n",
              static_cast<long long>(st.spec_decode_num_drafts),
              static_cast<long long>(st.spec_decode_num_draft_tokens),
              static_cast<long long>(st.spec_decode_num_accepted_tokens),
              1.0 + static_cast<double>(st.spec_decode_num_accepted_tokens) /
                        static_cast<double>(st.spec_decode_num_drafts));
  // Fewer steps than tokens: accepted drafts saved forwards.
  EXPECT_LT(st.n_steps, base.stats.n_steps);
  // The drafter is told the rows its step runs besides the drafting sequences' (prefill chunks and
  // decode rows without drafts, here beside drafts under a 16-token budget): none once only
  // drafting sequences are left.
  ASSERT_FALSE(drafter->other_rows_seen.empty());
  const auto [fewest, most] =
      std::minmax_element(drafter->other_rows_seen.begin(), drafter->other_rows_seen.end());
  EXPECT_EQ(*fewest, 0);
  EXPECT_GT(*most, 0) << "prefill chunks should share steps with drafting sequences";
  EXPECT_LT(*most, 16) << "within the step's token budget, which holds at least one drafting row";

  // A pool too small for all six: preemption by recompute, drafts resuming after it.
  SpecSetup tight = scripted_spec(4, std::make_shared<ScriptedDrafter>(references_of(reqs, base)));
  tight.n_kv_blocks = 9;
  const Outcome preempted = run(tight, reqs);
  expect_same_outputs(preempted, base, "scripted k=4, 9 blocks");
  EXPECT_GT(preempted.stats.n_preemptions, 0) << "the pool should force preemption";
  EXPECT_GT(preempted.stats.spec_decode_num_accepted_tokens, 0);
}

// Records what the real MTP drafter proposes, keyed by (sequence, position of the chunk's token).
class RecordingDrafter final : public Drafter {
 public:
  explicit RecordingDrafter(std::shared_ptr<Drafter> inner) : inner_(std::move(inner)) {}
  bool needs_hidden() const override { return inner_->needs_hidden(); }
  Status propose(std::span<DraftChunk> chunks, int64_t other_rows) override {
    DS_TRY(inner_->propose(chunks, other_rows));
    for (const DraftChunk& c : chunks)
      proposals[{c.seq_id, c.pos_begin}] =
          std::vector<int32_t>(c.draft.begin(), c.draft.begin() + c.n_filled);
    return ok_status();
  }
  Status observe(std::span<const ObservedChunk> chunks) override { return inner_->observe(chunks); }
  void forget(SeqId seq_id) override { inner_->forget(seq_id); }
  std::map<std::pair<SeqId, int64_t>, std::vector<int32_t>> proposals;

 private:
  std::shared_ptr<Drafter> inner_;
};

// The drafts the engine verifies after a prompt must be the MTP layer's own greedy chain computed
// the plain way: every prompt row through forward + forward_mtp in one sequence (the path the
// model tests compare with numpy), then the layer fed its own output for drafts 2 and 3 (V3: the
// hidden row passed back; V4: the output streams its slot keeps).
void expect_engine_drafts_are_the_greedy_chain(modelgen::TinyModel& f) {
  ASSERT_NE(f.model, nullptr);
  ModelRunner& m = *f.model;
  const size_t vocab =
      std::min<size_t>(static_cast<size_t>(m.config().vocab_size), f.tokenizer->vocab_size());
  std::vector<Request> reqs = requests(0.0f);
  reqs.resize(1);
  reqs[0].stop.max_tokens = 5;
  auto recorder = std::make_shared<RecordingDrafter>(std::make_shared<MtpDrafter>(m, vocab));
  const Outcome o = run(scripted_spec(3, recorder), reqs, f);
  ASSERT_EQ(o.events[0].tokens.size(), 5u);
  const std::vector<int32_t>& prompt = reqs[0].prompt_tokens;
  const int64_t n = static_cast<int64_t>(prompt.size());
  // The first decode step verifies drafts for the positions after the prompt's first sampled token.
  ASSERT_FALSE(recorder->proposals.empty());
  const auto first = recorder->proposals.find({recorder->proposals.begin()->first.first, n});
  ASSERT_NE(first, recorder->proposals.end());
  const std::vector<int32_t> engine_drafts = first->second;
  ASSERT_EQ(engine_drafts.size(), 3u);

  ASSERT_TRUE(m.init_kv_cache(standalone_kv_cache_config(n + 8, 16)).ok());
  SequenceState seq = make_standalone_sequence(m.kv_cache_config());
  LogitsOutput out;
  ForwardRequest fr{&seq, prompt, true};
  ASSERT_TRUE(m.forward({&fr, 1}, out).ok());
  const int32_t x = argmax(std::span<const float>(out.logits.row(n - 1), vocab));
  EXPECT_EQ(x, o.events[0].tokens[0]);
  const std::vector<float> hidden(out.hidden.data(), out.hidden.data() + out.hidden.numel());
  std::vector<int32_t> next(prompt.begin() + 1, prompt.end());
  next.push_back(x);
  MtpRequest mr{&seq, next, hidden.data()};
  ASSERT_TRUE(m.forward_mtp({&mr, 1}, out).ok());
  std::vector<int32_t> want{argmax(std::span<const float>(out.logits.row(n - 1), vocab))};
  std::vector<float> h(out.hidden.row(n - 1), out.hidden.row(n - 1) + m.config().hidden_size);
  for (int j = 1; j < 3; ++j) {
    MtpRequest chain{&seq, {&want.back(), 1}, h.data(), true, /*draft=*/true};
    ASSERT_TRUE(m.forward_mtp({&chain, 1}, out).ok());
    want.push_back(argmax(std::span<const float>(out.logits.row(0), vocab)));
    h.assign(out.hidden.row(0), out.hidden.row(0) + m.config().hidden_size);
  }
  EXPECT_EQ(engine_drafts, want);
}

TEST(EngineSpeculative, MtpDraftsAreTheMtpLayersGreedyChain) {
  expect_engine_drafts_are_the_greedy_chain(fixture());
}

TEST(EngineSpeculative, V4MtpDraftsAreTheMtpLayersGreedyChain) {
  expect_engine_drafts_are_the_greedy_chain(v4_fixture());
}

TEST(EngineSpeculative, DraftVocabularyHeadGivesThoseColumnsOfTheFullHead) {
  // ModelRunner::set_mtp_draft_vocab: forward_mtp with MtpRequest::draft_vocab gives, for each row,
  // the full head's logits of exactly those token ids (the head's rows copied), and leaves the full
  // head to requests without the flag.
  Fixture& f = fixture();
  ASSERT_NE(f.model, nullptr);
  ModelRunner& m = *f.model;
  const std::vector<int32_t> prompt = prompt_of(20, 9);
  const int64_t n = static_cast<int64_t>(prompt.size());
  ASSERT_TRUE(m.init_kv_cache(standalone_kv_cache_config(n + 8, 16)).ok());
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < m.config().vocab_size; t += 37) ids.push_back(t);
  ids.push_back(m.config().vocab_size - 1);
  ASSERT_TRUE(m.set_mtp_draft_vocab(ids).ok());
  LogitsOutput out;
  std::vector<float> full, sub;
  for (const bool draft_vocab : {false, true}) {
    SequenceState seq = make_standalone_sequence(m.kv_cache_config());
    ForwardRequest fr{&seq, prompt, true};
    ASSERT_TRUE(m.forward({&fr, 1}, out).ok());
    const std::vector<float> hidden(out.hidden.data(), out.hidden.data() + out.hidden.numel());
    std::vector<int32_t> next(prompt.begin() + 1, prompt.end());
    next.push_back(3);
    MtpRequest mr{&seq, next, hidden.data()};
    mr.draft_vocab = draft_vocab;
    ASSERT_TRUE(m.forward_mtp({&mr, 1}, out).ok());
    ASSERT_EQ(out.logits.numel(),
              n * (draft_vocab ? static_cast<int64_t>(ids.size()) : m.config().vocab_size));
    (draft_vocab ? sub : full).assign(out.logits.data(), out.logits.data() + out.logits.numel());
  }
  ASSERT_TRUE(m.set_mtp_draft_vocab({}).ok());
  const size_t V = static_cast<size_t>(m.config().vocab_size);
  for (int64_t r = 0; r < n; ++r)
    for (size_t c = 0; c < ids.size(); ++c) {
      const float want = full[static_cast<size_t>(r) * V + static_cast<size_t>(ids[c])];
      EXPECT_NEAR(sub[static_cast<size_t>(r) * ids.size() + c], want, 1e-5f * std::max(1.0f, std::abs(want)))
          << "row " << r << " token " << ids[c];
    }
}

TEST(EngineSpeculative, GreedyOutputAndKvEqualARunWithoutDrafts) { expect_lossless(0.0f); }

TEST(EngineSpeculative, SeededSamplingOutputAndKvEqualARunWithoutDrafts) { expect_lossless(1.0f); }

TEST(EngineSpeculative, StopStringsAndStopIdsCutAcceptedDrafts) {
  ASSERT_NE(fixture().model, nullptr);
  std::vector<Request> reqs = requests(0.0f);
  for (Request& r : reqs) r.detokenize = true;
  const Outcome free_run = run(no_spec(), reqs);
  // A stop string taken from the middle of request 2's text, a stop id from request 4's tokens.
  const std::string& text = free_run.events[2].text;
  ASSERT_GT(text.size(), 12u);
  reqs[2].stop.stop_strings = {text.substr(text.size() / 2, 3)};
  ASSERT_GT(free_run.events[4].tokens.size(), 10u);
  reqs[4].stop.stop_token_ids = {free_run.events[4].tokens[9]};
  const Outcome base = run(no_spec(), reqs);
  EXPECT_EQ(base.events[2].finish_reason, FinishReason::stop);
  EXPECT_EQ(base.events[4].finish_reason, FinishReason::stop);
  auto drafter = std::make_shared<ScriptedDrafter>(references_of(reqs, free_run));
  const Outcome scripted = run(scripted_spec(4, drafter), reqs);
  expect_same_outputs(scripted, base, "scripted with stops");
  const Outcome mtp = run(mtp_spec(3), reqs);
  expect_same_outputs(mtp, base, "mtp with stops");
}

TEST(EngineSpeculative, MtpRowsAreTheSameWhateverWasDrafted) {
  // The MTP layer's own cache rows of the kept positions do not depend on the drafts (its chain rows
  // are scratch, overwritten by the next observe): compare two runs with different drafts.
  ASSERT_NE(fixture().model, nullptr);
  const std::vector<Request> reqs = requests(0.0f);
  const Outcome mtp = run(mtp_spec(3), reqs);
  const Outcome mtp_k1 = run(mtp_spec(1), reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_FALSE(mtp.mtp_rows[i].empty());
    ASSERT_EQ(mtp.mtp_rows[i].size(), mtp_k1.mtp_rows[i].size());
    // Positions under a cached prefix hold whichever run wrote them first; both runs start cold.
    EXPECT_EQ(std::memcmp(mtp.mtp_rows[i].data(), mtp_k1.mtp_rows[i].data(),
                          mtp.mtp_rows[i].size() * sizeof(float)),
              0)
        << "request " << i;
  }
}

TEST(EngineSpeculative, PenalisedRequestsDraftAndGiveTheTokensOfARunWithoutDrafts) {
  // Each verify row is penalised with the drafts accepted before it counted, as a run without drafts
  // penalises that output position: the same tokens, log-probabilities and KV, greedy and sampled.
  ASSERT_NE(fixture().model, nullptr);
  for (const float temperature : {0.0f, 1.0f}) {
    std::vector<Request> reqs = requests(temperature);
    reqs.resize(3);
    reqs[0].sampling.repetition_penalty = 1.3f;
    reqs[1].sampling.frequency_penalty = 0.7f;
    reqs[2].sampling.presence_penalty = 0.9f;
    reqs[2].sampling.repetition_penalty = 1.1f;
    const std::string name = "penalties, temperature " + std::to_string(temperature);
    const Outcome base = run(no_spec(), reqs);
    auto drafter = std::make_shared<ScriptedDrafter>(references_of(reqs, base));
    const Outcome o = run(scripted_spec(4, drafter), reqs);
    expect_same_outputs(o, base, name + ", scripted k=4");
    expect_same_kv(o, base, name + ", scripted k=4");
    EXPECT_GT(drafter->n_proposals, 10) << name;
    EXPECT_GT(o.stats.spec_decode_num_accepted_tokens, o.stats.spec_decode_num_drafts)
        << name << ": mean acceptance length > 2";
    EXPECT_LT(o.stats.n_steps, base.stats.n_steps) << name;
    expect_same_outputs(run(mtp_spec(3), reqs), base, name + ", mtp k=3");
  }
}

std::shared_ptr<const grammar::CompiledGrammar> compiled_regex(const std::string& source) {
  Fixture& f = fixture();
  EngineConfig cfg;
  cfg.n_kv_blocks = 8;
  cfg.block_size_tokens = 16;
  Result<std::unique_ptr<Engine>> e = Engine::create(cfg, *f.model, f.tokenizer.get());
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  if (!e.ok()) return nullptr;
  grammar::GrammarSpec spec;
  spec.kind = grammar::GrammarSpec::Kind::regex;
  spec.source = source;
  Result<std::shared_ptr<const grammar::CompiledGrammar>> compiled = (*e)->compile_grammar(spec);
  EXPECT_TRUE(compiled.ok()) << compiled.status().to_string();
  return compiled.ok() ? *compiled : nullptr;
}

// Four constrained requests: a long grammar, a short one that completes within the drafts, and the
// long one starting only after the fifth token of an unconstrained run (Request::grammar_after_token).
std::vector<Request> grammar_requests(float temperature) {
  std::vector<Request> reqs = requests(temperature);
  reqs.resize(4);
  const std::shared_ptr<const grammar::CompiledGrammar> words = compiled_regex("([a-z]{1,3}[0-9] )+");
  const std::shared_ptr<const grammar::CompiledGrammar> word = compiled_regex("[a-z]{4,10}");
  if (!words || !word) return {};
  const Outcome free_run = run(no_spec(), reqs);
  for (Request& r : reqs) r.grammar = words;
  reqs[2].grammar = word;
  EXPECT_GT(free_run.events[3].tokens.size(), 5u);
  if (free_run.events[3].tokens.size() > 5) reqs[3].grammar_after_token = free_run.events[3].tokens[4];
  return reqs;
}

TEST(EngineSpeculative, GrammarRequestsDraftAndGiveTheTokensOfARunWithoutDrafts) {
  // Each verify row is masked by the grammar advanced over the drafts accepted before it (and the
  // matcher is left where it was for the engine to advance): the same tokens, log-probabilities and
  // KV as a run without drafts, while the constrained requests accept drafts. A draft the grammar
  // does not allow is rejected; a draft that completes the grammar ends the request.
  ASSERT_NE(fixture().model, nullptr);
  for (const float temperature : {0.0f, 1.0f}) {
    const std::string name = "grammar, temperature " + std::to_string(temperature);
    const std::vector<Request> reqs = grammar_requests(temperature);
    ASSERT_EQ(reqs.size(), 4u);
    const Outcome base = run(no_spec(), reqs);
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_TRUE(base.events[i].error.ok()) << name << " " << i << ": " << base.events[i].error.to_string();
      ASSERT_GE(base.events[i].tokens.size(), 2u) << name << " request " << i << " generated nothing";
    }
    EXPECT_EQ(base.events[2].finish_reason, FinishReason::stop) << name << ": the short grammar completes";
    auto drafter = std::make_shared<ScriptedDrafter>(references_of(reqs, base));
    const Outcome o = run(scripted_spec(4, drafter), reqs);
    expect_same_outputs(o, base, name + ", scripted k=4");
    expect_same_kv(o, base, name + ", scripted k=4");
    EXPECT_GT(o.stats.spec_decode_num_accepted_tokens, o.stats.spec_decode_num_drafts)
        << name << ": mean acceptance length > 2";
    EXPECT_LT(o.stats.spec_decode_num_accepted_tokens, o.stats.spec_decode_num_draft_tokens)
        << name << ": some drafts rejected";
    EXPECT_LT(o.stats.n_steps, base.stats.n_steps) << name;
    SpecSetup sync = scripted_spec(3, std::make_shared<ScriptedDrafter>(references_of(reqs, base)));
    sync.async = false;
    expect_same_outputs(run(sync, reqs), base, name + ", scripted k=3, sync loop");
    expect_same_outputs(run(mtp_spec(3), reqs), base, name + ", mtp k=3");
  }
}

TEST(EngineSpeculative, MtpDraftsStayInsideTheGrammar) {
  // The MTP drafter takes each draft among the tokens the grammar allows after the drafts before it
  // (DraftChunk::matcher): under "digits only" every proposal is a token of digits, which the random
  // MTP layer would almost never propose unmasked; the outputs stay those of a run without drafts.
  Fixture& f = fixture();
  ASSERT_NE(f.model, nullptr);
  const std::shared_ptr<const grammar::CompiledGrammar> digits = compiled_regex("[0-9]{40}");
  ASSERT_TRUE(digits);
  for (const auto& [temperature, sampled] : {std::pair{0.0f, false}, {1.0f, false}, {1.0f, true}}) {
    std::vector<Request> reqs = requests(temperature);
    reqs.resize(3);
    for (Request& r : reqs) r.grammar = digits;
    const Outcome base = run(no_spec(), reqs);
    const size_t vocab =
        std::min<size_t>(static_cast<size_t>(f.model->config().vocab_size), f.tokenizer->vocab_size());
    auto recorder = std::make_shared<RecordingDrafter>(std::make_shared<MtpDrafter>(*f.model, vocab));
    SpecSetup s = scripted_spec(3, recorder);
    if (sampled) s.draft_sampling = DraftSampling::sampled;
    const Outcome o = run(s, reqs);
    const std::string name =
        "digits grammar, mtp k=3, T=" + std::to_string(temperature) + (sampled ? ", sampled" : "");
    if (!sampled) {  // sampled drafts keep the target's distribution, not a run's tokens
      expect_same_outputs(o, base, name);
    } else {
      for (const TokenEvent& e : o.events) EXPECT_TRUE(e.error.ok()) << name << ": " << e.error.to_string();
    }
    size_t n_drafts = 0;
    for (const auto& [key, drafts] : recorder->proposals) {
      for (const int32_t id : drafts) {
        Result<std::string> text = f.tokenizer->decode(std::span<const int32_t>(&id, 1));
        ASSERT_TRUE(text.ok());
        EXPECT_TRUE(!text->empty() &&
                    std::all_of(text->begin(), text->end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
            << "draft " << id << " (" << *text << ") is outside the grammar";
        ++n_drafts;
      }
    }
    EXPECT_GT(n_drafts, 20u) << "the drafter proposed almost nothing";
  }
}

TEST(EngineSpeculative, SampledDraftsUnderAGrammarStayInsideIt) {
  // Sampled drafts verified against the masked target distribution: every output token is one the
  // grammar allows (the engine ends a request with an error otherwise), run after run the same.
  ASSERT_NE(fixture().model, nullptr);
  std::vector<Request> reqs = grammar_requests(1.0f);
  ASSERT_EQ(reqs.size(), 4u);
  for (Request& r : reqs) r.detokenize = true;
  SpecSetup sampled = mtp_spec(3);
  sampled.draft_sampling = DraftSampling::sampled;
  const Outcome a = run(sampled, reqs);
  expect_same_outputs(run(sampled, reqs), a, "sampled drafts under a grammar, second run");
  EXPECT_GT(a.stats.spec_decode_num_draft_tokens, 0);
  for (size_t i = 0; i < 3; ++i) {  // request 3's text starts unconstrained
    ASSERT_TRUE(a.events[i].error.ok()) << i << ": " << a.events[i].error.to_string();
    ASSERT_FALSE(a.events[i].text.empty()) << i;
    // Request 2 completed its grammar; the others were cut by max_tokens: a prefix of the language.
    const std::regex language(i == 2 ? "[a-z]{4,10}" : "([a-z]{1,3}[0-9] )*[a-z]{0,3}([0-9] ?)?");
    EXPECT_TRUE(std::regex_match(a.events[i].text, language)) << "request " << i << ": " << a.events[i].text;
  }
  EXPECT_EQ(a.events[2].finish_reason, FinishReason::stop);
}

TEST(EngineSpeculative, SyncLoopGivesTheSameOutputs) {
  // Speculation runs under async scheduling by default (a drafting sequence waits for its verify,
  // the others overlap); the synchronous loop must give the same tokens.
  ASSERT_NE(fixture().model, nullptr);
  const std::vector<Request> reqs = requests(1.0f);
  const Outcome base = run(no_spec(), reqs);
  SpecSetup sync = scripted_spec(3, std::make_shared<ScriptedDrafter>(references_of(reqs, base)));
  sync.async = false;
  const Outcome o = run(sync, reqs);
  expect_same_outputs(o, base, "scripted k=3, sync loop");
  EXPECT_GT(o.stats.spec_decode_num_accepted_tokens, 0);
}

TEST(EngineSpeculative, AdaptivePolicyKeepsOutputsAndTurnsDraftsDown) {
  // With the policy on, the cost curve measured at start and the measured acceptance decide the
  // drafts per step; on this model (random MTP weights: nothing accepted) it ends up drafting
  // little, and the outputs stay those of a run without speculation.
  ASSERT_NE(fixture().model, nullptr);
  const std::vector<Request> reqs = requests(0.0f);
  const Outcome base = run(no_spec(), reqs);
  SpecSetup adaptive = mtp_spec(3);
  adaptive.adaptive = true;
  const Outcome o = run(adaptive, reqs);
  expect_same_outputs(o, base, "mtp k=3 adaptive");
  expect_same_kv(o, base, "mtp k=3 adaptive");
  const Outcome fixed = run(mtp_spec(3), reqs);
  EXPECT_LT(o.stats.spec_decode_num_draft_tokens, fixed.stats.spec_decode_num_draft_tokens);
  // The decode steps' own timings rescaled the cost curve measured at start (a real ratio: not the
  // untouched 1, within the policy's bounds).
  EXPECT_NE(o.stats.spec_decode_target_cost_scale, 1.0);
  EXPECT_GE(o.stats.spec_decode_target_cost_scale, 1.0 / SpeculationPolicy::kMaxScale);
  EXPECT_LE(o.stats.spec_decode_target_cost_scale, SpeculationPolicy::kMaxScale);
  EXPECT_EQ(fixed.stats.spec_decode_target_cost_scale, 1.0);  // no policy, nothing observed
}

TEST(EngineSpeculative, SampledDraftsAreDeterministicAndAcceptMoreThanGreedyOnes) {
  // draft_sampling = sampled: the MTP layer's drafts are drawn from its distribution under the
  // request's temperature and verified by rejection sampling (the rule's distribution is checked in
  // rejection_sampling_test). A fixed seed gives the same tokens run after run; the random MTP layer
  // is close to the target in distribution, not in argmax, so sampled drafts are accepted where
  // greedy ones are not. Greedy requests are unaffected by the mode.
  ASSERT_NE(fixture().model, nullptr);
  const std::vector<Request> reqs = requests(1.0f);
  SpecSetup sampled = mtp_spec(3);
  sampled.draft_sampling = DraftSampling::sampled;
  const Outcome a = run(sampled, reqs);
  const Outcome b = run(sampled, reqs);
  expect_same_outputs(a, b, "sampled drafts, second run");
  const Outcome greedy_drafts = run(mtp_spec(3), reqs);
  EXPECT_GT(a.stats.spec_decode_num_accepted_tokens, greedy_drafts.stats.spec_decode_num_accepted_tokens);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_TRUE(a.events[i].error.ok()) << a.events[i].error.to_string();
    EXPECT_EQ(a.events[i].tokens.size(), static_cast<size_t>(reqs[i].stop.max_tokens)) << i;
    ASSERT_EQ(a.events[i].chosen_logprobs.size(), a.events[i].tokens.size()) << i;
  }
  const std::vector<Request> greedy_reqs = requests(0.0f);
  expect_same_outputs(run(sampled, greedy_reqs), run(no_spec(), greedy_reqs),
                      "sampled mode, greedy requests");
}

TEST(EngineSpeculative, RefusesAModelThatCannotDraftAndBadConfigs) {
  ASSERT_NE(fixture().model, nullptr);
  EngineConfig cfg;
  cfg.n_kv_blocks = 16;
  cfg.block_size_tokens = 16;
  cfg.drafter = std::make_shared<ScriptedDrafter>(std::vector<std::vector<int32_t>>{});
  Result<std::unique_ptr<Engine>> e = Engine::create(cfg, *fixture().model, fixture().tokenizer.get());
  EXPECT_EQ(e.status().code(), ErrorCode::invalid_argument) << "a drafter without num_speculative_tokens";
}

// Preemption by recompute with speculation on a V4-family model, in a pool of 9 blocks. Its
// prefix-cache hits resume by SWA bounded replay, which cuts window attention at the replay start
// (deepinfer-features §6.1): where a recompute hits the cache depends on when it was preempted, so
// the comparison runs without prefix caching, where a recompute is exact (and with it, that nothing
// fails and every request completes).
void expect_preemption_is_lossless(SpecSetup s, const std::vector<Request>& reqs, const Outcome& cached_base,
                                   modelgen::TinyModel& f, const std::string& name) {
  s.n_kv_blocks = 9;
  const Outcome cached = run(s, reqs, f);
  EXPECT_GT(cached.stats.n_preemptions, 0) << name << ": the pool should force preemption";
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_TRUE(cached.events[i].error.ok()) << name << " request " << i;
    EXPECT_EQ(cached.events[i].tokens.size(), cached_base.events[i].tokens.size())
        << name << " request " << i;
  }
  SpecSetup plain = no_spec();
  plain.prefix_caching = s.prefix_caching = false;
  const Outcome base = run(plain, reqs, f);
  const Outcome got = run(s, reqs, f);
  EXPECT_GT(got.stats.n_preemptions, 0) << name << ": the pool should force preemption";
  expect_same_outputs(got, base, name + ", 9 blocks, no prefix cache");
}

// V4.1: the checkpoint's DSpark stages (random weights: nearly every draft rejected, so the
// window rings and the ratio-1/2 compressors roll back at every depth) and the scripted drafter
// (long accepted runs too) give exactly the tokens and log-probabilities of a run without drafts,
// greedy and seeded sampling, with chunked prefill and prefix-cache hits (SWA replay).
TEST(EngineSpeculative, DsparkOnV41GivesTheOutputsOfARunWithoutDrafts) {
  Fixture& f = v41_fixture();
  ASSERT_NE(f.model, nullptr);
  ASSERT_NE(f.model->draft_block_model(), nullptr);
  for (const float temperature : {0.0f, 1.0f}) {
    const std::vector<Request> reqs = requests(temperature);
    const Outcome base = run(no_spec(), reqs, f);
    EXPECT_EQ(base.events[1].usage.cached_prompt_tokens, 32)
        << "the shared prefix should come from the cache";
    for (const int32_t k : {3, 5}) {
      SpecSetup dspark = mtp_spec(k);
      dspark.method = SpeculativeMethod::dspark;
      const Outcome got = run(dspark, reqs, f);
      const std::string name = "dspark k=" + std::to_string(k) + " T=" + std::to_string(temperature);
      expect_same_outputs(got, base, name);
      EXPECT_GT(got.stats.spec_decode_num_drafts, 0) << name;
      EXPECT_GT(got.stats.spec_decode_num_draft_tokens, got.stats.spec_decode_num_accepted_tokens) << name;
      std::printf("%s: %lld drafts, %lld draft tokens, %lld accepted\n", name.c_str(),
                  static_cast<long long>(got.stats.spec_decode_num_drafts),
                  static_cast<long long>(got.stats.spec_decode_num_draft_tokens),
                  static_cast<long long>(got.stats.spec_decode_num_accepted_tokens));
    }
    // Confidence-scheduled verification: fewer drafts verified, the same outputs.
    SpecSetup scheduled = mtp_spec(5);
    scheduled.method = SpeculativeMethod::dspark;
    scheduled.confidence_scheduling = true;
    const Outcome sched = run(scheduled, reqs, f);
    expect_same_outputs(sched, base, "dspark k=5 scheduled");
    SpecSetup all5 = scheduled;
    all5.confidence_scheduling = false;
    const Outcome every = run(all5, reqs, f);
    EXPECT_LE(sched.stats.spec_decode_num_draft_tokens, every.stats.spec_decode_num_draft_tokens);
    std::printf("dspark k=5 T=%g: %lld draft tokens verified with confidence scheduling, %lld without\n",
                temperature, static_cast<long long>(sched.stats.spec_decode_num_draft_tokens),
                static_cast<long long>(every.stats.spec_decode_num_draft_tokens));
    // The production variant: the capacity from two steps back, the step's most likely drafts.
    SpecSetup delayed = scheduled;
    delayed.confidence_delayed = true;
    const Outcome late = run(delayed, reqs, f);
    expect_same_outputs(late, base, "dspark k=5 scheduled, capacity two steps back");
    EXPECT_LE(late.stats.spec_decode_num_draft_tokens, every.stats.spec_decode_num_draft_tokens);
    std::printf("dspark k=5 T=%g: %lld draft tokens verified with the capacity of two steps back\n",
                temperature, static_cast<long long>(late.stats.spec_decode_num_draft_tokens));
    if (temperature > 0) {  // sampled drafts (rejection sampling): not the plain run's tokens, but seeded
      SpecSetup sampled = mtp_spec(5);
      sampled.method = SpeculativeMethod::dspark;
      sampled.draft_sampling = DraftSampling::sampled;
      const Outcome a = run(sampled, reqs, f), b = run(sampled, reqs, f);
      expect_same_outputs(a, b, "dspark sampled drafts, twice");
      for (size_t i = 0; i < reqs.size(); ++i)
        EXPECT_EQ(a.events[i].tokens.size(), static_cast<size_t>(reqs[i].stop.max_tokens)) << i;
    }
    auto drafter = std::make_shared<ScriptedDrafter>(references_of(reqs, base));
    const Outcome scripted = run(scripted_spec(4, drafter), reqs, f);
    expect_same_outputs(scripted, base, "v41 scripted k=4");
    SpecSetup tight_scripted = scripted_spec(4, std::make_shared<ScriptedDrafter>(references_of(reqs, base)));
    expect_preemption_is_lossless(tight_scripted, reqs, base, f, "v41 scripted k=4");
    EXPECT_GT(scripted.stats.spec_decode_num_accepted_tokens, scripted.stats.spec_decode_num_drafts)
        << "mean acceptance length > 2";
    EXPECT_LT(scripted.stats.n_steps, base.stats.n_steps);
  }
}

// V4: the checkpoint's MTP layer drafts (its chain fed its own output streams, its ring's draft
// writes undone) and the target rolls back over rejected drafts; greedy and seeded sampling give
// exactly the outputs of a run without drafts, with chunked prefill, prefix-cache hits (SWA replay:
// the MTP state restarts at the replay), the policy's cost curve, sampled drafts and preemption.
TEST(EngineSpeculative, MtpOnV4GivesTheOutputsOfARunWithoutDrafts) {
  Fixture& f = v4_fixture();
  ASSERT_NE(f.model, nullptr);
  ASSERT_TRUE(f.model->supports_mtp_drafting());
  for (const float temperature : {0.0f, 1.0f}) {
    const std::vector<Request> reqs = requests(temperature);
    const Outcome base = run(no_spec(), reqs, f);
    EXPECT_EQ(base.events[1].usage.cached_prompt_tokens, 32)
        << "the shared prefix should come from the cache";
    auto drafter = std::make_shared<ScriptedDrafter>(references_of(reqs, base));
    const Outcome scripted = run(scripted_spec(4, drafter), reqs, f);
    expect_same_outputs(scripted, base, "v4 scripted k=4");
    expect_preemption_is_lossless(
        scripted_spec(4, std::make_shared<ScriptedDrafter>(references_of(reqs, base))), reqs, base, f,
        "v4 scripted k=4");
    EXPECT_GT(scripted.stats.spec_decode_num_accepted_tokens, scripted.stats.spec_decode_num_drafts)
        << "mean acceptance length > 2";
    for (const int32_t k : {1, 3}) {
      const Outcome got = run(mtp_spec(k), reqs, f);
      const std::string name = "v4 mtp k=" + std::to_string(k) + " T=" + std::to_string(temperature);
      expect_same_outputs(got, base, name);
      EXPECT_GT(got.stats.spec_decode_num_drafts, 0) << name;
      EXPECT_EQ(got.events[1].usage.cached_prompt_tokens, 32) << name;
      std::printf("%s: %lld drafts, %lld draft tokens, %lld accepted\n", name.c_str(),
                  static_cast<long long>(got.stats.spec_decode_num_drafts),
                  static_cast<long long>(got.stats.spec_decode_num_draft_tokens),
                  static_cast<long long>(got.stats.spec_decode_num_accepted_tokens));
    }
    SpecSetup adaptive = mtp_spec(3);
    adaptive.adaptive = true;
    expect_same_outputs(run(adaptive, reqs, f), base, "v4 mtp k=3 adaptive");
    expect_preemption_is_lossless(mtp_spec(3), reqs, base, f, "v4 mtp k=3");
    if (temperature > 0) {
      SpecSetup sampled = mtp_spec(3);
      sampled.draft_sampling = DraftSampling::sampled;
      const Outcome a = run(sampled, reqs, f), b = run(sampled, reqs, f);
      expect_same_outputs(a, b, "v4 sampled drafts, twice");
      EXPECT_GT(a.stats.spec_decode_num_accepted_tokens, 0) << "sampled drafts close in distribution";
      for (size_t i = 0; i < reqs.size(); ++i)
        EXPECT_EQ(a.events[i].tokens.size(), static_cast<size_t>(reqs[i].stop.max_tokens)) << i;
    }
  }
}

TEST(EngineSpeculative, DsparkRefusesAModelWithoutStagesAndTooManyTokens) {
  EngineConfig cfg;
  cfg.n_kv_blocks = 16;
  cfg.block_size_tokens = 16;
  cfg.speculative.method = SpeculativeMethod::dspark;
  cfg.speculative.num_speculative_tokens = 3;
  Result<std::unique_ptr<Engine>> v3 = Engine::create(cfg, *fixture().model, fixture().tokenizer.get());
  EXPECT_EQ(v3.status().code(), ErrorCode::invalid_argument) << "a V3 checkpoint has no DSpark stages";
  EXPECT_NE(v3.status().message().find("dspark"), std::string::npos) << v3.status().message();
  cfg.speculative.num_speculative_tokens = 6;  // the block holds 5
  Fixture& f = v41_fixture();
  Result<std::unique_ptr<Engine>> v41 = Engine::create(cfg, *f.model, f.tokenizer.get());
  EXPECT_EQ(v41.status().code(), ErrorCode::invalid_argument);
  EXPECT_NE(v41.status().message().find("dspark_block_size (5)"), std::string::npos)
      << v41.status().message();
}

}  // namespace
}  // namespace ds
