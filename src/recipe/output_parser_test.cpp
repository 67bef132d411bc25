// OutputParser: the deltas of a model output do not depend on how it is cut into pieces, and the
// stages (reasoning, content, DSML tool calls, JSON mode, stop strings) follow features spec §10.4.
#include "recipe/output_parser.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "recipe/dsml_render.h"
#include "recipe/encoding.h"

namespace ds::recipe {
namespace {

using nlohmann::json;

// The whole output as one ordered list of deltas with same-kind neighbours merged, plus what the
// parser says at the end: comparable across splittings.
struct Parsed {
  std::vector<OutputDelta> deltas;
  std::string stop;
  int32_t n_tool_calls = 0;

  std::string text_of(OutputDeltaKind kind) const {
    std::string s;
    for (const OutputDelta& d : deltas)
      if (d.kind == kind) s += d.text;
    return s;
  }
  std::string arguments(int32_t index) const {
    std::string s;
    for (const OutputDelta& d : deltas)
      if (d.kind == OutputDeltaKind::tool_call_arguments && d.tool_index == index) s += d.text;
    return s;
  }
  std::string tool_name(int32_t index) const {
    for (const OutputDelta& d : deltas)
      if (d.kind == OutputDeltaKind::tool_call_start && d.tool_index == index) return d.text;
    return "<none>";
  }
};

bool same_delta(const OutputDelta& a, const OutputDelta& b) {
  return a.kind == b.kind && a.text == b.text && a.tool_index == b.tool_index;
}

void merge_into(std::vector<OutputDelta>& all, std::vector<OutputDelta> more) {
  for (OutputDelta& d : more) {
    EXPECT_TRUE(!d.text.empty() || d.kind == OutputDeltaKind::tool_call_start) << "empty delta emitted";
    if (!all.empty() && all.back().kind == d.kind && all.back().tool_index == d.tool_index &&
        d.kind != OutputDeltaKind::tool_call_start) {
      all.back().text += d.text;
    } else {
      all.push_back(std::move(d));
    }
  }
}

Parsed parse_pieces(const std::vector<std::string>& pieces, const OutputParserOptions& options) {
  OutputParser parser(options);
  Parsed p;
  for (const std::string& piece : pieces) merge_into(p.deltas, parser.feed(piece, 1));
  merge_into(p.deltas, parser.finish());
  p.stop = parser.matched_stop_sequence();
  p.n_tool_calls = parser.tool_call_count();
  return p;
}

Parsed parse_whole(const std::string& text, const OutputParserOptions& options) {
  return parse_pieces({text}, options);
}

std::string describe(const Parsed& p) {
  std::string s;
  for (const OutputDelta& d : p.deltas)
    s += fmt::format("[{}#{} {}]", static_cast<int>(d.kind), d.tool_index, d.text);
  return fmt::format("{} stop='{}'", s, p.stop);
}

void expect_same(const Parsed& want, const Parsed& got, const std::vector<std::string>& pieces) {
  bool same = want.deltas.size() == got.deltas.size() && want.stop == got.stop &&
              want.n_tool_calls == got.n_tool_calls;
  for (size_t i = 0; same && i < want.deltas.size(); ++i) same = same_delta(want.deltas[i], got.deltas[i]);
  if (!same) {
    std::string cut;
    for (const std::string& piece : pieces) cut += fmt::format("|{}", piece);
    ADD_FAILURE() << "split " << cut << "|\n want " << describe(want) << "\n got  " << describe(got);
  }
}

// Every cut of `text` into pieces gives the deltas of the whole: all 2^(n-1) cuts when the text is
// short, else every single cut point, byte by byte, and `n_random` random cuts (fixed seed).
void expect_split_invariant(const std::string& text, const OutputParserOptions& options, int n_random = 300) {
  const Parsed want = parse_whole(text, options);
  const size_t n = text.size();
  if (n <= 14) {
    for (uint32_t mask = 0; mask < (1u << (n - 1)); ++mask) {
      std::vector<std::string> pieces(1);
      for (size_t i = 0; i < n; ++i) {
        pieces.back() += text[i];
        if (i + 1 < n && (mask >> i & 1u)) pieces.emplace_back();
      }
      expect_same(want, parse_pieces(pieces, options), pieces);
    }
    return;
  }
  for (size_t cut = 1; cut < n; ++cut) {
    const std::vector<std::string> pieces = {text.substr(0, cut), text.substr(cut)};
    expect_same(want, parse_pieces(pieces, options), pieces);
  }
  std::vector<std::string> bytes;
  for (const char c : text) bytes.emplace_back(1, c);
  expect_same(want, parse_pieces(bytes, options), bytes);
  std::mt19937 rng(12345);
  for (int r = 0; r < n_random; ++r) {
    std::vector<std::string> pieces(1);
    std::uniform_int_distribution<int> len(1, 12);
    for (size_t i = 0; i < n;) {
      const size_t take = std::min<size_t>(static_cast<size_t>(len(rng)), n - i);
      pieces.back() += text.substr(i, take);
      i += take;
      if (i < n) pieces.emplace_back();
    }
    expect_same(want, parse_pieces(pieces, options), pieces);
  }
}

OutputParserOptions thinking_options() {
  OutputParserOptions o;
  o.start = OutputStart::reasoning;
  return o;
}

TEST(OutputParser, ReasoningThenContentDropsMarkerAndNewlines) {
  const Parsed p = parse_whole("\nLet me think.\n\n</think>\n\nHello **world**\n", thinking_options());
  EXPECT_EQ(p.text_of(OutputDeltaKind::reasoning), "Let me think.");
  EXPECT_EQ(p.text_of(OutputDeltaKind::content), "Hello **world**\n");
  ASSERT_EQ(p.deltas.size(), 2u);
  EXPECT_EQ(p.deltas[0].kind, OutputDeltaKind::reasoning);
}

TEST(OutputParser, ContentOnlyKeepsInnerNewlinesAndDropsLeadingOnes) {
  const Parsed p = parse_whole("\n\nA\n\nB", OutputParserOptions{});
  EXPECT_EQ(p.text_of(OutputDeltaKind::content), "A\n\nB");
  OutputParserOptions keep;
  keep.drop_leading_newlines = false;
  EXPECT_EQ(parse_whole("\n\nA", keep).text_of(OutputDeltaKind::content), "\n\nA");
}

TEST(OutputParser, StrayThinkEndInContentIsSkippedAsInvalid) {
  OutputParser parser(OutputParserOptions{});
  std::vector<OutputDelta> all;
  merge_into(all, parser.feed("a</think>b"));
  merge_into(all, parser.finish());
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].text, "ab");
  EXPECT_EQ(parser.invalid_bytes(), 8);
}

