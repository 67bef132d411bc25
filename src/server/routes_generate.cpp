#include "server/routes_generate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/api_routes.h"
#include "recipe/anthropic_messages_request.h"
#include "recipe/api_responder.h"
#include "recipe/chat_completions_request.h"
#include "recipe/completions_request.h"
#include "recipe/output_parser.h"
#include "recipe/request_error.h"
#include "recipe/response_common.h"
#include "recipe/responses_request.h"
#include "server/structured_output.h"
#include "server/tool_call_constraint.h"

namespace ds::server {

namespace {

// The recipe's events, framed as SSE by the channel (the one place that frames).
void write_frames(ResponseChannel& out, const recipe::StreamEvents& events) {
  for (const recipe::StreamEvent& e : events) out.write_event(e.data, e.name);
}

recipe::GenerationEnd generation_end(FinishReason reason) {
  switch (reason) {
    case FinishReason::stop:
      return recipe::GenerationEnd::stop;
    case FinishReason::length:
      return recipe::GenerationEnd::length;
    default:
      return recipe::GenerationEnd::end_of_stream;
  }
}

double seconds_between(SteadyTime from, SteadyTime to) {
  if (from == SteadyTime{} || to == SteadyTime{}) return -1.0;
  return std::chrono::duration<double>(to - from).count();
}

// The engine Request: sampling from the API fields (DeepSeek defaults: temperature 1, top_p 1;
// top_k is ignored, as DeepSeek does), max_tokens, and no engine stop strings (the parser matches
// them, in content only).
Request engine_request(const recipe::SamplingFields& s, const std::string& user,
                       const recipe::CacheDirectives& cache, std::vector<int32_t> prompt_tokens,
                       const GenerateRoutesConfig& config) {
  Request r;
  r.prompt_tokens = std::move(prompt_tokens);
  r.sampling.temperature = static_cast<float>(s.temperature.value_or(1.0));
  r.sampling.top_p = static_cast<float>(s.top_p.value_or(1.0));
  r.sampling.presence_penalty = static_cast<float>(s.presence_penalty);
  r.sampling.frequency_penalty = static_cast<float>(s.frequency_penalty);
  r.sampling.logprobs = s.logprobs;
  r.sampling.top_logprobs = s.top_logprobs.value_or(0);
  // Without a seed each request draws its own (greedy requests do not use it).
  r.sampling.seed = s.seed ? static_cast<uint64_t>(*s.seed) : std::random_device{}();
  // Without max_tokens: the default, but never more than the context leaves after the prompt (as
  // vLLM does), so a request that omits it is not refused for the default's sake.
  const int64_t room =
      config.engine->config().scheduler.max_seq_len - static_cast<int64_t>(r.prompt_tokens.size());
  const int64_t default_max_tokens =
      room >= 1 ? std::min(config.default_max_tokens, room) : config.default_max_tokens;
  r.stop.max_tokens = static_cast<int32_t>(s.max_tokens.value_or(default_max_tokens));
  r.tenant = user;
  // Cache directives (docs/kvcache.md, Cache control in the APIs): the salt scopes prefix sharing,
  // the rest steers the tiers and the pool.
  r.cache_salt = cache.salt;
  r.cache_class = cache.cache_class;
  r.cache_ttl_s = cache.ttl_s;
  r.cache_tier_writes = !cache.pool_only;
  r.cache_pin = cache.pin;
  r.cache_key = cache.prompt_cache_key;
  return r;
}

recipe::ResponseMeta response_meta(const GenerateRoutesConfig& config, const ResponseChannel& out,
                                   const char* id_prefix) {
  return recipe::ResponseMeta{
      std::string(id_prefix) + out.request_id(), config.model_id,
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count(),
      ""};
}

// One generation request in flight, whatever its API, with its `n` choices: each choice is one
// engine request. Choice 0 is submitted first and the others once its first event arrives: by then
// its prompt's full blocks are in the prefix cache, so the siblings fork from them and compute only
// the prompt's last partial block (forked sequences sharing the prompt's KV). Engine events arrive on
// the engine thread, one at a time, and are handled on the connection's strand in that order (or on
// the engine thread once the connection is gone); events_mu_ serialises them with begin() (the first
// event may come before submit() returns), mu_ guards the engine-id handshake for cancelling.
class GenerationCall : public std::enable_shared_from_this<GenerationCall> {
 public:
  GenerationCall(std::shared_ptr<const GenerateRoutesConfig> config, std::shared_ptr<ResponseChannel> out,
                 const recipe::OutputParserOptions& parser_options,
                 std::vector<std::unique_ptr<recipe::ApiResponder>> responders, bool streaming, bool logprobs,
                 bool report_cache_creation)
      : config_ptr_(std::move(config)),
        config_(*config_ptr_),
        out_(std::move(out)),
        streaming_(streaming),
        logprobs_wanted_(logprobs),
        report_cache_creation_(report_cache_creation) {
    for (std::unique_ptr<recipe::ApiResponder>& r : responders)
      choices_.emplace_back(parser_options, std::move(r));
    engine_ids_.resize(choices_.size());
    cancel_pending_.resize(choices_.size());
    n_open_ = choices_.size();
  }

