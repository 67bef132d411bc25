// The checks every model's forward makes on a batch before touching any state (ModelRunner's
// contract: a bad request changes nothing): per request, a sequence given once, a non-empty
// chunk of in-vocabulary ids, consistent counters, MTP rows only after the main model consumed
// them, and the length limit. Model-specific checks (block tables, V4 state slots and replay)
// follow in the model.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "base/status.h"
#include "model/model_runner.h"

namespace ds {

// "request <r>: " (built on the error path only).
std::string request_prefix(size_t r);

// model_bad_input naming request r for the first problem of seqs[r] / tokens[r] (seqs[0..r) are
// the batch's earlier requests). mtp: the chunk is MTP rows (from seq.n_mtp_tokens); mtp_draft: they
// are drafting rows, which may run past the main model's n_tokens (MtpRequest::draft).
Status check_request(std::span<SequenceState* const> seqs, std::span<const std::span<const int32_t>> tokens,
                     size_t r, bool mtp, int64_t vocab_size, int64_t max_seq_len, bool mtp_draft = false);

}  // namespace ds
