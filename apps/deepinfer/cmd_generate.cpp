// deepinfer generate: prefill a prompt, then decode token by token, streaming text to stdout.
// With --expert-parallel (under mpirun) every rank generates its own prompt and the MoE layers meet
// over MPI; a rank that has finished runs idle steps until every rank has (docs/expert-parallel.md).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "command_support.h"
#include "commands.h"
#include "decoder_replay_option.h"
#include "engine/model_loader.h"
#include "expert_parallel_option.h"
#include "model/model_registry.h"
#include "offline_batch.h"
#include "parallel/ep_step_runner.h"
#include "recipe/encoding.h"
#include "recipe/prompt.h"
#include "sampling/sampler.h"
#include "speculative_option.h"
#include "tokenizer/tokenizer.h"
#include "weights/model_config.h"

namespace ds::cli {

namespace {

struct GenerateOptions {
  std::string model_dir;
  std::string prompt;
  bool chat = false;
  bool thinking = false;
  int max_tokens = 64;
  float temperature = 0.0f;
  uint64_t seed = 0;
  std::string numerics = "production";
  std::string isa = "auto";
  int threads = 0;
  std::string input;               // offline batch: JSONL prompts
  std::string output;              // offline batch: JSONL results
  std::string speculative_config;  // --speculative-config JSON ("" = off)
  DecoderReplayFlags decoder_replay;
  bool expert_parallel = false;
  bool ep_stats = false;                  // print one 'ep_stats {json}' line per rank on stderr at the end
  std::vector<std::string> rank_prompts;  // "R=text": rank R generates this prompt instead of --prompt
  ExpertParallelOptions ep;
};

// Whether any rank still has a token to compute (one allgather per step).
Result<bool> any_rank_active(const MpiComm& comm, bool active) {
  std::vector<int64_t> all;
  DS_TRY(comm.allgather_i64(active ? 1 : 0, all));
  return std::any_of(all.begin(), all.end(), [](int64_t v) { return v != 0; });
}

// 64-token blocks, or the least multiple of 64 that splits no compression group (V4-Flash and
// the V4 bench preset have ratio 128 layers; the block must hold whole groups).

// Without --chat: BOS (when the tokenizer adds it by default) + the text with special tokens
// parsed. With --chat on a V3 checkpoint, DeepSeek-V3's format as ids: BOS, <｜User｜>, the text
// as plain BPE, <｜Assistant｜> (template markers are special ids; user text never is). V4 and
// later render one user message with the recipe's encoding for their model_type.
Result<std::vector<int32_t>> encode_prompt(const Tokenizer& tok, const GenerateOptions& o,
                                           const std::string& model_type) {
  std::vector<int32_t> ids;
  if (!o.chat) {
    if (tok.add_bos_by_default() && tok.bos_id() >= 0) ids.push_back(tok.bos_id());
    DS_ASSIGN_OR_RETURN(std::vector<int32_t> text, tok.encode(o.prompt, /*parse_special=*/true));
    ids.insert(ids.end(), text.begin(), text.end());
    return ids;
  }
  const Result<recipe::PromptEncodingKind> kind = recipe::prompt_encoding_for_model_type(model_type);
  if (kind.ok() && *kind != recipe::PromptEncodingKind::deepseek_v3) {
    recipe::ChatRequest request;
    recipe::Message user;
    user.role = recipe::Role::user;
    user.content = o.prompt;
    request.messages.push_back(std::move(user));
    request.thinking = o.thinking;
    recipe::EncodingOptions encoding;
    encoding.kind = *kind;
    DS_ASSIGN_OR_RETURN(recipe::RenderedPrompt rendered, recipe::render_prompt(request, encoding));
    return recipe::tokenize_prompt(rendered, tok);
  }
  // V3 (and V2-style checkpoints, which the recipe has no encoding for) keep this path; the
  // recipe's V3 encoding renders the same BOS, <｜User｜>, text, <｜Assistant｜> for one message.
  if (o.thinking) {
    return Status(ErrorCode::model_unsupported, o.model_dir + "/config.json: --thinking: model_type " +
                                                    model_type + " has no thinking mode");
  }
  const std::optional<int32_t> user = tok.token_to_id("<｜User｜>");
  const std::optional<int32_t> assistant = tok.token_to_id("<｜Assistant｜>");
  if (!user || !assistant) {
    return Status(ErrorCode::tokenizer_bad_file,
                  o.model_dir + "/tokenizer.json: no <｜User｜>/<｜Assistant｜> tokens for --chat");
  }
  if (tok.bos_id() >= 0) ids.push_back(tok.bos_id());
  ids.push_back(*user);
  DS_ASSIGN_OR_RETURN(std::vector<int32_t> text, tok.encode(o.prompt, /*parse_special=*/false));
  ids.insert(ids.end(), text.begin(), text.end());
  ids.push_back(*assistant);
  return ids;
}

// With --speculative-config the prompt runs through the engine (drafting and verification live
// there), one request, its text streamed as it comes.
int generate_with_engine(const std::string& cmd, const GenerateOptions& o,
                         const SpeculativeConfig& speculative, ModelRunner& m, const Tokenizer& tok,
                         std::vector<int32_t> prompt, Isa isa, int n_threads) {
  EngineConfig cfg;
  cfg.scheduler.max_running = 1;
  cfg.scheduler.max_seq_len = static_cast<int64_t>(prompt.size()) + o.max_tokens;
  // Blocks for the one sequence and its draft positions (64-token blocks, or the model's multiple).
  cfg.block_size_tokens = default_block_size_tokens(m.kv_cache_layout());
  cfg.n_kv_blocks = static_cast<int32_t>(
      (cfg.scheduler.max_seq_len + speculative.num_speculative_tokens + cfg.block_size_tokens) /
          cfg.block_size_tokens +
      1);
  cfg.speculative = speculative;
  Result<std::unique_ptr<Engine>> engine = Engine::create(cfg, m, &tok);
  if (!engine.ok()) return report_error(cmd, engine.status());
  Request r;
  r.prompt_tokens = std::move(prompt);
  r.sampling = SamplingParams{o.temperature, o.seed};
  r.stop.max_tokens = o.max_tokens;
  const size_t n_prompt = r.prompt_tokens.size();
  RequestStream stream;
  const double t0 = now_seconds();
  if (Result<RequestId> id = (*engine)->submit(std::move(r), stream.sink()); !id.ok())
    return report_error(cmd, id.status());
  double first_token_s = 0.0;
  int64_t n_generated = 0;
  Status error;
  while (std::optional<TokenEvent> event = stream.next()) {
    if (n_generated == 0 && !event->tokens.empty()) first_token_s = now_seconds() - t0;
    n_generated += static_cast<int64_t>(event->tokens.size());
    std::fwrite(event->text.data(), 1, event->text.size(), stdout);
    std::fflush(stdout);
    if (event->finished) {
      n_generated = event->usage.completion_tokens;
      error = event->error;
    }
  }
  std::fputc('\n', stdout);
  const double total_s = now_seconds() - t0;
  (*engine)->shutdown();
  if (!error.ok()) return report_error(cmd, error);
  const double decode_s = total_s - first_token_s;
  std::fprintf(stderr,
               "prompt tokens: %zu, generated tokens: %lld, time to first token: %.3f s, decode: %.1f tok/s "
               "(isa %s, %d threads)\n",
               n_prompt, static_cast<long long>(n_generated), first_token_s,
               decode_s > 0 && n_generated > 1 ? static_cast<double>(n_generated - 1) / decode_s : 0.0,
               std::string(isa_name(isa)).c_str(), n_threads);
  print_spec_decode_summary(cmd.c_str(), (*engine)->stats());
  return 0;
}

int run_generate(const GenerateOptions& o) {
  const std::string cmd = "generate";
  if (Status st = check_default_model_dir(o.model_dir, DS_DEFAULT_MODEL_DIR); !st.ok())
    return report_usage_error(cmd, st.message());
  Result<SpeculativeConfig> speculative = resolve_speculative_option(o.speculative_config);
  if (!speculative.ok()) return report_usage_error(cmd, speculative.status().message());
  Result<DecoderReplayOptions> decoder_replay = resolve_decoder_replay(o.decoder_replay);
  if (!decoder_replay.ok()) return report_usage_error(cmd, decoder_replay.status().message());
  if (!o.input.empty())
    return run_offline_batch({.model_dir = o.model_dir,
                              .input_path = o.input,
                              .output_path = o.output,
                              .defaults = {o.max_tokens, o.temperature, o.seed},
                              .isa = o.isa,
                              .threads = o.threads,
                              .numerics = o.numerics,
                              .speculative = *speculative,
                              .decoder_replay = *decoder_replay});
  if (o.expert_parallel && !o.input.empty())
    return report_usage_error(cmd, "--expert-parallel runs one --prompt per rank (no --input)");
  if (!o.expert_parallel && !o.rank_prompts.empty())
    return report_usage_error(cmd, "--rank-prompt needs --expert-parallel");
  std::unique_ptr<ExpertParallelRuntime> ep;
  GenerateOptions mine = o;
  if (o.expert_parallel) {
    Result<std::unique_ptr<ExpertParallelRuntime>> started = ExpertParallelRuntime::start(o.model_dir, o.ep);
    if (!started.ok()) return report_error(cmd, started.status());
    ep = std::move(*started);
    const std::string key = std::to_string(ep->rank()) + "=";
    for (const std::string& r : o.rank_prompts)
      if (r.compare(0, key.size(), key) == 0) mine.prompt = r.substr(key.size());
  }
  if (mine.prompt.empty()) return report_usage_error(cmd, "--prompt or --input is required");
  if (o.max_tokens < 0) return report_usage_error(cmd, "--max-tokens must be >= 0");
  const SamplingParams params{o.temperature, o.seed};
  if (Status st = params.validate(); !st.ok())
    return report_usage_error(cmd, "--temperature: " + st.message());
  Result<Isa> isa = parse_isa_option(o.isa);
  if (!isa.ok()) return report_usage_error(cmd, isa.status().message());
  if (Status st = check_numerics_option(o.numerics); !st.ok()) return report_usage_error(cmd, st.message());

  if (o.thinking && !o.chat) return report_usage_error(cmd, "--thinking needs --chat");

  Result<Tokenizer> tok = Tokenizer::load(o.model_dir);
  if (!tok.ok()) return report_error(cmd, tok.status());
  Result<ModelConfig> config = load_model_config(o.model_dir);
  if (!config.ok()) return report_error(cmd, config.status());
  Result<std::vector<int32_t>> prompt = encode_prompt(*tok, mine, config->model_type);
  if (!prompt.ok()) return report_error(cmd, prompt.status());
  if (prompt->empty()) return report_usage_error(cmd, "the prompt encodes to no tokens");

  ModelOptions mo;
  mo.isa = *isa;
  mo.n_threads = resolve_threads(o.threads);
  mo.numerics = o.numerics;
  mo.decoder_replay = *decoder_replay;
  mo.max_seq_len = static_cast<int64_t>(prompt->size()) + o.max_tokens;
  if (ep) mo.expert_exchange = &ep->exchange();
  Result<std::unique_ptr<ModelRunner>> model = load_model(o.model_dir, mo);
  if (!model.ok()) return report_error(cmd, model.status());
  ModelRunner& m = **model;
  if (speculative->enabled()) {
    if (o.max_tokens < 1)
      return report_usage_error(cmd, "--max-tokens must be >= 1 with --speculative-config");
    if (!ep)
      return generate_with_engine(cmd, o, *speculative, m, *tok, std::move(*prompt), *isa, mo.n_threads);
    // Under expert parallelism the engine's forwards (and MTP drafts) step in lockstep with the
    // other ranks through EpStepRunner, as in serve; destroying it is the ranks' collective leave.
    auto runner =
        std::make_unique<EpStepRunner>(std::move(*model), ep->comm(), ep->exchange(), ep->live_eplb());
    const int rc =
        generate_with_engine(cmd, o, *speculative, *runner, *tok, std::move(*prompt), *isa, mo.n_threads);
    runner.reset();
    if (o.ep_stats) std::fprintf(stderr, "ep_stats %s\n", ep->stats_json().c_str());
    return rc;
  }
  const int32_t eos_model = m.config().eos_token_id;
  const int32_t eos_tok = tok->eos_id();

  if (Status st = m.init_kv_cache(
          standalone_kv_cache_config(mo.max_seq_len, default_block_size_tokens(m.kv_cache_layout())));
      !st.ok())
    return report_error(cmd, st);
  SequenceState seq = make_standalone_sequence(m.kv_cache_config());
  seq.prompt_len = static_cast<int64_t>(prompt->size());
  LogitsOutput out;
  Sampler sampler;
  StreamDetokenizer detok(*tok, /*skip_special=*/false);

  // The checkpoint's vocab rows past the tokenizer's last id (129280 vs 128815 in V3) are padding
  // with no text: never sample them.
  const size_t n_sampled = static_cast<size_t>(std::min(m.config().vocab_size, tok->vocab_size()));

  const double t_prefill0 = now_seconds();
  ForwardRequest req{&seq, *prompt, false};
  if (Status st = m.forward({&req, 1}, out); !st.ok()) return report_error(cmd, st);
  const double prefill_s = now_seconds() - t_prefill0;

  // Live EPLB's view of the MoE layers (empty without --expert-parallel).
  const std::vector<RoutedExpertSet*> expert_sets =
      ep ? m.routed_expert_sets() : std::vector<RoutedExpertSet*>{};
  int n_generated = 0;
  int n_decode_steps = 0;
  double decode_s = 0.0;
  int32_t token = 0;
  bool done = o.max_tokens == 0;
  while (true) {
    if (!done) {
      token = sampler.sample({out.logits.row(0), n_sampled}, params, static_cast<uint64_t>(n_generated));
      ++n_generated;
      if (token == eos_model || token == eos_tok) {
        done = true;
      } else {
        Result<std::string> piece = detok.push(token);
        if (!piece.ok()) return report_error(cmd, piece.status());
        std::fwrite(piece->data(), 1, piece->size(), stdout);
        std::fflush(stdout);
        done = n_generated == o.max_tokens;
      }
    }
    if (ep) {
      if (!ep->exchange().status().ok()) return report_error(cmd, ep->exchange().status());
      Result<bool> any = any_rank_active(ep->comm(), !done);
      if (!any.ok()) return report_error(cmd, any.status());
      if (!*any) break;
      if (Status st = ep->after_step(expert_sets); !st.ok()) return report_error(cmd, st);
      if (done) {
        if (Status st = m.forward_idle(); !st.ok()) return report_error(cmd, st);
        continue;
      }
    } else if (done) {
      break;
    }
    const double t0 = now_seconds();
    ForwardRequest step{&seq, {&token, 1}, false};
    if (Status st = m.forward({&step, 1}, out); !st.ok()) return report_error(cmd, st);
    decode_s += now_seconds() - t0;
    ++n_decode_steps;
  }
  const std::string tail = detok.flush();
  std::fwrite(tail.data(), 1, tail.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  std::fprintf(
      stderr,
      "prompt tokens: %zu, generated tokens: %d, prefill: %.1f tok/s, decode: %.1f tok/s "
      "(isa %s, %d threads)\n",
      prompt->size(), n_generated, prefill_s > 0 ? static_cast<double>(prompt->size()) / prefill_s : 0.0,
      decode_s > 0 ? n_decode_steps / decode_s : 0.0, std::string(isa_name(*isa)).c_str(), mo.n_threads);
  if (ep && o.ep_stats) std::fprintf(stderr, "ep_stats %s\n", ep->stats_json().c_str());
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, CommandContext& ctx) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* sub = app.add_subcommand("generate", "Generate text from a prompt (greedy or sampled)");
  o->model_dir = DS_DEFAULT_MODEL_DIR;
  sub->add_option(
         "--model", o->model_dir,
         "Checkpoint directory (config.json, safetensors, tokenizer); default: the built-in demo model "
         "(docs/demo-model.md)")
      ->capture_default_str();
  sub->add_option("--prompt", o->prompt, "Prompt text");
  sub->add_option("--input", o->input, "JSONL prompts: offline batch inference, one request per line");
  sub->add_option("--output", o->output, "JSONL results, one line per input line, in input order");
  sub->add_flag(
      "--chat", o->chat,
      "Render the prompt as one user message in the model's chat format (V3, or the recipe's V4/V4.1 "
      "encoding; thinking off)");
  sub->add_flag("--thinking", o->thinking, "With --chat on V4/V4.1: start the reply inside <think>");
  sub->add_option("--max-tokens", o->max_tokens, "Maximum tokens to generate")->capture_default_str();
  sub->add_option("--temperature", o->temperature, "0 = greedy")->capture_default_str();
  sub->add_option("--seed", o->seed, "Sampling seed")->capture_default_str();
  sub->add_option("--isa", o->isa, "auto | reference | avx2 | avx512")->capture_default_str();
  sub->add_option("--numerics", o->numerics, kNumericsOptionHelp)->capture_default_str();
  sub->add_option("--threads", o->threads, "Worker threads (0 = all hardware threads)")
      ->capture_default_str();
  add_speculative_option(sub, o->speculative_config);
  add_decoder_replay_options(sub, o->decoder_replay);
  sub->add_flag("--expert-parallel", o->expert_parallel,
                "Run under mpirun: each rank its own prompt, only its experts; MoE layers meet over MPI");
  sub->add_option(
      "--rank-prompt", o->rank_prompts,
      "R=text: rank R generates this prompt instead of --prompt (with --expert-parallel; repeatable)");
  add_expert_parallel_options(sub, o->ep);
  sub->add_flag(
      "--ep-stats", o->ep_stats,
      "With --expert-parallel: print one 'ep_stats {json}' line per rank on stderr at the end (expert "
      "rows, all-to-all bytes and seconds)");
  sub->callback([o, &ctx] {
    try {
      ctx.exit_code = run_generate(*o);
    } catch (const std::exception& e) {
      ctx.exit_code = report_error("generate", Status(ErrorCode::internal, e.what()));
    }
  });
}

}  // namespace ds::cli
