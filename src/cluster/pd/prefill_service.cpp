#include "cluster/pd/prefill_service.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "cluster/pd/layer_copies.h"
#include "cluster/pd/page_writes.h"
#include "cluster/pd/state_pages.h"
#include "engine/request_stream.h"
#include "http/response_channel.h"
#include "transport/control_message.h"
#include "transport/ucx_endpoint.h"
#include "transport/ucx_worker.h"

namespace ds::pd {

namespace {

using Clock = std::chrono::steady_clock;
using transport::ControlMessage;
using transport::ControlType;

int64_t ns_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
}

Result<PrefillService::Job> parse_job(const std::string& body, std::chrono::milliseconds max_wait) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  const auto bad = [](const char* what) {
    return Status(ErrorCode::invalid_argument, fmt::format("/v1/pd/prefill: {}", what));
  };
  if (!j.is_object()) return bad("the body is not a JSON object");
  PrefillService::Job job;
  if (!j.contains("request_id") || !j["request_id"].is_number_unsigned())
    return bad("request_id: expected u64");
  job.request_id = j["request_id"].get<uint64_t>();
  if (!j.contains("tokens") || !j["tokens"].is_array() || j["tokens"].empty())
    return bad("tokens: expected a non-empty array of token ids");
  for (const auto& t : j["tokens"]) {
    if (!t.is_number_integer()) return bad("tokens: expected integers");
    job.tokens.push_back(t.get<int32_t>());
  }
  if (j.contains("cache_salt") && j["cache_salt"].is_string())
    job.cache_salt = j["cache_salt"].get<std::string>();
  if (!j.contains("decode_host") || !j["decode_host"].is_string())
    return bad("decode_host: expected a string");
  job.decode_host = j["decode_host"].get<std::string>();
  if (!j.contains("decode_port") || !j["decode_port"].is_number_unsigned() ||
      j["decode_port"].get<uint64_t>() == 0 || j["decode_port"].get<uint64_t>() > 65535)
    return bad("decode_port: expected a port in [1, 65535]");
  job.decode_port = static_cast<uint16_t>(j["decode_port"].get<uint64_t>());
  std::chrono::milliseconds wait = max_wait;
  if (j.contains("timeout_ms") && j["timeout_ms"].is_number_unsigned())
    wait = std::min(wait, std::chrono::milliseconds(j["timeout_ms"].get<int64_t>()));
  job.deadline = Clock::now() + wait;
  return job;
}

// The decode side's next control frame for this request, authenticated; an abort is an error.
Result<ControlMessage> receive_from_decode(transport::UcxWorker& worker, const transport::UcxEndpoint& ep,
                                           const transport::SharedSecret& secret, uint64_t request_id,
                                           Clock::time_point deadline) {
  // Short slices: a decode server that died is noticed (endpoint failure) before the deadline.
  // A frame of an earlier request on this (kept) connection, e.g. an abort that came after it
  // ended, is skipped.
  for (;;) {
    Result<std::string> got = Status(ErrorCode::transport_timeout, "no frame from the decode server in time");
    while (Clock::now() < deadline) {
      got = worker.receive(std::min(deadline, Clock::now() + std::chrono::milliseconds(20)));
      if (got.ok()) break;
      if (ep.failed()) return Status(ErrorCode::transport_io, "the decode server went away");
    }
    DS_ASSIGN_OR_RETURN(std::string frame, std::move(got));
    DS_ASSIGN_OR_RETURN(ControlMessage m, transport::decode_control_message(frame, secret));
    if (m.request_id != request_id) continue;
    if (m.type == ControlType::abort)
      return Status(ErrorCode::transport_peer_mismatch, "the decode server aborted: " + m.payload);
    return m;
  }
}

// The remote keys of the grant's regions, unpacked once per transfer (index = region index).
Result<std::vector<transport::RemoteKey>> unpack_keys(transport::UcxEndpoint& ep,
                                                      const transport::KvGrant& grant) {
  std::vector<transport::RemoteKey> keys;
  keys.reserve(grant.regions.size());
  for (const transport::RemoteRegion& r : grant.regions) {
    DS_ASSIGN_OR_RETURN(transport::RemoteKey k, ep.unpack_remote_key(r.packed_rkey));
    keys.push_back(std::move(k));
  }
  return keys;
}

