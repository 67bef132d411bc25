#include "sampling/stop_strings.h"

#include <algorithm>
#include <utility>

namespace ds {

Result<StopStringMatcher> StopStringMatcher::create(std::vector<std::string> stop_strings, size_t max_count,
                                                    size_t max_bytes) {
  if (stop_strings.size() > max_count) {
    return Status(ErrorCode::invalid_argument, "stop: at most " + std::to_string(max_count) +
                                                   " strings allowed, got " +
                                                   std::to_string(stop_strings.size()));
  }
  for (size_t i = 0; i < stop_strings.size(); ++i) {
    if (stop_strings[i].empty()) {
      return Status(ErrorCode::invalid_argument, "stop[" + std::to_string(i) + "] is empty");
    }
    if (stop_strings[i].size() > max_bytes) {
      return Status(ErrorCode::invalid_argument, "stop[" + std::to_string(i) + "] is " +
                                                     std::to_string(stop_strings[i].size()) +
                                                     " bytes, the limit is " + std::to_string(max_bytes));
    }
  }
  return StopStringMatcher(std::move(stop_strings));
}

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings)
    : stop_strings_(std::move(stop_strings)) {}

StopFeedResult StopStringMatcher::feed(std::string_view piece) {
  StopFeedResult out;
  if (stopped()) {
    out.stopped = true;
    return out;
  }
  held_.append(piece);
  // Everything before held_ was emitted only when no stop string could start there, so any
  // occurrence starts inside held_.
  size_t first = std::string::npos;
  for (size_t i = 0; i < stop_strings_.size(); ++i) {
    const size_t pos = held_.find(stop_strings_[i]);
    if (pos < first) {
      first = pos;
      matched_ = i;
    }
  }
  if (first != std::string::npos) {
    out.text = held_.substr(0, first);
    out.stopped = true;
    held_.clear();
    return out;
  }
  // Hold back the longest suffix of held_ that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const std::string& stop : stop_strings_) {
    const size_t longest = std::min(stop.size() - 1, held_.size());
    for (size_t len = longest; len > keep; --len) {
      if (std::string_view(held_).substr(held_.size() - len) == std::string_view(stop).substr(0, len)) {
        keep = len;
        break;
      }
    }
  }
  out.text = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopStringMatcher::flush() {
  std::string rest;
  rest.swap(held_);
  return rest;
}

}  // namespace ds