TEST(OutputParser, PartialMarkerAtTheEndIsPlainText) {
  const Parsed p = parse_whole("x <｜DS", OutputParserOptions{});
  EXPECT_EQ(p.text_of(OutputDeltaKind::content), "x <｜DS");
  const Parsed r = parse_whole("hmm </thi", thinking_options());
  EXPECT_EQ(r.text_of(OutputDeltaKind::reasoning), "hmm </thi");
}

TEST(OutputParser, HeldBackMarkerPrefixIsReleasedWhenItTurnsOutToBeText) {
  OutputParser parser(thinking_options());
  const std::vector<OutputDelta> first = parser.feed("a </th");
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].text, "a ");  // "</th" may still become </think>: held back
  const std::vector<OutputDelta> second = parser.feed("ing>");
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].text, "</thing>");
}

TEST(OutputParser, StopSequenceIgnoredInReasoningHonouredInContent) {
  OutputParserOptions o = thinking_options();
  o.stop_sequences = {"STOP", ""};
  OutputParser parser(o);
  std::vector<OutputDelta> all;
  for (const char* piece : {"I could say ", "STOP here", "</think>", "Answer then ", "ST", "OP and", " more"})
    merge_into(all, parser.feed(piece, 1));
  merge_into(all, parser.finish());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].text, "I could say STOP here");
  EXPECT_EQ(all[1].text, "Answer then ");
  EXPECT_EQ(parser.matched_stop_sequence(), "STOP");
  EXPECT_EQ(parser.finish_reason(GenerationEnd::stop), OutputFinishReason::stop_sequence);
  // Tokens up to and including the piece that completed the stop ("OP and"), not after it.
  EXPECT_EQ(parser.completion_tokens(), 6);
  EXPECT_EQ(parser.reasoning_tokens(), 3);  // the pieces begun in reasoning, `</think>` included
  EXPECT_GT(parser.invalid_bytes(), 0);
}

