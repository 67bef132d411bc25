#include "offline_batch.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <istream>
#include <limits>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <ostream>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "base/clock.h"
#include "command_support.h"
#include "engine/model_loader.h"
#include "speculative_option.h"

namespace ds::cli {

namespace {

using nlohmann::json;

Status line_error(const std::string& message) { return Status(ErrorCode::invalid_argument, message); }

Result<std::vector<int32_t>> encode_chat(const json& messages, const Tokenizer& tok) {
  if (!messages.is_array() || messages.empty()) return line_error("\"messages\" must be a non-empty array");
  const std::optional<int32_t> user = tok.token_to_id("<｜User｜>");
  const std::optional<int32_t> assistant = tok.token_to_id("<｜Assistant｜>");
  const std::optional<int32_t> eos = tok.token_to_id("<｜end▁of▁sentence｜>");
  if (!user || !assistant || !eos) {
    return Status(ErrorCode::tokenizer_bad_file, "the tokenizer has no DeepSeek-V3 chat tokens");
  }
  std::vector<int32_t> ids;
  if (tok.bos_id() >= 0) ids.push_back(tok.bos_id());
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string()) {
      return line_error("messages[" + std::to_string(i) + "] needs string \"role\" and \"content\"");
    }
    const std::string role = m["role"].get<std::string>();
    if (role == "user") {
      ids.push_back(*user);
    } else if (role == "assistant") {
      ids.push_back(*assistant);
    } else if (role != "system") {
      return line_error("messages[" + std::to_string(i) + "].role '" + role +
                        "' is not system, user or assistant");
    }
    // Message text is plain BPE: a user cannot inject template markers.
    DS_ASSIGN_OR_RETURN(std::vector<int32_t> text, tok.encode(m["content"].get<std::string>(), false));
    ids.insert(ids.end(), text.begin(), text.end());
    if (role == "assistant") ids.push_back(*eos);
  }
  ids.push_back(*assistant);
  return ids;
}

template <class T>
Status read_number(const json& line, const char* key, T& out) {
  if (!line.contains(key)) return ok_status();
  const json& v = line[key];
  if (!v.is_number()) return line_error(std::string("\"") + key + "\" must be a number");
  if constexpr (std::is_integral_v<T>) {
    const std::string range_error = std::string("\"") + key + "\" must be an integer in range";
    if (!v.is_number_integer()) return line_error(range_error);
    if (v.is_number_unsigned()) {
      if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max()))
        return line_error(range_error);
    } else {
      const int64_t x = v.get<int64_t>();
      if (x < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
          (x > 0 && static_cast<uint64_t>(x) > static_cast<uint64_t>(std::numeric_limits<T>::max()))) {
        return line_error(range_error);
      }
    }
  }
  out = v.get<T>();
  return ok_status();
}

