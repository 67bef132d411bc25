// deepinfer logits: run one sequence over given token ids (a prefill of the first N, then one
// token at a time) and dump the logits (and optionally the MTP logits) as .npy for the reference.
// With --expert-parallel (under mpirun) every rank runs its own sequence and the MoE layers meet
// over MPI (docs/expert-parallel.md).
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "command_support.h"
#include "commands.h"
#include "decoder_replay_option.h"
#include "engine/model_loader.h"
#include "expert_parallel_option.h"
#include "model/model_registry.h"
#include "npy_writer.h"

namespace ds::cli {

namespace {

struct LogitsOptions {
  std::string model_dir;
  std::string ids;
  int prefill = 0;         // 0 = all ids in one prefill
  int64_t replay_hit = 0;  // > 0: simulate a prefix-cache hit of this many tokens (SWA bounded replay)
  std::string out_path;
  std::string mtp_out_path;
  std::string dspark_out_path;
  std::string isa = "auto";
  int threads = 0;
  std::string mla = "absorbed";
  std::string numerics = "production";
  DecoderReplayFlags decoder_replay;
  bool expert_parallel = false;
  std::vector<std::string> rank_ids;  // "R=ids": rank R runs these ids instead of --ids
  bool ep_stats = false;
  ExpertParallelOptions ep;
};

// The ids this rank runs: --ids, or the --rank-ids entry "R=..." for this rank.
std::string ids_for_rank(const LogitsOptions& o, int rank) {
  const std::string key = std::to_string(rank) + "=";
  for (const std::string& r : o.rank_ids)
    if (r.compare(0, key.size(), key) == 0) return r.substr(key.size());
  return o.ids;
}

// Ranks meet at every MoE layer: a rank with fewer main forwards than the others runs idle steps
// after its own (ModelRunner::forward_idle); MTP forwards have no idle step yet, so their counts
// must agree. Returns the most main forwards any rank runs.
Result<int64_t> agree_on_steps(const MpiComm& comm, int64_t n_steps, int64_t n_mtp_steps) {
  std::vector<int64_t> steps, mtp_steps;
  DS_TRY(comm.allgather_i64(n_steps, steps));
  DS_TRY(comm.allgather_i64(n_mtp_steps, mtp_steps));
  for (size_t r = 0; r < mtp_steps.size(); ++r) {
    if (mtp_steps[r] != n_mtp_steps) {
      return Status(ErrorCode::invalid_argument, "--expert-parallel: rank " + std::to_string(comm.rank()) +
                                                     " runs " + std::to_string(n_mtp_steps) +
                                                     " MTP forward steps but rank " + std::to_string(r) +
                                                     " runs " + std::to_string(mtp_steps[r]) +
                                                     " (with --mtp-out give every rank as many ids)");
    }
  }
  return *std::max_element(steps.begin(), steps.end());
}

// 64-token blocks, or the least multiple of 64 that splits no compression group (V4-Flash and
// the V4 bench preset have ratio 128 layers; the block must hold whole groups).

// "0,17,42" -> ids; false on anything else (empty items, signs, non-digits, overflow).
bool parse_ids(const std::string& text, std::vector<int32_t>& ids) {
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    int32_t v = 0;
    const char* first = text.data() + begin;
    const char* last = text.data() + end;
    auto [ptr, ec] = std::from_chars(first, last, v);
    if (first == last || ec != std::errc() || ptr != last || v < 0) return false;
    ids.push_back(v);
    begin = end + 1;
  }
  return !ids.empty();
}

// Feeds ids[first, last) to `seq` as chunks: one chunk of `prefill` ids, then one id per step;
// each chunk's rows of out.logits / out.hidden are appended to `logits` / `hidden` (every row: with
// all_logits the hidden rows are the logits rows; `draft_features` asks all_hidden, which gives a
// DSpark model's context features instead). `between_steps` runs after every forward (live EPLB).
Status run_chunks(ModelRunner& m, SequenceState& seq, const std::vector<int32_t>& ids, size_t n_prefill,
                  bool draft_features, std::vector<float>& logits, std::vector<float>& hidden,
                  const std::function<Status()>& between_steps) {
  LogitsOutput out;
  size_t pos = 0;
  while (pos < ids.size()) {
    const size_t n = pos == 0 ? n_prefill : 1;
    ForwardRequest req{&seq, {ids.data() + pos, n}, true};
    req.all_hidden = draft_features;
    DS_TRY(m.forward({&req, 1}, out));
    logits.insert(logits.end(), out.logits.data(), out.logits.data() + out.logits.numel());
    hidden.insert(hidden.end(), out.hidden.data(), out.hidden.data() + out.hidden.numel());
    pos += n;
    DS_TRY(between_steps());
  }
  return ok_status();
}

// A prefix-cache hit of `hit` tokens (SWA bounded replay, ForwardRequest::replay_end): `seq` runs
// ids[0, hit) (the cached prefix), then starts over at hit − W (KvCacheLayout::swa_replay_tokens)
// in a fresh state slot on the same blocks and runs ids[hit − W, n_prefill) as one chunk carrying
// replay_end = hit, then one id per step. Only the second pass's rows are appended.
Status run_replayed(ModelRunner& m, SequenceState& seq, const std::vector<int32_t>& ids, size_t n_prefill,
                    int64_t hit, std::vector<float>& logits) {
  const int64_t w = m.kv_cache_layout().swa_replay_tokens;
  if (w <= 0)
    return Status(ErrorCode::invalid_argument, "--replay-hit: this model has no SWA bounded replay");
  if (hit < w || hit >= static_cast<int64_t>(n_prefill)) {
    return Status(ErrorCode::invalid_argument, "--replay-hit " + std::to_string(hit) + " must be in [" +
                                                   std::to_string(w) + " (the replay length), the prompt " +
                                                   std::to_string(n_prefill) + ")");
  }
  LogitsOutput out;
  ForwardRequest cold{&seq, {ids.data(), static_cast<size_t>(hit)}, false};
  DS_TRY(m.forward({&cold, 1}, out));
  seq.n_tokens = hit - w;  // the sharer: same blocks, another slot, from the replay start
  seq.state_slot = 1;
  size_t pos = static_cast<size_t>(hit - w);
  while (pos < ids.size()) {
    const size_t n = pos < n_prefill ? n_prefill - pos : 1;
    ForwardRequest req{&seq, {ids.data() + pos, n}, true, static_cast<int64_t>(pos) < hit ? hit : 0};
    DS_TRY(m.forward({&req, 1}, out));
    logits.insert(logits.end(), out.logits.data(), out.logits.data() + out.logits.numel());
    pos += n;
  }
  return ok_status();
}

// DSpark (docs/dspark.md): the context features of positions [0, n − 1) feed the drafter, then one
// draft block with the last id as the anchor and the greedy chain. Returns [block, vocab + 2]:
// row j = z_j (base logits + Markov bias), c_j, y_j.
Result<std::vector<float>> run_dspark_block(DraftBlockModel& dm, int64_t hidden_size, int64_t vocab,
                                            SequenceState& seq, const std::vector<int32_t>& ids,
                                            const std::vector<float>& hidden) {
  const int64_t n = static_cast<int64_t>(ids.size());
  DS_TRY(dm.extend(seq, 0, {hidden.data(), static_cast<size_t>((n - 1) * hidden_size)}));
  const DraftBlockRequest req{&seq, ids.back(), n - 1};
  DraftBlockOutput out;
  DS_TRY(dm.draft({&req, 1}, out));
  const int64_t B = dm.block_size(), width = vocab + 2;
  std::vector<float> rows(static_cast<size_t>(B * width));
  int32_t prev = ids.back();
  for (int64_t j = 0; j < B; ++j) {
    float* z = rows.data() + j * width;
    std::copy_n(out.logits.row(j), vocab, z);
    dm.add_markov_bias(prev, {z, static_cast<size_t>(vocab)});
    const int32_t y = static_cast<int32_t>(std::max_element(z, z + vocab) - z);
    z[vocab] = dm.confidence({out.hidden.row(j), static_cast<size_t>(hidden_size)}, prev);
    z[vocab + 1] = static_cast<float>(y);
    prev = y;
  }
  return rows;
}

// MTP row i pairs hidden row i with ids[i + 1]; chunked like the main pass.
Status run_mtp_chunks(ModelRunner& m, SequenceState& seq, const std::vector<int32_t>& ids,
                      const std::vector<float>& hidden, size_t n_prefill, std::vector<float>& logits) {
  const int64_t H = m.config().hidden_size;
  const size_t n_rows = ids.size() - 1;
  LogitsOutput out;
  size_t row = 0;
  while (row < n_rows) {
    const size_t n = row == 0 ? std::min(n_prefill, n_rows) : 1;
    MtpRequest req{&seq, {ids.data() + row + 1, n}, hidden.data() + static_cast<int64_t>(row) * H};
    DS_TRY(m.forward_mtp({&req, 1}, out));
    logits.insert(logits.end(), out.logits.data(), out.logits.data() + out.logits.numel());
    row += n;
  }
  return ok_status();
}

int run_logits(const LogitsOptions& o) {
  const std::string cmd = "logits";
  std::unique_ptr<ExpertParallelRuntime> ep;
  if (o.expert_parallel) {
    Result<std::unique_ptr<ExpertParallelRuntime>> started = ExpertParallelRuntime::start(o.model_dir, o.ep);
    if (!started.ok()) return report_error(cmd, started.status());
    ep = std::move(*started);
  } else if (!o.rank_ids.empty()) {
    return report_usage_error(cmd, "--rank-ids needs --expert-parallel");
  }
  const int rank = ep ? ep->rank() : 0;
  std::vector<int32_t> ids;
  if (!parse_ids(ids_for_rank(o, rank), ids))
    return report_usage_error(cmd, "--ids must be comma-separated non-negative integers");
  if (o.prefill < 0 || o.prefill > static_cast<int>(ids.size())) {
    return report_usage_error(cmd, "--prefill must be in [1, " + std::to_string(ids.size()) + "] (0 = all)");
  }
  Result<Isa> isa = parse_isa_option(o.isa);
  if (!isa.ok()) return report_usage_error(cmd, isa.status().message());
  if (Status st = check_numerics_option(o.numerics); !st.ok()) return report_usage_error(cmd, st.message());
  if (o.mla != "absorbed" && o.mla != "plain")
    return report_usage_error(cmd, "--mla must be absorbed or plain");
  const size_t n_prefill = o.prefill == 0 ? ids.size() : static_cast<size_t>(o.prefill);
  Result<DecoderReplayOptions> decoder_replay = resolve_decoder_replay(o.decoder_replay);
  if (!decoder_replay.ok()) return report_usage_error(cmd, decoder_replay.status().message());

  ModelOptions mo;
  mo.isa = *isa;
  mo.n_threads = resolve_threads(o.threads);
  mo.numerics = o.numerics;
  mo.decoder_replay = *decoder_replay;
  mo.mla_mode = o.mla == "plain" ? MlaMode::plain : MlaMode::absorbed;
  mo.max_seq_len = static_cast<int64_t>(ids.size());
  if (ep) mo.expert_exchange = &ep->exchange();
  // no-bf16 drops V4's bf16 rounding points (the reference's --no-bf16) so the engine can be
  // compared with it at an f32-noise bound; V3 has no such points and ignores the options.
  Result<std::unique_ptr<ModelRunner>> model = load_model(o.model_dir, mo);
  if (!model.ok()) return report_error(cmd, model.status());
  ModelRunner& m = **model;
  if (!o.dspark_out_path.empty()) {
    if (m.draft_block_model() == nullptr) {
      return report_error(
          cmd, Status(ErrorCode::model_unsupported,
                      o.model_dir + "/config.json: --dspark-out needs DSpark stages (dspark_* keys "
                                    "and num_nextn_predict_layers > 0)"));
    }
    if (ep || o.replay_hit > 0 || decoder_replay->compact || !o.mtp_out_path.empty() || ids.size() < 2) {
      return report_usage_error(cmd,
                                "--dspark-out runs without --expert-parallel, --replay-hit, --mtp-out and "
                                "decoder replay, on at least 2 ids");
    }
  }
  if (!o.mtp_out_path.empty() && !m.has_mtp()) {
    return report_error(
        cmd, Status(ErrorCode::model_unsupported, o.model_dir + "/config.json: --mtp-out needs an MTP layer "
                                                                "(num_nextn_predict_layers is 0)"));
  }

  KvCacheConfig kv =
      standalone_kv_cache_config(mo.max_seq_len, default_block_size_tokens(m.kv_cache_layout()));
  if (o.replay_hit > 0) {  // the cold prefix and the sequence that hits it; the MTP state is not replayed
    kv.n_sequence_slots = 2;
    kv.mtp_layer = false;
  }
  if (Status st = m.init_kv_cache(kv); !st.ok()) return report_error(cmd, st);
  SequenceState seq = make_standalone_sequence(m.kv_cache_config());
  seq.prompt_len = static_cast<int64_t>(n_prefill);  // the prefill chunk is the prompt (decoder replay)
  int64_t n_idle_steps = 0;
  if (ep) {
    const int64_t n_steps = 1 + static_cast<int64_t>(ids.size() - n_prefill);
    const int64_t n_mtp = static_cast<int64_t>(ids.size()) - 1;
    const int64_t n_mtp_steps = o.mtp_out_path.empty() || n_mtp == 0
                                    ? 0
                                    : 1 + n_mtp - std::min<int64_t>(static_cast<int64_t>(n_prefill), n_mtp);
    Result<int64_t> most = agree_on_steps(ep->comm(), n_steps, n_mtp_steps);
    if (!most.ok()) return report_error(cmd, most.status());
    n_idle_steps = *most - n_steps;
  }
  // Live EPLB between the main pass's forwards (every rank runs as many, idle ones included).
  const std::vector<RoutedExpertSet*> expert_sets =
      ep ? m.routed_expert_sets() : std::vector<RoutedExpertSet*>{};
  const std::function<Status()> between_steps = [&] { return ep ? ep->after_step(expert_sets) : Status(); };
  // Under expert parallelism, rank 0 writes --out unless the path has {rank} (then every rank does).
  const bool writes = rank == 0 || o.out_path.find("{rank}") != std::string::npos;
  std::vector<float> logits, hidden;
  if (o.replay_hit > 0) {
    if (ep || !o.mtp_out_path.empty())
      return report_usage_error(cmd, "--replay-hit runs without --expert-parallel and --mtp-out");
    if (Status st = run_replayed(m, seq, ids, n_prefill, o.replay_hit, logits); !st.ok())
      return report_error(cmd, st);
  } else if (Status st = run_chunks(m, seq, ids, n_prefill, !o.dspark_out_path.empty(), logits, hidden,
                                    between_steps);
             !st.ok()) {
    return report_error(cmd, st);
  }
  for (int64_t i = 0; i < n_idle_steps; ++i) {
    if (Status st = m.forward_idle(); !st.ok()) return report_error(cmd, st);
    if (Status st = between_steps(); !st.ok()) return report_error(cmd, st);
  }
  if (ep && !ep->exchange().status().ok()) return report_error(cmd, ep->exchange().status());
  const int64_t vocab = m.config().vocab_size;
  // With decoder replay the prompt rows before the cut have no logits: the file starts at the cut.
  const int64_t n = static_cast<int64_t>(logits.size()) / vocab;
  if (writes) {
    if (Status st = write_npy_f32(per_rank_path(o.out_path, rank), logits.data(), n, vocab); !st.ok())
      return report_error(cmd, st);
  }

  if (!o.mtp_out_path.empty()) {
    std::vector<float> mtp_logits;
    if (ids.size() > 1) {
      if (Status st = run_mtp_chunks(m, seq, ids, hidden, n_prefill, mtp_logits); !st.ok()) {
        return report_error(cmd, st);
      }
    }
    if (ep && !ep->exchange().status().ok()) return report_error(cmd, ep->exchange().status());
    if (writes) {
      if (Status st = write_npy_f32(per_rank_path(o.mtp_out_path, rank), mtp_logits.data(),
                                    static_cast<int64_t>(ids.size()) - 1, vocab);
          !st.ok())
        return report_error(cmd, st);
    }
  }
  if (!o.dspark_out_path.empty()) {
    const int64_t B = m.draft_block_model()->block_size();
    Result<std::vector<float>> rows =
        run_dspark_block(*m.draft_block_model(), m.config().hidden_size, vocab, seq, ids, hidden);
    if (!rows.ok()) return report_error(cmd, rows.status());
    if (Status st = write_npy_f32(o.dspark_out_path, rows->data(), B, vocab + 2); !st.ok())
      return report_error(cmd, st);
  }
  if (ep && o.ep_stats) std::printf("ep_stats %s\n", ep->stats_json().c_str());
  return 0;
}

}  // namespace

