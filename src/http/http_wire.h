// Response bytes as they go on the wire: status line and headers, chunked framing, SSE events. Written
// by hand (not Beast serializers) because streams interleave a header, many chunks and a terminator
// queued from other threads; requests are still parsed by Beast.
#pragma once

#include <string>
#include <string_view>

#include "http/response_channel.h"

namespace ds::server {

// "HTTP/1.1 <status> <reason>\r\n<headers>\r\n". Header names/values with CR or LF are dropped (no
// response splitting through a handler-supplied header).
std::string response_head(int http_status, const HeaderList& headers);
// One chunk of a chunked body ("<hex len>\r\n<payload>\r\n"); empty payloads return "" (an empty chunk
// would end the body).
std::string chunk_frame(std::string_view payload);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";
// "event: E\ndata: D\n\n"; a D with newlines becomes several data: lines (the SSE rule for multi-line data).
std::string sse_event_text(std::string_view data, std::string_view event);

}  // namespace ds::server