TEST(OutputParser, StopSequenceNotMatchedInsideToolMarkup) {
  OutputParserOptions o;
  o.stop_sequences = {"name"};
  const Parsed p = parse_whole(
      "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n<｜DSML｜ parameter name=\"name\" "
      "string=\"true\">name</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>",
      o);
  EXPECT_EQ(p.stop, "");
  EXPECT_EQ(p.arguments(0), R"({"name": "name"})");
}

// The DSML block of `calls` as the prompt encoder renders it for `dialect`.
std::string rendered_calls(const std::vector<ToolCall>& calls, const DsmlDialect& dialect) {
  PromptBuilder builder;
  EXPECT_TRUE(append_dsml_tool_calls(builder, calls, dialect).ok());
  RenderedPrompt prompt;
  prompt.segments = builder.take();
  return prompt.text();
}

DsmlDialect v4_dialect() {
  DsmlDialect d;
  d.calls_tag = "tool_calls";
  d.invoke_tag = "invoke";
  d.parameter_tag = "parameter";
  return d;
}

DsmlDialect v41_dialect() {
  DsmlDialect d;
  d.calls_tag = " calls";
  d.invoke_tag = " invoke";
  d.parameter_tag = " parameter";
  return d;
}

TEST(OutputParser, DsmlToolCallsRoundTripBothDialects) {
  const std::vector<ToolCall> calls = {
      {"call_0", "get_weather",
       R"({"city": "Paris\n日本 \"quoted\" \\ back", "days": 3, "opts": {"unit": "c", "hourly": [1, 2]}, "ok": true})"},
      {"call_1", "now", ""},
      {"call_2", "ns::search", R"({"": "empty key", "q": ""})"},
  };
  for (const DsmlDialect& dialect : {v4_dialect(), v41_dialect()}) {
    const std::string output = "Let me check." + rendered_calls(calls, dialect);
    SCOPED_TRACE(output);
    const Parsed p = parse_whole(output, OutputParserOptions{});
    EXPECT_EQ(p.text_of(OutputDeltaKind::content), "Let me check.");
    ASSERT_EQ(p.n_tool_calls, 3);
    for (int32_t i = 0; i < 3; ++i) {
      EXPECT_EQ(p.tool_name(i), calls[static_cast<size_t>(i)].name);
      const std::string& want_text = calls[static_cast<size_t>(i)].arguments_json;
      const json want = json::parse(want_text.empty() ? "{}" : want_text);
      const json got = json::parse(p.arguments(i), nullptr, false);
      ASSERT_FALSE(got.is_discarded()) << p.arguments(i);
      EXPECT_EQ(got, want) << p.arguments(i);
    }
    EXPECT_EQ(p.arguments(1), "{}");
    expect_split_invariant(output, OutputParserOptions{}, 100);
  }
}

EncodingOptions v3_encoding() {
  EncodingOptions options;
  options.kind = PromptEncodingKind::deepseek_v3;
  return options;
}

// The assistant turn the V3 encoding renders for `calls`, as the model would write it.
std::string v3_rendered_reply(const std::string& content, const std::vector<ToolCall>& calls) {
  ChatRequest request;
  Message user;
  user.role = Role::user;
  user.content = "hi";
  Message reply;
  reply.role = Role::assistant;
  reply.content = content;
  reply.tool_calls = calls;
  request.messages = {user, reply};
  Result<RenderedPrompt> prompt = render_prompt_v3(request, v3_encoding());
  EXPECT_TRUE(prompt.ok());
  if (!prompt.ok()) return {};
  const std::string text = prompt->text();
  // The first header opens the reply (the prompt ends with the next turn's header).
  const size_t begin = text.find("<｜Assistant｜>") + std::string_view("<｜Assistant｜>").size();
  const size_t end = text.find("<｜end▁of▁sentence｜>", begin);
  return text.substr(begin, end - begin);
}

