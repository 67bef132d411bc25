// Randomized scheduler stress against the fake model: thousands of steps of random arrivals,
// cancels, deadlines, priorities, tenants, salts and shared prompt prefixes over a pool small enough
// to force preemption, in synchronous and async (schedule N+1 before on_step_done N) modes, with
// and without SWA bounded replay. After every step: check_integrity() and the invariants below,
// including prefix hits against a brute-force model of the cache (token-by-token comparison of
// block contents instead of hashes).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/scheduler.h"
#include "engine/scheduler_test_driver.h"

namespace ds {
namespace {

using testing::expect_plan_well_formed;
using testing::fake_sample;
using testing::fake_token;
using namespace std::chrono_literals;

constexpr int32_t kBlockSize = 4;
constexpr int32_t kNBlocks = 48;
constexpr int kArrivalSteps = 2500;
constexpr int kMaxDrainSteps = 2000;

struct StressParams {
  bool async = false;
  int32_t swa_replay_tokens = 0;
  uint32_t seed = 0;
};

std::string param_name(const ::testing::TestParamInfo<StressParams>& info) {
  return std::string(info.param.async ? "Async" : "Sync") + "Swa" +
         std::to_string(info.param.swa_replay_tokens) + "Seed" + std::to_string(info.param.seed);
}

// What the test knows about a live sequence, tracked from plans alone.
struct Live {
  SeqSpec spec;
  int64_t scheduled_end = 0;  // end of its latest chunk
  int64_t computed_end = 0;   // end of its latest finished chunk
  int32_t n_pending = 0;      // samples in flight
  int64_t replay_end = 0;     // replay_end of its current admission
  bool ever_admitted = false;
  int arrival_step = 0;
};

struct BlockContent {
  std::string salt;
  std::vector<int32_t> prefix;  // tokens 0 .. end of this block
};

// The longest cached prefix (in tokens) by brute force: block j matches when some cached block
// holds exactly (salt, tokens[0 .. (j + 1) * block_size)).
int64_t brute_force_hit(const KvCacheManager& kv, const std::unordered_map<BlockId, BlockContent>& contents,
                        std::span<const int32_t> tokens, const std::string& salt) {
  const size_t max_blocks = (tokens.size() - 1) / kBlockSize;
  size_t n_blocks = 0;
  for (; n_blocks < max_blocks; ++n_blocks) {
    const std::span<const int32_t> prefix = tokens.first((n_blocks + 1) * kBlockSize);
    bool found = false;
    for (const auto& [block_id, content] : contents) {
      if (kv.is_block_cached(block_id) && content.salt == salt &&
          std::equal(prefix.begin(), prefix.end(), content.prefix.begin(), content.prefix.end())) {
        found = true;
        break;
      }
    }
    if (!found) break;
  }
  return static_cast<int64_t>(n_blocks) * kBlockSize;
}

class SchedulerStress : public ::testing::TestWithParam<StressParams> {};

TEST_P(SchedulerStress, RandomWorkloadKeepsEveryInvariant) {
  const StressParams params = GetParam();
  SchedulerConfig cfg;
  cfg.max_step_tokens = 24;
  cfg.max_running = 6;
  cfg.max_waiting = 12;
  cfg.max_seq_len = 72;
  cfg.swa_replay_tokens = params.swa_replay_tokens;
  KvCacheManagerConfig kv_cfg;
  kv_cfg.block_size_tokens = kBlockSize;
  kv_cfg.n_blocks = kNBlocks;
  kv_cfg.process_seed = 0xfeed + params.seed;
  KvCacheManager kv(kv_cfg);
  Scheduler sched(cfg, kv);
  const int64_t window = params.swa_replay_tokens;
  auto adopt = [window](int64_t hit) { return hit > window ? hit : int64_t{0}; };

  std::mt19937 rng(params.seed);
  std::vector<std::vector<int32_t>> families(4, std::vector<int32_t>(64));
  for (auto& family : families) {
    for (int32_t& t : family) t = static_cast<int32_t>(rng() % 1000);
  }

  std::map<SeqId, Live> live;
  std::unordered_map<BlockId, BlockContent> contents;
  SteadyTime now = SteadyTime{} + 1h;
  SeqId next_id = 1;
  std::optional<StepPlan> in_flight;
  int n_finished = 0, n_expired = 0, n_cancelled = 0, n_overloaded = 0, n_preempted = 0;
  int n_hits = 0, n_hits_checked_exactly = 0, n_replays = 0, n_resumed = 0, max_wait_steps = 0;

  // Step results reach the test: pending samples resolve, block contents become known, and
  // sequences that reached max_tokens finish (as the engine does).
  auto complete = [&](const StepPlan& plan) {
    sched.on_step_done(plan, fake_sample(plan));
    for (const ScheduledChunk& chunk : plan.chunks) {
      const auto it = live.find(chunk.seq_id);
      if (it == live.end()) continue;  // cancelled or expired while in flight
      Live& seq = it->second;
      if (chunk.samples) --seq.n_pending;
      seq.computed_end = chunk.pos_begin + chunk.n_tokens;
      const std::span<const int32_t> tokens = sched.tokens(chunk.seq_id);
      const std::vector<BlockId>& table = sched.block_table(chunk.seq_id);
      for (size_t j = 0; j < static_cast<size_t>(seq.computed_end / kBlockSize) && j < table.size(); ++j) {
        contents[table[j]] = BlockContent{
            seq.spec.cache_salt, std::vector<int32_t>(tokens.begin(), tokens.begin() + (j + 1) * kBlockSize)};
      }
      if (sched.n_generated(chunk.seq_id) == seq.spec.max_tokens) {
        std::vector<int32_t> expected = seq.spec.prompt_tokens;
        while (expected.size() < seq.spec.prompt_tokens.size() + static_cast<size_t>(seq.spec.max_tokens)) {
          expected.push_back(fake_token(chunk.seq_id, static_cast<int64_t>(expected.size())));
        }
        ASSERT_EQ(std::vector<int32_t>(tokens.begin(), tokens.end()), expected) << "seq " << chunk.seq_id;
        sched.finish(chunk.seq_id);
        live.erase(it);
        ++n_finished;
      }
    }
  };

  int step = 0;
  for (; step < kArrivalSteps + kMaxDrainSteps; ++step) {
    if (step >= kArrivalSteps && live.empty()) break;
    if (step < kArrivalSteps) {
      const int n_arrivals = rng() % 2 == 0 ? static_cast<int>(rng() % 4) : 0;
      for (int a = 0; a < n_arrivals; ++a) {
        SeqSpec spec;
        std::vector<int32_t> stream = families[rng() % families.size()];
        if (rng() % 3 == 0) stream[rng() % stream.size()] = static_cast<int32_t>(2000 + rng() % 1000);
        stream.resize(1 + rng() % 40);
        spec.prompt_tokens = std::move(stream);
        spec.max_tokens = 1 + static_cast<int32_t>(rng() % 16);
        spec.priority = static_cast<int32_t>(rng() % 3);
        spec.tenant = "tenant-" + std::to_string(rng() % 3);
        spec.cache_salt = rng() % 2 == 0 ? std::string() : spec.tenant;
        if (rng() % 8 == 0) spec.deadline = now + std::chrono::milliseconds(5 + rng() % 80);
        const bool queue_full = sched.n_waiting() >= cfg.max_waiting;
        const Status added = sched.add(next_id, spec);
        if (queue_full) {
          ASSERT_EQ(added.code(), ErrorCode::engine_overloaded);
          ++n_overloaded;
        } else {
          ASSERT_TRUE(added.ok()) << added.to_string();
          live.emplace(next_id, Live{std::move(spec), 0, 0, 0, 0, false, step});
        }
        ++next_id;
      }
      if (!live.empty() && rng() % 50 == 0) {
        const auto it = std::next(live.begin(), static_cast<std::ptrdiff_t>(rng() % live.size()));
        sched.finish(it->first);
        live.erase(it);
        ++n_cancelled;
      }
    }

    // Before planning: who runs, and the brute-force hit of every waiting sequence (an upper
    // bound: nothing is registered during schedule(), only evicted).
    std::map<SeqId, bool> was_running;
    std::map<SeqId, int64_t> hit_upper;
    for (const auto& [seq_id, seq] : live) {
      was_running[seq_id] = sched.is_running(seq_id);
      if (!was_running[seq_id]) {
        hit_upper[seq_id] = brute_force_hit(kv, contents, sched.tokens(seq_id), seq.spec.cache_salt);
      }
    }

    const StepPlan plan = sched.schedule(now);
    expect_plan_well_formed(plan, cfg);

    for (const SeqId seq_id : plan.expired) {
      const auto it = live.find(seq_id);
      ASSERT_NE(it, live.end()) << "expired an unknown sequence " << seq_id;
      ASSERT_TRUE(it->second.spec.deadline && *it->second.spec.deadline <= now);
      live.erase(it);
      ++n_expired;
    }
    for (const auto& [seq_id, seq] : live) {
      ASSERT_FALSE(seq.spec.deadline && *seq.spec.deadline <= now)
          << "seq " << seq_id << " outlived its deadline";
    }
    for (const SeqId seq_id : plan.preempted) {
      ASSERT_TRUE(was_running.at(seq_id)) << "preempted a sequence that was not running";
      if (in_flight) {
        for (const ScheduledChunk& chunk : in_flight->chunks)
          ASSERT_NE(chunk.seq_id, seq_id) << "preempted in flight";
      }
      Live& seq = live.at(seq_id);
      ASSERT_EQ(seq.n_pending, 0);
      seq.scheduled_end = 0;
      seq.replay_end = 0;
      ++n_preempted;
    }

    bool seen_prefill = false;
    for (const ScheduledChunk& chunk : plan.chunks) {
      Live& seq = live.at(chunk.seq_id);
      const bool preempted_now =
          std::find(plan.preempted.begin(), plan.preempted.end(), chunk.seq_id) != plan.preempted.end();
      ASSERT_FALSE(preempted_now) << "a preempted sequence kept its chunk";
      const int64_t n_known = static_cast<int64_t>(sched.tokens(chunk.seq_id).size()) + seq.n_pending;
      const int64_t prompt_len = static_cast<int64_t>(seq.spec.prompt_tokens.size());
      const bool continuing = was_running.at(chunk.seq_id);
      const bool decode = continuing && chunk.n_tokens == 1 && chunk.samples && chunk.pos_begin >= prompt_len;
      if (decode) {
        ASSERT_FALSE(seen_prefill) << "step " << step << ": decode chunk after a prefill chunk, seq "
                                   << chunk.seq_id << " pos " << chunk.pos_begin << " replay_end "
                                   << chunk.replay_end;
      } else {
        seen_prefill = true;
      }
      if (continuing) {
        ASSERT_EQ(chunk.pos_begin, seq.scheduled_end) << "step " << step << " seq " << chunk.seq_id;
        ASSERT_EQ(chunk.replay_end, chunk.pos_begin < seq.replay_end ? seq.replay_end : 0);
      } else {
        // Admission: the prefix hit H is where the chunk starts, or replay_end under SWA replay.
        const int64_t hit = chunk.replay_end > 0 ? chunk.replay_end : chunk.pos_begin;
        if (window > 0 && hit > 0) {
          ASSERT_EQ(chunk.pos_begin, hit - window) << "replay must start one window before the hit";
          ASSERT_GT(hit, window) << "a hit no longer than the window was adopted";
          ++n_replays;
        }
        ASSERT_EQ(hit % kBlockSize, 0);
        ASSERT_LT(hit, n_known) << "a hit must leave the last token to compute";
        const int64_t upper = hit_upper.at(chunk.seq_id);
        const int64_t lower = brute_force_hit(kv, contents, sched.tokens(chunk.seq_id), seq.spec.cache_salt);
        ASSERT_LE(lower, upper);
        if (lower == upper) {
          ASSERT_EQ(hit, adopt(upper)) << "step " << step << " seq " << chunk.seq_id;
          ++n_hits_checked_exactly;
        } else {
          ASSERT_TRUE(hit == 0 || (hit >= lower && hit <= upper && hit == adopt(hit)));
        }
        // No false hit: the shared blocks hold exactly this salt's prefix.
        const std::vector<BlockId>& table = sched.block_table(chunk.seq_id);
        const std::span<const int32_t> tokens = sched.tokens(chunk.seq_id);
        for (size_t j = 0; j < static_cast<size_t>(hit / kBlockSize); ++j) {
          const BlockContent& content = contents.at(table[j]);
          ASSERT_EQ(content.salt, seq.spec.cache_salt);
          ASSERT_TRUE(std::equal(content.prefix.begin(), content.prefix.end(), tokens.begin(),
                                 tokens.begin() + static_cast<std::ptrdiff_t>((j + 1) * kBlockSize)));
        }
        if (!seq.ever_admitted) {
          ASSERT_EQ(sched.cached_prompt_tokens(chunk.seq_id), hit);
          max_wait_steps = std::max(max_wait_steps, step - seq.arrival_step);
        } else {
          ++n_resumed;
        }
        n_hits += hit > 0 ? 1 : 0;
        seq.ever_admitted = true;
        seq.replay_end = chunk.replay_end;
      }
      ASSERT_EQ(chunk.samples, chunk.pos_begin + chunk.n_tokens == n_known) << "seq " << chunk.seq_id;
      seq.scheduled_end = chunk.pos_begin + chunk.n_tokens;
      if (chunk.samples) ++seq.n_pending;
    }

    // Two salts never share a block.
    std::unordered_map<BlockId, std::string> salt_of_block;
    for (const auto& [seq_id, seq] : live) {
      if (!sched.is_running(seq_id)) continue;
      for (const BlockId block_id : sched.block_table(seq_id)) {
        const auto [at, inserted] = salt_of_block.emplace(block_id, seq.spec.cache_salt);
        ASSERT_EQ(at->second, seq.spec.cache_salt) << "block " << block_id << " shared across salts";
      }
    }

    if (params.async) {
      if (in_flight) complete(*in_flight);
      in_flight = plan;
    } else {
      complete(plan);
    }
    if (::testing::Test::HasFatalFailure()) return;
    const Status integrity = sched.check_integrity();
    ASSERT_TRUE(integrity.ok()) << "step " << step << ": " << integrity.to_string();
    now += 1ms;
  }
  if (in_flight) complete(*in_flight);

  // Every sequence finished with exactly max_tokens, or was reported expired or cancelled.
  EXPECT_TRUE(live.empty()) << live.size() << " sequences never finished (starved) after " << step
                            << " steps";
  EXPECT_EQ(sched.n_running() + sched.n_waiting(), 0);
  EXPECT_EQ(kv.n_free_blocks(), kNBlocks) << "leaked KV blocks";
  EXPECT_TRUE(sched.check_integrity().ok());
  EXPECT_EQ(static_cast<int64_t>(n_finished + n_expired + n_cancelled),
            static_cast<int64_t>(next_id - 1 - n_overloaded));

  // The workload must have exercised what it claims to test.
  EXPECT_GT(n_finished, 300);
  EXPECT_GT(n_expired, 5);
  EXPECT_GT(n_overloaded, 5);
  EXPECT_GT(n_preempted, 5);
  EXPECT_GT(n_resumed, 5);
  EXPECT_GT(n_hits, 50);
  EXPECT_GT(n_hits_checked_exactly, 300);
  if (window > 0) {
    EXPECT_GT(n_replays, 20);
  }
  std::printf(
      "finished %d expired %d cancelled %d overloaded %d preempted %d resumed %d hits %d (exact %d) "
      "replays %d max_wait_steps %d steps %d evictions %lld\n",
      n_finished, n_expired, n_cancelled, n_overloaded, n_preempted, n_resumed, n_hits,
      n_hits_checked_exactly, n_replays, max_wait_steps, step,
      static_cast<long long>(kv.stats().n_evictions));
}

// Equal priorities, one tenant keeping a deep backlog and one sending a request now and then: fair
// share must admit the light tenant's requests well ahead of the heavy backlog (under FIFO both
// would wait the same), and no request may starve.
TEST(SchedulerFairShare, LightTenantWaitsFarLessThanAHeavyTenantsBacklog) {
  SchedulerConfig cfg;
  cfg.max_step_tokens = 16;
  cfg.max_running = 4;
  cfg.max_waiting = 24;
  cfg.max_seq_len = 64;
  KvCacheManagerConfig kv_cfg;
  kv_cfg.block_size_tokens = kBlockSize;
  kv_cfg.n_blocks = 64;
  kv_cfg.process_seed = 1;
  KvCacheManager kv(kv_cfg);
  Scheduler sched(cfg, kv);
  SteadyTime now = SteadyTime{} + 1h;

  std::map<SeqId, std::pair<std::string, int>> arrival;  // tenant, step
  std::map<std::string, std::vector<int>> waits;
  SeqId next_id = 1;
  constexpr int kSteps = 1500;
  for (int step = 0; step < kSteps + 500; ++step) {
    auto submit = [&](const std::string& tenant) {
      SeqSpec spec;
      spec.prompt_tokens.assign(8, static_cast<int32_t>(next_id));  // distinct prompts: no prefix hits
      spec.max_tokens = 8;
      spec.tenant = tenant;
      ASSERT_TRUE(sched.add(next_id, std::move(spec)).ok());
      arrival[next_id++] = {tenant, step};
    };
    if (step < kSteps) {
      while (sched.n_waiting() < cfg.max_waiting - 2) submit("heavy");
      if (step % 15 == 0) submit("light");
    }
    const StepPlan plan = sched.schedule(now);
    for (const ScheduledChunk& chunk : plan.chunks) {
      if (chunk.pos_begin == 0) {
        const auto& [tenant, arrived] = arrival.at(chunk.seq_id);
        waits[tenant].push_back(step - arrived);
      }
    }
    sched.on_step_done(plan, fake_sample(plan));
    for (const ScheduledChunk& chunk : plan.chunks) {
      if (sched.contains(chunk.seq_id) && sched.n_generated(chunk.seq_id) == 8) sched.finish(chunk.seq_id);
    }
    ASSERT_TRUE(sched.check_integrity().ok());
    now += 1ms;
    if (step >= kSteps && sched.n_waiting() + sched.n_running() == 0) break;
  }
  ASSERT_EQ(sched.n_waiting() + sched.n_running(), 0) << "starved requests left";
  auto mean = [](const std::vector<int>& v) {
    double sum = 0;
    for (const int x : v) sum += x;
    return sum / static_cast<double>(v.size());
  };
  const double light_mean = mean(waits.at("light"));
  const double heavy_mean = mean(waits.at("heavy"));
  const int light_max = *std::max_element(waits.at("light").begin(), waits.at("light").end());
  std::printf(
      "fair share: light %zu requests mean wait %.1f max %d steps; heavy %zu requests mean wait %.1f\n",
      waits.at("light").size(), light_mean, light_max, waits.at("heavy").size(), heavy_mean);
  EXPECT_EQ(waits.at("light").size(), static_cast<size_t>((kSteps + 14) / 15));
  EXPECT_LT(light_mean * 4, heavy_mean);
  // A light request waits at most for one running slot to free: a request occupies its slot for
  // 1 prefill + 7 decode steps, so the next free slot is at most 8 steps away.
  EXPECT_LE(light_max, 8);
}

INSTANTIATE_TEST_SUITE_P(Modes, SchedulerStress,
                         ::testing::Values(StressParams{false, 0, 1}, StressParams{true, 0, 2},
                                           StressParams{false, 8, 3}, StressParams{true, 8, 4},
                                           StressParams{false, 0, 5}, StressParams{true, 0, 6},
                                           StressParams{false, 8, 7}, StressParams{true, 8, 8}),
                         param_name);

}  // namespace
}  // namespace ds
