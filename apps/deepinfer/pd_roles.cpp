#include "pd_roles.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "kv_tier_options.h"
#include "kvcache/tier_store.h"

namespace ds::cli {

namespace {
const std::vector<double> kBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                      0.25,  0.5,    1,     2.5,  5,     10,   30};
}  // namespace

void add_pd_options(CLI::App* sub, PdOptions& o) {
  auto* g = sub->add_option_group("Prefill/decode disaggregation", "docs/pd.md");
  g->add_option(
       "--role", o.role,
       "prefill: prefill for decode servers (POST /v1/pd/prefill); decode: import the KV of requests "
       "the router sends with a prefill server; both: a plain server")
      ->capture_default_str();
  g->add_option("--kv-transfer-secret-file", o.secret_file,
                "Shared secret of the prefill and decode servers (>= 16 bytes): authenticates the control "
                "messages and keys the transferred blocks");
  g->add_option("--kv-transfer-host", o.transfer_host, "Address of this decode server's UCX listeners")
      ->capture_default_str();
  g->add_option("--kv-lease-timeout-ms", o.lease_timeout_ms,
                "A decode server's wait for a transfer; past it the request is prefilled here")
      ->capture_default_str();
  g->add_option("--kv-transit-mib", o.transit_mib,
                "Prefill: the outbox of blocks in transit, at most; decode: the registered landing region "
                "of V4/V4.1 sequence states (the KV pages go straight into the pool)")
      ->capture_default_str();
  g->add_option("--kv-lease-pool-fraction", o.lease_pool_fraction,
                "Decode: at most this share of the KV pool is leased to transfers at once (beyond it, a "
                "request is prefilled here)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  g->add_option("--kv-transfer-slots", o.transfer_slots,
                "Decode: UCX transfer slots made at start, each with the KV pool registered (more are made "
                "when all are busy; on RDMA registering pins the pool, so make enough up front)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  g->add_option("--kv-stream-puts", o.stream_puts,
                "Prefill: put each block to the decode server as soon as the prefill chunk that completes it "
                "is done, overlapping the puts with the rest of the prefill (false: after the whole prefill)")
      ->capture_default_str();
  g->add_option(
       "--kv-shared-memory", o.shared_memory,
       "Decode: keep the KV pool in a shared-memory segment (memfd) that prefill servers on the same "
       "host, run by the same user, map and write with memcpy; prefill: use such a segment when a "
       "decode server offers one (false: UCX puts only; docs/pd.md)")
      ->capture_default_str();
  g->add_option("--kv-transport", o.transport,
                "UCX transports for the KV transfer, UCX_TLS syntax (docs/pd.md, Transports): e.g. tcp "
                "(any hosts), sm,tcp (same-host peers over shared memory), rc,sm,tcp (RDMA); default: "
                "UCX_TLS from the environment, else UCX's choice");
  g->add_option("--kv-decode-peer", o.decode_peers,
                "Prefill role: an address of a decode server's UCX listeners (its --kv-transfer-host) this "
                "server may connect to (repeatable); a request naming another is refused");
  g->add_option("--kv-prefill-api-key", o.prefill_api_key,
                "Decode role: the API key sent to the prefill servers (one of their --api-key; "
                "POST /v1/pd/prefill takes a key where the server has any)");
  g->add_option("--kv-prefill-peer", o.prefill_peers,
                "Decode role: a prefill server URL this server may take KV from (repeatable; the router's "
                "--prefill URLs). A request naming another one is prefilled here");
}

