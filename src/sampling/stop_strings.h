// StopStringMatcher: finds the request's stop strings in the streamed output text, incrementally.
//
// OpenAI semantics: the output ends right before the first occurrence of any stop string, and the
// stop string itself is never emitted. Pieces arrive one by one (from the UTF-8-safe stream
// detokenizer); feed() returns the text that can be emitted now and holds back the longest tail
// that could still be the beginning of a stop string, so a stop string split over many pieces is
// still caught. Matching is on bytes: a stop string found in the bytes is found whatever the
// piece boundaries, and since both the text and the stop strings are valid UTF-8, emitted text
// ends on a character boundary whenever it ends before a stop string.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ds {

struct StopFeedResult {
  std::string text;      // safe to emit now (possibly empty)
  bool stopped = false;  // a stop string was found: `text` is the last output
};

class StopStringMatcher {
 public:
  // Errors (invalid_argument, naming "stop"): more than max_count strings, an empty string, or one
  // longer than max_bytes. OpenAI allows 4 stop strings, DeepSeek 16; the caller passes its limits.
  static Result<StopStringMatcher> create(std::vector<std::string> stop_strings, size_t max_count,
                                          size_t max_bytes);

  // Appends `piece` to the output. After `stopped`, further calls return nothing.
  StopFeedResult feed(std::string_view piece);
  // At the end of generation (no stop string found): the held-back text. Empty after a stop.
  std::string flush();

  bool stopped() const { return matched_.has_value(); }
  // Index into the stop strings of the one that ended the output (the earliest occurrence; on a
  // tie, the lower index).
  std::optional<size_t> matched_index() const { return matched_; }

 private:
  explicit StopStringMatcher(std::vector<std::string> stop_strings);

  std::vector<std::string> stop_strings_;
  std::string held_;  // text not yet emitted: a suffix that may begin a stop string
  std::optional<size_t> matched_;
};

}  // namespace ds
