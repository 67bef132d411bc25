// Test helpers for the response builders: SSE frames back to JSON, checking the framing.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ds::recipe::testing {

// `data: {...}\n\n` frames -> their JSON ("[DONE]" becomes the string "[DONE]").
inline std::vector<nlohmann::json> sse_data_frames(const std::vector<std::string>& events) {
  std::vector<nlohmann::json> out;
  for (const std::string& e : events) {
    EXPECT_EQ(e.rfind("data: ", 0), 0u) << e;
    EXPECT_TRUE(e.size() >= 2 && e.substr(e.size() - 2) == "\n\n") << e;
    const std::string body = e.substr(6, e.size() - 8);
    out.push_back(body == "[DONE]" ? nlohmann::json("[DONE]") : nlohmann::json::parse(body));
  }
  return out;
}

// `event: NAME\ndata: {...}\n\n` frames -> their JSON; NAME must equal the data's "type".
inline std::vector<nlohmann::json> sse_typed_frames(const std::vector<std::string>& events) {
  std::vector<nlohmann::json> out;
  for (const std::string& e : events) {
    const size_t nl = e.find('\n');
    EXPECT_EQ(e.rfind("event: ", 0), 0u) << e;
    EXPECT_NE(nl, std::string::npos) << e;
    const std::string name = e.substr(7, nl - 7);
    EXPECT_EQ(e.compare(nl + 1, 6, "data: "), 0) << e;
    EXPECT_TRUE(e.size() >= 2 && e.substr(e.size() - 2) == "\n\n") << e;
    nlohmann::json data = nlohmann::json::parse(e.substr(nl + 7, e.size() - nl - 9));
    EXPECT_EQ(data.value("type", ""), name) << e;
    out.push_back(std::move(data));
  }
  return out;
}

inline std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Compares frame by frame so a failure names the first differing frame.
inline void expect_frames(const std::vector<nlohmann::json>& got, const std::vector<nlohmann::json>& want) {
  ASSERT_EQ(got.size(), want.size()) << "got:\n" << nlohmann::json(got).dump(1);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "frame " << i;
}

}  // namespace ds::recipe::testing
