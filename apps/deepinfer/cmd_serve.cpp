// deepinfer serve: the OpenAI-compatible HTTP server over one engine. Loads the checkpoint and its
// tokenizer, starts the engine and the HTTP server, prints the address it listens on, then waits
// for SIGINT/SIGTERM and shuts down in order: the server first (in-flight responses drain, the
// rest see on_close and cancel their engine requests), then the engine, then the model.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "client_api_keys.h"
#include "command_support.h"
#include "commands.h"
#include "decoder_replay_option.h"
#include "engine/engine.h"
#include "engine/model_loader.h"
#include "engine/testing/scripted_output_runner.h"
#include "ep_metrics.h"
#include "expert_parallel_option.h"
#include "http/http_server.h"
#include "http/metrics_registry.h"
#include "http/serving_metrics.h"
#include "kv_tier_metrics.h"
#include "kv_tier_options.h"
#include "kvcache/kv_event_publisher.h"
#include "model/model_registry.h"
#include "parallel/ep_step_runner.h"
#include "pd_roles.h"
#include "recipe/conversion_options.h"
#include "recipe/encoding.h"
#include "server/routes_cache_admin.h"
#include "server/routes_chat_page.h"
#include "server/routes_generate.h"
#include "server/routes_operational.h"
#include "speculative_option.h"
#include "tokenizer/tokenizer.h"
#include "weights/model_config.h"

namespace ds::embedded {
extern const std::string_view chat_page_html;  // web/chat.html
}