// The decode server's shared segment as this slot maps it, when the grant names one this process
// can open (same host, same user): kept per decode server between transfers and remapped when the
// grant names another (that server restarted). Null: the pages go over UCX; a segment that cannot be
// opened is remembered as such (not retried until the grant names another one) and logged once.
std::shared_ptr<const transport::SharedPageMapping> peer_segment(TransferSlot& slot, const std::string& host,
                                                                 uint16_t port,
                                                                 const transport::KvGrant& grant,
                                                                 const Logger* log) {
  const std::string peer = fmt::format("{}:{}", host, port);
  if (!grant.shared) return nullptr;
  const transport::SharedSegmentRef& want = *grant.shared;
  const auto same = [&](const transport::SharedSegmentRef& have) {
    return have.pid == want.pid && have.fd == want.fd && have.token == want.token && have.bytes >= want.bytes;
  };
  auto it = slot.peer_segments.find(peer);
  if (it != slot.peer_segments.end() && same(it->second.ref)) return it->second.mapping;
  TransferSlot::PeerSegment entry{want, nullptr, host, port};
  Result<std::unique_ptr<transport::SharedPageMapping>> mapped = transport::SharedPageMapping::open(want);
  if (mapped.ok()) {
    entry.mapping = std::move(mapped).value();
  } else if (log != nullptr) {
    log->log(LogLevel::info,
             "pd prefill: decode server {} shares its KV pool, not usable here ({}); puts go over UCX", peer,
             mapped.status().message());
  }
  std::shared_ptr<const transport::SharedPageMapping> out = entry.mapping;
  slot.peer_segments.insert_or_assign(peer, std::move(entry));
  return out;
}

}  // namespace

PrefillService::PrefillService(Engine& engine, std::shared_ptr<TransitTier> outbox,
                               std::shared_ptr<const PdIdentity> identity, PrefillServiceConfig config,
                               const Logger* log)
    : engine_(engine),
      outbox_(std::move(outbox)),
      identity_(std::move(identity)),
      config_(config),
      log_(log) {
  slots_ = std::make_unique<TransferSlots>(
      [this]() -> Result<std::unique_ptr<TransferSlot>> {
        auto slot = std::make_unique<TransferSlot>();
        DS_ASSIGN_OR_RETURN(slot->worker, transport::UcxWorker::create(config_.ucx));
        slot->staging.resize(
            std::max<size_t>(config_.staging_bytes, static_cast<size_t>(identity_->block_bytes)));
        DS_ASSIGN_OR_RETURN(slot->memory,
                            slot->worker->register_memory(slot->staging.data(), slot->staging.size()));
        if (config_.stream_puts) {
          slot->layer_staging.resize(slot->staging.size());
          DS_ASSIGN_OR_RETURN(slot->layer_memory, slot->worker->register_memory(slot->layer_staging.data(),
                                                                                slot->layer_staging.size()));
        }
        return slot;
      },
      [](TransferSlot& slot) {
        // Between transfers: keep the kept connections alive, close the failed ones (and unmap the
        // shared segments of their decode servers), and drop the frames of transfers that are over.
        slot.worker->progress();
        slot.worker->close_failed();
        std::erase_if(slot.peer_segments,
                      [&](const auto& kv) { return !slot.worker->has_peer(kv.second.host, kv.second.port); });
        while (slot.worker->receive(Clock::now()).ok()) {
        }
      },
      config_.max_transfers);
  if (Status st = slots_->prewarm(1); !st.ok() && log_ != nullptr)
    log_->log(LogLevel::warn, "pd prefill: no UCX transfer slot at start ({})", st.to_string());
}

PrefillService::~PrefillService() = default;

