#include "tokenizer/bpe_model.h"

#include <climits>
#include <queue>

#include <fmt/format.h>

namespace ds {
namespace {

// Below this many symbols the quadratic scan beats the heap (no allocation, ints in cache).
constexpr size_t kShortWordSymbols = 64;

}  // namespace

Result<BpeModel> BpeModel::build(const BpeModelSpec& spec, std::string_view source) {
  BpeModel model;
  int32_t max_id = -1;
  model.id_of_text_.reserve(spec.vocab.size() * 2);
  for (const auto& [text, id] : spec.vocab) {
    if (id < 0) {
      return Status(ErrorCode::tokenizer_bad_file,
                    fmt::format("{}: model.vocab: token {:?} has negative id {}", source, text, id));
    }
    model.id_of_text_[text] = id;
    max_id = std::max(max_id, id);
  }
  model.text_of_id_.resize(static_cast<size_t>(max_id + 1));
  model.has_id_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [text, id] : spec.vocab) {
    model.text_of_id_[static_cast<size_t>(id)] = text;
    model.has_id_[static_cast<size_t>(id)] = true;
  }

  for (int b = 0; b < 256; ++b) {
    const auto it =
        model.id_of_text_.find(std::string(model.alphabet_.char_of_byte(static_cast<uint8_t>(b))));
    model.id_of_byte_[b] = it == model.id_of_text_.end() ? -1 : it->second;
  }

  model.merges_ = MergeTable(spec.merges.size());
  std::string joined;
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [left, right] = spec.merges[rank];
    const auto left_it = model.id_of_text_.find(left);
    const auto right_it = model.id_of_text_.find(right);
    joined.assign(left).append(right);
    const auto joined_it = model.id_of_text_.find(joined);
    if (left_it == model.id_of_text_.end() || right_it == model.id_of_text_.end() ||
        joined_it == model.id_of_text_.end()) {
      return Status(
          ErrorCode::tokenizer_bad_file,
          fmt::format("{}: model.merges[{}]: merge {:?} + {:?} uses a token missing from model.vocab", source,
                      rank, left, right));
    }
    model.merges_.insert(left_it->second, right_it->second,
                         BpeMerge{static_cast<int32_t>(rank), joined_it->second});
  }

  if (spec.unk_token) {
    const auto it = model.id_of_text_.find(*spec.unk_token);
    if (it == model.id_of_text_.end()) {
      return Status(ErrorCode::tokenizer_bad_file,
                    fmt::format("{}: model.unk_token {:?} is not in model.vocab", source, *spec.unk_token));
    }
    model.unk_id_ = it->second;
  }
  model.fuse_unk_ = spec.fuse_unk;
  model.ignore_merges_ = spec.ignore_merges;
  return model;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  const auto it = id_of_text_.find(std::string(token));
  if (it == id_of_text_.end()) return std::nullopt;
  return it->second;
}

std::string_view BpeModel::token_text(int32_t id) const {
  if (id < 0 || id >= id_limit()) return {};
  return text_of_id_[static_cast<size_t>(id)];
}

void BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>& symbols) const {
  symbols.clear();
  bool last_was_unk = false;
  for (char c : word) {
    const int32_t id = id_of_byte_[static_cast<uint8_t>(c)];
    if (id >= 0) {
      symbols.push_back(id);
      last_was_unk = false;
    } else if (unk_id_ >= 0) {
      if (!(fuse_unk_ && last_was_unk)) symbols.push_back(unk_id_);
      last_was_unk = true;
    }
  }
}

void BpeModel::merge_short(std::vector<int32_t>& symbols) const {
  size_t n = symbols.size();
  if (n < 2) return;
  // rank_at[i], merged_at[i]: the merge joining symbols[i] and symbols[i + 1] (INT_MAX = none).
  int32_t rank_at[kShortWordSymbols];
  int32_t merged_at[kShortWordSymbols];
  const auto refresh = [&](size_t i) {
    const std::optional<BpeMerge> m = merges_.find(symbols[i], symbols[i + 1]);
    rank_at[i] = m ? m->rank : INT_MAX;
    merged_at[i] = m ? m->merged_id : -1;
  };
  for (size_t i = 0; i + 1 < n; ++i) refresh(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (rank_at[i] < rank_at[best]) best = i;  // strict: ties go to the leftmost pair
    }
    if (rank_at[best] == INT_MAX) break;
    symbols[best] = merged_at[best];
    for (size_t i = best + 1; i + 1 < n; ++i) {
      symbols[i] = symbols[i + 1];
      rank_at[i] = rank_at[i + 1];
      merged_at[i] = merged_at[i + 1];
    }
    --n;
    if (best + 1 < n) refresh(best);
    if (best > 0) refresh(best - 1);
  }
  symbols.resize(n);
}

void BpeModel::merge_long(std::vector<int32_t>& symbols) const {
  const size_t n = symbols.size();
  if (n < 2) return;
  struct Node {
    int32_t id;
    int32_t prev;  // -1 = none
    int32_t next;  // -1 = none
    bool alive;
  };
  struct Candidate {
    int32_t rank;
    int32_t pos;  // index of the left symbol
    int32_t merged_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::vector<Node> nodes(n);
  for (size_t i = 0; i < n; ++i) {
    nodes[i] =
        Node{symbols[i], static_cast<int32_t>(i) - 1, i + 1 < n ? static_cast<int32_t>(i + 1) : -1, true};
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  const auto push_pair = [&](int32_t left) {
    const int32_t right = nodes[static_cast<size_t>(left)].next;
    if (right < 0) return;
    const std::optional<BpeMerge> m =
        merges_.find(nodes[static_cast<size_t>(left)].id, nodes[static_cast<size_t>(right)].id);
    if (m) queue.push(Candidate{m->rank, left, m->merged_id});
  };
  for (size_t i = 0; i + 1 < n; ++i) push_pair(static_cast<int32_t>(i));
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Node& left = nodes[static_cast<size_t>(top.pos)];
    if (!left.alive || left.next < 0) continue;
    Node& right = nodes[static_cast<size_t>(left.next)];
    // A stale entry: the pair at this position changed since it was queued.
    const std::optional<BpeMerge> current = merges_.find(left.id, right.id);
    if (!current || current->merged_id != top.merged_id) continue;
    left.id = top.merged_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) nodes[static_cast<size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(top.pos);
  }
  size_t n_out = 0;
  for (int32_t i = 0; i >= 0; i = nodes[static_cast<size_t>(i)].next)
    symbols[n_out++] = nodes[static_cast<size_t>(i)].id;
  symbols.resize(n_out);
}

void BpeModel::encode_word_uncached(std::string_view word, std::vector<int32_t>& out, bool force_heap) const {
  if (ignore_merges_) {
    const auto it = id_of_text_.find(alphabet_.encode(word));
    if (it != id_of_text_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<int32_t> symbols;
  initial_symbols(word, symbols);
  if (!force_heap && symbols.size() <= kShortWordSymbols) {
    merge_short(symbols);
  } else {
    merge_long(symbols);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (word.size() == 1) {  // one byte: no merge can apply
    const int32_t id = id_of_byte_[static_cast<uint8_t>(word[0])];
    if (id >= 0) {
      out.push_back(id);
    } else if (unk_id_ >= 0) {
      out.push_back(unk_id_);
    }
    return;
  }
  if (cache_.lookup(word, out)) return;
  const size_t first = out.size();
  encode_word_uncached(word, out, /*force_heap=*/false);
  cache_.store(word, std::span<const int32_t>(out.data() + first, out.size() - first));
}

}  // namespace ds
