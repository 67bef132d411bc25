// The cache-control fields of every API (recipe/cache_fields.h): where each lands in
// CacheDirectives, the precedence between them, and a 400 naming the field for every bad value.
#include "recipe/cache_fields.h"

#include <gtest/gtest.h>

#include <string>

#include "recipe/anthropic_messages_request.h"
#include "recipe/chat_completions_request.h"
#include "recipe/completions_request.h"
#include "recipe/request_error.h"
#include "recipe/responses_request.h"

namespace ds::recipe {
namespace {

template <class T>
void expect_error_at(const Result<T>& r, const std::string& path, const std::string& fragment = "") {
  ASSERT_FALSE(r.ok()) << "accepted";
  EXPECT_EQ(r.status().code(), ErrorCode::recipe_bad_request);
  EXPECT_EQ(error_field_path(r.status()), path) << r.status().message();
  if (!fragment.empty()) {
    EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
  }
}

Result<ChatRequest> anthropic(const std::string& extra, const std::string& system = R"("S")",
                              const std::string& content = R"("q")") {
  return parse_anthropic_messages_request(R"({"model":"m","max_tokens":16,"system":)" + system +
                                              R"(,"messages":[{"role":"user","content":)" + content + "}]" +
                                              extra + "}",
                                          {});
}

Result<ChatRequest> openai_chat(const std::string& extra) {
  return parse_chat_completions_request(
      R"({"model":"m","messages":[{"role":"user","content":"q"}])" + extra + "}", {});
}

TEST(CacheFields, NoFieldsMeansNoDirectives) {
  Result<ChatRequest> r = openai_chat("");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FALSE(r->cache.any());
  Result<ChatRequest> a = anthropic("");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_FALSE(a->cache.any());
}

TEST(CacheFields, OurCacheObjectOnEveryApi) {
  const std::string cache = R"(,"cache":{"class":"agent","ttl_s":7200,"pin":true,"salt":"tenant-a"})";
  Result<ChatRequest> chat = openai_chat(cache);
  Result<ChatRequest> msgs = anthropic(cache);
  Result<ChatRequest> resp = parse_responses_request(R"({"model":"m","input":"q")" + cache + "}", {});
  Result<CompletionRequest> cmpl =
      parse_completions_request(R"({"model":"m","prompt":"q")" + cache + "}", {});
  for (const CacheDirectives* d : {&chat->cache, &msgs->cache, &resp->cache, &cmpl->cache}) {
    EXPECT_EQ(d->cache_class, "agent");
    EXPECT_EQ(d->ttl_s, 7200);
    EXPECT_TRUE(d->pin);
    EXPECT_EQ(d->salt, "tenant-a");
    EXPECT_TRUE(d->any());
  }
}

TEST(CacheFields, OurCacheObjectRefusesBadValuesNamingTheField) {
  expect_error_at(openai_chat(R"(,"cache":"agent")"), "cache", "expected object");
  expect_error_at(openai_chat(R"(,"cache":{"klass":"agent"})"), "cache.klass", "unknown field");
  expect_error_at(openai_chat(R"(,"cache":{"class":"Agent!"})"), "cache.class");
  expect_error_at(openai_chat(R"(,"cache":{"class":""})"), "cache.class");
  expect_error_at(openai_chat(R"(,"cache":{"ttl_s":0})"), "cache.ttl_s");
  expect_error_at(openai_chat(R"(,"cache":{"ttl_s":2592001})"), "cache.ttl_s");
  expect_error_at(openai_chat(R"(,"cache":{"ttl_s":"1h"})"), "cache.ttl_s");
  expect_error_at(openai_chat(R"(,"cache":{"pin":"yes"})"), "cache.pin");
  expect_error_at(openai_chat(R"(,"cache":{"salt":""})"), "cache.salt");
  expect_error_at(openai_chat(R"(,"cache":{"salt":")" + std::string(257, 'x') + R"("})"), "cache.salt");
  expect_error_at(anthropic(R"(,"cache":{"ttl_s":-5})"), "cache.ttl_s");
}

TEST(CacheFields, OpenAiPromptCacheKeyAndRetention) {
  Result<ChatRequest> r = openai_chat(R"(,"prompt_cache_key":"team-7/agent","prompt_cache_retention":"24h")");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->cache.prompt_cache_key, "team-7/agent");
  EXPECT_EQ(r->cache.ttl_s, 86400);
  EXPECT_FALSE(r->cache.pool_only);
  Result<ChatRequest> mem = openai_chat(R"(,"prompt_cache_retention":"in-memory")");
  ASSERT_TRUE(mem.ok()) << mem.status().to_string();
  EXPECT_TRUE(mem->cache.pool_only);
  EXPECT_FALSE(mem->cache.ttl_s.has_value());
  // Ours wins over retention.
  Result<ChatRequest> both = openai_chat(R"(,"prompt_cache_retention":"24h","cache":{"ttl_s":60})");
  ASSERT_TRUE(both.ok()) << both.status().to_string();
  EXPECT_EQ(both->cache.ttl_s, 60);
  Result<CompletionRequest> cmpl =
      parse_completions_request(R"({"model":"m","prompt":"q","prompt_cache_key":"k"})", {});
  ASSERT_TRUE(cmpl.ok()) << cmpl.status().to_string();
  EXPECT_EQ(cmpl->cache.prompt_cache_key, "k");