  // Io thread, before submit: the engine requests of choices 1..n-1.
  void set_sibling_requests(std::vector<Request> requests) { sibling_requests_ = std::move(requests); }

  // Io thread (choice 0, after a successful submit) or engine thread (siblings).
  void set_engine_id(size_t choice, RequestId id) {
    bool cancel_now = false;
    {
      std::lock_guard lock(mu_);
      engine_ids_[choice] = id;
      cancel_now = cancel_all_pending_ || cancel_pending_[choice];
    }
    if (cancel_now) config_.engine->cancel(id);
  }

  // Io thread, after a successful submit: starts the response (a stream's headers), then handles
  // the events that arrived meanwhile. The stream's opening frames wait for the first event: it
  // carries the prompt's cache split (Anthropic's message_start reports it).
  void begin() {
    std::lock_guard lock(events_mu_);
    if (streaming_) out_->start_stream();
    begun_ = true;
    for (auto& [choice, ev] : early_events_) handle(choice, std::move(ev));
    early_events_.clear();
  }

  // Engine thread: only queues. Parsing, JSON building and framing run on the connection's strand, in
  // the engine's order (ResponseChannel::run_in_order), so the engine's loop never waits on them.
  static void on_event(const std::shared_ptr<GenerationCall>& call, size_t choice, TokenEvent&& ev) {
    call->out_->run_in_order(
        [call, choice, ev = std::move(ev)]() mutable { call->on_event_in_order(choice, std::move(ev)); });
  }

  // The connection's strand (or the engine thread once the connection is gone).
  void on_event_in_order(size_t choice, TokenEvent&& ev) {
    std::lock_guard lock(events_mu_);
    if (!begun_) {
      early_events_.emplace_back(choice, std::move(ev));
      return;
    }
    handle(choice, std::move(ev));
  }

  // The client went away (or the response failed): every choice's engine request, now or as soon
  // as its id is known.
  void cancel_all() {
    std::vector<RequestId> ids;
    {
      std::lock_guard lock(mu_);
      cancel_all_pending_ = true;
      for (RequestId id : engine_ids_)
        if (id != 0) ids.push_back(id);
    }
    for (RequestId id : ids) config_.engine->cancel(id);
  }

 private:
  struct Choice {
    Choice(const recipe::OutputParserOptions& options, std::unique_ptr<recipe::ApiResponder> r)
        : parser(options), responder(std::move(r)) {}
    recipe::OutputParser parser;
    std::unique_ptr<recipe::ApiResponder> responder;
    recipe::CollectedOutput collected;               // non-stream only
    std::vector<recipe::TokenLogprobInfo> logprobs;  // non-stream only
    bool stopped = false;                            // a stop sequence matched: the rest is dropped
    recipe::OutputFinishReason reason = recipe::OutputFinishReason::stop;
    std::string stop_sequence;
    recipe::ResponseUsage usage;
    SteadyTime last_token_at{};  // when the previous token event was handled (ITL metric)
  };

