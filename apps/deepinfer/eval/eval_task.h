// An eval task file: JSONL, one item per line (docs/tools.md):
//   {"question": "...", "answer": "..."}                          exact match (GSM8K/AIME style)
//   {"question": "...", "choices": ["..", ".."], "answer": "B"}   multiple choice (MMLU/GPQA); the
//                                                                 answer may also be an index or the
//                                                                 text of the right choice
//   {"question": "...", "type": "json", "answer": {...}}          JSON validity (+ equality if given)
// optional: "id", "type" ("exact" | "choice" | "json"; default from the fields), "prompt" (the
// whole user message, replacing the rendered question).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace ds::eval {

enum class ItemType { exact, choice, json };
const char* item_type_name(ItemType type);

struct TaskItem {
  std::string id;
  ItemType type = ItemType::exact;
  std::string prompt;  // the user message sent
  std::string answer;  // exact: the gold text; choice: the letter; json: compact JSON or "" (validity only)
  int n_choices = 0;
};

// The user message for an item: the question, its lettered choices, and how to state the answer.
std::string render_prompt(ItemType type, const std::string& question,
                          const std::vector<std::string>& choices);

// io_error / invalid_argument naming the file, line and field.
Result<std::vector<TaskItem>> load_task(const std::string& path);

}  // namespace ds::eval
