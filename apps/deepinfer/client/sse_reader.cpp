#include "client/sse_reader.h"

namespace ds::client {

bool SseReader::feed(std::string_view bytes) {
  for (const char c : bytes) {
    if (after_cr_) {
      after_cr_ = false;
      if (c == '\n') continue;  // the \n of a \r\n pair
    }
    if (c == '\r' || c == '\n') {
      after_cr_ = c == '\r';
      if (!take_line(line_)) return false;
      line_.clear();
      continue;
    }
    line_.push_back(c);
  }
  return true;
}

bool SseReader::take_line(std::string_view line) {
  if (line.empty()) {
    if (!has_data_) return true;
    has_data_ = false;
    std::string data;
    data.swap(data_);
    return on_data_(data);
  }
  if (line.front() == ':') return true;
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view{} : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field != "data") return true;
  if (has_data_) data_.push_back('\n');
  data_.append(value);
  has_data_ = true;
  return true;
}

}  // namespace ds::client