  void handle(size_t index, TokenEvent&& ev) {
    if (closed_) return;  // the response already ended with an error
    if (streaming_ && !frames_opened_) {
      frames_opened_ = true;
      recipe::ResponseUsage prompt_usage = response_usage(ev.usage);
      prompt_usage.completion_tokens = 0;
      for (Choice& c : choices_) write_frames(*out_, c.responder->begin(prompt_usage));
    }
    Choice& c = choices_[index];
    observe_inter_token_latency(c, ev.tokens.size());
    if (!c.stopped) {
      std::vector<recipe::OutputDelta> deltas =
          c.parser.feed(ev.text, static_cast<int64_t>(ev.tokens.size()));
      std::vector<recipe::TokenLogprobInfo> logprobs = logprob_infos(ev);
      if (streaming_) {
        write_frames(*out_, c.responder->on_deltas(deltas, logprobs));
      } else {
        c.collected.add(deltas);
        c.logprobs.insert(c.logprobs.end(), logprobs.begin(), logprobs.end());
      }
      if (c.parser.stop_sequence_matched()) {
        c.stopped = true;
        cancel_engine(index);
      }
    }
    if (index == 0 && !sibling_requests_.empty() && !(ev.finished && ends_in_error(c, ev))) submit_siblings();
    if (ev.finished) finish(index, ev);
  }

  // On choice 0's first event: its prompt is computed and committed by now.
  void submit_siblings() {
    std::vector<Request> requests = std::move(sibling_requests_);
    sibling_requests_.clear();
    for (size_t i = 0; i < requests.size() && !closed_; ++i) {
      const size_t choice = i + 1;
      // The sink keeps the call alive, as choice 0's does (the engine drops it when the request ends).
      Result<RequestId> id = config_.engine->submit(
          std::move(requests[i]),
          [self = shared_from_this(), choice](TokenEvent&& ev) { on_event(self, choice, std::move(ev)); });
      if (!id.ok()) return fail(id.status());
      set_engine_id(choice, *id);
    }
  }

  std::vector<recipe::TokenLogprobInfo> logprob_infos(const TokenEvent& ev) const {
    std::vector<recipe::TokenLogprobInfo> infos;
    if (!logprobs_wanted_) return infos;
    for (size_t i = 0; i < ev.chosen_logprobs.size(); ++i) {
      std::vector<recipe::IdLogprob> top;
      if (i < ev.top_logprobs.size()) {
        for (const TokenLogprob& t : ev.top_logprobs[i]) top.push_back({t.token_id, t.logprob});
      }
      // Sampled ids are always the tokenizer's (the engine masks the padding rows), so this
      // cannot fail short of a bug; such a token is left out rather than failing the response.
      Result<recipe::TokenLogprobInfo> info = recipe::token_logprob_info(
          *config_.tokenizer, {ev.chosen_logprobs[i].token_id, ev.chosen_logprobs[i].logprob}, top);
      if (info.ok()) infos.push_back(std::move(info).value());
    }
    return infos;
  }

  void cancel_engine(size_t choice) {
    RequestId id = 0;
    {
      std::lock_guard lock(mu_);
      id = engine_ids_[choice];
      if (id == 0) cancel_pending_[choice] = true;  // cancelled as soon as submit() returns
    }
    if (id != 0) config_.engine->cancel(id);
  }

  // A choice's last event is an error (unless a stop sequence had already ended it: then the
  // engine's cancel is the expected end).
  static bool ends_in_error(const Choice& c, const TokenEvent& ev) {
    return !c.stopped &&
           (ev.finish_reason == FinishReason::error || ev.finish_reason == FinishReason::deadline);
  }

  // The whole response fails (a choice failed, or a sibling could not be submitted): the error in
  // the API's shape, and every other choice cancelled.
  void fail(const Status& error) {
    closed_ = true;
    if (streaming_) {
      out_->stream_error(error);
    } else {
      out_->send_error(error);
    }
    cancel_all();
  }

