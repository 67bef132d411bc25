#include "engine/speculation_costs.h"

#include <algorithm>
#include <map>

#include "base/clock.h"

namespace ds {

namespace {
constexpr int kRepetitions = 7;
}  // namespace

Result<SpeculationCosts> measure_speculation_costs(ModelRunner& model, int32_t max_seqs, int32_t k_max,
                                                   bool draft_vocab) {
  std::vector<int32_t> batch_sizes;
  for (int32_t b = 1; b < max_seqs; b *= 2) batch_sizes.push_back(b);
  batch_sizes.push_back(std::max(1, max_seqs));
  // Varied tokens (so rows route to varied experts, as real decode rows do), one slice per sequence.
  const int32_t vocab = std::max(1, model.config().vocab_size);
  const size_t per_seq = static_cast<size_t>(k_max) + 1;
  std::map<int64_t, double> target, draft;  // rows -> fastest ns
  std::vector<SequenceState> seqs(static_cast<size_t>(batch_sizes.back()));
  std::vector<int32_t> tokens(seqs.size() * per_seq);
  uint32_t x = 12345;
  for (int32_t& t : tokens) {
    x = x * 1664525u + 1013904223u;
    t = static_cast<int32_t>((x >> 8) % static_cast<uint32_t>(vocab));
  }
  std::vector<ForwardRequest> requests;
  std::vector<MtpRequest> mtp;
  LogitsOutput out, mtp_out;
  // Repetitions outermost: a burst of load on a shared host inflates one pass, not every
  // repetition of one point.
  for (int rep = 0; rep < kRepetitions; ++rep) {
    for (const int32_t b : batch_sizes) {
      for (int32_t r = 1; r <= k_max + 1; ++r) {
        const int64_t rows = int64_t{b} * r;
        requests.clear();
        for (int32_t s = 0; s < b; ++s) {
          SequenceState& seq = seqs[static_cast<size_t>(s)];
          seq.block_table.assign(1, s);
          seq.state_slot = s;  // models with per-sequence state slots (V4): one each
          seq.n_tokens = 0;
          seq.n_mtp_tokens = 0;
          ForwardRequest f{&seq,
                           std::span<const int32_t>(tokens.data() + static_cast<size_t>(s) * per_seq,
                                                    static_cast<size_t>(r)),
                           r > 1, 0};
          f.all_hidden = true;
          requests.push_back(f);
        }
        const int64_t t0 = now_ns();
        DS_TRY(model.forward(requests, out));
        const int64_t t1 = now_ns();
        const auto keep_min = [](std::map<int64_t, double>& m, int64_t rows, double ns) {
          const auto [it, inserted] = m.emplace(rows, ns);
          if (!inserted) it->second = std::min(it->second, ns);
        };
        keep_min(target, rows, static_cast<double>(t1 - t0));
        if (!model.supports_mtp_drafting()) continue;  // a block drafter (DSpark): the target only
        mtp.clear();
        for (int32_t s = 0; s < b; ++s) {
          MtpRequest m;
          m.seq = &seqs[static_cast<size_t>(s)];
          m.next_tokens = std::span<const int32_t>(tokens.data() + static_cast<size_t>(s) * per_seq,
                                                   static_cast<size_t>(r));
          m.hidden = out.hidden.row(out.hidden_row_begin[static_cast<size_t>(s)]);
          m.all_logits = false;
          m.draft_vocab = draft_vocab;
          mtp.push_back(m);
        }
        const int64_t t2 = now_ns();
        DS_TRY(model.forward_mtp(mtp, mtp_out));
        const int64_t t3 = now_ns();
        keep_min(draft, rows, static_cast<double>(t3 - t2));
      }
    }
  }
  for (SequenceState& seq : seqs) truncate_sequence(seq, 0);
  SpeculationCosts costs;
  for (const auto& [rows, ns] : target) costs.target.push_back({rows, ns});
  for (const auto& [rows, ns] : draft) costs.draft.push_back({rows, ns});
  // More rows never cost less: a point above a later one was inflated by noise (noise only adds
  // time), so each point is lowered to the cheapest at or after it.
  for (auto* curve : {&costs.target, &costs.draft})
    for (size_t i = curve->size(); i-- > 1;)
      (*curve)[i - 1].ns = std::min((*curve)[i - 1].ns, (*curve)[i].ns);
  return costs;
}

}  // namespace ds