Result<std::unique_ptr<PdRole>> PdRole::configure(const PdOptions& o, const std::string& model_dir,
                                                  EngineConfig& engine_config) {
  auto r = std::unique_ptr<PdRole>(new PdRole());
  DS_ASSIGN_OR_RETURN(r->role_, pd::parse_pd_role(o.role));
  r->options_ = o;
  if (r->role_ == pd::PdRole::both) return r;
  if (o.secret_file.empty())
    return Status(ErrorCode::invalid_argument,
                  fmt::format("--role {} needs --kv-transfer-secret-file", o.role));
  if (o.lease_timeout_ms < 1)
    return Status(ErrorCode::invalid_argument, "--kv-lease-timeout-ms must be >= 1");
  if (o.transit_mib < 1) return Status(ErrorCode::invalid_argument, "--kv-transit-mib must be >= 1");
  if (r->role_ == pd::PdRole::prefill && o.decode_peers.empty())
    return Status(ErrorCode::invalid_argument,
                  "--role prefill needs --kv-decode-peer HOST (the decode servers' --kv-transfer-host it may "
                  "connect to; a request body alone never names one)");
  if (r->role_ == pd::PdRole::decode && o.prefill_peers.empty())
    return Status(ErrorCode::invalid_argument,
                  "--role decode needs --kv-prefill-peer URL (the prefill servers it may call; a request "
                  "header alone never names one)");
  r->identity_ = std::make_shared<pd::PdIdentity>();
  DS_ASSIGN_OR_RETURN(r->identity_->secret, pd::load_transfer_secret(o.secret_file));
  DS_ASSIGN_OR_RETURN(r->identity_->model_fingerprint, checkpoint_fingerprint(model_dir));
  const bool prefill = r->role_ == pd::PdRole::prefill;
  // The prefill server's outbox (its tier writer copies the prompt blocks there for the puts); the
  // decode server takes the pages straight into its pool and has no transit tier.
  if (prefill)
    r->tier_ = std::make_shared<pd::TransitTier>(pd::TransitTierConfig{
        .name = "pd-outbox",
        .only_expected = true,
        .max_bytes = o.transit_mib << 20,
    });
  // The engine keys its prefix cache with the tier seed: the same secret and model give both sides
  // the same block keys. With --kv-disk-dir / --kv-redis the transfer secret keys those tiers too.
  KvTierConfig& t = engine_config.kv_tiers;
  const std::function<Result<std::vector<std::shared_ptr<KvTier>>>(uint64_t)> open_local = t.open;
  t.model_fingerprint = r->identity_->model_fingerprint;
  t.secret.clear();
  for (char c : r->identity_->secret) t.secret.push_back(static_cast<std::byte>(c));
  // The decode server writes only to its own tiers, if it has any.
  t.writes = prefill || (open_local && t.writes);
  if (!prefill && o.shared_memory) {
    // The pool's pages (and the landing region's) in a segment same-host prefill servers can map.
    Result<std::shared_ptr<transport::SharedPageMemory>> shared =
        transport::SharedPageMemory::create("deepinfer-kv-pool");
    if (!shared.ok())
      return Status(ErrorCode::invalid_argument,
                    fmt::format("--kv-shared-memory: no shared segment for the KV pool ({}); start with "
                                "--kv-shared-memory false to keep it on the heap",
                                shared.status().message()));
    r->shared_pages_ = std::move(shared).value();
    engine_config.kv_memory = r->shared_pages_;
  }
  if (!prefill) {
    // The decode server's own cached blocks (its KV events), so only the rest is asked for.
    r->pool_ = std::make_shared<pd::PoolIndex>();
    engine_config.kv_event_sink =
        [pool = r->pool_, next = std::move(engine_config.kv_event_sink)](std::vector<KvCacheEvent>&& events) {
          pool->apply(events);
          if (next) next(std::move(events));
        };
  }
  r->namespace_id_ = std::make_shared<uint64_t>(0);
  r->local_tiers_ = std::make_shared<std::vector<std::shared_ptr<KvTier>>>();
  // Read in this order: the outbox first (prefill), then this server's SSD and Redis tiers.
  t.open = [tier = r->tier_, ns = r->namespace_id_, local = r->local_tiers_,
            open_local](uint64_t namespace_id) -> Result<std::vector<std::shared_ptr<KvTier>>> {
    *ns = namespace_id;
    std::vector<std::shared_ptr<KvTier>> tiers;
    if (tier) tiers.push_back(tier);
    if (open_local) {
      DS_ASSIGN_OR_RETURN(*local, open_local(namespace_id));
      tiers.insert(tiers.end(), local->begin(), local->end());
    }
    return tiers;
  };
  return r;
}