  void finish(size_t index, const TokenEvent& ev) {
    record_metrics(choices_[index], ev);
    Choice& c = choices_[index];
    if (ends_in_error(c, ev)) return fail(ev.error);
    std::vector<recipe::OutputDelta> tail = c.parser.finish();
    c.reason = c.parser.finish_reason(generation_end(ev.finish_reason));
    c.usage = response_usage(ev.usage);
    c.usage.completion_tokens = c.parser.completion_tokens();
    c.usage.reasoning_tokens = c.parser.reasoning_tokens();
    c.stop_sequence = c.parser.matched_stop_sequence();
    if (streaming_) {
      write_frames(*out_, c.responder->on_deltas(tail, {}));
      if (choices_.size() > 1) write_frames(*out_, c.responder->finish_choice(c.reason));
    } else {
      c.collected.add(tail);
    }
    if (--n_open_ > 0) return;
    closed_ = true;
    if (choices_.size() == 1) {
      if (streaming_) {
        write_frames(*out_, c.responder->finish(c.reason, c.stop_sequence, c.usage));
        out_->end_stream();
      } else {
        out_->send_json(200, recipe::dump_json(c.responder->body(c.collected, c.reason, c.stop_sequence,
                                                                 c.usage, c.logprobs)));
      }
      return;
    }
    const recipe::ResponseUsage total = total_usage();
    if (streaming_) {
      write_frames(*out_, choices_[0].responder->end_stream(total));
      out_->end_stream();
      return;
    }
    std::vector<recipe::Json> bodies;
    for (Choice& each : choices_)
      bodies.push_back(
          each.responder->body(each.collected, each.reason, each.stop_sequence, each.usage, each.logprobs));
    out_->send_json(200, recipe::dump_json(recipe::openai_merge_choices(std::move(bodies), total)));
  }

  // `n` > 1: the prompt once (choice 0's split: the siblings' hits are its blocks), the
  // completions of every choice.
  recipe::ResponseUsage total_usage() const {
    recipe::ResponseUsage total = choices_[0].usage;
    total.completion_tokens = 0;
    total.reasoning_tokens = 0;
    for (const Choice& c : choices_) {
      total.completion_tokens += c.usage.completion_tokens;
      total.reasoning_tokens += c.usage.reasoning_tokens;
    }
    return total;
  }

  // The engine's counts; with cache directives also the prompt tokens this request wrote into the
  // prefix cache: its full blocks past the hit (all of them are committed once the prompt is computed).
  recipe::ResponseUsage response_usage(const TokenUsage& engine_usage) const {
    recipe::ResponseUsage usage;
    usage.prompt_tokens = engine_usage.prompt_tokens;
    usage.prompt_cache_hit_tokens = engine_usage.cached_prompt_tokens;
    if (report_cache_creation_ && config_.engine->config().enable_prefix_caching) {
      const int64_t block = config_.engine->kv_cache_config().block_size_tokens;
      const int64_t full = block > 0 ? engine_usage.prompt_tokens / block * block : 0;
      usage.cache_creation_tokens = std::max<int64_t>(0, full - engine_usage.cached_prompt_tokens);
    }
    return usage;
  }

  // Inter-token latency, one observation per token after the first: the time since the choice's
  // previous token event split evenly over this event's tokens (an event may carry several, e.g.
  // when detokenization held back part of a character). Tokens that come with the first one have
  // no measurable gap and count as 0.
  void observe_inter_token_latency(Choice& c, size_t n_tokens) {
    if (config_.metrics == nullptr || n_tokens == 0) return;
    const SteadyTime now = std::chrono::steady_clock::now();
    Histogram& itl = config_.metrics->inter_token_latency_seconds;
    if (c.last_token_at == SteadyTime{}) {
      for (size_t i = 1; i < n_tokens; ++i) itl.observe(0.0);
    } else {
      const double per_token_s =
          std::chrono::duration<double>(now - c.last_token_at).count() / static_cast<double>(n_tokens);
      for (size_t i = 0; i < n_tokens; ++i) itl.observe(per_token_s);
    }
    c.last_token_at = now;
  }