namespace ds::cli {

namespace {

struct ServeOptions {
  std::string model_dir;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::vector<std::string> api_keys;
  std::string api_key_file;
  std::vector<std::string> admin_api_keys;  // admin routes (GET /v1/cache/stats, DELETE /v1/cache)
  std::string admin_api_key_file;
  std::string kv_events_endpoint;  // "" = no KV events
  std::string kv_events_topic;
  std::string kv_events_replay_endpoint;  // "" = no replay socket
  size_t kv_events_buffer_steps = 10000;
  std::string served_model_name;  // "" = the model directory's name
  int64_t max_model_len = 4096;   // prompt + output tokens per request (capped by the checkpoint)
  int64_t default_max_tokens = 4096;
  int64_t kv_cache_mib = 1024;
  int32_t kv_pin_max_blocks = -1;  // cache.pin quota; -1 = a quarter of the pool
  int max_running = 64;
  int max_waiting = 1024;  // bounded admission queue: 429 + Retry-After beyond it
  int max_step_tokens = 2048;
  int retry_after_s = 1;
  // Request limits (serving-anchors §5): each violation is a 400 naming the field (413 for the body).
  size_t max_body_bytes = 32u << 20;
  size_t max_connections = 10000;
  recipe::RequestLimits limits;
  int io_threads = 1;
  std::string numerics = "production";
  std::string isa = "auto";
  int threads = 0;
  KvTierOptions kv_tiers;
  bool chat_page = true;                // GET / serves web/chat.html
  std::string testing_scripted_output;  // tests only: a script file for ScriptedOutputRunner
  std::string speculative_config;       // --speculative-config JSON ("" = off)
  bool jump_forward = false;            // --jump-forward (docs/grammar.md, Jump-forward)
  DecoderReplayFlags decoder_replay;    // --yoco-prefill-* (V4.1 decoder replay)
  PdOptions pd;                         // --role and the KV transfer flags (docs/pd.md)
  bool expert_parallel = false;         // under mpirun: rank R serves on --port + R
  ExpertParallelOptions ep;
};

// Blocks SIGINT/SIGTERM in this thread (and every thread it starts later), so sigwait() can take
// them in order; no signal handler, no global flag.
sigset_t block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

int run_serve(const ServeOptions& o) {
  const std::string cmd = "serve";
  if (Status st = check_default_model_dir(o.model_dir, DS_DEFAULT_MODEL_DIR); !st.ok())
    return report_usage_error(cmd, st.message());
  if (o.port < 0 || o.port > 65535) return report_usage_error(cmd, "--port must be in [0, 65535]");
  if (o.max_model_len < 2) return report_usage_error(cmd, "--max-model-len must be >= 2");
  if (o.default_max_tokens < 1) return report_usage_error(cmd, "--default-max-tokens must be >= 1");
  if (o.max_waiting < 1) return report_usage_error(cmd, "--max-waiting must be >= 1");
  if (o.limits.max_messages < 1 || o.limits.max_stop_bytes < 1 || o.limits.max_tokens_cap < 1 ||
      o.limits.max_choices < 1)
    return report_usage_error(
        cmd, "--max-messages, --max-stop-bytes, --max-tokens-cap and --max-choices must be >= 1");
  Result<Isa> isa = parse_isa_option(o.isa);
  if (!isa.ok()) return report_usage_error(cmd, isa.status().message());
  if (Status st = check_numerics_option(o.numerics); !st.ok()) return report_usage_error(cmd, st.message());
  Result<SpeculativeConfig> speculative = resolve_speculative_option(o.speculative_config);
  if (!speculative.ok()) return report_usage_error(cmd, speculative.status().message());
  Result<DecoderReplayOptions> decoder_replay = resolve_decoder_replay(o.decoder_replay);
  if (!decoder_replay.ok()) return report_usage_error(cmd, decoder_replay.status().message());

  // Expert parallelism (docs/expert-parallel.md): one HTTP front per rank on --port + rank (put
  // `deepinfer route` in front), each rank its own engine; the ranks step in lockstep (EpStepRunner).
  std::unique_ptr<ExpertParallelRuntime> ep;
  if (o.expert_parallel) {
    Result<std::unique_ptr<ExpertParallelRuntime>> started = ExpertParallelRuntime::start(o.model_dir, o.ep);
    if (!started.ok()) return report_error(cmd, started.status());
    ep = std::move(*started);
    if (o.port != 0 && o.port + ep->n_ranks() - 1 > 65535)
      return report_usage_error(cmd, "--port + ranks - 1 must be <= 65535");
  }
  server::ServerConfig server_config;
  server_config.host = o.host;
  server_config.port = static_cast<uint16_t>(o.port != 0 && ep ? o.port + ep->rank() : o.port);
  server_config.n_io_threads = o.io_threads;
  server_config.max_body_bytes = o.max_body_bytes;
  server_config.max_connections = o.max_connections;
  server_config.retry_after_s = o.retry_after_s;
  if (int rc = load_client_api_keys(cmd, o.api_keys, o.api_key_file, server_config.api_keys); rc != 0)
    return rc;
  if (int rc =
          load_client_api_keys(cmd, o.admin_api_keys, o.admin_api_key_file, server_config.admin_api_keys);
      rc != 0)
    return rc;
  // The admin routes exist only with an admin key of their own.
  server_config.enable_admin_routes = !server_config.admin_api_keys.empty();
  if (Status st = server::validate_server_config(server_config); !st.ok())
    return report_usage_error(cmd, st.message());

  Result<Tokenizer> tok = Tokenizer::load(o.model_dir);
  if (!tok.ok()) return report_error(cmd, tok.status());
  Result<ModelConfig> model_config = load_model_config(o.model_dir);
  if (!model_config.ok()) return report_error(cmd, model_config.status());
  Result<recipe::PromptEncodingKind> encoding =
      recipe::prompt_encoding_for_model_type(model_config->model_type);
  if (!encoding.ok()) return report_error(cmd, encoding.status());

  const int64_t max_model_len =
      model_config->max_position_embeddings > 0
          ? std::min<int64_t>(o.max_model_len, model_config->max_position_embeddings)
          : o.max_model_len;
  const sigset_t stop_signals = block_stop_signals();

  ModelOptions mo;
  mo.isa = *isa;
  mo.n_threads = resolve_threads(o.threads);
  mo.numerics = o.numerics;
  mo.decoder_replay = *decoder_replay;
  mo.max_seq_len = max_model_len;
  if (ep) mo.expert_exchange = &ep->exchange();
  Result<std::unique_ptr<ModelRunner>> model = load_model(o.model_dir, mo);
  if (!model.ok()) return report_error(cmd, model.status());
  EpStepRunner* ep_runner = nullptr;
  if (ep) {
    auto wrapped =
        std::make_unique<EpStepRunner>(std::move(*model), ep->comm(), ep->exchange(), ep->live_eplb());
    ep_runner = wrapped.get();
    *model = std::move(wrapped);
  }
  if (!o.testing_scripted_output.empty()) {
    Result<std::vector<testing::OutputScript>> scripts =
        testing::load_output_scripts(o.testing_scripted_output, *tok);
    if (!scripts.ok()) return report_error(cmd, scripts.status());
    std::fprintf(stderr, "deepinfer serve: TESTING: outputs forced by %zu script(s) from %s\n",
                 scripts->size(), o.testing_scripted_output.c_str());
    *model = std::make_unique<testing::ScriptedOutputRunner>(std::move(*model), std::move(scripts).value());
  }

  EngineConfig engine_config;
  engine_config.scheduler.max_running = o.max_running;
  engine_config.scheduler.max_waiting = o.max_waiting;
  engine_config.scheduler.max_step_tokens = o.max_step_tokens;
  engine_config.scheduler.max_seq_len = max_model_len;
  engine_config.kv_cache_bytes = o.kv_cache_mib << 20;
  engine_config.prefix_hash_seed = std::random_device{}();
  engine_config.speculative = *speculative;
  engine_config.jump_forward = o.jump_forward;
  engine_config.max_pinned_blocks = o.kv_pin_max_blocks;
  // KV events (docs/kvcache.md): bound before the engine starts, so no index change is missed.
  std::unique_ptr<KvEventPublisher> kv_events;
  if (!o.kv_events_endpoint.empty()) {
    KvEventPublisherConfig pc;
    pc.endpoint = o.kv_events_endpoint;
    pc.topic = o.kv_events_topic;
    pc.replay_endpoint = o.kv_events_replay_endpoint;
    pc.replay_buffer_batches = o.kv_events_buffer_steps;
    pc.format.block_size_tokens = engine_config.block_size_tokens > 0
                                      ? engine_config.block_size_tokens
                                      : default_block_size_tokens((*model)->kv_cache_layout());
    Result<std::unique_ptr<KvEventPublisher>> started = KvEventPublisher::start(pc);
    if (!started.ok()) return report_usage_error(cmd, started.status().message());
    kv_events = std::move(started).value();
    engine_config.kv_event_sink = [pub = kv_events.get()](std::vector<KvCacheEvent>&& events) {
      pub->publish(std::move(events));
    };
  }
  if (Status st = configure_kv_tiers(o.kv_tiers, o.model_dir, engine_config.kv_tiers); !st.ok())
    return report_error(cmd, st);
  Result<std::unique_ptr<PdRole>> pd_role = PdRole::configure(o.pd, o.model_dir, engine_config);
  if (!pd_role.ok()) return report_usage_error(cmd, pd_role.status().message());
  Result<std::unique_ptr<Engine>> engine = Engine::create(engine_config, **model, &*tok);
  if (!engine.ok()) return report_error(cmd, engine.status());
  Engine& eng = **engine;

  const std::string model_id =
      !o.served_model_name.empty()
          ? o.served_model_name
          : std::filesystem::path(o.model_dir).lexically_normal().filename().string();
  server::MetricsRegistry registry;
  server::ServingMetrics serving_metrics(registry);
  registry.add_collector([&eng, &serving_metrics] {
    const EngineStats s = eng.stats();
    serving_metrics.set_engine_sample(
        {.n_requests_running = static_cast<double>(s.n_running),
         .n_requests_waiting = static_cast<double>(s.n_waiting),
         .prefill_tokens_pending = static_cast<double>(s.prefill_tokens_pending),
         .kv_cache_usage = s.kv_usage,
         .prefix_cache_query_tokens = static_cast<double>(s.prefix_queries_tokens),
         .prefix_cache_hit_tokens = static_cast<double>(s.prefix_hit_tokens),
         .prompt_tokens = static_cast<double>(s.prompt_tokens_total),
         .generation_tokens = static_cast<double>(s.generation_tokens_total)});
  });
  if (engine_config.kv_tiers.open) add_kv_tier_metrics(registry, eng);
  if (ep_runner != nullptr) {
    add_ep_metrics(registry, *ep_runner, ep->rank(), ep->n_ranks());
  }
  add_spec_decode_metrics(registry, eng);
  if (engine_config.jump_forward) {
    server::Counter* forced = &registry.counter("deepinfer:jump_forward_tokens_total",
                                                "Output tokens a grammar forced, appended without sampling");
    registry.add_collector(
        [&eng, forced] { forced->set_total(static_cast<double>(eng.stats().jump_forward_tokens_total)); });
  }
  const Logger log(LogLevel::info);
  const int64_t started_unix_s =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();

  recipe::ConversionOptions conversion;
  // V3 has no thinking mode: thinking is off unless a request asks (and V3 encoding refuses it).
  conversion.default_thinking = *encoding != recipe::PromptEncodingKind::deepseek_v3;
  conversion.limits = o.limits;
  // A max_tokens that cannot fit the context is refused by the recipe with the field named.
  conversion.limits.max_tokens_cap = std::min(o.limits.max_tokens_cap, max_model_len);

  server::RouteTable router;
  if (Status st = server::add_operational_routes(router, {.model_id = model_id,
                                                          .max_model_len = max_model_len,
                                                          .created_unix_s = started_unix_s,
                                                          .tokenizer = &*tok,
                                                          .metrics = &registry,
                                                          .healthy = nullptr,
                                                          .ready = nullptr,
                                                          .retry_after_s = server_config.retry_after_s,
                                                          .chat_encoding = *encoding,
                                                          .conversion = conversion});
      !st.ok())
    return report_error(cmd, st);
  server::GenerateRoutesConfig generate{.engine = &eng,
                                        .tokenizer = &*tok,
                                        .encoding = *encoding,
                                        .conversion = conversion,
                                        .model_id = model_id,
                                        .default_max_tokens = o.default_max_tokens,
                                        .metrics = &serving_metrics,
                                        .log = &log,
                                        .kv_import = {}};
  if (Status st = (*pd_role)->attach(eng, **model, router, generate, registry, &log); !st.ok())
    return report_error(cmd, st);
  if (Status st = server::add_generate_routes(router, generate); !st.ok()) return report_error(cmd, st);

  if (server_config.enable_admin_routes) {
    server::CacheAdminRoutesConfig admin{.engine = &eng, .kv_events_stats = {}};
    if (kv_events) {
      admin.kv_events_stats = [pub = kv_events.get()] {
        const KvEventPublisherStats s = pub->stats();
        return nlohmann::ordered_json{{"endpoint", pub->endpoint()},
                                      {"batches_published", s.batches_published},
                                      {"events_published", s.events_published},
                                      {"batches_dropped", s.batches_dropped},
                                      {"replay_endpoint", pub->replay_endpoint()},
                                      {"replay_requests", s.replay_requests},
                                      {"batches_replayed", s.batches_replayed}};
      };
    }
    if (Status st = server::add_cache_admin_routes(router, admin); !st.ok()) return report_error(cmd, st);
  }
  if (o.chat_page) {
    if (Status st = server::add_chat_page_route(router, embedded::chat_page_html); !st.ok())
      return report_error(cmd, st);
  }
  Result<std::unique_ptr<server::HttpServer>> http =
      server::HttpServer::start(server_config, std::move(router), log, &serving_metrics);
  if (!http.ok()) return report_error(cmd, http.status());
  // Tests and scripts read this line for the port (--port 0 picks a free one).
  std::printf(
      "deepinfer serve: listening on http://%s:%u (model %s, %s encoding, max_model_len %lld, role %s)\n",
      o.host.c_str(), static_cast<unsigned>((*http)->port()), model_id.c_str(),
      recipe::prompt_encoding_name(*encoding), static_cast<long long>(max_model_len),
      pd::pd_role_name((*pd_role)->role()));
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  std::fprintf(stderr, "deepinfer serve: signal %d, shutting down\n", signal_number);
  (*http)->shutdown();
  (*pd_role)->stop();
  eng.shutdown();
  if (engine_config.speculative.enabled()) print_spec_decode_summary("deepinfer serve", eng.stats());
  if (engine_config.kv_tiers.open) {
    const EngineStats s = eng.stats();
    std::fprintf(
        stderr,
        "deepinfer serve: kv tiers: %lld restores, %lld restored tokens, %lld blocks written, %lld write "
        "jobs dropped\n",
        static_cast<long long>(s.kv_tier_restores), static_cast<long long>(s.kv_tier_restored_tokens),
        static_cast<long long>(s.kv_tier_blocks_written),
        static_cast<long long>(s.kv_tier_write_jobs_dropped));
  }
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, CommandContext& ctx) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* sub = app.add_subcommand("serve", "Serve the OpenAI/Anthropic-compatible HTTP API");
  o->model_dir = DS_DEFAULT_MODEL_DIR;
  sub->add_option(
         "--model", o->model_dir,
         "Checkpoint directory (config.json, safetensors, tokenizer); default: the built-in demo model "
         "(docs/demo-model.md)")
      ->capture_default_str();
  sub->add_option("--host", o->host, "Address to bind")->capture_default_str();
  sub->add_option("--port", o->port, "Port (0 = a free one, printed at start)")->capture_default_str();
  sub->add_option("--api-key", o->api_keys, "API key clients must send (repeatable)");
  sub->add_option("--api-key-file", o->api_key_file, "File of API keys, one per line (# comments)");
  sub->add_option("--admin-api-key", o->admin_api_keys,
                  "Admin key (repeatable) for GET /v1/cache/stats and DELETE /v1/cache; client keys get 403");
  sub->add_option("--admin-api-key-file", o->admin_api_key_file, "File of admin keys, one per line");
  CLI::Option* kv_events_opt = sub->add_option(
      "--kv-events-endpoint", o->kv_events_endpoint,
      "Publish KV events (vLLM's schema) on a ZeroMQ PUB socket bound here, e.g. tcp://127.0.0.1:5557");
  sub->add_option("--kv-events-topic", o->kv_events_topic, "Topic frame of every KV event message")
      ->capture_default_str();
  sub->add_flag("--jump-forward", o->jump_forward,
                "Structured output: append the tokens a grammar forces without sampling them (steps run "
                "synchronously for every request while on; docs/grammar.md)");
  sub->add_option("--kv-events-replay-endpoint", o->kv_events_replay_endpoint,
                  "ZeroMQ ROUTER socket bound here answers replay requests for missed KV event batches "
                  "(vLLM's protocol), e.g. tcp://127.0.0.1:5558")
      ->needs(kv_events_opt);
  sub->add_option("--kv-events-buffer-steps", o->kv_events_buffer_steps, "KV event batches kept for replay")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--served-model-name", o->served_model_name,
                  "Model id in responses (default: directory name)");
  sub->add_option("--max-model-len", o->max_model_len, "Prompt + output tokens per request")
      ->capture_default_str();
  sub->add_option("--default-max-tokens", o->default_max_tokens, "max_tokens when a request sets none")
      ->capture_default_str();
  sub->add_option("--kv-cache-mib", o->kv_cache_mib, "KV cache size")->capture_default_str();
  sub->add_option("--kv-pin-max-blocks", o->kv_pin_max_blocks,
                  "Pool blocks requests may pin with \"cache\": {\"pin\": true} (-1 = a quarter of the pool, "
                  "0 = none)")
      ->capture_default_str();
  sub->add_option("--max-running", o->max_running, "Requests decoded together")->capture_default_str();
  sub->add_option("--max-waiting", o->max_waiting,
                  "Requests queued for admission; beyond it: 429 + Retry-After")
      ->capture_default_str();
  sub->add_option("--max-step-tokens", o->max_step_tokens, "Tokens per engine step")->capture_default_str();
  sub->add_flag("!--no-chat-page", o->chat_page, "Do not serve the browser chat page at /");
  sub->add_option("--retry-after-s", o->retry_after_s, "Retry-After seconds on 429/503")
      ->capture_default_str();
  auto* limits = sub->add_option_group("Limits", "Per-request limits; a violation is a 400 naming the field");
  limits->add_option("--max-body-bytes", o->max_body_bytes, "Request body size (413 beyond)")
      ->capture_default_str();
  limits->add_option("--max-connections", o->max_connections, "Open connections (503 beyond)")
      ->capture_default_str();
  limits->add_option("--max-messages", o->limits.max_messages, "Messages per request")->capture_default_str();
  limits->add_option("--max-tools", o->limits.max_tools, "Tools per request")->capture_default_str();
  limits
      ->add_option("--max-choices", o->limits.max_choices,
                   "Largest `n` (choices per request) of Chat Completions and Completions")
      ->capture_default_str();
  limits
      ->add_option("--max-tool-schema-bytes", o->limits.max_tool_schema_bytes,
                   "One tool's parameter schema, as compact JSON")
      ->capture_default_str();
  limits->add_option("--max-stop-sequences", o->limits.max_stop_sequences, "Stop strings per request")
      ->capture_default_str();
  limits->add_option("--max-stop-bytes", o->limits.max_stop_bytes, "Bytes per stop string")
      ->capture_default_str();
  limits
      ->add_option("--max-tokens-cap", o->limits.max_tokens_cap,
                   "Largest max_tokens a request may ask for (also capped by --max-model-len)")
      ->capture_default_str();
  sub->add_option("--io-threads", o->io_threads, "HTTP io threads")->capture_default_str();
  sub->add_option("--isa", o->isa, "auto | reference | avx2 | avx512")->capture_default_str();
  sub->add_option("--numerics", o->numerics, kNumericsOptionHelp)->capture_default_str();
  sub->add_option("--threads", o->threads, "Worker threads (0 = all hardware threads)")
      ->capture_default_str();
  add_kv_tier_options(sub, o->kv_tiers);
  add_speculative_option(sub, o->speculative_config);
  add_decoder_replay_options(sub, o->decoder_replay);
  add_pd_options(sub, o->pd);
  sub->add_flag(
      "--expert-parallel", o->expert_parallel,
      "Run under mpirun: rank R serves on --port + R with only its experts; ranks step in lockstep");
  add_expert_parallel_options(sub, o->ep);
  sub->add_option("--testing-scripted-output", o->testing_scripted_output,
                  "FOR TESTS ONLY: JSON array of scripts (anchor + output text) that force the model's "
                  "tokens (docs/server.md, scripted output); never use in production")
      ->group("Testing");
  sub->callback([o, &ctx] {
    try {
      ctx.exit_code = run_serve(*o);
    } catch (const std::exception& e) {
      ctx.exit_code = report_error("serve", Status(ErrorCode::internal, e.what()));
    }
  });
}

}  // namespace ds::cli