Result<Request> parse_line(const json& line, const Tokenizer& tok, const BatchDefaults& d) {
  if (!line.is_object()) return line_error("a line must be a JSON object");
  Request r;
  const int n_inputs = static_cast<int>(line.contains("prompt")) +
                       static_cast<int>(line.contains("messages")) +
                       static_cast<int>(line.contains("prompt_token_ids"));
  if (n_inputs != 1)
    return line_error("exactly one of \"prompt\", \"messages\", \"prompt_token_ids\" is needed");
  if (line.contains("prompt")) {
    if (!line["prompt"].is_string()) return line_error("\"prompt\" must be a string");
    if (tok.add_bos_by_default() && tok.bos_id() >= 0) r.prompt_tokens.push_back(tok.bos_id());
    DS_ASSIGN_OR_RETURN(std::vector<int32_t> text, tok.encode(line["prompt"].get<std::string>(), true));
    r.prompt_tokens.insert(r.prompt_tokens.end(), text.begin(), text.end());
  } else if (line.contains("messages")) {
    DS_ASSIGN_OR_RETURN(r.prompt_tokens, encode_chat(line["messages"], tok));
  } else {
    const json& ids = line["prompt_token_ids"];
    if (!ids.is_array()) return line_error("\"prompt_token_ids\" must be an array of integers");
    for (const json& id : ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        return line_error("\"prompt_token_ids\" must hold integers in [0, 2^31)");
      }
      r.prompt_tokens.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  r.stop.max_tokens = d.max_tokens;
  r.sampling.temperature = d.temperature;
  r.sampling.seed = d.seed;
  DS_TRY(read_number(line, "max_tokens", r.stop.max_tokens));
  DS_TRY(read_number(line, "temperature", r.sampling.temperature));
  DS_TRY(read_number(line, "seed", r.sampling.seed));
  DS_TRY(read_number(line, "top_k", r.sampling.top_k));
  DS_TRY(read_number(line, "top_p", r.sampling.top_p));
  DS_TRY(read_number(line, "min_p", r.sampling.min_p));
  DS_TRY(read_number(line, "repetition_penalty", r.sampling.repetition_penalty));
  DS_TRY(read_number(line, "presence_penalty", r.sampling.presence_penalty));
  DS_TRY(read_number(line, "frequency_penalty", r.sampling.frequency_penalty));
  DS_TRY(read_number(line, "top_logprobs", r.sampling.top_logprobs));
  if (line.contains("logprobs")) {
    if (!line["logprobs"].is_boolean()) return line_error("\"logprobs\" must be true or false");
    r.sampling.logprobs = line["logprobs"].get<bool>();
  }
  if (line.contains("ignore_eos")) {
    if (!line["ignore_eos"].is_boolean()) return line_error("\"ignore_eos\" must be true or false");
    r.stop.ignore_eos = line["ignore_eos"].get<bool>();
  }
  if (line.contains("stop")) {
    const json& stop = line["stop"];
    if (stop.is_string()) {
      r.stop.stop_strings.push_back(stop.get<std::string>());
    } else if (stop.is_array() &&
               std::all_of(stop.begin(), stop.end(), [](const json& s) { return s.is_string(); })) {
      for (const json& s : stop) r.stop.stop_strings.push_back(s.get<std::string>());
    } else {
      return line_error("\"stop\" must be a string or an array of strings");
    }
  }
  if (line.contains("stop_token_ids")) {
    const json& ids = line["stop_token_ids"];
    if (!ids.is_array()) return line_error("\"stop_token_ids\" must be an array of integers");
    for (const json& id : ids) {
      if (!id.is_number_integer()) return line_error("\"stop_token_ids\" must be an array of integers");
      r.stop.stop_token_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  return r;
}

// One item's events merged (on the engine thread) and its completion, shared with the writer.
struct BatchState {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<TokenEvent> results;  // guarded by mu
  std::vector<uint8_t> done;        // guarded by mu
  int64_t n_done = 0;               // guarded by mu
  int64_t completion_tokens = 0;    // guarded by mu: generated so far, all requests
};

json result_json(const BatchItem& item, const TokenEvent& e) {
  json j;
  j["index"] = item.index;
  j["id"] = json::parse(item.id_json, nullptr, /*allow_exceptions=*/false);
  const Status& error = item.error.ok() ? e.error : item.error;
  if (!item.error.ok() || (e.finish_reason == FinishReason::error && e.tokens.empty())) {
    j["error"] = {{"code", error_code_name(error.code())}, {"message", error.message()}};
    return j;
  }
  j["text"] = e.text;
  j["token_ids"] = e.tokens;
  j["finish_reason"] = finish_reason_name(e.finish_reason);
  if (!error.ok()) j["error"] = {{"code", error_code_name(error.code())}, {"message", error.message()}};
  j["usage"] = {{"prompt_tokens", e.usage.prompt_tokens},
                {"completion_tokens", e.usage.completion_tokens},
                {"cached_prompt_tokens", e.usage.cached_prompt_tokens}};
  if (item.request.sampling.logprobs) {
    json lps = json::array();
    for (size_t i = 0; i < e.chosen_logprobs.size(); ++i) {
      json top = json::array();
      if (i < e.top_logprobs.size()) {
        for (const TokenLogprob& t : e.top_logprobs[i])
          top.push_back({{"token_id", t.token_id}, {"logprob", t.logprob}});
      }
      lps.push_back({{"token_id", e.chosen_logprobs[i].token_id},
                     {"logprob", e.chosen_logprobs[i].logprob},
                     {"top", top}});
    }
    j["logprobs"] = lps;
  }
  return j;
}

void draw_progress(int64_t n_done, int64_t n_total, int64_t tokens, double elapsed_s) {
  constexpr int kWidth = 30;
  const int filled = n_total > 0 ? static_cast<int>(kWidth * n_done / n_total) : kWidth;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, ' ');
  std::fprintf(stderr, "\r[%s] %lld/%lld requests, %lld tokens, %.1f tok/s ", bar.c_str(),
               static_cast<long long>(n_done), static_cast<long long>(n_total),
               static_cast<long long>(tokens), elapsed_s > 0 ? static_cast<double>(tokens) / elapsed_s : 0.0);
  std::fflush(stderr);
}

}  // namespace

Result<std::vector<BatchItem>> parse_batch_input(std::istream& in, const Tokenizer& tok,
                                                 const BatchDefaults& defaults) {
  std::vector<BatchItem> items;
  std::string text;
  int64_t line_no = 0;
  while (std::getline(in, text)) {
    ++line_no;
    if (std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c) != 0; })) continue;
    BatchItem item;
    item.index = static_cast<int64_t>(items.size());
    item.id_json = std::to_string(item.index);
    const json line = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (line.is_discarded()) {
      item.error = line_error("line " + std::to_string(line_no) + ": not valid JSON");
    } else {
      if (line.is_object() && line.contains("id")) item.id_json = line["id"].dump();
      Result<Request> r = parse_line(line, tok, defaults);
      if (r.ok()) {
        item.request = std::move(r).value();
      } else {
        item.error =
            Status(r.status().code(), "line " + std::to_string(line_no) + ": " + r.status().message());
      }
    }
    items.push_back(std::move(item));
  }
  if (in.bad()) return Status(ErrorCode::io_error, "reading the input failed");
  return items;
}