OutputParserOptions v3_options() {
  OutputParserOptions o;
  o.tool_markup = ToolCallMarkup::v3;
  o.think_tag_opens_reasoning = true;
  return o;
}

TEST(OutputParser, V3ToolCallsRoundTripTheEncoding) {
  const std::vector<ToolCall> calls = {
      {"call_0", "calculator", R"({"expression": "12 * 34"})"},
      {"call_1", "now", ""},
      {"call_2", "lookup", R"({"word": "日本 \"x\"", "n": [1, 2]})"},
  };
  const std::string output = v3_rendered_reply("Let me check.", calls);
  ASSERT_NE(output.find("<｜tool▁calls▁begin｜>"), std::string::npos) << output;
  SCOPED_TRACE(output);
  const Parsed p = parse_whole(output, v3_options());
  EXPECT_EQ(p.text_of(OutputDeltaKind::content), "Let me check.");
  ASSERT_EQ(p.n_tool_calls, 3);
  for (int32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(p.tool_name(i), calls[static_cast<size_t>(i)].name);
    const std::string& want_text = calls[static_cast<size_t>(i)].arguments_json;
    const json got = json::parse(p.arguments(i), nullptr, false);
    ASSERT_FALSE(got.is_discarded()) << p.arguments(i);
    EXPECT_EQ(got, json::parse(want_text.empty() ? "{}" : want_text));
  }
  expect_split_invariant(output, v3_options(), 100);
  // DSML options leave V3 markup as text (and the reverse).
  EXPECT_EQ(parse_whole(output, OutputParserOptions{}).n_tool_calls, 0);
  const std::string dsml = "x" + rendered_calls({calls[0]}, v41_dialect());
  EXPECT_EQ(parse_whole(dsml, v3_options()).n_tool_calls, 0);
}

TEST(OutputParser, V3ThinkTagOpensReasoningOnlyAtTheStart) {
  const std::string output = "<think>\n7 + 5 = 12, write 2, carry 1\n</think>\n\n17 + 5 = 22.";
  const Parsed p = parse_whole(output, v3_options());
  EXPECT_EQ(p.text_of(OutputDeltaKind::reasoning), "7 + 5 = 12, write 2, carry 1");
  EXPECT_EQ(p.text_of(OutputDeltaKind::content), "17 + 5 = 22.");
  expect_split_invariant(output, v3_options(), 100);
  // Newlines first are still "the start"; text first is not.
  EXPECT_EQ(parse_whole("\n<think>a</think>b", v3_options()).text_of(OutputDeltaKind::reasoning), "a");
  const Parsed late = parse_whole("so <think>a</think>b", v3_options());
  EXPECT_EQ(late.text_of(OutputDeltaKind::reasoning), "");
  EXPECT_EQ(late.text_of(OutputDeltaKind::content), "so <think>ab");
  // Only once: a second `<think>` after `</think>` is content.
  EXPECT_EQ(parse_whole("<think>a</think>\n\n<think>b", v3_options()).text_of(OutputDeltaKind::content),
            "<think>b");
  // Off: the tag is text.
  EXPECT_EQ(parse_whole("<think>a", OutputParserOptions{}).text_of(OutputDeltaKind::content), "<think>a");
}

