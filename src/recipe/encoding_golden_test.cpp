// Golden prompt strings, derived by hand from the encoding rules (model spec §7/§8, features spec
// §10.2, V3's tokenizer_config.json chat_template). Each expected string is written out; the
// comments name the rule each piece comes from.
#include <gtest/gtest.h>

#include <string>

#include "recipe/encoding.h"
#include "recipe/recipe_test_util.h"

namespace ds::recipe {
namespace {

using testing::chat;
using testing::render_text;
constexpr auto kV3 = PromptEncodingKind::deepseek_v3;
constexpr auto kV4 = PromptEncodingKind::deepseek_v4;
constexpr auto kV41 = PromptEncodingKind::deepseek_v41;

const std::string BOS = "<｜begin▁of▁sentence｜>";
const std::string EOS = "<｜end▁of▁sentence｜>";
const std::string USER = "<｜User｜>";
const std::string ASSISTANT = "<｜Assistant｜>";
const std::string SYSTEM = "<｜System｜>";
const std::string EFFORT_50 =
    "Reasoning Effort: 50 (range 1-100, the higher the value, the more thorough the reasoning)\n\n";

// ---- V4.1 ----------------------------------------------------------------------------------

TEST(EncodingV41, ThinkingSystemAndUser) {
  const ChatRequest req = chat(
      R"({"model":"m","messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"Hi"}]})");
  EXPECT_EQ(render_text(req, kV41),
            BOS +                        // BOS first
                SYSTEM + EFFORT_50 +     // message 0: <｜System｜>, effort line (default high = 50)
                "You are helpful." +     // system text, no marker of its own at index 0
                USER + "Hi" +            // user turn
                ASSISTANT + "<think>");  // generation prefix, thinking mode
}

TEST(EncodingV41, GenerationStartStateForTheOutputParser) {
  EncodingOptions options;
  Result<RenderedPrompt> thinking =
      render_prompt(chat(R"({"model":"m","messages":[{"role":"user","content":"q"}]})"), options);
  ASSERT_TRUE(thinking.ok());
  EXPECT_TRUE(thinking->generation_in_reasoning);
  EXPECT_FALSE(thinking->generation_in_tool_calls);
  Result<RenderedPrompt> chat_mode = render_prompt(
      chat(R"({"model":"m","thinking":{"type":"disabled"},"messages":[{"role":"user","content":"q"}]})"),
      options);
  ASSERT_TRUE(chat_mode.ok());
  EXPECT_FALSE(chat_mode->generation_in_reasoning);
}

TEST(EncodingV41, PrefixStillReasoningContinuesInsideThink) {
  const ChatRequest req = chat(R"({"model":"m","messages":[
      {"role":"user","content":"q"},{"role":"assistant","reasoning_content":"partial","prefix":true}]})");
  EncodingOptions options;
  Result<RenderedPrompt> r = render_prompt(req, options);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  // No </think>, no EOS, no new header: the model continues the reasoning.
  EXPECT_EQ(r->text(), BOS + SYSTEM + EFFORT_50 + USER + "q" + ASSISTANT + "<think>" + "partial");
  EXPECT_TRUE(r->generation_in_reasoning);
}

TEST(EncodingV41, EffortLevelsAreNumeric) {
  // V4.1 encoding.py: low 25, high 50, xhigh 75, max 100; minimal folds to low, medium to high.
  for (const auto& [effort, number] : std::vector<std::pair<std::string, std::string>>{{"minimal", "25"},
                                                                                       {"low", "25"},
                                                                                       {"medium", "50"},
                                                                                       {"high", "50"},
                                                                                       {"xhigh", "75"},
                                                                                       {"max", "100"}}) {
    const ChatRequest req = chat(R"({"model":"m","reasoning_effort":")" + effort +
                                 R"(","messages":[{"role":"user","content":"q"}]})");
    EXPECT_EQ(render_text(req, kV41),
              BOS + SYSTEM + "Reasoning Effort: " + number +
                  " (range 1-100, the higher the value, the more thorough the reasoning)\n\n" + USER + "q" +
                  ASSISTANT + "<think>")
        << effort;
  }
}

