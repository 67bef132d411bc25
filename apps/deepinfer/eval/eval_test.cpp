// eval's scoring on scripted answers: extraction, normalization, letters, JSON, pass@k, Wilson,
// task files and the summary.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "eval/eval_report.h"
#include "eval/eval_scoring.h"
#include "eval/eval_task.h"

namespace ds::eval {
namespace {

TEST(ExtractFinalAnswer, RulesInOrder) {
  EXPECT_EQ(extract_final_answer("She pays 3*6 = 18 dollars.\n#### 18"), "18");
  EXPECT_EQ(extract_final_answer("so \\boxed{\\frac{1}{2}} and then \\boxed{204}"), "204");
  EXPECT_EQ(extract_final_answer("Thinking 12 and 13.\nThe answer is 25."), "25.");
  EXPECT_EQ(extract_final_answer("Answer: 7 km\nbye"), "7 km");
  EXPECT_EQ(extract_final_answer("I got 3 then 1,250.5 at the end"), "1,250.5");
  EXPECT_EQ(extract_final_answer("no digits here\n  paris  \n"), "paris");
}

TEST(ExtractFinalAnswer, TakesTheTextAfterThinking) {
  EXPECT_EQ(extract_final_answer("<think>Answer: 3? no, 4</think>The sum is 5."), "5");
  EXPECT_EQ(strip_thinking("a</think>b</think>c"), "c");
}

TEST(NormalizeAnswer, CanonicalNumbersAndWrappers) {
  EXPECT_EQ(normalize_answer(" 1,000.50 "), "1000.5");
  EXPECT_EQ(normalize_answer("$18.00."), "18");
  EXPECT_EQ(normalize_answer("**Paris**"), "paris");
  EXPECT_EQ(normalize_answer("`-0.25`"), "-0.25");
  EXPECT_EQ(normalize_answer("1,2"), "1,2");  // not a thousands separator: left as text
}

TEST(ExactMatch, ComparesExtractedAndNormalized) {
  EXPECT_TRUE(exact_match("Each costs 2, so 9 * 2 = 18.\nAnswer: $18", "18"));
  EXPECT_TRUE(exact_match("#### 1,024", "Janet has ... so 1024.\n#### 1024"));  // GSM8K gold rationale
  EXPECT_TRUE(exact_match("The answer is 2.50", "2.5"));
  EXPECT_FALSE(exact_match("Answer: 19", "18"));
  EXPECT_FALSE(exact_match("", "18"));
  EXPECT_TRUE(exact_match("Answer: Paris.", "paris"));
  EXPECT_FALSE(exact_match("<think>Answer: 18</think>Answer: 17", "18"));
}

TEST(ExtractChoiceLetter, StatedAndStandingAlone) {
  EXPECT_EQ(extract_choice_letter("Let me see. Answer: C", 4), 'C');
  EXPECT_EQ(extract_choice_letter("The answer is (B).", 4), 'B');
  EXPECT_EQ(extract_choice_letter("A is wrong, so **D**", 4), 'D');
  EXPECT_EQ(extract_choice_letter("I pick A. Actually the answer is B", 4), 'B');
  EXPECT_EQ(extract_choice_letter("Answer: E", 4), std::nullopt);  // out of range for 4 choices
  EXPECT_EQ(extract_choice_letter("the answer is a bit unclear", 4), std::nullopt);
  EXPECT_EQ(extract_choice_letter("<think>Answer: A</think>Final: (C)", 4), 'C');
  EXPECT_EQ(extract_choice_letter("It's cold. I can't say.", 4), std::nullopt);
}

TEST(JsonMatch, ValidityAndEquality) {
  EXPECT_TRUE(json_match(R"({"a": 1})", ""));
  EXPECT_TRUE(json_match("```json\n{\"a\": [1, 2]}\n```", R"({"a":[1,2]})"));
  EXPECT_TRUE(json_match("<think>{oops</think> {\"b\": true}", R"({"b":true})"));
  EXPECT_FALSE(json_match(R"({"a": 1)", ""));
  EXPECT_FALSE(json_match(R"({"a": 2})", R"({"a":1})"));
}

// pass@k by brute force: the fraction of k-subsets of n samples (c correct) with a correct one.
double pass_at_k_by_counting(int n, int c, int k) {
  int with = 0, all = 0;
  for (unsigned mask = 0; mask < (1u << n); ++mask) {
    if (__builtin_popcount(mask) != k) continue;
    ++all;
    with += (mask & ((1u << c) - 1)) != 0 ? 1 : 0;
  }
  return static_cast<double>(with) / all;
}

TEST(PassAtK, MatchesCountingSubsets) {
  for (int n = 1; n <= 8; ++n)
    for (int c = 0; c <= n; ++c)
      for (int k = 1; k <= n; ++k) EXPECT_NEAR(pass_at_k(n, c, k), pass_at_k_by_counting(n, c, k), 1e-12);
  EXPECT_DOUBLE_EQ(pass_at_k(10, 3, 1), 0.3);
}

TEST(Wilson, KnownValuesAndBounds) {
  // 8 of 10 at 95%: [0.4902, 0.9433] (standard tables)
  const Interval a = wilson_interval(8, 10);
  EXPECT_NEAR(a.low, 0.4902, 1e-4);
  EXPECT_NEAR(a.high, 0.9433, 1e-4);
  const Interval zero = wilson_interval(0, 20);
  EXPECT_DOUBLE_EQ(zero.low, 0.0);
  EXPECT_NEAR(zero.high, 0.1611, 1e-4);
  const Interval none = wilson_interval(0, 0);
  EXPECT_EQ(none.low, 0.0);
  EXPECT_EQ(none.high, 1.0);
}

std::filesystem::path write_file(const std::string& name, const std::string& text) {
  const std::filesystem::path p = std::filesystem::temp_directory_path() / name;
  std::ofstream(p) << text;
  return p;
}

TEST(LoadTask, ThreeKindsAndTheirAnswers) {
  const auto p = write_file(
      "eval_task_test.jsonl",
      "{\"question\": \"2+2?\", \"answer\": 4}\n"
      "{\"id\": \"q2\", \"question\": \"Pick\", \"choices\": [\"x\", \"y\", \"z\"], \"answer\": \"z\"}\n"
      "{\"question\": \"Pick\", \"choices\": [\"x\", \"y\"], \"answer\": 1}\n"
      "{\"question\": \"Emit\", \"type\": \"json\", \"answer\": {\"k\": 1}}\n");
  Result<std::vector<TaskItem>> items = load_task(p.string());
  ASSERT_TRUE(items.ok()) << items.status().message();
  ASSERT_EQ(items->size(), 4u);
  EXPECT_EQ((*items)[0].id, "1");
  EXPECT_EQ((*items)[0].answer, "4");
  EXPECT_EQ((*items)[1].id, "q2");
  EXPECT_EQ((*items)[1].type, ItemType::choice);
  EXPECT_EQ((*items)[1].answer, "C");
  EXPECT_NE((*items)[1].prompt.find("C) z"), std::string::npos);
  EXPECT_EQ((*items)[2].answer, "B");
  EXPECT_EQ((*items)[3].type, ItemType::json);
  EXPECT_EQ((*items)[3].answer, R"({"k":1})");
  std::filesystem::remove(p);
}

TEST(LoadTask, ErrorsNameLineAndField) {
  const auto p =
      write_file("eval_task_bad.jsonl", "{\"question\": \"a\", \"answer\": \"1\"}\n{\"question\": \"b\"}\n");
  Result<std::vector<TaskItem>> items = load_task(p.string());
  ASSERT_FALSE(items.ok());
  EXPECT_NE(items.status().message().find(":2: field 'answer'"), std::string::npos)
      << items.status().message();
  std::ofstream(p) << "{\"question\": \"a\", \"choices\": [\"x\", \"y\"], \"answer\": \"Q\"}\n";
  EXPECT_FALSE(load_task(p.string()).ok());
  std::filesystem::remove(p);
}

TEST(SummarizeEval, AccuracyPassAtKAndInterval) {
  TaskItem exact{.id = "1", .type = ItemType::exact, .prompt = "p", .answer = "18", .n_choices = 0};
  TaskItem choice{.id = "2", .type = ItemType::choice, .prompt = "p", .answer = "B", .n_choices = 4};
  auto sample = [](const TaskItem& item, const std::string& content) {
    SampleResult s;
    s.ok = true;
    s.content = content;
    score_sample(item, s);
    return s;
  };
  std::vector<std::vector<SampleResult>> results = {
      {sample(exact, "#### 18"), sample(exact, "#### 17"), sample(exact, "Answer: 18"), sample(exact, "x")},
      {sample(choice, "Answer: A"), sample(choice, "Answer: C"), sample(choice, "Answer: D"),
       SampleResult{}}};
  EXPECT_TRUE(results[0][0].correct);
  EXPECT_EQ(results[0][1].extracted, "17");
  EXPECT_EQ(results[1][0].extracted, "A");
  const auto s = summarize_eval({exact, choice}, results, {1, 2});
  EXPECT_EQ(s["samples"], 8);
  EXPECT_EQ(s["correct_samples"], 2);
  EXPECT_EQ(s["failed_requests"], 1);
  EXPECT_DOUBLE_EQ(s["accuracy"].get<double>(), (0.5 + 0.0) / 2);
  EXPECT_DOUBLE_EQ(s["pass_at_k"]["pass@1"].get<double>(), 0.25);
  EXPECT_NEAR(s["pass_at_k"]["pass@2"].get<double>(), (pass_at_k(4, 2, 2) + 0.0) / 2, 1e-12);
  const Interval ci = wilson_interval(2, 8);
  EXPECT_DOUBLE_EQ(s["accuracy_ci95"][0].get<double>(), ci.low);
  EXPECT_EQ(s["by_type"]["choice"]["items"], 1);
}

}  // namespace
}  // namespace ds::eval
