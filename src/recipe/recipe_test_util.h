// Test helpers: chat requests from JSON bodies, and a tiny tokenizer that knows the DeepSeek
// V3/V4/V4.1 template markers as added special tokens (ids from 400 up, never the real ones, so
// tests cannot pass by hard-coding ids).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "recipe/chat_completions_request.h"
#include "recipe/encoding.h"
#include "tokenizer/tiny_tokenizer_fixture.h"
#include "tokenizer/tokenizer.h"

namespace ds::recipe::testing {

inline ChatRequest chat(std::string_view body, const ConversionOptions& options = {}) {
  Result<ChatRequest> r = parse_chat_completions_request(body, options);
  EXPECT_TRUE(r.ok()) << r.status().to_string() << "\nbody: " << body;
  return r.ok() ? std::move(r).value() : ChatRequest{};
}

inline std::string render_text(const ChatRequest& request, PromptEncodingKind kind,
                               std::optional<bool> drop_earlier_reasoning = std::nullopt) {
  EncodingOptions options;
  options.kind = kind;
  options.drop_earlier_reasoning = drop_earlier_reasoning;
  Result<RenderedPrompt> r = render_prompt(request, options);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r->text() : std::string();
}

inline const std::vector<std::string>& all_marker_texts() {
  static const std::vector<std::string> markers = {"<｜begin▁of▁sentence｜>",
                                                   "<｜end▁of▁sentence｜>",
                                                   "<｜User｜>",
                                                   "<｜Assistant｜>",
                                                   "<｜System｜>",
                                                   "<｜latest_reminder｜>",
                                                   "<think>",
                                                   "</think>",
                                                   "｜DSML｜",
                                                   "<｜tool▁calls▁begin｜>",
                                                   "<｜tool▁calls▁end｜>",
                                                   "<｜tool▁call▁begin｜>",
                                                   "<｜tool▁call▁end｜>",
                                                   "<｜tool▁sep｜>",
                                                   "<｜tool▁outputs▁begin｜>",
                                                   "<｜tool▁outputs▁end｜>",
                                                   "<｜tool▁output▁begin｜>",
                                                   "<｜tool▁output▁end｜>"};
  return markers;
}

// The tiny fixture tokenizer plus every marker except those in `leave_out`.
inline Tokenizer marker_tokenizer(const std::vector<std::string>& leave_out = {}) {
  nlohmann::json root = nlohmann::json::parse(ds::testing::tiny_tokenizer_json());
  int next_id = 400;
  for (const std::string& m : all_marker_texts()) {
    const int id = next_id++;
    if (std::find(leave_out.begin(), leave_out.end(), m) != leave_out.end()) continue;
    // The tiny fixture already has "<think>" (id 301); a second entry would shadow it.
    const bool present = std::any_of(root["added_tokens"].begin(), root["added_tokens"].end(),
                                     [&](const nlohmann::json& t) { return t["content"] == m; });
    if (present) continue;
    root["added_tokens"].push_back({{"id", id},
                                    {"content", m},
                                    {"single_word", false},
                                    {"lstrip", false},
                                    {"rstrip", false},
                                    {"normalized", false},
                                    {"special", true}});
  }
  Result<Tokenizer> tok = Tokenizer::from_json(root.dump(), "", "recipe-markers");
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  return std::move(tok).value();
}

}  // namespace ds::recipe::testing
