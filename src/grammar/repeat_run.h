// Bounded repeats without one first visit per count (docs/grammar.md, "Repeat runs").
//
// GrammarBuilder lowers e{m,n} (n <= 32: a JSON string's minLength/maxLength, a regex {m,n}, bounded
// whitespace) to m copies `e` and n - m copies `(e|)` in one alternative, followed by a byte T. After k
// copies the parser state is position k of the run: n + 1 states whose masks differ only in how many
// more copies a token may use. Walking the trie for each of them costs a whole-trie walk per position.
//
// Instead, for each run the tables hold a shadow alternative [e*, T, rest of the alternative...] in the
// same rule (never predicted, so the language is unchanged). A walk from its e* item records for each
// accepted token how many whole copies j it consumes and whether it ends inside a copy (partial) or has
// left the run through T (exited); RunMask. The part of the walk before T is the same for every run with
// the same e and T (a run class: every bounded string of a schema), so it is walked once per class; only
// the subtrees below the exits (T scanned) are walked per run. Position k's mask then follows:
//   staying inside the run: k + j + partial <= n;   leaving it after j copies: m <= k + j <= n,
// and escape nodes likewise from the code of the path above them (the full parser checks them anyway).
// The walk marks as an escape every node where the copies are ambiguous (a byte that continues a copy
// and leaves the run, an element whose strings are prefixes of one another), so the rule is exact.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/parser_tables.h"

namespace ds::grammar {

// Finds the runs of `t`'s grammar kinds (t.n_grammar_kinds set) and appends their shadow kinds.
void add_repeat_runs(const Grammar& g, ParserTables& t);

// The walks of a run's shadow alternative (state_mask_walk.h). One per run class for the part before T
// (walk_run_inside: `tokens` that stay inside the run, `escapes`, and `exits`: the nodes where T is
// scanned at a copy boundary, with j), then one per run from those exits on (walk_run_exits: `tokens`
// and `escapes` past T, which depend on what follows the run).
struct RunMask {
  // code = j << 2 | exited << 1 | partial: j whole copies consumed, the run left through T, or the
  // token ends inside a copy.
  static constexpr uint16_t kExited = 2;
  static constexpr uint16_t kPartial = 1;
  struct Token {
    int32_t id;
    uint16_t code;
  };
  struct Node {
    uint32_t node;
    uint16_t code;  // escapes: of the path above the node; exits: of the path including T
  };
  std::vector<Token> tokens;
  std::vector<Node> escapes;  // disjoint subtrees
  std::vector<Node> exits;
};

// Whether a token (or path) with this code is possible from position k of `run`.
inline bool run_code_allowed(const RepeatRun& run, uint32_t k, uint16_t code) {
  const uint32_t j = code >> 2;
  const uint32_t room = run.n_copies - k;
  if (code & RunMask::kExited) return k + j >= run.n_required && j <= room;
  return j + (code & RunMask::kPartial) <= room;
}

// Position k's accepted bitmask (from empty, `words` words) and escape nodes (sorted).
void derive_run_position(const RepeatRun& run, const RunMask& inside, const RunMask& exits, uint32_t k,
                         size_t words, std::vector<uint32_t>& accepted, std::vector<uint32_t>& escape_nodes);

}  // namespace ds::grammar
