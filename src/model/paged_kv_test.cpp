// DeepSeekV3 over the paged latent cache: block size and block placement never change a bit,
// sequences sharing a cached prefix's blocks compute exactly what the whole prompt gives alone,
// and bad block tables or cache configs are rejected before anything is written.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "model/deepseek_v3.h"
#include "model/model_test_support.h"

namespace ds {
namespace {

using namespace model_test;  // NOLINT(google-build-using-namespace): the shared test helpers

std::vector<float> rows(const std::vector<float>& m, int64_t width, int64_t first, int64_t n) {
  return std::vector<float>(m.begin() + first * width, m.begin() + (first + n) * width);
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Paging moves rows, never the arithmetic: block sizes 64 (one block), 16, 3 and 1, in order or
// scattered over a larger pool, give the same logits and MTP logits bit for bit, on every ISA
// path (absorbed MLA, the paged kernels) and in the plain form (which gathers the rows first,
// the same code on every path, so one path). Re-initialising the cache to each block size also
// exercises the resize.
TEST(PagedKvCache, BlockSizeAndPlacementAreBitwiseInvisible) {
  for (Isa isa : supported_isas()) {
    for (MlaMode mode : {MlaMode::absorbed, MlaMode::plain}) {
      if (mode == MlaMode::plain && isa != best_isa()) continue;
      auto m = load(false, isa, mode);
      ASSERT_TRUE(m);
      ASSERT_TRUE(m->init_kv_cache({64, 1}).ok());
      const SeqRun want = run(*m, kIds, {5, 4, 2}, true, blocks_from(0, 1));
      expect_sane(want.logits);
      expect_sane(want.mtp);
      for (int32_t bs : {16, 3, 1}) {
        const int32_t n = static_cast<int32_t>(blocks_for_tokens(64, bs));
        ASSERT_TRUE(m->init_kv_cache({bs, 3 * n}).ok());
        EXPECT_EQ(m->kv_cache_config().block_size_tokens, bs);
        const std::string what = std::string(isa_name(isa)) +
                                 (mode == MlaMode::plain ? " plain" : " absorbed") + " block size " +
                                 std::to_string(bs);
        const SeqRun in_order = run(*m, kIds, {5, 4, 2}, true, blocks_from(n, n));
        EXPECT_EQ(in_order.logits, want.logits) << what;
        EXPECT_EQ(in_order.mtp, want.mtp) << what;
        SequenceState scattered;
        scattered.block_table.resize(static_cast<size_t>(3 * n));
        std::iota(scattered.block_table.begin(), scattered.block_table.end(), 0);
        std::shuffle(scattered.block_table.begin(), scattered.block_table.end(), std::mt19937(bs));
        scattered.block_table.resize(static_cast<size_t>(n));
        const SeqRun shuffled = run(*m, kIds, {5, 4, 2}, true, scattered);
        EXPECT_EQ(shuffled.logits, want.logits) << what << " shuffled";
        EXPECT_EQ(shuffled.mtp, want.mtp) << what << " shuffled";
      }
    }
  }
}

// Sequences continuing a cached prefix read its blocks and write only their own, and get exactly
// the logits (and MTP logits) of computing their whole prompt alone, also when two of them read
// the shared blocks in the same forward. The MTP rows of a shared block are exact only when the
// token after the shared positions matches too (kv_cache.h): the last test shows the mismatch and
// the remedy (share one block fewer).
TEST(PagedKvCache, SharedPrefixBlocksGiveTheWholePromptsLogits) {
  auto m = load(false, best_isa());
  ASSERT_TRUE(m);
  const int64_t V = m->config().vocab_size;
  const int64_t H = m->config().hidden_size;
  // The prefix owner: kIds (12 tokens) in blocks 0, 1, 2 (block size 4), MTP over all its rows.
  run(*m, kIds, {kIds.size()}, true, blocks_from(0, 3));

  // B and D agree with kIds through position 8, then diverge. Alone, in fresh blocks:
  const std::vector<int32_t> prompt_b = concat({kIds.begin(), kIds.begin() + 9}, {300, 301, 302});
  const std::vector<int32_t> prompt_d = concat({kIds.begin(), kIds.begin() + 9}, {400, 401});
  const SeqRun alone_b = run(*m, prompt_b, {prompt_b.size()}, true, blocks_from(16));
  const SeqRun alone_d = run(*m, prompt_d, {prompt_d.size()}, true, blocks_from(32));

  // Shared: both read blocks 0 and 1 (positions 0..7, main and MTP slots) and write their own.
  SequenceState sb{{0, 1, 48, 49}, 8, 8};
  SequenceState sd{{0, 1, 52, 53}, 8, 8};
  const std::span<const int32_t> tail_b(prompt_b.begin() + 8, prompt_b.end());
  const std::span<const int32_t> tail_d(prompt_d.begin() + 8, prompt_d.end());
  const int64_t nb = static_cast<int64_t>(tail_b.size()), nd = static_cast<int64_t>(tail_d.size());
  LogitsOutput out;
  ForwardRequest both[2] = {{&sb, tail_b, true}, {&sd, tail_d, true}};
  ASSERT_TRUE(m->forward(both, out).ok());
  EXPECT_EQ(sb.n_tokens, 12);
  EXPECT_EQ(sd.n_tokens, 11);
  const std::vector<float> logits(out.logits.data(), out.logits.data() + out.logits.numel());
  EXPECT_EQ(rows(logits, V, 0, nb), rows(alone_b.logits, V, 8, nb));
  EXPECT_EQ(rows(logits, V, nb, nd), rows(alone_d.logits, V, 8, nd));

  // MTP rows from position 8: hidden(p) with the token at p + 1.
  const std::vector<float> hidden(out.hidden.data(), out.hidden.data() + out.hidden.numel());
  MtpRequest mtp[2] = {{&sb, {prompt_b.data() + 9, static_cast<size_t>(nb - 1)}, hidden.data()},
                       {&sd, {prompt_d.data() + 9, static_cast<size_t>(nd - 1)}, hidden.data() + nb * H}};
  ASSERT_TRUE(m->forward_mtp(mtp, out).ok());
  const std::vector<float> mtp_logits(out.logits.data(), out.logits.data() + out.logits.numel());
  EXPECT_EQ(rows(mtp_logits, V, 0, nb - 1), rows(alone_b.mtp, V, 8, nb - 1));
  EXPECT_EQ(rows(mtp_logits, V, nb - 1, nd - 1), rows(alone_d.mtp, V, 8, nd - 1));

  // The prefix owner's blocks were only read: it continues exactly as if alone.
  const SeqRun whole = run(*m, concat(kIds, {7}), {kIds.size() + 1}, false, blocks_from(16));
  SequenceState owner{{0, 1, 2, 3}, 12, 11};
  const int32_t next = 7;
  ForwardRequest step{&owner, {&next, 1}, false};
  ASSERT_TRUE(m->forward({&step, 1}, out).ok());
  EXPECT_EQ(std::vector<float>(out.logits.data(), out.logits.data() + V), rows(whole.logits, V, 12, 1));

  // E diverges at position 8 itself: the main model is still exact from the 2 shared blocks, but
  // the MTP row at position 7 was built with kIds[8], not E's token, so E's MTP logits differ.
  // Sharing one block fewer makes them exact again.
  const std::vector<int32_t> prompt_e = concat({kIds.begin(), kIds.begin() + 8}, {500, 501, 502});
  const SeqRun alone_e = run(*m, prompt_e, {prompt_e.size()}, true, blocks_from(16));
  for (int32_t shared : {2, 1}) {
    const int64_t n_shared = int64_t{shared} * kBlockSize;
    SequenceState se{{0, 1}, n_shared, n_shared};
    se.block_table.resize(static_cast<size_t>(shared));
    for (int32_t b = 0; b < 4; ++b) se.block_table.push_back(48 + b);
    const SeqRun r = run(*m, {prompt_e.begin() + n_shared, prompt_e.end()}, {prompt_e.size()}, false, se);
    EXPECT_EQ(r.logits, rows(alone_e.logits, V, n_shared, static_cast<int64_t>(prompt_e.size()) - n_shared))
        << shared << " shared blocks";
    se.n_tokens = static_cast<int64_t>(prompt_e.size());
    const int64_t n_mtp = static_cast<int64_t>(prompt_e.size()) - 1 - n_shared;
    MtpRequest req{&se, {prompt_e.data() + n_shared + 1, static_cast<size_t>(n_mtp)}, r.hidden.data()};
    ASSERT_TRUE(m->forward_mtp({&req, 1}, out).ok());
    const std::vector<float> got(out.logits.data(), out.logits.data() + out.logits.numel());
    if (shared == 2) {
      EXPECT_NE(got, rows(alone_e.mtp, V, n_shared, n_mtp)) << "the stale MTP row should show";
    } else {
      EXPECT_EQ(got, rows(alone_e.mtp, V, n_shared, n_mtp));
    }
  }
}

TEST(PagedKvCache, LayoutCountsEveryLayerSlot) {
  auto m = load(false);
  ASSERT_TRUE(m);
  const ModelConfig& c = m->config();
  ASSERT_TRUE(m->has_mtp());
  const KvCacheLayout l = m->kv_cache_layout();
  EXPECT_EQ(l.block_size_multiple, 1);
  EXPECT_EQ(l.bytes_per_token, int64_t{4} * (c.kv_lora_rank + c.qk_rope_head_dim) *
                                   (c.num_hidden_layers + c.num_nextn_predict_layers));
  EXPECT_EQ(l.bytes_per_sequence, 0);
}

// Bad cache configs are invalid_argument and keep the cache that was there.
TEST(PagedKvCache, InitRejectsBadConfigsAndKeepsTheOldCache) {
  ModelOptions o;
  o.max_seq_len = 64;
  Result<std::unique_ptr<DeepSeekV3>> loaded = DeepSeekV3::load(tiny_dir(false), o);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  DeepSeekV3& m = **loaded;
  EXPECT_EQ(m.kv_cache_config().n_blocks, 0);
  // Before init_kv_cache every forward is refused, naming the request; an empty one has nothing
  // to refuse.
  LogitsOutput out;
  ASSERT_TRUE(m.forward({}, out).ok());
  EXPECT_EQ(out.row_begin, std::vector<int64_t>{0});
  EXPECT_EQ(out.logits.numel(), 0);
  SequenceState seq = blocks_from(0);
  ForwardRequest req{&seq, {kIds.data(), 3}, false};
  const Status before = m.forward({&req, 1}, out);
  EXPECT_EQ(before.code(), ErrorCode::model_bad_input);
  EXPECT_NE(before.message().find("request 0: the KV cache is not initialised"), std::string::npos)
      << before.message();

  ASSERT_TRUE(m.init_kv_cache({kBlockSize, kSeqBlocks}).ok());
  const SeqRun want = run(m, kIds, {kIds.size()});
  const int32_t max32 = std::numeric_limits<int32_t>::max();
  for (const KvCacheConfig& bad :
       {KvCacheConfig{0, 8}, KvCacheConfig{-4, 8}, KvCacheConfig{16, 0}, KvCacheConfig{1 << 16, max32}}) {
    const Status st = m.init_kv_cache(bad);
    EXPECT_EQ(st.code(), ErrorCode::invalid_argument) << bad.block_size_tokens << " x " << bad.n_blocks;
    EXPECT_EQ(m.kv_cache_config().block_size_tokens, kBlockSize);
    EXPECT_EQ(m.kv_cache_config().n_blocks, kSeqBlocks);
  }
  EXPECT_NE(m.init_kv_cache({1 << 16, max32}).message().find("over the limit"), std::string::npos);
  EXPECT_EQ(run(m, kIds, {kIds.size()}).logits, want.logits);
}

// Bad block tables are model_bad_input naming the request, and nothing is written: the
// sequences involved keep their counts and a prefix owner's rows survive a refused call that
// would have overwritten them.
TEST(PagedKvCache, ForwardRejectsBadBlockTablesWithoutSideEffects) {
  auto m = load(false, best_isa());
  ASSERT_TRUE(m);
  const int64_t V = m->config().vocab_size;
  const SeqRun want = run(*m, kIds, {kIds.size()}, false, blocks_from(16));
  SequenceState owner = blocks_from(0, 3);
  LogitsOutput out;
  ForwardRequest first{&owner, {kIds.data(), 6}, false};
  ASSERT_TRUE(m->forward({&first, 1}, out).ok());

  const std::vector<int32_t> four = {11, 12, 13, 14};
  auto expect_refused = [&](std::span<const ForwardRequest> reqs, const std::string& text) {
    std::vector<int64_t> n_before;
    for (const ForwardRequest& r : reqs) n_before.push_back(r.seq->n_tokens);
    const Status st = m->forward(reqs, out);
    EXPECT_EQ(st.code(), ErrorCode::model_bad_input) << st.to_string();
    EXPECT_NE(st.message().find(text), std::string::npos) << st.message();
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(reqs[i].seq->n_tokens, n_before[i]);
  };
  // Too short: 2 blocks hold 8 positions, the chunk needs 9.
  SequenceState short_table = blocks_from(20, 2);
  short_table.n_tokens = 5;
  ForwardRequest too_short{&short_table, four, false};
  expect_refused({&too_short, 1}, "request 0: block table has 2 blocks");
  // An id past the cache's 64 blocks, in the second request of a call.
  SequenceState past_end{{21, kSeqSlots * kSeqBlocks}, 0, 0};
  ForwardRequest bad_id[2] = {{&short_table, {four.data(), 1}, false}, {&past_end, {kIds.data(), 6}, false}};
  expect_refused(bad_id, "request 1: block table entry 1 is block 64, outside [0, 64)");
  // A second sequence that would write into the owner's block 1 (positions 4..7) in the same
  // call as the owner writes there: refused, and the owner's rows 0..5 must survive.
  SequenceState intruder{{30, 1}, 4, 4};
  ForwardRequest clash[2] = {{&owner, {kIds.data() + 6, 2}, false}, {&intruder, four, false}};
  expect_refused(clash, "requests 0 and 1: block 1 is written by request");
  // Reading a block another request writes in the same call is refused too.
  SequenceState reader{{0, 1, 40}, 8, 8};
  ForwardRequest read_write[2] = {{&reader, {four.data(), 1}, false}, {&owner, {kIds.data() + 6, 2}, false}};
  expect_refused(read_write, "block 1 is written by request 1 and read by request 0");
  // Counts that contradict each other.
  SequenceState inconsistent{{40, 41}, 2, 3};
  ForwardRequest inc{&inconsistent, four, false};
  expect_refused({&inc, 1}, "request 0: inconsistent sequence");

  // The owner continues exactly as if nothing had been attempted.
  ForwardRequest rest{&owner, {kIds.data() + 6, kIds.size() - 6}, true};
  ASSERT_TRUE(m->forward({&rest, 1}, out).ok());
  EXPECT_EQ(std::vector<float>(out.logits.data(), out.logits.data() + out.logits.numel()),
            rows(want.logits, V, 6, static_cast<int64_t>(kIds.size()) - 6));
}

}  // namespace
}  // namespace ds
