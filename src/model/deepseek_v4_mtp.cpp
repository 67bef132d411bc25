// DeepSeek-V4's MTP layer run by the model (model-spec §4.10, docs/speculative.md "V4"): rows that
// consume the main model's final streams (the drafter's observe), and draft rows that reuse the layer
// autoregressively, each fed the layer's own output streams of the row before. The MTP layer is
// window-only, so its state is one ring: a draft row journals the slot it overwrites and the next
// MTP call that is not a draft puts every such slot back.
#include <algorithm>
#include <string>
#include <vector>

#include "model/batch_check.h"
#include "model/deepseek_v4.h"
#include "model/v4_chunk_undo.h"

namespace ds {

namespace {

Status bad_input(const std::string& what) { return Status(ErrorCode::model_bad_input, what); }

}  // namespace

bool DeepSeekV4::supports_mtp_drafting() const {
  return has_mtp() && supports_truncation() &&
         specs_[static_cast<size_t>(cfg_.num_hidden_layers)].compress_ratio == 0;
}

Status DeepSeekV4::set_mtp_draft_vocab(std::span<const int32_t> ids) {
  if (!mtp_) return Status(ErrorCode::model_unsupported, "checkpoint has no MTP layer");
  draft_head_ = WeightMatrix{};
  draft_head_storage_.clear();
  if (ids.empty()) return ok_status();
  DS_ASSIGN_OR_RETURN(draft_head_, select_rows(head_.w, ids, draft_head_storage_));
  return ok_status();
}

Status DeepSeekV4::forward_mtp_idle() {
  if (!mtp_) return Status(ErrorCode::model_unsupported, "checkpoint has no MTP layer");
  mtp_->ffn_idle(ctx_, num_, scratch_);
  return ok_status();
}

Status DeepSeekV4::check_mtp_request(const MtpRequest& req, size_t r) const {
  const SequenceState& seq = *req.seq;
  const V4SequenceSlot& slot = slots_.of(seq);
  const int64_t at = seq.n_mtp_tokens;
  if (slot.mtp_layers.empty()) return bad_input(request_prefix(r) + "the sequence's slot keeps no MTP state");
  if (at < slot.n_mtp_tokens) {
    return bad_input(request_prefix(r) + "MTP rows from position " + std::to_string(at) +
                     ", but the MTP layer has consumed " + std::to_string(slot.n_mtp_tokens));
  }
  if (!req.draft) return ok_status();
  if (req.next_tokens.size() != 1) return bad_input(request_prefix(r) + "a V4 MTP draft request has one row");
  if (slot.mtp_out_pos != at - 1) {
    return bad_input(request_prefix(r) + "an MTP draft row at position " + std::to_string(at) +
                     " needs the MTP output of position " + std::to_string(at - 1) +
                     " (the last MTP row is at " + std::to_string(slot.mtp_out_pos) + ")");
  }
  return ok_status();
}

Status DeepSeekV4::forward_mtp(std::span<const MtpRequest> requests, LogitsOutput& out) {
  if (!mtp_) return Status(ErrorCode::model_unsupported, "checkpoint has no MTP layer");
  if (!kv_config_.mtp_layer) {
    return Status(ErrorCode::model_unsupported, "the KV cache was initialised without the MTP layer");
  }
  std::vector<SequenceState*> seqs;
  std::vector<std::span<const int32_t>> tokens;
  std::vector<uint8_t> drafts;
  for (const auto& r : requests) {
    seqs.push_back(r.seq);
    tokens.push_back(r.next_tokens);
    drafts.push_back(r.draft ? 1 : 0);
  }
  DS_TRY(check_batch(seqs, tokens, {}, /*mtp=*/true, {}, drafts));
  for (size_t r = 0; r < requests.size(); ++r) DS_TRY(check_mtp_request(requests[r], r));
  const bool sub_vocab = !requests.empty() && requests.front().draft_vocab && draft_head_.rows > 0;
  const int64_t d = cfg_.hidden_size, row = cfg_.hc_mult * d;
  std::vector<float> h, head_in, last(static_cast<size_t>(row));
  out.row_begin.assign(1, 0);
  for (size_t r = 0; r < requests.size(); ++r) {
    const MtpRequest& req = requests[r];
    SequenceState& seq = *seqs[r];
    V4SequenceSlot& slot = slots_.of(seq);
    const int64_t n = static_cast<int64_t>(tokens[r].size());
    std::vector<int32_t> pos(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) pos[t] = static_cast<int32_t>(seq.n_mtp_tokens + t);
    const float* in = nullptr;
    if (req.draft) {
      begin_mtp_draft(slot, seq.n_mtp_tokens);
      in = slot.mtp_out_streams.data();
    } else {
      undo_mtp_drafts(slot);
      // Positions the layer skipped (drafting was off for them) leave the pending inputs unread.
      const int64_t skip = seq.n_mtp_tokens - slot.n_mtp_tokens;
      slot.pending_streams.erase(slot.pending_streams.begin(), slot.pending_streams.begin() + skip * row);
      slot.n_mtp_tokens = seq.n_mtp_tokens;
      in = slot.pending_streams.data();  // row 0 is position slot.n_mtp_tokens
    }
    h.resize(static_cast<size_t>(n * d));
    mtp_->forward(ctx_, num_, embed_, in, tokens[r].data(), n, pos.data(), slot.mtp_layers[0],
                  pages_for(cfg_.num_hidden_layers, seq.block_table.data()), h.data(), scratch_, last.data());
    if (req.draft) {
      end_mtp_draft(slot);
    } else {
      slot.pending_streams.erase(slot.pending_streams.begin(), slot.pending_streams.begin() + n * row);
      slot.n_mtp_tokens += n;
    }
    slot.mtp_out_streams = last;
    slot.mtp_out_pos = seq.n_mtp_tokens + n - 1;
    seq.n_mtp_tokens += n;
    const int64_t n_out = req.all_logits ? n : 1;
    head_in.insert(head_in.end(), h.end() - n_out * d, h.end());
    out.row_begin.push_back(out.row_begin.back() + n_out);
  }
  const int64_t R = out.row_begin.back();
  const WeightMatrix& head = sub_vocab ? draft_head_ : head_.w;
  out.logits.reshape(Shape{R, head.rows});
  if (R > 0) linear(ctx_, head, head_in.data(), R, d, out.logits.data(), head.rows);
  // The head's input rows (the chain input itself stays in the slot: all hc streams).
  out.hidden_row_begin = out.row_begin;
  out.hidden.reshape(Shape{R, d});
  std::copy(head_in.begin(), head_in.end(), out.hidden.data());
  return ok_status();
}

}  // namespace ds