TEST(OutputParser, ToolCallArgumentsStreamAsTheyArrive) {
  OutputParser parser(OutputParserOptions{});
  std::vector<OutputDelta> d = parser.feed("\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"run\">\n");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, OutputDeltaKind::tool_call_start);
  EXPECT_EQ(d[0].text, "run");
  EXPECT_EQ(d[0].tool_index, 0);
  d = parser.feed("<｜DSML｜ parameter name=\"cmd\" string=\"true\">ls -la");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, OutputDeltaKind::tool_call_arguments);
  EXPECT_EQ(d[0].text, R"({"cmd": "ls -la)");
  d = parser.feed(" /tmp</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, R"( /tmp"})");
  EXPECT_EQ(parser.finish_reason(GenerationEnd::stop), OutputFinishReason::tool_calls);
  // Anything after the block is dropped.
  EXPECT_TRUE(parser.feed("trailing text").empty());
  EXPECT_TRUE(parser.finish().empty());
  EXPECT_EQ(parser.invalid_bytes(), 13);
}

TEST(OutputParser, ToolCallFromInsideThinking) {
  const std::string output =
      "plan\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"n\" "
      "string=\"false\">[1, 2]</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  const Parsed p = parse_whole(output, thinking_options());
  EXPECT_EQ(p.text_of(OutputDeltaKind::reasoning), "plan");
  EXPECT_EQ(p.text_of(OutputDeltaKind::content), "");
  EXPECT_EQ(p.tool_name(0), "f");
  EXPECT_EQ(p.arguments(0), R"({"n": [1, 2]})");
  expect_split_invariant(output, thinking_options(), 100);
}

TEST(OutputParser, ForcedToolChoiceStartsInsideTheBlock) {
  OutputParserOptions o;
  o.start = OutputStart::tool_calls;
  const std::string output =
      "<｜DSML｜ invoke name=\"pick\">\n<｜DSML｜ parameter name=\"x\" "
      "string=\"false\">1.5</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>";
  const Parsed p = parse_whole(output, o);
  EXPECT_EQ(p.tool_name(0), "pick");
  EXPECT_EQ(p.arguments(0), R"({"x": 1.5})");
  EXPECT_EQ(p.text_of(OutputDeltaKind::content), "");
}

TEST(OutputParser, JsonModeFenceKeepsOnlyTheJsonAndSpacesTheRest) {
  OutputParserOptions o;
  o.json_object = true;
  const std::string output = "Sure:\n```json\n{\"a\": 1}\n```\nDone";
  const Parsed p = parse_whole(output, o);
  // "Sure:\n" -> 6 spaces, the fences vanish, "\nDone" -> 5 spaces.
  EXPECT_EQ(p.text_of(OutputDeltaKind::content), std::string(6, ' ') + "{\"a\": 1}" + std::string(5, ' '));
  expect_split_invariant(output, o);
  const std::string plain = "```\n[1, 2]\n```";
  EXPECT_EQ(parse_whole(plain, o).text_of(OutputDeltaKind::content), "[1, 2]");
  expect_split_invariant(plain, o);
}

TEST(OutputParser, JsonModeRawObjectAndStopInsideJson) {
  OutputParserOptions o;
  o.json_object = true;
  o.stop_sequences = {"END"};
  // A stop sequence in the text before the JSON is not matched (it becomes spaces); inside the
  // JSON it is.
  const Parsed p = parse_whole("END ok {\"k\": \"v\"} END tail", o);
  EXPECT_EQ(p.text_of(OutputDeltaKind::content), std::string(7, ' ') + "{\"k\": \"v\"} ");
  EXPECT_EQ(p.stop, "END");
}

TEST(OutputParser, SplitInvarianceOnShortStringsIsExhaustive) {
  OutputParserOptions stops = thinking_options();
  stops.stop_sequences = {"ab", "aab"};
  for (const char* text : {"x</think>y", "\n\nr\n</think>\nc", "aaab</think>aaab", "a</think>\n\n</thi",
                           "<<</think>>>", "\n</think></think>"}) {
    SCOPED_TRACE(text);
    expect_split_invariant(text, stops);
  }
  OutputParserOptions content;
  content.stop_sequences = {"abab", "b"};
  for (const char* text : {"aabababx", "ab\nab", "\n\n<x", "xx\n\n<a"}) {
    SCOPED_TRACE(text);
    expect_split_invariant(text, content);
  }
}