BatchSummary run_batch(Engine& engine, std::vector<BatchItem>& items, std::ostream& out, bool progress) {
  const double t0 = now_seconds();
  auto state = std::make_shared<BatchState>();
  state->results.resize(items.size());
  state->done.assign(items.size(), 0);
  size_t next_to_write = 0;
  double last_draw = 0.0;
  BatchSummary summary;
  summary.n_requests = static_cast<int64_t>(items.size());

  // Writes every finished item at the front of the input order. Call with the lock held.
  const auto write_ready = [&](std::unique_lock<std::mutex>&) {
    while (next_to_write < items.size() && state->done[next_to_write]) {
      const BatchItem& item = items[next_to_write];
      const TokenEvent& e = state->results[next_to_write];
      if (!item.error.ok() || e.finish_reason == FinishReason::error) ++summary.n_failed;
      summary.prompt_tokens += e.usage.prompt_tokens;
      summary.cached_prompt_tokens += e.usage.cached_prompt_tokens;
      summary.completion_tokens += e.usage.completion_tokens;
      out << result_json(item, e).dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
      state->results[next_to_write] = TokenEvent{};  // free the text early
      ++next_to_write;
    }
    const double now = now_seconds();
    if (progress && now - last_draw > 0.25) {
      draw_progress(state->n_done, summary.n_requests, state->completion_tokens, now - t0);
      last_draw = now;
    }
  };

  for (size_t i = 0; i < items.size(); ++i) {
    BatchItem& item = items[i];
    if (item.error.ok()) {
      const EventSink sink = [state, i](TokenEvent&& e) {
        std::lock_guard<std::mutex> lock(state->mu);
        TokenEvent& acc = state->results[i];
        acc.tokens.insert(acc.tokens.end(), e.tokens.begin(), e.tokens.end());
        acc.text += e.text;
        acc.chosen_logprobs.insert(acc.chosen_logprobs.end(), e.chosen_logprobs.begin(),
                                   e.chosen_logprobs.end());
        for (auto& top : e.top_logprobs) acc.top_logprobs.push_back(std::move(top));
        state->completion_tokens += static_cast<int64_t>(e.tokens.size());
        if (e.finished) {
          acc.finished = true;
          acc.finish_reason = e.finish_reason;
          acc.error = e.error;
          acc.usage = e.usage;
          state->done[i] = 1;
          ++state->n_done;
          state->cv.notify_all();
        }
      };
      while (true) {
        Result<RequestId> id = engine.submit(item.request, sink);
        if (id.ok()) break;
        if (id.status().code() != ErrorCode::engine_overloaded) {
          item.error = id.status();
          break;
        }
        // The queue is full: wait for a request to finish, writing what is ready meanwhile.
        std::unique_lock<std::mutex> lock(state->mu);
        const int64_t seen = state->n_done;
        state->cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return state->n_done != seen; });
        write_ready(lock);
      }
    }
    std::unique_lock<std::mutex> lock(state->mu);
    if (!item.error.ok()) {
      state->done[i] = 1;
      ++state->n_done;
    }
    write_ready(lock);
  }
  std::unique_lock<std::mutex> lock(state->mu);
  while (next_to_write < items.size()) {
    state->cv.wait_for(lock, std::chrono::milliseconds(250));
    write_ready(lock);
  }
  out.flush();
  summary.wall_s = now_seconds() - t0;
  if (progress) {
    draw_progress(state->n_done, summary.n_requests, state->completion_tokens, summary.wall_s);
    std::fputc('\n', stderr);
  }
  return summary;
}