void add_logits_command(CLI::App& app, CommandContext& ctx) {
  auto o = std::make_shared<LogitsOptions>();
  CLI::App* sub = app.add_subcommand("logits", "Write the logits of a token sequence as .npy");
  sub->add_option("--model", o->model_dir, "Checkpoint directory")->required();
  sub->add_option("--ids", o->ids, "Comma-separated token ids, e.g. 0,17,42")->required();
  sub->add_option("--prefill", o->prefill,
                  "Ids in the first (prefill) chunk; the rest go one at a time (0 = all)")
      ->capture_default_str();
  sub->add_option("--out", o->out_path,
                  "Output .npy: float32 [n_ids, vocab] (with decoder replay: the rows from the cut on)")
      ->required();
  sub->add_option(
      "--replay-hit", o->replay_hit,
      "Simulate a prefix-cache hit of this many prompt tokens (SWA bounded replay): --out holds the rows "
      "from hit - swa_replay_tokens (V4, V4.1)");
  sub->add_option("--mtp-out", o->mtp_out_path, "Output .npy for MTP logits: float32 [n_ids - 1, vocab]");
  sub->add_option(
      "--dspark-out", o->dspark_out_path,
      "Output .npy of one DSpark draft block after the ids (anchor = the last id; docs/dspark.md): "
      "float32 [block, vocab + 2], row j = logits, confidence, greedy draft");
  sub->add_option("--isa", o->isa, "auto | reference | avx2 | avx512")->capture_default_str();
  sub->add_option("--threads", o->threads, "Worker threads (0 = all hardware threads)")
      ->capture_default_str();
  sub->add_option("--mla", o->mla, "absorbed | plain attention form")->capture_default_str();
  sub->add_option("--numerics", o->numerics, kNumericsOptionHelp)->capture_default_str();
  add_decoder_replay_options(sub, o->decoder_replay);
  sub->add_flag("--expert-parallel", o->expert_parallel,
                "Run under mpirun: each rank loads only its experts; MoE layers meet over MPI all-to-all");
  sub->add_option("--rank-ids", o->rank_ids,
                  "R=ids: rank R runs these ids instead of --ids (with --expert-parallel; repeatable)");
  add_expert_parallel_options(sub, o->ep);
  sub->add_flag("--ep-stats", o->ep_stats,
                "Print one 'ep_stats {json}' line per rank (expert rows, bytes, time)");
  sub->callback([o, &ctx] {
    try {
      ctx.exit_code = run_logits(*o);
    } catch (const std::exception& e) {
      ctx.exit_code = report_error("logits", Status(ErrorCode::internal, e.what()));
    }
  });
}

}  // namespace ds::cli