TEST(EncodingV41, NonThinkingHistory) {
  const ChatRequest req = chat(R"({"model":"m","thinking":{"type":"disabled"},"messages":[
      {"role":"user","content":"a"},
      {"role":"assistant","content":"b","reasoning_content":"r"},
      {"role":"user","content":"c"}]})");
  // No <｜System｜> (no system message, no effort line without thinking); chat-mode headers end
  // with </think>; reasoning is never rendered outside thinking mode; EOS closes the assistant.
  EXPECT_EQ(render_text(req, kV41),
            BOS + USER + "a" + ASSISTANT + "</think>" + "b" + EOS + USER + "c" + ASSISTANT + "</think>");
}

TEST(EncodingV41, ThinkingKeepsEarlierReasoningByDefaultAndDropsOnRequest) {
  const ChatRequest req = chat(R"({"model":"m","messages":[
      {"role":"user","content":"a"},
      {"role":"assistant","content":"b","reasoning_content":"r"},
      {"role":"user","content":"c"}]})");
  // deepseek-recipe (features §10.2 rule 5): reasoning of earlier turns kept; every header <think>.
  EXPECT_EQ(render_text(req, kV41), BOS + SYSTEM + EFFORT_50 + USER + "a" + ASSISTANT + "<think>" + "r" +
                                        "</think>" + "b" + EOS + USER + "c" + ASSISTANT + "<think>");
  // drop_earlier_reasoning (encoding.py default): the earlier turn is a closed empty think.
  EXPECT_EQ(render_text(req, kV41, /*drop_earlier_reasoning=*/true), BOS + SYSTEM + EFFORT_50 + USER + "a" +
                                                                         ASSISTANT + "</think>" + "b" + EOS +
                                                                         USER + "c" + ASSISTANT + "<think>");
}

TEST(EncodingV41, MidConversationSystemGetsItsOwnMarkerAndOpensTheReply) {
  const ChatRequest req = chat(R"({"model":"m","thinking":{"type":"disabled"},"messages":[
      {"role":"user","content":"a"},
      {"role":"assistant","content":"b"},
      {"role":"system","content":"new rule"}]})");
  EXPECT_EQ(render_text(req, kV41),
            BOS + USER + "a" + ASSISTANT + "</think>b" + EOS + SYSTEM + "new rule" + ASSISTANT + "</think>");
}

TEST(EncodingV41, LatestReminderFollowsTheAssistantHeader) {
  const ChatRequest req = chat(R"({"model":"m","thinking":{"type":"disabled"},"messages":[
      {"role":"user","content":"q"},
      {"role":"latest_reminder","content":"today is Monday"}]})");
  EXPECT_EQ(render_text(req, kV41),
            BOS + USER + "q" + ASSISTANT + "</think>" + "<｜latest_reminder｜>today is Monday");
}

TEST(EncodingV41, ForcedToolChoiceOpensTheCallsBlock) {
  const ChatRequest req = chat(R"({"model":"m","thinking":{"type":"disabled"},"tool_choice":"required",
      "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
      "messages":[{"role":"user","content":"x"}]})");
  EncodingOptions options;
  Result<RenderedPrompt> r = render_prompt(req, options);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const std::string text = r->text();
  // An empty system message is created for the tools section, opened by <｜System｜>.
  EXPECT_EQ(text.rfind(BOS + SYSTEM + "\n\n## Tools\n\n", 0), 0u) << text;
  EXPECT_NE(text.find("{\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}\n\n"), std::string::npos);
  // Rule 6: with a required tool choice the prompt ends inside the V4.1 calls block.
  const std::string tail = USER + "x" + ASSISTANT + "</think>" + "\n\n<｜DSML｜ calls>\n";
  ASSERT_GE(text.size(), tail.size());
  EXPECT_EQ(text.substr(text.size() - tail.size()), tail);
  EXPECT_TRUE(r->generation_in_tool_calls);
  EXPECT_FALSE(r->generation_in_reasoning);
}

