#include "model/batch_check.h"

namespace ds {

namespace {

Status bad_input(const std::string& what) { return Status(ErrorCode::model_bad_input, what); }

}  // namespace

std::string request_prefix(size_t r) { return "request " + std::to_string(r) + ": "; }

Status check_request(std::span<SequenceState* const> seqs, std::span<const std::span<const int32_t>> tokens,
                     size_t r, bool mtp, int64_t vocab_size, int64_t max_seq_len, bool mtp_draft) {
  const SequenceState* seq = seqs[r];
  if (seq == nullptr) return bad_input(request_prefix(r) + "no sequence");
  for (size_t q = 0; q < r; ++q) {
    if (seqs[q] == seq) return bad_input(request_prefix(r) + "sequence appears twice in one batch");
  }
  const std::span<const int32_t> toks = tokens[r];
  if (toks.empty()) return bad_input(request_prefix(r) + "empty chunk");
  for (size_t i = 0; i < toks.size(); ++i) {
    if (toks[i] < 0 || toks[i] >= vocab_size) {
      return bad_input(request_prefix(r) + "token id " + std::to_string(toks[i]) + " at index " +
                       std::to_string(i) + " is outside the vocabulary [0, " + std::to_string(vocab_size) +
                       ")");
    }
  }
  if (seq->n_tokens < 0 || seq->n_mtp_tokens < 0 || (seq->n_mtp_tokens > seq->n_tokens && !mtp_draft)) {
    return bad_input(request_prefix(r) + "inconsistent sequence (n_tokens " + std::to_string(seq->n_tokens) +
                     ", n_mtp_tokens " + std::to_string(seq->n_mtp_tokens) + ")");
  }
  const int64_t n = static_cast<int64_t>(toks.size());
  const int64_t base = mtp ? seq->n_mtp_tokens : seq->n_tokens;
  if (mtp && !mtp_draft && base + n > seq->n_tokens) {
    return bad_input(request_prefix(r) + "MTP rows up to position " + std::to_string(base + n - 1) +
                     " need the main model to have consumed them first (it has " +
                     std::to_string(seq->n_tokens) + " tokens)");
  }
  if (base + n > max_seq_len) {
    return bad_input(request_prefix(r) + "sequence length " + std::to_string(base + n) +
                     " exceeds max_seq_len " + std::to_string(max_seq_len));
  }
  return ok_status();
}

}  // namespace ds