Status PdRole::attach(Engine& engine, const ModelRunner& model, server::RouteTable& routes,
                      server::GenerateRoutesConfig& generate, server::MetricsRegistry& registry,
                      const Logger* log) {
  if (role_ == pd::PdRole::both) return ok_status();
  identity_->namespace_id = *namespace_id_;
  identity_->block_size_tokens = engine.kv_cache_config().block_size_tokens;
  identity_->block_bytes = model.kv_block_bytes();
  identity_->state_bytes = model.sequence_state_bytes();
  if (identity_->namespace_id == 0 || identity_->block_bytes <= 0)
    return Status(ErrorCode::invalid_argument,
                  "--role prefill/decode needs prefix caching and a model that exports KV blocks");
  using server::Counter;
  using server::Gauge;
  if (role_ == pd::PdRole::prefill) {
    server::Histogram* prefill_h =
        &registry.histogram("deepinfer:pd_prefill_seconds",
                            "Per transfer: queue + prefill here until the blocks are ready.", kBuckets);
    server::Histogram* put_h = &registry.histogram(
        "deepinfer:pd_put_seconds",
        "Per transfer: UCX puts + flush into the decode server's blocks after the prefill ended.", kBuckets);
    pd::PrefillServiceConfig pc;
    pc.allowed_decode_hosts = options_.decode_peers;
    pc.ucx.tls = options_.transport;
    pc.stream_puts = options_.stream_puts;
    pc.shared_memory = options_.shared_memory;
    server::Histogram* queue_h = &registry.histogram("deepinfer:pd_prefill_queue_seconds",
                                                     "Per transfer: of deepinfer:pd_prefill_seconds, the "
                                                     "wait in this engine's queue before the prefill ran.",
                                                     kBuckets);
    pc.observe = [prefill_h, queue_h, put_h](double prefill_s, double queue_s, double put_s) {
      prefill_h->observe(prefill_s);
      queue_h->observe(queue_s);
      put_h->observe(put_s);
    };
    prefill_ = std::make_unique<pd::PrefillService>(engine, tier_, identity_, std::move(pc), log);
    DS_TRY(prefill_->add_routes(routes));
    Counter* transfers =
        &registry.counter("deepinfer:pd_prefill_transfers_total", "KV transfers completed (prefill side).");
    Counter* failures =
        &registry.counter("deepinfer:pd_prefill_failures_total", "KV transfers that failed (prefill side).");
    Counter* bytes =
        &registry.counter("deepinfer:pd_transfer_bytes_total", "KV bytes put to decode servers.");
    Counter* early =
        &registry.counter("deepinfer:pd_blocks_put_early_total",
                          "Blocks put to decode servers while their prefill still ran (--kv-stream-puts).");
    Counter* puts =
        &registry.counter("deepinfer:pd_puts_total",
                          "One-sided puts to decode servers (one per page array and run of blocks).");
    Counter* shared = &registry.counter(
        "deepinfer:pd_shared_bytes_total",
        "Of deepinfer:pd_transfer_bytes_total: copied into same-host decode servers' shared KV pools "
        "(--kv-shared-memory) instead of put over UCX.");
    Counter* by_layer = &registry.counter("deepinfer:pd_blocks_written_by_layer_total",
                                          "Blocks copied into same-host decode servers' pools layer by layer "
                                          "while the prefill's forwards ran.");
    Counter* prefill_s =
        &registry.counter("deepinfer:pd_prefill_seconds_total", "Prefill time of the transfers.");
    Counter* transfer_s = &registry.counter("deepinfer:pd_transfer_seconds_total",
                                            "Put + flush time of the transfers after their prefills ended "
                                            "(puts overlapping a prefill not counted).");
    Gauge* running = &registry.gauge("deepinfer:pd_prefill_transfers_running", "KV transfers in progress.");
    Counter* refused_hosts = &registry.counter(
        "deepinfer:pd_refused_decode_hosts_total",
        "Prefill requests naming a decode_host outside --kv-decode-peer (refused before any connection).");
    registry.add_collector([=, s = prefill_.get()] {
      const pd::PrefillStats& st = s->stats();
      running->set(static_cast<double>(s->n_running()));
      transfers->set_total(static_cast<double>(st.transfers.load()));
      failures->set_total(static_cast<double>(st.failures.load()));
      bytes->set_total(static_cast<double>(st.bytes_sent.load()));
      puts->set_total(static_cast<double>(st.puts.load()));
      shared->set_total(static_cast<double>(st.shared_bytes.load()));
      by_layer->set_total(static_cast<double>(st.blocks_by_layer.load()));
      early->set_total(static_cast<double>(st.blocks_early.load()));
      prefill_s->set_total(static_cast<double>(st.prefill_ns.load()) * 1e-9);
      transfer_s->set_total(static_cast<double>(st.transfer_ns.load()) * 1e-9);
      refused_hosts->set_total(static_cast<double>(st.refused_hosts.load()));
    });
    return ok_status();
  }
  pd::DecodeServiceConfig dc;
  dc.transfer_host = options_.transfer_host;
  dc.lease_timeout = std::chrono::milliseconds(options_.lease_timeout_ms);
  dc.landing_bytes = options_.transit_mib << 20;
  dc.prefill_api_key = options_.prefill_api_key;
  dc.prewarm_slots = options_.transfer_slots;
  dc.ucx.tls = options_.transport;
  dc.shared_pages = shared_pages_;
  server::Histogram* import_h = &registry.histogram(
      "deepinfer:pd_import_seconds",
      "Per import: lease start to kv_written (the TTFT part before this server's queue; the rest is "
      "deepinfer:time_to_first_token_seconds here)",
      kBuckets);
  dc.observe_import = [import_h](double s) { import_h->observe(s); };
  if (!local_tiers_->empty()) {
    dc.count_local_tier_blocks = [local = local_tiers_](std::span<const uint64_t> keys) {
      return count_prefix_across_tiers(*local, keys);
    };
  }
  lender_ = std::make_shared<pd::PoolLender>(engine, options_.lease_pool_fraction);
  decode_ = std::make_unique<pd::DecodeService>(lender_, identity_, pool_, dc, log);
  Counter* unknown_peers = &registry.counter(
      "deepinfer:pd_unknown_peers_total",
      "Requests naming a prefill server not in --kv-prefill-peer (prefilled here, no connection made).");
  generate.kv_import = [d = decode_.get(), allowed = options_.prefill_peers, log, unknown_peers](
                           std::string peers, Request request, std::function<bool()> client_gone,
                           std::function<void(Request, std::shared_ptr<void>)> resume) {
    const auto strip = [](std::string u) {
      while (!u.empty() && (u.back() == '/' || u.back() == ' ')) u.pop_back();
      while (!u.empty() && u.front() == ' ') u.erase(u.begin());
      return u;
    };
    // The router's list, its pick first ("url[, url...]"); only --kv-prefill-peer servers are called.
    std::vector<std::string> urls;
    for (size_t pos = 0; pos <= peers.size() && urls.size() < 16;) {
      const size_t comma = std::min(peers.find(',', pos), peers.size());
      const std::string peer = strip(peers.substr(pos, comma - pos));
      pos = comma + 1;
      if (peer.empty()) continue;
      bool known = false;
      for (const std::string& a : allowed) known = known || strip(a) == peer;
      if (known) {
        if (std::find(urls.begin(), urls.end(), peer) == urls.end()) urls.push_back(peer);
        continue;
      }
      unknown_peers->inc();
      if (log != nullptr)
        log->log(LogLevel::warn, "pd decode: prefill peer '{}' is not one of --kv-prefill-peer; not called",
                 peer.substr(0, 200));
    }
    d->start(std::move(urls), std::move(request), std::move(client_gone), std::move(resume));
  };
  Counter* imports =
      &registry.counter("deepinfer:pd_imports_total", "Requests whose prompt KV came from a prefill server.");
  Counter* retries = &registry.counter("deepinfer:pd_retries_total",
                                       "Transfers tried on the next prefill server after one failed.");
  Counter* fallbacks = &registry.counter("deepinfer:pd_fallbacks_total",
                                         "P/D requests prefilled here after a failed transfer.");
  Counter* refusals =
      &registry.counter("deepinfer:pd_refusals_total", "Prefill servers refused (secret, model, layout).");
  Counter* bytes =
      &registry.counter("deepinfer:pd_received_bytes_total", "KV bytes received from prefill servers.");
  Counter* transfer_s =
      &registry.counter("deepinfer:pd_import_seconds_total", "Lease start to kv_written, summed.");
  Counter* local =
      &registry.counter("deepinfer:pd_local_blocks_total",
                        "Prompt blocks of P/D requests found in this server's pool (not transferred).");
  Counter* local_tier = &registry.counter(
      "deepinfer:pd_local_tier_blocks_total",
      "Prompt blocks of P/D requests found in this server's SSD / Redis tiers (not transferred).");
  Gauge* leased = &registry.gauge("deepinfer:pd_leased_blocks",
                                  "Pool blocks held by transfers and by the requests they landed for, now.");
  Gauge* lent = &registry.gauge("deepinfer:pd_lent_blocks",
                                "Pool blocks the engine has lent out now (reserved for puts, landed and not "
                                "yet released, or held after a failed transfer until its put deadline).");
  Gauge* shared_bytes = &registry.gauge(
      "deepinfer:pd_shared_pool_bytes",
      "Bytes of the KV pool and landing region in the shared segment same-host prefill servers write "
      "(--kv-shared-memory; 0: off).");
  Gauge* slots = &registry.gauge("deepinfer:pd_transfer_slots",
                                 "UCX transfer slots (each with the KV pool registered) this server holds.");
  double shared_pool_bytes = 0;
  if (shared_pages_) {
    for (const transport::SharedRange& r : shared_pages_->ranges())
      shared_pool_bytes += static_cast<double>(r.bytes);
    if (log != nullptr)
      log->log(LogLevel::info,
               "pd decode: KV pool shared with same-host prefill servers ({:.1f} MiB in the segment, {:.1f} "
               "MiB on the heap)",
               shared_pool_bytes / (1 << 20), static_cast<double>(shared_pages_->heap_bytes()) / (1 << 20));
  }
  registry.add_collector([=, s = decode_.get(), e = &engine] {
    slots->set(static_cast<double>(s->n_slots()));
    shared_bytes->set(shared_pool_bytes);
    const pd::DecodeStats& st = s->stats();
    imports->set_total(static_cast<double>(st.imports.load()));
    retries->set_total(static_cast<double>(st.retries.load()));
    fallbacks->set_total(static_cast<double>(st.fallbacks.load()));
    refusals->set_total(static_cast<double>(st.refusals.load()));
    bytes->set_total(static_cast<double>(st.bytes_received.load()));
    transfer_s->set_total(static_cast<double>(st.transfer_ns.load()) * 1e-9);
    local->set_total(static_cast<double>(st.local_blocks.load()));
    local_tier->set_total(static_cast<double>(st.local_tier_blocks.load()));
    leased->set(static_cast<double>(st.leased_blocks.load()));
    lent->set(static_cast<double>(e->stats().kv_blocks_lent));
  });
  return ok_status();
}

void PdRole::stop() {
  prefill_.reset();
  decode_.reset();                 // its transfers end; its UCX registrations of the pool go
  if (lender_) lender_->detach();  // leases still in requests' sinks stop calling the engine
}

}  // namespace ds::cli
