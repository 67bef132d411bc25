// Test helpers for the response builders: stream events back to JSON, checking names and data.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "recipe/response_common.h"

namespace ds::recipe::testing {

// Unnamed events (the OpenAI APIs) -> their JSON ("[DONE]" becomes the string "[DONE]"); the data
// holds no line break (it goes on one `data:` line).
inline std::vector<nlohmann::json> sse_data_frames(const StreamEvents& events) {
  std::vector<nlohmann::json> out;
  for (const StreamEvent& e : events) {
    EXPECT_EQ(e.name, "") << e.data;
    EXPECT_EQ(e.data.find('\n'), std::string::npos) << e.data;
    out.push_back(e.data == "[DONE]" ? nlohmann::json("[DONE]") : nlohmann::json::parse(e.data));
  }
  return out;
}

// Named events (Anthropic, Responses) -> their JSON; the name must equal the data's "type".
inline std::vector<nlohmann::json> sse_typed_frames(const StreamEvents& events) {
  std::vector<nlohmann::json> out;
  for (const StreamEvent& e : events) {
    EXPECT_EQ(e.data.find('\n'), std::string::npos) << e.data;
    nlohmann::json data = nlohmann::json::parse(e.data);
    EXPECT_EQ(data.value("type", ""), e.name) << e.data;
    out.push_back(std::move(data));
  }
  return out;
}

inline StreamEvents concat(StreamEvents a, const StreamEvents& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Compares frame by frame so a failure names the first differing frame.
inline void expect_frames(const std::vector<nlohmann::json>& got, const std::vector<nlohmann::json>& want) {
  ASSERT_EQ(got.size(), want.size()) << "got:\n" << nlohmann::json(got).dump(1);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "frame " << i;
}

}  // namespace ds::recipe::testing
