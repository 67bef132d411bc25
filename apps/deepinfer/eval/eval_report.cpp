#include "eval/eval_report.h"

#include "eval/eval_scoring.h"

namespace ds::eval {

void score_sample(const TaskItem& item, SampleResult& s) {
  if (!s.ok) {
    s.correct = false;
    s.extracted.clear();
    return;
  }
  switch (item.type) {
    case ItemType::exact:
      s.extracted = extract_final_answer(s.content);
      s.correct = exact_match(s.content, item.answer);
      break;
    case ItemType::choice: {
      const std::optional<char> letter = extract_choice_letter(s.content, item.n_choices);
      s.extracted = letter ? std::string(1, *letter) : std::string();
      s.correct = letter && std::string(1, *letter) == item.answer;
      break;
    }
    case ItemType::json:
      s.correct = json_match(s.content, item.answer);
      s.extracted = json_match(s.content, "") ? "json" : "invalid json";
      break;
  }
}

nlohmann::json summarize_eval(const std::vector<TaskItem>& items,
                              const std::vector<std::vector<SampleResult>>& results,
                              const std::vector<int>& ks) {
  int64_t n_samples = 0, n_correct = 0, n_failed = 0, completion_tokens = 0;
  double accuracy_sum = 0;
  std::vector<double> pass_sums(ks.size(), 0.0);
  nlohmann::json by_type = nlohmann::json::object();
  for (size_t i = 0; i < items.size(); ++i) {
    const std::vector<SampleResult>& samples = results[i];
    int64_t c = 0;
    for (const SampleResult& s : samples) {
      c += s.correct ? 1 : 0;
      n_failed += s.ok ? 0 : 1;
      completion_tokens += s.completion_tokens;
    }
    const int64_t n = static_cast<int64_t>(samples.size());
    n_samples += n;
    n_correct += c;
    if (n > 0) accuracy_sum += static_cast<double>(c) / static_cast<double>(n);
    for (size_t j = 0; j < ks.size(); ++j)
      if (ks[j] <= n) pass_sums[j] += pass_at_k(n, c, ks[j]);
    nlohmann::json& t = by_type[item_type_name(items[i].type)];
    if (t.is_null()) t = {{"items", 0}, {"correct_samples", 0}, {"samples", 0}};
    t["items"] = t["items"].get<int64_t>() + 1;
    t["correct_samples"] = t["correct_samples"].get<int64_t>() + c;
    t["samples"] = t["samples"].get<int64_t>() + n;
  }
  const double n_items = static_cast<double>(items.size());
  const Interval ci = wilson_interval(n_correct, n_samples);
  nlohmann::json out = {{"items", items.size()},
                        {"samples", n_samples},
                        {"correct_samples", n_correct},
                        {"failed_requests", n_failed},
                        {"completion_tokens", completion_tokens},
                        {"accuracy", n_items > 0 ? accuracy_sum / n_items : 0.0},
                        {"accuracy_ci95", {ci.low, ci.high}},
                        {"by_type", by_type}};
  nlohmann::json pass = nlohmann::json::object();
  for (size_t j = 0; j < ks.size(); ++j) {
    const bool defined = !results.empty() && ks[j] <= static_cast<int>(results.front().size());
    pass["pass@" + std::to_string(ks[j])] =
        defined ? nlohmann::json(pass_sums[j] / n_items) : nlohmann::json(nullptr);
  }
  out["pass_at_k"] = pass;
  return out;
}

}  // namespace ds::eval
