#include "engine/testing/fake_model_runner.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <unordered_set>

namespace ds::testing {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

FakeModelRunner::FakeModelRunner(const FakeModelOptions& options) : opts_(options) {
  config_.model_type = "fake";
  config_.vocab_size = options.vocab_size;
  config_.eos_token_id = options.eos_token_id;
  config_.image_token_id = options.image_token_id;
  config_.bos_token_id = 0;
  config_.max_position_embeddings = static_cast<int>(options.max_seq_len);
}

KvCacheLayout FakeModelRunner::kv_cache_layout() const {
  KvCacheLayout layout;
  layout.block_size_multiple = opts_.block_size_multiple;
  layout.bytes_per_token = static_cast<int64_t>(sizeof(uint64_t) + sizeof(uint8_t));
  layout.bytes_per_sequence = 0;
  return layout;
}

Status FakeModelRunner::init_kv_cache(const KvCacheConfig& cfg) {
  if (cfg.block_size_tokens <= 0 || cfg.block_size_tokens % opts_.block_size_multiple != 0) {
    return Status(ErrorCode::invalid_argument, "block_size_tokens " + std::to_string(cfg.block_size_tokens) +
                                                   " is not a positive multiple of " +
                                                   std::to_string(opts_.block_size_multiple));
  }
  if (cfg.n_blocks <= 0) return Status(ErrorCode::invalid_argument, "n_blocks must be positive");
  kv_cfg_ = cfg;
  const size_t n_cells = static_cast<size_t>(cfg.n_blocks) * static_cast<size_t>(cfg.block_size_tokens);
  cells_.assign(n_cells, 0);
  written_.assign(n_cells, 0);
  return ok_status();
}

uint64_t FakeModelRunner::hash_step(uint64_t prev, int32_t token) const {
  return splitmix64(prev ^ splitmix64(static_cast<uint64_t>(static_cast<uint32_t>(token)) + opts_.seed));
}

void FakeModelRunner::fill_logits(uint64_t hash, float* row) const {
  for (int32_t v = 0; v < opts_.vocab_size; ++v) {
    const uint64_t r = splitmix64(hash + static_cast<uint64_t>(v));
    row[v] = static_cast<float>(r >> 48) / 4096.0f - 8.0f;  // [-8, 8) in steps of 1/4096
  }
  if (opts_.eos_token_id >= 0 && opts_.eos_token_id < opts_.vocab_size)
    row[opts_.eos_token_id] += opts_.eos_logit_offset;
}

std::vector<float> FakeModelRunner::reference_logits(std::span<const int32_t> tokens) const {
  uint64_t h = 0;
  for (int32_t t : tokens) h = hash_step(h, t);
  std::vector<float> row(static_cast<size_t>(opts_.vocab_size));
  fill_logits(h, row.data());
  return row;
}

std::vector<int32_t> FakeModelRunner::reference_greedy(std::span<const int32_t> prompt, int n) const {
  std::vector<int32_t> seq(prompt.begin(), prompt.end());
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const std::vector<float> row = reference_logits(seq);
    const int32_t best = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    out.push_back(best);
    seq.push_back(best);
  }
  return out;
}