  expect_error_at(openai_chat(R"(,"prompt_cache_retention":"in_memory")"), "prompt_cache_retention",
                  "in-memory or 24h");
  expect_error_at(openai_chat(R"(,"prompt_cache_retention":24)"), "prompt_cache_retention");
  expect_error_at(openai_chat(R"(,"prompt_cache_key":"")"), "prompt_cache_key");
  expect_error_at(parse_responses_request(R"({"model":"m","input":"q","prompt_cache_key":7})", {}),
                  "prompt_cache_key");
}

TEST(CacheFields, AnthropicBreakpointsOnSystemMessagesAndTools) {
  Result<ChatRequest> r = parse_anthropic_messages_request(R"({"model":"m","max_tokens":16,
    "tools":[{"name":"get","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral","ttl":"1h"}}],
    "system":[{"type":"text","text":"S","cache_control":{"type":"ephemeral"}}],
    "messages":[{"role":"user","content":[{"type":"text","text":"q","cache_control":{"type":"ephemeral","ttl":"5m"}}]}]})",
                                                           {});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->cache.n_breakpoints, 3);
  EXPECT_EQ(r->cache.ttl_s, 3600) << "the longest breakpoint";
  EXPECT_EQ(r->messages[0].content, "S");
  EXPECT_EQ(r->messages[1].content, "q");

  Result<ChatRequest> five =
      anthropic("", R"([{"type":"text","text":"S","cache_control":{"type":"ephemeral"}}])");
  ASSERT_TRUE(five.ok()) << five.status().to_string();
  EXPECT_EQ(five->cache.ttl_s, 300) << "ephemeral without ttl is Anthropic's 5 minutes";
  // The top-level (automatic) breakpoint and ours: cache.ttl_s wins.
  Result<ChatRequest> top =
      anthropic(R"(,"cache_control":{"type":"ephemeral","ttl":"1h"},"cache":{"ttl_s":99})");
  ASSERT_TRUE(top.ok()) << top.status().to_string();
  EXPECT_EQ(top->cache.n_breakpoints, 1);
  EXPECT_EQ(top->cache.ttl_s, 99);
  // Breakpoints inside a tool_result's content count too.
  Result<ChatRequest> tool_result = parse_anthropic_messages_request(R"({"model":"m","max_tokens":16,
    "messages":[{"role":"user","content":"q"},
      {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"get","input":{}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1",
        "content":[{"type":"text","text":"R","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]}]})",
                                                                     {});
  ASSERT_TRUE(tool_result.ok()) << tool_result.status().to_string();
  EXPECT_EQ(tool_result->cache.n_breakpoints, 1);
  EXPECT_EQ(tool_result->cache.ttl_s, 3600);
}

TEST(CacheFields, AnthropicBreakpointErrorsNameTheField) {
  const std::string block = R"({"type":"text","text":"x","cache_control":{"type":"ephemeral"}})";
  expect_error_at(anthropic("", "[" + block + "]",
                            R"([{"type":"text","text":"q","cache_control":{"type":"persistent"}}])"),
                  "messages[0].content[0].cache_control.type", "expected ephemeral");
  expect_error_at(
      anthropic("", R"([{"type":"text","text":"S","cache_control":{"type":"ephemeral","ttl":"2h"}}])"),
      "system[0].cache_control.ttl", "5m or 1h");
  expect_error_at(anthropic("", R"([{"type":"text","text":"S","cache_control":{"ttl":"5m"}}])"),
                  "system[0].cache_control.type", "required");
  expect_error_at(anthropic("", R"([{"type":"text","text":"S","cache_control":"ephemeral"}])"),
                  "system[0].cache_control", "expected object");
  expect_error_at(
      anthropic("", R"([{"type":"text","text":"S","cache_control":{"type":"ephemeral","scope":"x"}}])"),
      "system[0].cache_control.scope", "unknown field");
  // A fifth breakpoint.
  expect_error_at(
      anthropic("", "[" + block + "," + block + "," + block + "," + block + "]", "[" + block + "]"),
      "messages[0].content[0].cache_control", "maximum of 4");
  // 1h after 5m in prompt order (tools, system, messages), whatever the order of the JSON keys.
  expect_error_at(
      anthropic("", "[" + block + "]",
                R"([{"type":"text","text":"q","cache_control":{"type":"ephemeral","ttl":"1h"}}])"),
      "messages[0].content[0].cache_control.ttl", "must not come after");
  expect_error_at(parse_anthropic_messages_request(
                      R"({"model":"m","max_tokens":16,"messages":[{"role":"user","content":"q"},
        {"role":"assistant","content":[{"type":"thinking","thinking":"t","cache_control":{"type":"ephemeral"}}]}]})",
                      {}),
                  "messages[1].content[0].cache_control", "thinking");
}

}  // namespace
}  // namespace ds::recipe