Result<PrefillService::Outcome> PrefillService::run(const Job& job) {
  const transport::SharedSecret& secret = identity_->secret;
  DS_ASSIGN_OR_RETURN(TransferSlots::Checkout slot, slots_->checkout());
  transport::UcxWorker* worker = slot->worker.get();
  // The connection to this decode slot is kept between transfers (made on the first one).
  DS_ASSIGN_OR_RETURN(transport::UcxEndpoint * ep, worker->connect_cached(job.decode_host, job.decode_port));
  // However this ends short of kv_written, the connection goes: nothing still in flight lands late.
  // Its shared segment's mapping, if any, goes with it.
  const std::string peer = fmt::format("{}:{}", job.decode_host, job.decode_port);
  struct CloseOnFailure {
    TransferSlot& slot;
    transport::UcxEndpoint* ep;
    const std::string& peer;
    bool done = false;
    ~CloseOnFailure() {
      if (done) return;
      slot.worker->close(ep);
      slot.peer_segments.erase(peer);
    }
  } close_on_failure{*slot, ep, peer};
  // Nothing is computed before the decode server proved it holds the secret and the same model.
  DS_TRY(ep->send(
      transport::encode_control_message(
          {ControlType::hello, job.request_id, transport::encode_peer_identity(identity_->peer_identity())},
          secret),
      job.deadline));
  DS_ASSIGN_OR_RETURN(ControlMessage accept,
                      receive_from_decode(*worker, *ep, secret, job.request_id, job.deadline));
  if (accept.type != ControlType::hello_accept)
    return Status(ErrorCode::transport_bad_message, "expected hello_accept from the decode server");
  DS_ASSIGN_OR_RETURN(transport::PeerIdentity theirs, transport::decode_peer_identity(accept.payload));
  DS_TRY(transport::check_peer_identity(identity_->peer_identity(), theirs));
  DS_ASSIGN_OR_RETURN(ControlMessage grant_msg,
                      receive_from_decode(*worker, *ep, secret, job.request_id, job.deadline));
  if (grant_msg.type != ControlType::kv_grant)
    return Status(ErrorCode::transport_bad_message, "expected kv_grant from the decode server");
  DS_ASSIGN_OR_RETURN(transport::KvGrant grant, transport::decode_kv_grant(grant_msg.payload));
  const std::vector<uint64_t> all_keys = identity_->transfer_keys(job.tokens, job.cache_salt);
  // The grant covers the last block_ids.size() transfer blocks — the ones before are the decode
  // server's own prefix-cache hits — in pages of the same layout as ours, and the state's pages.
  // State pages are as big as a KV block on both sides (state_pages.h).
  const int64_t state_pages = state_pages_for(identity_->state_bytes, identity_->block_bytes);
  const size_t n_kv = grant.block_ids.size();
  if (grant.block_bytes() != static_cast<uint64_t>(identity_->block_bytes) || n_kv > all_keys.size() ||
      static_cast<int64_t>(grant.state_pages.size()) != state_pages ||
      (state_pages > 0 && grant.state_page_bytes != static_cast<uint64_t>(identity_->block_bytes)))
    return Status(
        ErrorCode::transport_peer_mismatch,
        fmt::format("grant of {} blocks of {} bytes and {} state pages; this prompt has {} blocks of {} "
                    "bytes (and {} state pages)",
                    grant.block_ids.size(), grant.block_bytes(), grant.state_pages.size(), all_keys.size(),
                    identity_->block_bytes, state_pages));
  const std::vector<uint64_t> keys(all_keys.end() - static_cast<std::ptrdiff_t>(n_kv), all_keys.end());
  // Prefill of the transfer blocks' tokens only (the decode server computes the rest, at least the
  // last token, and samples): one sampled token (dropped), the blocks go to the outbox tier, and
  // the model's state after them (V4: window rings, compressor partial groups) comes back, so the
  // decode server continues exactly where this prefill stopped.
  Outcome outcome;
  const auto t_prefill = Clock::now();
  Request request;
  request.prompt_tokens.assign(
      job.tokens.begin(),
      job.tokens.begin() + static_cast<std::ptrdiff_t>(all_keys.size()) * identity_->block_size_tokens);
  request.export_state = true;
  request.cache_salt = job.cache_salt;
  request.stop.max_tokens = 1;
  request.stop.ignore_eos = true;
  request.detokenize = false;
  request.deadline = job.deadline;
  request.tier_write_chunks = config_.stream_puts;
  // The outbox stores only the blocks of transfers (client requests this server also serves leave
  // nothing there), and however this ends it keeps none of this prompt's: on success only the ones
  // not sent are left (the decode server's own hits, written before or with the sent ones); on a
  // failure the writer may still be copying: a short wait first.
  struct OutboxCleanup {
    TransitTier& outbox;
    const std::vector<uint64_t> expected;
    std::vector<uint64_t> keys;  // the ones not taken yet
    ~OutboxCleanup() {
      (void)outbox.take_all(keys, Clock::now() + std::chrono::milliseconds(300));
      outbox.unexpect(expected);  // a block the writer copies later is not kept
      outbox.drop(keys);
    }
  };
  const std::vector<uint64_t> prompt_keys =
      identity_->prompt_block_keys(request.prompt_tokens, job.cache_salt);
  OutboxCleanup cleanup{*outbox_, prompt_keys, prompt_keys};
  outbox_->expect(cleanup.expected);
  // The puts start as soon as the granted blocks reach the outbox: with stream_puts each prefill
  // chunk's completed blocks get there while the next chunks compute.
  DS_ASSIGN_OR_RETURN(std::vector<transport::RemoteKey> rkeys, unpack_keys(*ep, grant));
  const std::shared_ptr<const transport::SharedPageMapping> shared =
      config_.shared_memory ? peer_segment(*slot, job.decode_host, job.decode_port, grant, log_) : nullptr;
  PageWrites puts(*ep, grant, rkeys, slot->staging, shared.get(), job.deadline);
  // Streaming: the engine copies each layer's pages of the granted blocks a forward completes as
  // that layer ends (layer_copies.h) — same host, straight into the decode server's pool; else into
  // the slot's layer buffer, put from there on the next poll. The outbox then only supplies what was
  // not copied (this server's prefix-cache hits, what did not fit in the buffer).
  std::shared_ptr<LayerCopies> layers;
  if (config_.stream_puts && (shared || !slot->layer_staging.empty())) {
    layers = std::make_shared<LayerCopies>(
        engine_.kv_page_arrays(), grant, shared,
        shared ? std::span<std::byte>() : std::span<std::byte>(slot->layer_staging),
        static_cast<int64_t>(all_keys.size() - n_kv));
    if (layers->usable())
      request.kv_layer_sink = layers;
    else
      layers.reset();
  }
  struct CloseLayers {  // however this ends, no copy lands after it
    LayerCopies* layers;
    ~CloseLayers() {
      if (layers != nullptr) layers->close();
    }
  } close_layers{layers.get()};
  int64_t layer_puts = 0;  // puts of pages the layer copies staged
  const auto put_staged = [&]() -> Status {
    if (!layers || !layers->staged()) return ok_status();
    for (const LayerCopies::StagedPut& p : layers->take_staged()) {
      const transport::RemoteRegion* r = grant.region_of(p.remote, p.bytes);
      if (r == nullptr) return Status(ErrorCode::internal, "a layer put outside the grant's regions");
      DS_TRY(ep->put(slot->layer_staging.data() + p.offset, p.bytes, p.remote,
                     rkeys[static_cast<size_t>(r - grant.regions.data())]));
      ++layer_puts;
    }
    return ok_status();
  };
  size_t n_put = 0;       // granted blocks put so far (a prefix of keys)
  int64_t put_early = 0;  // of those, put while the prefill still ran
  const auto put_some = [&](std::vector<TierEntry> ready) -> Status {
    if (ready.empty()) return ok_status();
    for (size_t i = n_put; i < n_put + ready.size(); ++i) std::erase(cleanup.keys, keys[i]);  // taken
    // The blocks the layer copies already wrote need nothing more.
    std::vector<TierEntry> rest;
    std::vector<uint32_t> rest_ids;
    for (size_t i = 0; i < ready.size(); ++i) {
      if (layers && layers->complete(n_put + i)) {
        ++outcome.blocks_by_layer;
        continue;
      }
      rest.push_back(std::move(ready[i]));
      rest_ids.push_back(grant.block_ids[n_put + i]);
    }
    DS_TRY(write_blocks(puts, slot->staging.size(), rest, rest_ids, grant));
    n_put += ready.size();
    outcome.bytes += static_cast<int64_t>(ready.size()) * identity_->block_bytes;
    return ok_status();
  };
  RequestStream stream;
  DS_ASSIGN_OR_RETURN(RequestId engine_id, engine_.submit(std::move(request), stream.sink()));
  TokenEvent last;
  std::shared_ptr<const std::vector<std::byte>> state;
  const auto poll = std::chrono::milliseconds(config_.stream_puts ? 2 : 20);
  while (!stream.finished()) {
    std::optional<TokenEvent> ev = stream.next_until(Clock::now() + poll);
    if (ev) {
      if (ev->sequence_state) state = ev->sequence_state;
      last = std::move(*ev);
      continue;
    }
    if (Status st = put_staged(); !st.ok()) {
      engine_.cancel(engine_id);
      return st;
    }
    if (config_.stream_puts && n_put < keys.size()) {
      const size_t before = n_put;
      if (Status st = put_some(outbox_->take_ready(std::span(keys).subspan(n_put))); !st.ok()) {
        engine_.cancel(engine_id);
        return st;
      }
      put_early += static_cast<int64_t>(n_put - before);
    }
    // An abort from the decode side (its client left, its lease ended) cancels the prefill.
    worker->progress();
    Result<std::string> frame = worker->receive(Clock::now());
    if (frame.ok()) {
      Result<ControlMessage> m = transport::decode_control_message(*frame, secret);
      if (m.ok() && m->request_id != job.request_id) continue;  // an earlier request's late frame
      engine_.cancel(engine_id);
      return Status(ErrorCode::transport_peer_mismatch, "the decode server aborted during prefill: " +
                                                            (m.ok() ? m->payload : m.status().message()));
    }
    if (ep->failed()) {
      engine_.cancel(engine_id);
      return Status(ErrorCode::transport_io, "the decode server went away during prefill");
    }
  }
  if (last.finish_reason == FinishReason::error || last.finish_reason == FinishReason::deadline ||
      last.finish_reason == FinishReason::cancelled)
    return last.error.ok() ? Status(ErrorCode::transport_timeout, "the prefill did not finish") : last.error;
  const std::vector<uint64_t> rest(keys.begin() + static_cast<std::ptrdiff_t>(n_put), keys.end());
  std::optional<std::vector<TierEntry>> blocks = outbox_->take_all(rest, job.deadline);
  if (!blocks)
    return Status(ErrorCode::transport_timeout, "the prefilled blocks did not reach the outbox in time");
  outcome.prefill_ns = ns_since(t_prefill);
  outcome.queue_ns = std::max<int64_t>(
      0,
      std::chrono::duration_cast<std::chrono::nanoseconds>(last.first_scheduled_at - last.queued_at).count());
  outcome.blocks = static_cast<int64_t>(keys.size());
  outcome.blocks_early = put_early;
  // Only the pages the state fills (not the bound's padding).
  std::vector<std::vector<std::byte>> state_page_bytes;
  if (state_pages > 0) {
    if (!state) return Status(ErrorCode::internal, "the prefill exported no sequence state");
    const int64_t used =
        std::max<int64_t>(1, state_pages_for(static_cast<int64_t>(state->size()), identity_->block_bytes));
    if (used > state_pages)
      return Status(ErrorCode::internal,
                    fmt::format("a sequence state of {} bytes is past the model's bound of {}", state->size(),
                                identity_->state_bytes));
    DS_ASSIGN_OR_RETURN(state_page_bytes, pack_state_pages(*state, identity_->block_bytes, used));
    outcome.state_bytes = static_cast<int64_t>(state->size());
  }

  const auto t_transfer = Clock::now();
  DS_TRY(put_staged());  // the last forward's pages
  DS_TRY(put_some(std::move(*blocks)));
  DS_TRY(write_state(puts, state_page_bytes, grant));
  DS_TRY(puts.finish());
  if (layer_puts > 0) DS_TRY(ep->flush(job.deadline));  // the layer puts too (finish flushes only its own)
  outcome.puts = puts.puts() + layer_puts;
  outcome.shared_bytes = puts.shared_bytes() + (layers && !layers->staged() ? layers->bytes() : 0);
  outcome.bytes += static_cast<int64_t>(state_page_bytes.size()) * identity_->block_bytes;
  outcome.transfer_ns = ns_since(t_transfer);  // the tail after the prefill: what did not overlap it
  DS_TRY(ep->send(transport::encode_control_message({ControlType::kv_written, job.request_id, ""}, secret),
                  job.deadline));
  close_on_failure.done = true;
  return outcome;
}