int run_offline_batch(const OfflineBatchOptions& o) {
  const std::string cmd = "generate";
  if (o.input_path.empty() || o.output_path.empty()) return report_usage_error(cmd, "--input needs --output");
  if (o.defaults.max_tokens < 1) return report_usage_error(cmd, "--max-tokens must be >= 1 with --input");
  if (o.max_running < 1 || o.max_step_tokens < 1 || o.kv_cache_mib < 1) {
    return report_usage_error(cmd, "--max-running, --max-step-tokens and --kv-cache-mib must be >= 1");
  }
  Result<Isa> isa = parse_isa_option(o.isa);
  if (!isa.ok()) return report_usage_error(cmd, isa.status().message());
  Result<Tokenizer> tok = Tokenizer::load(o.model_dir);
  if (!tok.ok()) return report_error(cmd, tok.status());
  std::ifstream in(o.input_path);
  if (!in) return report_error(cmd, Status(ErrorCode::io_error, o.input_path + ": cannot open"));
  Result<std::vector<BatchItem>> items = parse_batch_input(in, *tok, o.defaults);
  if (!items.ok())
    return report_error(cmd, Status(items.status().code(), o.input_path + ": " + items.status().message()));

  int64_t max_seq_len = 1;
  for (const BatchItem& item : *items) {
    if (!item.error.ok()) continue;
    max_seq_len = std::max(
        max_seq_len, static_cast<int64_t>(item.request.prompt_tokens.size()) + item.request.stop.max_tokens);
  }
  ModelOptions mo;
  mo.isa = *isa;
  mo.n_threads = resolve_threads(o.threads);
  mo.max_seq_len = max_seq_len;
  mo.numerics = o.numerics;
  mo.decoder_replay = o.decoder_replay;
  Result<std::unique_ptr<ModelRunner>> model = load_model(o.model_dir, mo);
  if (!model.ok()) return report_error(cmd, model.status());

  EngineConfig cfg;
  cfg.scheduler.max_running = o.max_running;
  cfg.scheduler.max_step_tokens = o.max_step_tokens;
  cfg.scheduler.max_seq_len = max_seq_len;
  cfg.kv_cache_bytes = o.kv_cache_mib << 20;
  cfg.prefix_hash_seed = std::random_device{}();
  cfg.speculative = o.speculative;
  Result<std::unique_ptr<Engine>> engine = Engine::create(cfg, **model, &*tok);
  if (!engine.ok()) return report_error(cmd, engine.status());

  std::ofstream out(o.output_path, std::ios::trunc);
  if (!out)
    return report_error(cmd, Status(ErrorCode::io_error, o.output_path + ": cannot open for writing"));
  const BatchSummary s = run_batch(**engine, *items, out, o.progress && ::isatty(STDERR_FILENO) != 0);
  (*engine)->shutdown();
  if (o.speculative.enabled()) print_spec_decode_summary("generate", (*engine)->stats());
  if (!out) return report_error(cmd, Status(ErrorCode::io_error, o.output_path + ": write failed"));
  const double wall = s.wall_s > 0 ? s.wall_s : 1e-9;
  std::fprintf(stderr,
               "requests: %lld (%lld failed), prompt tokens: %lld (%lld cached), generated tokens: %lld, "
               "wall: %.2f s, output: %.1f tok/s, total: %.1f tok/s, %.2f req/s (isa %s, %d threads)\n",
               static_cast<long long>(s.n_requests), static_cast<long long>(s.n_failed),
               static_cast<long long>(s.prompt_tokens), static_cast<long long>(s.cached_prompt_tokens),
               static_cast<long long>(s.completion_tokens), s.wall_s,
               static_cast<double>(s.completion_tokens) / wall,
               static_cast<double>(s.prompt_tokens + s.completion_tokens) / wall,
               static_cast<double>(s.n_requests) / wall, std::string(isa_name(*isa)).c_str(), mo.n_threads);
  return 0;
}

}  // namespace ds::cli