TEST(EncodingV41, ToolCallHistoryUsesSpacedTagNames) {
  const ChatRequest req = chat(R"({"model":"m","thinking":{"type":"disabled"},
      "tools":[{"type":"function","function":{"name":"f"}}],
      "messages":[{"role":"user","content":"x"},
        {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
          "function":{"name":"f","arguments":"{\"q\": \"a b\", \"n\": [1, 2]}"}}]},
        {"role":"tool","tool_call_id":"c1","content":"done"}]})");
  const std::string text = render_text(req, kV41);
  const std::string expected_turns =
      USER + "x" + ASSISTANT + "</think>" +  // chat-mode header
      "\n\n<｜DSML｜ calls>\n" +             // tool calls after "\n\n"
      "<｜DSML｜ invoke name=\"f\">\n" +     // one invoke per call
      "<｜DSML｜ parameter name=\"q\" string=\"true\">a b</｜DSML｜ parameter>\n" +      // string: raw text
      "<｜DSML｜ parameter name=\"n\" string=\"false\">[1, 2]</｜DSML｜ parameter>\n" +  // else JSON
      "</｜DSML｜ invoke>\n" + "</｜DSML｜ calls>" + EOS +  // block closed, then EOS
      USER + "<tool_result>done</tool_result>" +            // tool result as a user turn
      ASSISTANT + "</think>";
  ASSERT_GE(text.size(), expected_turns.size());
  EXPECT_EQ(text.substr(text.size() - expected_turns.size()), expected_turns) << text;
}

// ---- V4 ------------------------------------------------------------------------------------

TEST(EncodingV4, ThinkingDropsEarlierReasoningAndHasNoEffortLineBelowMax) {
  const ChatRequest req = chat(R"({"model":"m","messages":[
      {"role":"user","content":"a"},
      {"role":"assistant","content":"b","reasoning_content":"r"},
      {"role":"user","content":"c"}]})");
  // encoding_dsv4.py: no system marker; reasoning before the last user message dropped, its header
  // becomes </think>; the last user turn opens <think>.
  EXPECT_EQ(render_text(req, kV4),
            BOS + USER + "a" + ASSISTANT + "</think>" + "b" + EOS + USER + "c" + ASSISTANT + "<think>");
  // The same with the switch turned off keeps "r".
  EXPECT_EQ(render_text(req, kV4, /*drop_earlier_reasoning=*/false),
            BOS + USER + "a" + ASSISTANT + "<think>r</think>b" + EOS + USER + "c" + ASSISTANT + "<think>");
}

TEST(EncodingV4, ThinkMaxParagraphStartsThePrompt) {
  const ChatRequest req = chat(
      R"({"model":"m","reasoning_effort":"max","messages":[{"role":"system","content":"S"},{"role":"user","content":"q"}]})");
  EXPECT_EQ(
      render_text(req, kV4),
      BOS +
          "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
          "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve "
          "the "
          "root cause, rigorously stress-testing your logic against all potential paths, edge cases, and "
          "adversarial scenarios.\n"
          "Explicitly write out your entire deliberation process, documenting every intermediate step, "
          "considered alternative, and rejected hypothesis to ensure absolutely no assumption is left "
          "unchecked.\n\n" +
          "S" + USER + "q" + ASSISTANT + "<think>");
  // Non-thinking max: the paragraph belongs to thinking mode only.
  const ChatRequest off = chat(
      R"({"model":"m","reasoning_effort":"max","thinking":{"type":"disabled"},"messages":[{"role":"user","content":"q"}]})");
  EXPECT_EQ(render_text(off, kV4), BOS + USER + "q" + ASSISTANT + "</think>");
}

