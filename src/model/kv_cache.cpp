#include "model/kv_cache.h"

#include <algorithm>

#include "base/assert.h"

namespace ds {

float* LatentCache::append_rows(int64_t n) {
  const size_t need = static_cast<size_t>((n_rows_ + n) * row_dim_);
  if (need > rows_.capacity()) rows_.reserve(std::max(need, rows_.capacity() * 2));
  rows_.resize(need);
  float* first_new = rows_.data() + n_rows_ * row_dim_;
  n_rows_ += n;
  return first_new;
}

void LatentCache::truncate(int64_t n_rows) {
  DS_ASSERT(n_rows >= 0 && n_rows <= n_rows_, "truncate beyond the cached rows");
  n_rows_ = n_rows;
  rows_.resize(static_cast<size_t>(n_rows_ * row_dim_));
}

SequenceState::SequenceState(int n_layers, int64_t row_dim, bool has_mtp, int64_t max_seq_len)
    : mtp_(row_dim), row_dim_(row_dim), has_mtp_(has_mtp), max_seq_len_(max_seq_len) {
  layers_.reserve(static_cast<size_t>(n_layers));
  for (int i = 0; i < n_layers; ++i) layers_.emplace_back(row_dim);
}

Status SequenceState::check_room(int64_t n_new, int64_t n_have) const {
  if (n_have + n_new > max_seq_len_) {
    return Status(ErrorCode::model_bad_input, "sequence length " + std::to_string(n_have + n_new) +
                                                  " exceeds max_seq_len " + std::to_string(max_seq_len_));
  }
  return ok_status();
}

void SequenceState::truncate(int64_t n_tokens) {
  DS_ASSERT(n_tokens >= 0 && n_tokens <= n_tokens_, "truncate beyond the sequence");
  for (auto& l : layers_) l.truncate(std::min(n_tokens, l.n_rows()));
  n_tokens_ = n_tokens;
  if (n_mtp_tokens_ > n_tokens) {
    mtp_.truncate(n_tokens);
    n_mtp_tokens_ = n_tokens;
  }
}

}  // namespace ds
