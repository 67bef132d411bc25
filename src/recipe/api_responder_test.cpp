// ApiResponder: the one interface the server drives. Every API's whole stream is events whose data is
// one line of JSON (or OpenAI's "[DONE]"), named as their type where the API names events, never
// pre-framed SSE (the server frames once); Completions' echo opens the stream and the body.
#include "recipe/api_responder.h"

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "recipe/response_test_util.h"

namespace ds::recipe {
namespace {

using nlohmann::json;

ResponseMeta meta() { return ResponseMeta{"r-1", "m", 1700000000, ""}; }

ResponseUsage usage() {
  ResponseUsage u;
  u.prompt_tokens = 5;
  u.completion_tokens = 3;
  return u;
}

// begin, two steps (text with blank lines and a broken UTF-8 byte, then a tool call), finish.
StreamEvents whole_stream(ApiResponder& r) {
  StreamEvents events = r.begin(usage());
  events = testing::concat(events, r.on_deltas({{OutputDeltaKind::content, "a\n\nb \xC3", -1}}, {}));
  events = testing::concat(events, r.on_deltas({{OutputDeltaKind::tool_call_start, "f", 0},
                                                {OutputDeltaKind::tool_call_arguments, "{\"x\":1}", 0}},
                                               {}));
  return testing::concat(events, r.finish(OutputFinishReason::tool_calls, "", usage()));
}

TEST(ApiResponder, EveryApiStreamsOneLineJsonEventsThatTheServerFramesOnce) {
  struct Case {
    const char* api;
    std::unique_ptr<ApiResponder> responder;
    bool named;
  };
  Case cases[] = {{"chat", make_chat_responder(meta(), {}), false},
                  {"completions", make_completions_responder(meta(), {}, ""), false},
                  {"anthropic", make_anthropic_responder(meta()), true},
                  {"responses", make_responses_responder(meta()), true}};
  for (Case& c : cases) {
    SCOPED_TRACE(c.api);
    const StreamEvents events = whole_stream(*c.responder);
    ASSERT_FALSE(events.empty());
    for (const StreamEvent& e : events) {
      EXPECT_FALSE(e.data.starts_with("data:") || e.data.starts_with("event:")) << e.data;
      EXPECT_EQ(e.name.find('\n'), std::string::npos) << e.name;
    }
    // The helpers check one line per data, names equal to the data's "type", and parse every data.
    const std::vector<json> frames =
        c.named ? testing::sse_typed_frames(events) : testing::sse_data_frames(events);
    EXPECT_EQ(frames.size(), events.size());
    EXPECT_EQ(events.back() == done_event(), !c.named);  // only the OpenAI APIs close with [DONE]
    // The text survives with its blank lines; the broken byte became U+FFFD, not an exception.
    std::string all;
    for (const StreamEvent& e : events) all += e.data;
    EXPECT_NE(all.find("a\\n\\nb \xEF\xBF\xBD"), std::string::npos) << all;
  }
}

TEST(ApiResponder, CompletionsEchoOpensTheStreamAndPrefixesTheBody) {
  auto r = make_completions_responder(meta(), {}, "Once");
  const StreamEvents opening = r->begin(usage());
  ASSERT_EQ(opening.size(), 1u);
  EXPECT_EQ(json::parse(opening[0].data)["choices"][0]["text"], "Once");
  EXPECT_TRUE(make_completions_responder(meta(), {}, "")->begin(usage()).empty());
  CollectedOutput out;
  out.add(OutputDelta{OutputDeltaKind::content, " upon", -1});
  const Json body = r->body(out, OutputFinishReason::stop, "", usage(), {});
  EXPECT_EQ(body["choices"][0]["text"], "Once upon");
}

}  // namespace
}  // namespace ds::recipe