TEST(EncodingV4, ToolsSectionToolCallsAndSortedResults) {
  const ChatRequest req = chat(R"({"model":"m","messages":[
      {"role":"system","content":"S"},
      {"role":"user","content":"weather?"},
      {"role":"assistant","content":"","reasoning_content":"need tools","tool_calls":[
        {"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"days\":2}"}},
        {"id":"c2","type":"function","function":{"name":"get_time","arguments":"{}"}}]},
      {"role":"tool","tool_call_id":"c2","content":"12:00"},
      {"role":"tool","tool_call_id":"c1","content":"sunny"}],
    "tools":[{"type":"function","function":{"name":"get_weather","description":"Weather by city",
              "parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},
             {"type":"function","function":{"name":"get_time","description":"Time"}}]})");
  const std::string tools_section =
      "## Tools\n\n"
      "You have access to a set of tools to help answer the user's question. You can invoke tools by writing "
      "a "
      "\"<｜DSML｜tool_calls>\" block like the following:\n\n"
      "<｜DSML｜tool_calls>\n"
      "<｜DSML｜invoke name=\"$TOOL_NAME\">\n"
      "<｜DSML｜parameter name=\"$PARAMETER_NAME\" "
      "string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>\n"
      "...\n"
      "</｜DSML｜invoke>\n"
      "<｜DSML｜invoke name=\"$TOOL_NAME2\">\n"
      "...\n"
      "</｜DSML｜invoke>\n"
      "</｜DSML｜tool_calls>\n\n"
      "String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, "
      "booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n"
      "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside "
      "<think>...</think> BEFORE any tool calls or final response.\n\n"
      "Otherwise, output directly after </think> with tool calls or final response.\n\n"
      "### Available Tool Schemas\n\n"
      // One schema per line, json.dumps style, client key order.
      "{\"name\": \"get_weather\", \"description\": \"Weather by city\", \"parameters\": {\"type\": "
      "\"object\", "
      "\"properties\": {\"city\": {\"type\": \"string\"}}}}\n"
      "{\"name\": \"get_time\", \"description\": \"Time\"}\n\n"
      "You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";
  EXPECT_EQ(render_text(req, kV4),
            BOS + "S" + "\n\n" + tools_section +             // tools appended to the system text
                USER + "weather?" + ASSISTANT + "<think>" +  // tools present: reasoning kept, <think> headers
                "need tools</think>" +                       // reasoning + </think>
                "\n\n<｜DSML｜tool_calls>\n" +               // V4 tag names, no leading space
                "<｜DSML｜invoke name=\"get_weather\">\n" +
                "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n" +
                "<｜DSML｜parameter name=\"days\" string=\"false\">2</｜DSML｜parameter>\n" +
                "</｜DSML｜invoke>\n" +
                "<｜DSML｜invoke name=\"get_time\">\n\n</｜DSML｜invoke>\n" +  // no arguments: empty line
                "</｜DSML｜tool_calls>" + EOS +
                // Results merged into one user turn, in the order of the calls (c1 before c2).
                USER + "<tool_result>sunny</tool_result>\n\n<tool_result>12:00</tool_result>" + ASSISTANT +
                "<think>");
}

TEST(EncodingV4, ToolResultsAndFollowingUserTextShareOneTurn) {
  const ChatRequest req = chat(R"({"model":"m","thinking":{"type":"disabled"},"messages":[
      {"role":"user","content":"q"},
      {"role":"assistant","content":"let me check","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":""}}]},
      {"role":"tool","tool_call_id":"c1","content":"r1"},
      {"role":"user","content":"and?"}]})");
  EXPECT_EQ(render_text(req, kV4),
            BOS + USER + "q" + ASSISTANT + "</think>" + "let me check" +
                "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n\n</｜DSML｜invoke>\n"
                "</｜DSML｜tool_calls>" +
                EOS + USER + "<tool_result>r1</tool_result>\n\nand?" + ASSISTANT + "</think>");
}

TEST(EncodingV4, JsonObjectAppendsTheResponseFormatSection) {
  const ChatRequest req =
      chat(R"({"model":"m","thinking":{"type":"disabled"},"response_format":{"type":"json_object"},
      "messages":[{"role":"system","content":"Reply in json"},{"role":"user","content":"q"}]})");
  EXPECT_EQ(render_text(req, kV4),
            BOS + "Reply in json" +
                "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n"
                "{\"type\": \"json_object\"}" +
                USER + "q" + ASSISTANT + "</think>");
}

TEST(EncodingV4, DeveloperIsAUserTurnAndIsDroppedBeforeTheLastUserInThinkingMode) {
  const ChatRequest req = chat(R"({"model":"m","messages":[
      {"role":"developer","content":"d"},
      {"role":"user","content":"u"}]})");
  EXPECT_EQ(render_text(req, kV4), BOS + USER + "u" + ASSISTANT + "<think>");
  const ChatRequest chat_mode = chat(R"({"model":"m","thinking":{"type":"disabled"},"messages":[
      {"role":"developer","content":"d"},
      {"role":"user","content":"u"}]})");
  EXPECT_EQ(render_text(chat_mode, kV4), BOS + USER + "d" + USER + "u" + ASSISTANT + "</think>");
}

