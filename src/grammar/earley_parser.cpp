#include "grammar/earley_parser.h"

#include <algorithm>

namespace ds::grammar {

namespace {
constexpr uint32_t kNone = 0xffffffffu;
}

EarleyParser::EarleyParser(const ParserTables& tables)
    : tables_(&tables), stamp_(tables.kinds.size(), 0), first_of_kind_(tables.kinds.size(), kNone) {
  reset();
}

void EarleyParser::add(uint32_t kind, uint32_t origin) {
  if (stamp_[kind] == generation_) {
    for (uint32_t i = first_of_kind_[kind]; i != kNone; i = same_kind_next_[i])
      if (items_[i].origin == origin) return;
  } else {
    stamp_[kind] = generation_;
    first_of_kind_[kind] = kNone;
  }
  const auto idx = static_cast<uint32_t>(items_.size());
  items_.push_back(Item{kind, origin});
  same_kind_next_.push_back(first_of_kind_[kind]);
  first_of_kind_[kind] = idx;
}

void EarleyParser::complete(uint32_t rule, uint32_t origin) {
  if (origin == kExternal) {
    // The parent sits in a set this local parser does not have. When only one item kind ever refers to
    // `rule`, that parent must be of that kind (it predicted the rule), so its continuation is known
    // up to its origin, which is external too. Otherwise the context decides: escape.
    const uint32_t parent = tables_->sole_parent[rule];
    if (parent == ParserTables::kManyParents) {
      escaped_ = true;
      return;
    }
    const ItemKind& pk = tables_->kinds[parent];
    add(pk.star ? parent : pk.advanced, kExternal);
    return;
  }
  // Parents waiting for `rule` in the origin set. When origin is the set being built, the range grows
  // while we scan it; nullable rules are also advanced at prediction time (Aycock-Horspool), so a
  // parent added after this point is still advanced.
  const size_t begin = set_begin_[origin];
  for (size_t j = begin; j < set_end(origin); ++j) {
    const Item parent = items_[j];
    const ItemKind& pk = tables_->kinds[parent.kind];
    if (pk.next != ItemKind::Next::rule || pk.index != rule) continue;
    add(pk.star ? parent.kind : pk.advanced, parent.origin);
  }
}

void EarleyParser::close_last_set() {
  const auto cur = static_cast<uint32_t>(set_begin_.size() - 1);
  for (size_t i = set_begin_.back(); i < items_.size(); ++i) {
    const Item it = items_[i];
    const ItemKind& k = tables_->kinds[it.kind];
    switch (k.next) {
      case ItemKind::Next::end:
        complete(k.rule, it.origin);
        break;
      case ItemKind::Next::bytes:
        if (k.star) add(k.advanced, it.origin);
        break;
      case ItemKind::Next::rule:
        for (uint32_t start : tables_->rule_starts[k.index]) add(start, cur);
        if (k.star || tables_->nullable[k.index]) add(k.advanced, it.origin);
        break;
    }
  }
}

void EarleyParser::reset() {
  items_.clear();
  same_kind_next_.clear();
  set_begin_.assign(1, 0);
  escaped_ = false;
  if (++generation_ == 0) {
    std::fill(stamp_.begin(), stamp_.end(), 0);
    generation_ = 1;
  }
  for (uint32_t start : tables_->rule_starts[0]) add(start, 0);
  close_last_set();
}

void EarleyParser::reset_local(const EarleyParser& from) {
  items_.clear();
  same_kind_next_.clear();
  set_begin_.assign(1, 0);
  escaped_ = false;
  if (++generation_ == 0) {
    std::fill(stamp_.begin(), stamp_.end(), 0);
    generation_ = 1;
  }
  const auto from_cur = static_cast<uint32_t>(from.set_begin_.size() - 1);
  for (size_t i = from.set_begin_.back(); i < from.items_.size(); ++i) {
    const Item it = from.items_[i];
    add(it.kind, it.origin == from_cur ? 0 : kExternal);
  }
  // `from`'s set is already closed: completions of its external items happened there.
}

void EarleyParser::reset_local_items(std::span<const uint32_t> kinds) {
  items_.clear();
  same_kind_next_.clear();
  set_begin_.assign(1, 0);
  if (++generation_ == 0) {
    std::fill(stamp_.begin(), stamp_.end(), 0);
    generation_ = 1;
  }
  for (uint32_t kind : kinds) add(kind, kExternal);
  close_last_set();
  escaped_ = false;
}

bool EarleyParser::push_byte(uint8_t byte) {
  const size_t prev_begin = set_begin_.back();
  const size_t prev_end = items_.size();
  const auto new_begin = static_cast<uint32_t>(items_.size());
  set_begin_.push_back(new_begin);
  escaped_ = false;
  if (++generation_ == 0) {
    std::fill(stamp_.begin(), stamp_.end(), 0);
    generation_ = 1;
  }
  for (size_t i = prev_begin; i < prev_end; ++i) {
    const Item it = items_[i];
    const ItemKind& k = tables_->kinds[it.kind];
    if (k.next != ItemKind::Next::bytes || !tables_->byte_sets[k.index].contains(byte)) continue;
    add(k.star ? it.kind : k.advanced, it.origin);
  }
  if (items_.size() == new_begin) {
    set_begin_.pop_back();
    return false;
  }
  close_last_set();
  return true;
}

void EarleyParser::pop_to(size_t n_sets) {
  if (n_sets >= set_begin_.size()) return;
  items_.resize(set_begin_[n_sets]);
  same_kind_next_.resize(items_.size());
  set_begin_.resize(n_sets);
  escaped_ = false;
  // The dedup stamps refer to a set that is gone; a new generation starts with the next push.
}

bool EarleyParser::is_accepting() const {
  for (size_t i = set_begin_.back(); i < items_.size(); ++i) {
    const ItemKind& k = tables_->kinds[items_[i].kind];
    if (k.next == ItemKind::Next::end && k.rule == 0 && items_[i].origin == 0) return true;
  }
  return false;
}

bool EarleyParser::can_continue() const {
  for (size_t i = set_begin_.back(); i < items_.size(); ++i)
    if (tables_->kinds[items_[i].kind].next == ItemKind::Next::bytes) return true;
  return false;
}

ByteSet EarleyParser::next_bytes() const {
  ByteSet out;
  for (size_t i = set_begin_.back(); i < items_.size(); ++i) {
    const ItemKind& k = tables_->kinds[items_[i].kind];
    if (k.next == ItemKind::Next::bytes) out.add_all(tables_->byte_sets[k.index]);
  }
  return out;
}

void EarleyParser::state_key(std::vector<uint64_t>& out) const {
  out.clear();
  const auto cur = static_cast<uint32_t>(set_begin_.size() - 1);
  for (size_t i = set_begin_.back(); i < items_.size(); ++i) {
    // End items were completed when the set was closed and take no part in a later walk, so states that
    // differ only in them (a string before and after its first character) share one cache entry.
    if (tables_->kinds[items_[i].kind].next == ItemKind::Next::end) continue;
    out.push_back(uint64_t{items_[i].kind} << 1 | (items_[i].origin == cur ? 1u : 0u));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

}  // namespace ds::grammar