TEST(OutputParser, SplitInvarianceOnALongMixedOutput) {
  OutputParserOptions o = thinking_options();
  o.stop_sequences = {"</final>"};
  const std::string output =
      "\n\nThe user wants weather. 日本語 reasoning with </thin and <｜DS fragments.\n\n</think>\n\n"
      "Checking now — one moment.</think> ok" +
      rendered_calls({{"c", "weather", R"({"city": "Zürich", "days": [1, 2]})"}}, v41_dialect()) +
      " trailing junk";
  expect_split_invariant(output, o, 300);
  const Parsed p = parse_whole(output, o);
  EXPECT_EQ(p.text_of(OutputDeltaKind::reasoning),
            "The user wants weather. 日本語 reasoning with </thin and <｜DS fragments.");
  EXPECT_EQ(p.text_of(OutputDeltaKind::content), "Checking now — one moment. ok");
  EXPECT_EQ(p.arguments(0), R"({"city": "Zürich", "days": [1, 2]})");
}

TEST(OutputParser, PiecesEndingInsideAUtf8CharacterGiveWholeCharacters) {
  OutputParser parser(OutputParserOptions{});
  const std::string text = "é日";  // C3 A9 | E6 97 A5
  std::vector<OutputDelta> d = parser.feed(text.substr(0, 1));
  EXPECT_TRUE(d.empty());
  d = parser.feed(text.substr(1, 2));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, "é");
  d = parser.feed(text.substr(3));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, "日");
}

TEST(OutputParser, OptionsFollowTheRenderedPrompt) {
  ChatRequest request;
  request.response_format.kind = ResponseFormatKind::json_object;
  request.sampling.stop = {"x"};
  RenderedPrompt prompt;
  prompt.encoding_name = "deepseek_v41";
  prompt.generation_in_reasoning = true;
  OutputParserOptions o = output_parser_options(request, prompt);
  EXPECT_EQ(o.start, OutputStart::reasoning);
  EXPECT_TRUE(o.json_object);
  EXPECT_EQ(o.tool_markup, ToolCallMarkup::dsml);
  EXPECT_FALSE(o.think_tag_opens_reasoning);
  EXPECT_EQ(o.stop_sequences, std::vector<std::string>{"x"});
  prompt.generation_in_tool_calls = true;
  prompt.encoding_name = "deepseek_v3";
  o = output_parser_options(request, prompt);
  EXPECT_EQ(o.start, OutputStart::tool_calls);
  EXPECT_EQ(o.tool_markup, ToolCallMarkup::v3);
  EXPECT_TRUE(o.think_tag_opens_reasoning);
  Message prefix;
  prefix.role = Role::assistant;
  prefix.prefix = true;
  request.messages.push_back(prefix);
  EXPECT_FALSE(output_parser_options(request, prompt).drop_leading_newlines);
}

TEST(OutputParser, KeepsWorkingAfterAMove) {
  // The branches point into the machine's label table: a move must keep them valid.
  OutputParser first(thinking_options());
  const std::vector<OutputDelta> before = first.feed("x </thi");
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].text, "x ");
  OutputParser moved = std::move(first);
  std::vector<OutputDelta> after = moved.feed("nk>y");
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].kind, OutputDeltaKind::content);
  EXPECT_EQ(after[0].text, "y");
}

TEST(OutputParser, FinishReasons) {
  OutputParser plain(OutputParserOptions{});
  EXPECT_EQ(plain.finish_reason(GenerationEnd::stop), OutputFinishReason::stop);
  EXPECT_EQ(plain.finish_reason(GenerationEnd::length), OutputFinishReason::length);
  EXPECT_EQ(plain.finish_reason(GenerationEnd::content_filter), OutputFinishReason::content_filter);
  EXPECT_EQ(plain.finish_reason(GenerationEnd::end_of_stream), OutputFinishReason::end_of_stream);
  EXPECT_STREQ(output_finish_reason_name(OutputFinishReason::stop_sequence), "stop_sequence");
}

}  // namespace
}  // namespace ds::recipe