TEST(EncodingV4, LaterSystemMessageJoinsTheFirst) {
  const ChatRequest req = chat(R"({"model":"m","thinking":{"type":"disabled"},"messages":[
      {"role":"system","content":"A"},{"role":"user","content":"q"},{"role":"system","content":"B"},
      {"role":"user","content":"r"}]})");
  EXPECT_EQ(render_text(req, kV4), BOS + "A\n\nB" + USER + "q\n\nr" + ASSISTANT + "</think>");
}

TEST(EncodingV4, PrefixContinuesTheLastAssistantMessage) {
  const ChatRequest req = chat(R"({"model":"m","thinking":{"type":"disabled"},"messages":[
      {"role":"user","content":"q"},{"role":"assistant","content":"```python\n","prefix":true}]})");
  EXPECT_EQ(render_text(req, kV4), BOS + USER + "q" + ASSISTANT + "</think>" + "```python\n");
}

// ---- V3 ------------------------------------------------------------------------------------

TEST(EncodingV3, ChatTemplate) {
  ConversionOptions v3;
  v3.default_thinking = false;
  const ChatRequest req = chat(R"({"model":"m","messages":[
      {"role":"system","content":"S"},{"role":"user","content":"a"},{"role":"assistant","content":"b"},
      {"role":"user","content":"c"}]})",
                               v3);
  // BOS, system text, <｜User｜>, <｜Assistant｜> + reply + EOS, generation header <｜Assistant｜>.
  EXPECT_EQ(render_text(req, kV3), BOS + "S" + USER + "a" + ASSISTANT + "b" + EOS + USER + "c" + ASSISTANT);
}

TEST(EncodingV3, ToolCallsAndOutputs) {
  ConversionOptions v3;
  v3.default_thinking = false;
  const ChatRequest req = chat(R"({"model":"m","messages":[
      {"role":"user","content":"q"},
      {"role":"assistant","content":null,"tool_calls":[
        {"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}},
        {"id":"c2","type":"function","function":{"name":"g","arguments":"{}"}}]},
      {"role":"tool","tool_call_id":"c1","content":"r1"},
      {"role":"tool","tool_call_id":"c2","content":"r2"}]})",
                               v3);
  EXPECT_EQ(render_text(req, kV3),
            BOS + USER + "q" + ASSISTANT +
                "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"x\":1}\n```"
                "<｜tool▁call▁end｜>\n"
                "<｜tool▁call▁begin｜>function<｜tool▁sep｜>g\n```json\n{}\n```<｜tool▁call▁end｜>"
                "<｜tool▁calls▁end｜>" +
                EOS +
                "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>r1<｜tool▁output▁end｜>\n"
                "<｜tool▁output▁begin｜>r2<｜tool▁output▁end｜><｜tool▁outputs▁end｜>");
}

TEST(EncodingV3, RefusesThinkingAndToolDefinitions) {
  EncodingOptions options;
  options.kind = kV3;
  const ChatRequest thinking =
      chat(R"({"model":"m","thinking":{"type":"enabled"},"messages":[{"role":"user","content":"q"}]})");
  Result<RenderedPrompt> r = render_prompt(thinking, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("thinking: ", 0), 0u) << r.status().message();
  // The API default (thinking on, not asked for) is not an error for V3: it renders without it.
  const ChatRequest defaulted = chat(R"({"model":"m","messages":[{"role":"user","content":"q"}]})");
  EXPECT_EQ(render_text(defaulted, kV3), BOS + USER + "q" + ASSISTANT);
  ConversionOptions v3;
  v3.default_thinking = false;
  const ChatRequest tools = chat(
      R"({"model":"m","tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"q"}]})",
      v3);
  r = render_prompt(tools, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("tools: ", 0), 0u) << r.status().message();
}

TEST(Encoding, ModelTypeSelectsTheEncoding) {
  EXPECT_EQ(*prompt_encoding_for_model_type("deepseek_v3"), kV3);
  EXPECT_EQ(*prompt_encoding_for_model_type("deepseek_v32"), kV3);
  EXPECT_EQ(*prompt_encoding_for_model_type("deepseek_v4"), kV4);
  EXPECT_EQ(*prompt_encoding_for_model_type("deepseek_v41"), kV41);
  EXPECT_FALSE(prompt_encoding_for_model_type("llama").ok());
}

}  // namespace
}  // namespace ds::recipe
