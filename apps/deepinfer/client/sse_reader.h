// Splits a Server-Sent Events byte stream into events (WHATWG EventSource framing): lines end in
// \n, \r\n or \r; "data:" lines of one event are joined with '\n'; a blank line ends the event;
// comments (":") and other fields (event, id, retry) are skipped, the tools only need the data.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace ds::client {

class SseReader {
 public:
  // `on_data` gets each event's data; returning false stops the reader (feed() then returns false).
  explicit SseReader(std::function<bool(std::string_view)> on_data) : on_data_(std::move(on_data)) {}
  // Feeds bytes as they arrive (any split); false once on_data asked to stop.
  bool feed(std::string_view bytes);

 private:
  bool take_line(std::string_view line);
  std::function<bool(std::string_view)> on_data_;
  std::string line_;
  std::string data_;
  bool has_data_ = false;
  bool after_cr_ = false;
};

}  // namespace ds::client