Status FakeModelRunner::validate(std::span<const ForwardRequest> requests) const {
  if (cells_.empty()) return Status(ErrorCode::model_bad_input, "forward before init_kv_cache");
  const int64_t bs = kv_cfg_.block_size_tokens;
  std::unordered_set<const SequenceState*> seen_seqs;
  std::unordered_set<int32_t> written_blocks;
  for (size_t r = 0; r < requests.size(); ++r) {
    const ForwardRequest& req = requests[r];
    const std::string name = "request " + std::to_string(r);
    if (req.seq == nullptr || req.tokens.empty())
      return Status(ErrorCode::model_bad_input, name + ": empty chunk");
    if (!seen_seqs.insert(req.seq).second)
      return Status(ErrorCode::model_bad_input, name + ": sequence named twice");
    for (int32_t t : req.tokens) {
      if (t < 0 || t >= opts_.vocab_size) {
        return Status(ErrorCode::model_bad_input, name + ": token id " + std::to_string(t) + " out of range");
      }
    }
    const int64_t end = req.seq->n_tokens + static_cast<int64_t>(req.tokens.size());
    if (end > opts_.max_seq_len) return Status(ErrorCode::model_bad_input, name + ": over max_seq_len");
    const int64_t n_blocks_needed = (end + bs - 1) / bs;
    if (static_cast<int64_t>(req.seq->block_table.size()) < n_blocks_needed) {
      return Status(ErrorCode::model_bad_input, name + ": block table too short");
    }
    for (int64_t b = 0; b < n_blocks_needed; ++b) {
      const int32_t id = req.seq->block_table[static_cast<size_t>(b)];
      if (id < 0 || id >= kv_cfg_.n_blocks)
        return Status(ErrorCode::model_bad_input, name + ": bad block id");
    }
    for (int64_t b = req.seq->n_tokens / bs; b < n_blocks_needed; ++b) {
      if (!written_blocks.insert(req.seq->block_table[static_cast<size_t>(b)]).second) {
        return Status(ErrorCode::model_bad_input, name + ": block written by two requests");
      }
    }
    if (req.seq->n_tokens > 0) {
      const int64_t prev = req.seq->n_tokens - 1;
      const size_t cell =
          static_cast<size_t>(req.seq->block_table[static_cast<size_t>(prev / bs)] * bs + prev % bs);
      if (!written_[cell]) return Status(ErrorCode::internal, name + ": reads a position never written");
    }
  }
  return ok_status();
}

Status FakeModelRunner::forward(std::span<const ForwardRequest> requests, LogitsOutput& out) {
  DS_TRY(validate(requests));
  const int64_t bs = kv_cfg_.block_size_tokens;
  int64_t n_out_rows = 0;
  int64_t n_rows = 0;
  out.row_begin.assign(1, 0);
  for (const ForwardRequest& req : requests) {
    n_out_rows += req.all_logits ? static_cast<int64_t>(req.tokens.size()) : 1;
    out.row_begin.push_back(n_out_rows);
    n_rows += static_cast<int64_t>(req.tokens.size());
  }
  // logits: [n_out_rows, vocab]
  out.logits.reshape({n_out_rows, static_cast<int64_t>(opts_.vocab_size)});
  int64_t out_row = 0;
  for (const ForwardRequest& req : requests) {
    SequenceState& seq = *req.seq;
    const auto cell_of = [&](int64_t pos) {
      return static_cast<size_t>(seq.block_table[static_cast<size_t>(pos / bs)] * bs + pos % bs);
    };
    uint64_t h = seq.n_tokens == 0 ? 0 : cells_[cell_of(seq.n_tokens - 1)];
    for (size_t i = 0; i < req.tokens.size(); ++i) {
      h = hash_step(h, req.tokens[i]);
      const size_t cell = cell_of(seq.n_tokens + static_cast<int64_t>(i));
      cells_[cell] = h;
      written_[cell] = 1;
      if (req.all_logits || i + 1 == req.tokens.size()) fill_logits(h, out.logits.row(out_row++));
    }
    seq.n_tokens += static_cast<int64_t>(req.tokens.size());
  }
  const int64_t sleep_ns = opts_.step_sleep_us * 1000 + opts_.row_sleep_ns * n_rows;
  if (sleep_ns > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(sleep_ns));
  std::lock_guard<std::mutex> lock(counters_mu_);
  ++counters_.n_forward_calls;
  counters_.n_rows += n_rows;
  counters_.max_requests_per_call =
      std::max(counters_.max_requests_per_call, static_cast<int64_t>(requests.size()));
  return ok_status();
}

Status FakeModelRunner::forward_mtp(std::span<const MtpRequest>, LogitsOutput&) {
  return Status(ErrorCode::model_unsupported, "the fake model has no MTP layer");
}

FakeModelRunner::Counters FakeModelRunner::counters() const {
  std::lock_guard<std::mutex> lock(counters_mu_);
  return counters_;
}

}  // namespace ds::testing
