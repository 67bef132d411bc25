// Scoring an item's samples and the summary of a run: accuracy (the mean over items of the fraction
// of correct samples, i.e. pass@1 estimated from all n samples) with a Wilson 95% interval over all
// samples as independent trials, pass@k for each k asked (unbiased estimator), and counts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/eval_task.h"

namespace ds::eval {

struct SampleResult {
  bool ok = false;      // the request succeeded (a failed request counts as wrong)
  std::string error;    // when !ok
  std::string content;  // the message content (reasoning_content is kept apart, never scored)
  std::string reasoning;
  std::string extracted;  // what was compared: the final answer, the letter, or "json"/"invalid json"
  bool correct = false;
  int64_t completion_tokens = 0;
  double latency_s = 0;
};

// Scores `content` against the item: sets extracted and correct.
void score_sample(const TaskItem& item, SampleResult& sample);

// results[i] are the samples of items[i] (all of the same count n).
nlohmann::json summarize_eval(const std::vector<TaskItem>& items,
                              const std::vector<std::vector<SampleResult>>& results,
                              const std::vector<int>& ks);

}  // namespace ds::eval