  void record_metrics(const Choice& c, const TokenEvent& ev) {
    if (config_.metrics == nullptr) return;
    ServingMetrics& m = *config_.metrics;
    m.record_request_finished(c.stopped ? "stop" : finish_reason_name(ev.finish_reason));
    const SteadyTime now = std::chrono::steady_clock::now();
    if (double s = seconds_between(ev.queued_at, ev.first_token_at); s >= 0)
      m.time_to_first_token_seconds.observe(s);
    if (double s = seconds_between(ev.queued_at, ev.first_scheduled_at); s >= 0) {
      m.request_queue_time_seconds.observe(s);
    }
    if (double s = seconds_between(ev.queued_at, now); s >= 0) m.e2e_request_latency_seconds.observe(s);
  }

  std::shared_ptr<const GenerateRoutesConfig> config_ptr_;  // keeps config_ alive past the server
  const GenerateRoutesConfig& config_;
  std::shared_ptr<ResponseChannel> out_;
  std::mutex events_mu_;  // guards everything below up to mu_
  bool begun_ = false;
  bool frames_opened_ = false;                               // a stream's opening frames were written
  std::vector<std::pair<size_t, TokenEvent>> early_events_;  // arrived before begin()
  std::vector<Choice> choices_;
  std::vector<Request> sibling_requests_;  // choices 1..n-1, until choice 0's first event
  size_t n_open_ = 0;                      // choices not finished yet
  bool closed_ = false;                    // the response has ended (all choices, or an error)
  const bool streaming_;
  const bool logprobs_wanted_;
  const bool report_cache_creation_;
  std::mutex mu_;
  std::vector<RequestId> engine_ids_;  // guarded by mu_; 0 until submitted
  std::vector<bool> cancel_pending_;   // guarded by mu_: cancel that choice as soon as its id is known
  bool cancel_all_pending_ = false;    // guarded by mu_: cancel every choice as soon as its id is known
};

std::optional<std::string> prefill_peer_of(const ServerRequest& request) {
  std::optional<std::string_view> v = request.header(kPrefillPeerHeader);
  if (!v || v->empty()) return std::nullopt;
  return std::string(*v);
}

// The API's names for the prompt and max_tokens, for a 400 about the context length.
struct ContextFields {
  std::string_view prompt;
  std::string_view max_tokens;
};

void submit_generation(const std::shared_ptr<const GenerateRoutesConfig>& config,
                       const std::shared_ptr<ResponseChannel>& out, std::shared_ptr<GenerationCall> call,
                       Request request, std::shared_ptr<void> lease);

// Submits the first choice's request (P/D decode role with a prefill peer: after its KV import;
// the call submits the other choices after it) and answers through `out`; errors before the first
// byte are plain errors.
void run_generation(const std::shared_ptr<const GenerateRoutesConfig>& config,
                    const std::shared_ptr<ResponseChannel>& out, std::shared_ptr<GenerationCall> call,
                    std::vector<Request> requests, ContextFields fields,
                    std::optional<std::string> prefill_peer) {
  Request& request = requests[0];
  const auto n_prompt_tokens = static_cast<int64_t>(request.prompt_tokens.size());
  // The engine refuses this too; here the error names what to shorten: the prompt when it leaves
  // no room for one token, else max_tokens.
  const int64_t max_seq_len = config->engine->config().scheduler.max_seq_len;
  if (n_prompt_tokens + request.stop.max_tokens > max_seq_len) {
    return out->send_error(recipe::field_error(
        n_prompt_tokens >= max_seq_len ? fields.prompt : fields.max_tokens,
        fmt::format("the maximum context length is {} tokens; this request needs {} ({} in the prompt, {} "
                    "for the output)",
                    max_seq_len, n_prompt_tokens + request.stop.max_tokens, n_prompt_tokens,
                    request.stop.max_tokens)));
  }
  call->set_sibling_requests(std::vector<Request>(std::make_move_iterator(requests.begin() + 1),
                                                  std::make_move_iterator(requests.end())));
  if (config->kv_import && prefill_peer) {
    config->kv_import(
        std::move(*prefill_peer), std::move(request), [out] { return out->closed(); },
        [config, out, call](Request r, std::shared_ptr<void> lease) {
          submit_generation(config, out, call, std::move(r), std::move(lease));
        });
    return;
  }
  submit_generation(config, out, std::move(call), std::move(request), nullptr);
}

// Submits choice 0 to the engine; `lease` (P/D: the imported KV) lives until its last event.
void submit_generation(const std::shared_ptr<const GenerateRoutesConfig>& config,
                       const std::shared_ptr<ResponseChannel>& out, std::shared_ptr<GenerationCall> call,
                       Request request, std::shared_ptr<void> lease) {
  Result<RequestId> id =
      config->engine->submit(std::move(request), [call, lease = std::move(lease)](TokenEvent&& ev) {
        (void)lease;  // held, not used: dropped with the sink after the last event
        GenerationCall::on_event(call, 0, std::move(ev));
      });
  if (!id.ok()) return out->send_error(id.status());
  call->set_engine_id(0, *id);
  call->begin();
  out->on_close([weak = std::weak_ptr<GenerationCall>(call)] {
    if (std::shared_ptr<GenerationCall> c = weak.lock()) c->cancel_all();
  });
}

// The engine requests of a request's `n` choices: choice i samples with seed + i (a request
// without a seed draws one per choice), all else equal.
std::vector<Request> choice_requests(Request first, int32_t n, const std::optional<int64_t>& seed) {
  std::vector<Request> out;
  for (int32_t i = 1; i < n; ++i) {
    Request r = first;
    r.sampling.seed = seed ? static_cast<uint64_t>(*seed) + static_cast<uint64_t>(i) : std::random_device{}();
    out.push_back(std::move(r));
  }
  out.insert(out.begin(), std::move(first));
  return out;
}

// Chat-shaped APIs (Chat Completions, Anthropic Messages, Responses): the ChatRequest is rendered
// with the model's encoding.
void handle_chat_like(const std::shared_ptr<const GenerateRoutesConfig>& config, const ServerRequest& request,
                      const std::shared_ptr<ResponseChannel>& out, ApiKind kind) {
  Result<recipe::ChatRequest> chat =
      kind == ApiKind::chat_completions
          ? recipe::parse_chat_completions_request(request.body, config->conversion)
      : kind == ApiKind::anthropic_messages
          ? recipe::parse_anthropic_messages_request(request.body, config->conversion)
          : recipe::parse_responses_request(request.body, config->conversion);
  if (!chat.ok()) return out->send_error(chat.status());
  recipe::EncodingOptions encoding;
  encoding.kind = config->encoding;
  Result<recipe::RenderedPrompt> prompt = recipe::render_prompt(*chat, encoding);
  if (!prompt.ok()) return out->send_error(prompt.status());
  Result<std::vector<int32_t>> ids = recipe::tokenize_prompt(*prompt, *config->tokenizer);
  if (!ids.ok()) return out->send_error(ids.status());

  // One responder per choice (only Chat Completions has `n`), all under one response id.
  std::vector<std::unique_ptr<recipe::ApiResponder>> responders;
  if (kind == ApiKind::chat_completions) {
    const recipe::ResponseMeta meta = response_meta(*config, *out, "chatcmpl-");
    for (int32_t i = 0; i < chat->sampling.n; ++i)
      responders.push_back(recipe::make_chat_responder(meta, {.thinking = chat->thinking,
                                                              .include_usage = chat->include_usage,
                                                              .logprobs = chat->sampling.logprobs,
                                                              .choice_index = i}));
  } else if (kind == ApiKind::anthropic_messages) {
    responders.push_back(recipe::make_anthropic_responder(response_meta(*config, *out, "msg_")));
  } else {
    responders.push_back(recipe::make_responses_responder(response_meta(*config, *out, "resp_")));
  }
  auto call = std::make_shared<GenerationCall>(config, out, recipe::output_parser_options(*chat, *prompt),
                                               std::move(responders), chat->stream, chat->sampling.logprobs,
                                               chat->cache.any());
  const ContextFields fields = kind == ApiKind::responses ? ContextFields{"input", "max_output_tokens"}
                                                          : ContextFields{"messages", "max_tokens"};
  Request engine_req =
      engine_request(chat->sampling, chat->user, chat->cache, std::move(ids).value(), *config);
  if (Status st = attach_output_constraint(chat->response_format, chat->thinking, *config->tokenizer,
                                           *config->engine, engine_req);
      !st.ok())
    return out->send_error(st);
  if (Status st =
          attach_tool_call_constraint(*chat, *prompt, *config->tokenizer, *config->engine, engine_req);
      !st.ok())
    return out->send_error(st);
  run_generation(
      config, out, std::move(call),
      choice_requests(std::move(engine_req), kind == ApiKind::chat_completions ? chat->sampling.n : 1,
                      chat->sampling.seed),
      fields, prefill_peer_of(request));
}

// Completions (legacy): the client's raw prompt, no template.
void handle_completions(const std::shared_ptr<const GenerateRoutesConfig>& config,
                        const ServerRequest& request, const std::shared_ptr<ResponseChannel>& out) {
  Result<recipe::CompletionRequest> completion =
      recipe::parse_completions_request(request.body, config->conversion);
  if (!completion.ok()) return out->send_error(completion.status());
  Result<std::vector<int32_t>> ids = recipe::encode_completion_prompt(*completion, *config->tokenizer);
  if (!ids.ok()) return out->send_error(ids.status());
  std::string echo;
  if (completion->echo) {
    if (completion->prompt_text) {
      echo = *completion->prompt_text;
    } else {
      Result<std::string> text = config->tokenizer->decode(*ids, /*skip_special=*/false);
      if (!text.ok()) return out->send_error(text.status());
      echo = std::move(text).value();
    }
  }
  const recipe::ResponseMeta meta = response_meta(*config, *out, "cmpl-");
  std::vector<std::unique_ptr<recipe::ApiResponder>> responders;
  for (int32_t i = 0; i < completion->sampling.n; ++i)
    responders.push_back(recipe::make_completions_responder(meta,
                                                            {.include_usage = completion->include_usage,
                                                             .logprobs = completion->sampling.logprobs,
                                                             .text_offset_start = 0,
                                                             .choice_index = i},
                                                            echo));
  auto call = std::make_shared<GenerationCall>(config, out, recipe::completions_parser_options(*completion),
                                               std::move(responders), completion->stream,
                                               completion->sampling.logprobs, completion->cache.any());
  Request engine_req = engine_request(completion->sampling, completion->user, completion->cache,
                                      std::move(ids).value(), *config);
  if (Status st = attach_output_constraint(completion->response_format, false, *config->tokenizer,
                                           *config->engine, engine_req);
      !st.ok())
    return out->send_error(st);
  run_generation(config, out, std::move(call),
                 choice_requests(std::move(engine_req), completion->sampling.n, completion->sampling.seed),
                 ContextFields{"prompt", "max_tokens"}, prefill_peer_of(request));
}

}  // namespace

Status add_generate_routes(RouteTable& router, const GenerateRoutesConfig& config) {
  if (config.engine == nullptr || config.tokenizer == nullptr)
    return Status(ErrorCode::invalid_argument, "generate routes need an engine and a tokenizer");
  // Handlers and in-flight calls share one copy of the config (calls may outlive the router).
  auto shared = std::make_shared<const GenerateRoutesConfig>(config);
  for (const ApiRoute& route : kGenerationRoutes) {
    const ApiKind kind = route.kind;
    HandlerFn fn = [shared, kind](ServerRequest req, std::shared_ptr<ResponseChannel> out) {
      if (kind == ApiKind::completions) return handle_completions(shared, req, out);
      handle_chat_like(shared, req, out, kind);
    };
    DS_TRY(router.add(std::string(route.method), std::string(route.path),
                      {route.error_style, RouteAccess::api_key}, std::move(fn)));
  }
  return ok_status();
}

}  // namespace ds::server