Status PrefillService::add_routes(server::RouteTable& routes) {
  return routes.add(
      "POST", "/v1/pd/prefill", {server::ErrorStyle::openai, server::RouteAccess::api_key},
      [this](server::ServerRequest req, std::shared_ptr<server::ResponseChannel> out) {
        Result<Job> job = parse_job(req.body, config_.max_wait);
        if (!job.ok()) return out->send_error(job.status());
        if (std::find(config_.allowed_decode_hosts.begin(), config_.allowed_decode_hosts.end(),
                      job->decode_host) == config_.allowed_decode_hosts.end()) {
          stats_.refused_hosts.fetch_add(1);
          log_->log(LogLevel::warn, "pd prefill: decode_host '{}' is not one of --kv-decode-peer; refused",
                    job->decode_host.substr(0, 200));
          return out->send_error(Status(
              ErrorCode::invalid_argument,
              fmt::format("/v1/pd/prefill: decode_host '{}' is not one of this server's --kv-decode-peer",
                          job->decode_host.substr(0, 200))));
        }
        auto shared_job = std::make_shared<Job>(std::move(job).value());
        const bool started = jobs_.start(
            [this, shared_job, out] {
              Result<Outcome> r = run(*shared_job);
              if (!r.ok()) {
                stats_.failures.fetch_add(1);
                log_->log(LogLevel::warn, "pd prefill: request {} for decode {}:{} failed: {}",
                          shared_job->request_id, shared_job->decode_host, shared_job->decode_port,
                          r.status().to_string());
                return out->send_error(r.status());
              }
              stats_.transfers.fetch_add(1);
              stats_.blocks_sent.fetch_add(r->blocks);
              stats_.bytes_sent.fetch_add(r->bytes);
              stats_.puts.fetch_add(r->puts);
              stats_.shared_bytes.fetch_add(r->shared_bytes);
              stats_.blocks_by_layer.fetch_add(r->blocks_by_layer);
              stats_.blocks_early.fetch_add(r->blocks_early);
              stats_.prefill_ns.fetch_add(r->prefill_ns);
              stats_.transfer_ns.fetch_add(r->transfer_ns);
              if (config_.observe)
                config_.observe(static_cast<double>(r->prefill_ns) * 1e-9,
                                static_cast<double>(r->queue_ns) * 1e-9,
                                static_cast<double>(r->transfer_ns) * 1e-9);
              out->send_json(200, nlohmann::json{{"blocks", r->blocks},
                                                 {"bytes", r->bytes},
                                                 {"prefill_ms", static_cast<double>(r->prefill_ns) / 1e6},
                                                 {"transfer_ms", static_cast<double>(r->transfer_ns) / 1e6}}
                                      .dump());
            },
            config_.max_transfers);
        if (!started)
          out->send_error(Status(ErrorCode::engine_overloaded, "every prefill transfer slot is busy"));
      });
}

}  // namespace ds::pd
