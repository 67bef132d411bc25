#include "eval/eval_task.h"

#include <fstream>
#include <nlohmann/json.hpp>

namespace ds::eval {

using json = nlohmann::json;

const char* item_type_name(ItemType type) {
  switch (type) {
    case ItemType::exact:
      return "exact";
    case ItemType::choice:
      return "choice";
    case ItemType::json:
      return "json";
  }
  return "exact";
}

std::string render_prompt(ItemType type, const std::string& question,
                          const std::vector<std::string>& choices) {
  std::string p = question;
  switch (type) {
    case ItemType::exact:
      p += "\n\nGive the final answer on the last line as \"Answer: <answer>\".";
      break;
    case ItemType::choice:
      p += "\n";
      for (size_t i = 0; i < choices.size(); ++i) {
        p.push_back('\n');
        p.push_back(static_cast<char>('A' + i));
        p.append(") ").append(choices[i]);
      }
      p += "\n\nAnswer with the letter of the correct option, on the last line as \"Answer: X\".";
      break;
    case ItemType::json:
      p += "\n\nReply with the JSON only.";
      break;
  }
  return p;
}

namespace {

Status bad(const std::string& where, const std::string& what) {
  return Status(ErrorCode::invalid_argument, where + ": " + what);
}

// The gold letter of a multiple-choice item from "B", 1 or the text of the right choice.
Result<std::string> choice_answer(const json& answer, const std::vector<std::string>& choices,
                                  const std::string& where) {
  const int n = static_cast<int>(choices.size());
  if (answer.is_number_integer()) {
    const int64_t i = answer.get<int64_t>();
    if (i < 0 || i >= n) return bad(where, "field 'answer': index out of range of 'choices'");
    return std::string(1, static_cast<char>('A' + i));
  }
  if (!answer.is_string()) return bad(where, "field 'answer' must be a letter, an index or a choice's text");
  const std::string a = answer.get<std::string>();
  if (a.size() == 1 && a[0] >= 'A' && a[0] < 'A' + n) return a;
  for (int i = 0; i < n; ++i)
    if (choices[static_cast<size_t>(i)] == a) return std::string(1, static_cast<char>('A' + i));
  return bad(where, "field 'answer' '" + a + "' is neither a letter of the choices nor one of them");
}

Result<TaskItem> parse_item(const json& j, const std::string& where, int line_no) {
  if (!j.is_object()) return bad(where, "not a JSON object");
  TaskItem item;
  item.id = j.contains("id") ? (j["id"].is_string() ? j["id"].get<std::string>() : j["id"].dump())
                             : std::to_string(line_no);
  if (!j.contains("question") || !j["question"].is_string())
    return bad(where, "field 'question' (string) is missing");
  const std::string question = j["question"].get<std::string>();
  std::vector<std::string> choices;
  if (j.contains("choices")) {
    if (!j["choices"].is_array() || j["choices"].size() < 2 || j["choices"].size() > 26)
      return bad(where, "field 'choices' must be an array of 2 to 26 strings");
    for (const json& c : j["choices"]) {
      if (!c.is_string()) return bad(where, "field 'choices' must be an array of 2 to 26 strings");
      choices.push_back(c.get<std::string>());
    }
  }
  const std::string type = j.value("type", choices.empty() ? "exact" : "choice");
  const json answer = j.contains("answer") ? j["answer"] : json(nullptr);
  if (type == "exact") {
    item.type = ItemType::exact;
    if (answer.is_string()) {
      item.answer = answer.get<std::string>();
    } else if (answer.is_number()) {
      item.answer = answer.dump();
    } else {
      return bad(where, "field 'answer' (string or number) is missing");
    }
  } else if (type == "choice") {
    item.type = ItemType::choice;
    if (choices.empty()) return bad(where, "a choice item needs field 'choices'");
    DS_ASSIGN_OR_RETURN(item.answer, choice_answer(answer, choices, where));
    item.n_choices = static_cast<int>(choices.size());
  } else if (type == "json") {
    item.type = ItemType::json;
    item.answer = answer.is_null() ? std::string() : answer.dump();
  } else {
    return bad(where, "field 'type' must be exact, choice or json, not '" + type + "'");
  }
  if (j.contains("prompt")) {
    if (!j["prompt"].is_string()) return bad(where, "field 'prompt' must be a string");
    item.prompt = j["prompt"].get<std::string>();
  } else {
    item.prompt = render_prompt(item.type, question, choices);
  }
  return item;
}

}  // namespace

Result<std::vector<TaskItem>> load_task(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status(ErrorCode::io_error, "cannot open task file " + path);
  std::vector<TaskItem> items;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    const json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) return bad(where, "not valid JSON");
    DS_ASSIGN_OR_RETURN(TaskItem item, parse_item(j, where, line_no));
    items.push_back(std::move(item));
  }
  if (items.empty()) return Status(ErrorCode::invalid_argument, path + ": no items");
  return items;
}

}  // namespace ds::eval
