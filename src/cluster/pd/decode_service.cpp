#include "cluster/pd/decode_service.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "cluster/pd/http_post.h"
#include "cluster/pd/state_pages.h"
#include "transport/control_message.h"
#include "transport/registered_memory.h"
#include "transport/ucx_endpoint.h"
#include "transport/ucx_worker.h"

namespace ds::pd {

namespace {

using Clock = std::chrono::steady_clock;
using transport::ControlMessage;
using transport::ControlType;

constexpr auto kPoll = std::chrono::milliseconds(20);

// What the prefill server answered to POST /v1/pd/prefill (on the HTTP thread).
struct PrefillCall {
  std::atomic<bool> done{false};
  std::atomic<bool> cancel{false};  // the transfer ended without it: close the connection
  Status status;
};

}  // namespace

// A frame no transfer of this slot waits for (`current`: the one that does, if any): a hello of a
// transfer that is over is answered with an abort, anything else is dropped. Returns whether it was
// stale.
bool DecodeService::answer_stale(transport::UcxWorker& worker, const transport::Frame& frame,
                                 std::optional<uint64_t> current) {
  Result<ControlMessage> m = transport::decode_control_message(frame.bytes, identity_->secret);
  if (!m.ok() || (current && m->request_id == *current)) return false;
  stats_->stale_frames.fetch_add(1);
  transport::UcxEndpoint* ep = worker.find(frame.from);
  if (m->type == ControlType::hello && ep != nullptr && !ep->failed())
    (void)ep->send(transport::encode_control_message(
                       {ControlType::abort, m->request_id, "no transfer of that request is waiting here"},
                       identity_->secret),
                   Clock::now() + std::chrono::milliseconds(200));
  return true;
}

// The pool blocks of one landed request, adopted as its prompt's cached blocks: unpinned when the
// request ends (the lease lives in its event sink); by then its own table holds the ones it uses.
struct DecodeService::Lease {
  std::shared_ptr<PoolLender> lender;
  std::shared_ptr<DecodeStats> stats;
  std::vector<int32_t> blocks;
  ~Lease() {
    lender->release(blocks);
    stats->leased_blocks.fetch_sub(static_cast<int64_t>(blocks.size()));
  }
};

DecodeService::DecodeService(std::shared_ptr<PoolLender> lender, std::shared_ptr<const PdIdentity> identity,
                             std::shared_ptr<const PoolIndex> pool, DecodeServiceConfig config,
                             const Logger* log)
    : lender_(std::move(lender)),
      identity_(std::move(identity)),
      pool_(std::move(pool)),
      config_(std::move(config)),
      log_(log),
      stats_(std::make_shared<DecodeStats>()),
      next_request_id_(std::random_device{}() | (uint64_t{std::random_device{}()} << 32)) {
  if (identity_->state_bytes > 0) {
    // The states' pages are as big as a KV block (both sides size them with state_pages_for).
    const auto page_bytes = static_cast<size_t>(std::max<int64_t>(identity_->block_bytes, 1));
    region_ = std::make_unique<LandingRegion>(
        page_bytes, std::max<size_t>(1, static_cast<size_t>(config_.landing_bytes) / page_bytes),
        config_.shared_pages);
  }
  if (config_.shared_pages) {  // the pool and the landing region are allocated: the segment is final
    shared_ref_ = config_.shared_pages->ref();
    shared_ranges_ = config_.shared_pages->ranges();
  }
  slots_ = std::make_unique<TransferSlots>(
      [this]() -> Result<std::unique_ptr<TransferSlot>> {
        auto slot = std::make_unique<TransferSlot>();
        DS_ASSIGN_OR_RETURN(slot->worker, transport::UcxWorker::create(config_.ucx));
        DS_TRY(slot->worker->listen(config_.transfer_host, 0));
        for (const PoolExtent& e : lender_->extents()) {
          DS_ASSIGN_OR_RETURN(std::unique_ptr<transport::RegisteredMemory> m,
                              slot->worker->register_memory(e.address, e.bytes));
          slot->pool_memory.push_back(std::move(m));
        }
        if (region_) {
          DS_ASSIGN_OR_RETURN(slot->memory, slot->worker->register_memory(region_->data(), region_->bytes()));
        }
        return slot;
      },
      [this](TransferSlot& slot) {
        // No transfer waits on this slot: peers that connect are kept, a hello is answered with an
        // abort (its lease is over), so a late prefill server stops at once.
        slot.worker->accept_pending();
        slot.worker->close_failed();
        for (;;) {
          Result<transport::Frame> frame = slot.worker->receive_frame(Clock::now());
          if (!frame.ok()) break;
          answer_stale(*slot.worker, *frame, std::nullopt);
        }
      },
      config_.max_transfers);
  // The first slot now: its UCX setup and the memory's registration are not paid by a request.
  if (Status st = slots_->prewarm(std::clamp(config_.prewarm_slots, 1, config_.max_transfers));
      !st.ok() && log_ != nullptr)
    log_->log(LogLevel::warn, "pd decode: no UCX transfer slot at start ({}); P/D requests prefill here",
              st.to_string());
}

DecodeService::~DecodeService() = default;

void DecodeService::start(std::vector<std::string> prefill_urls, Request request,
                          std::function<bool()> client_gone, Resume resume) {
  const std::vector<uint64_t> keys = identity_->transfer_keys(request.prompt_tokens, request.cache_salt);
  size_t first = static_cast<size_t>(pool_ ? pool_->count_prefix(keys) : 0);
  stats_->local_blocks.fetch_add(static_cast<int64_t>(first));
  if (config_.count_local_tier_blocks && first < keys.size()) {
    const int64_t in_tiers = config_.count_local_tier_blocks(std::span(keys).subspan(first));
    stats_->local_tier_blocks.fetch_add(in_tiers);
    first += static_cast<size_t>(in_tiers);
  }
  if (first == keys.size() || prefill_urls.empty()) {
    // Shorter than a block, or every block cached here: nothing to move.
    if (!keys.empty() && first == keys.size()) stats_->local_only.fetch_add(1);
    return resume(std::move(request), nullptr);
  }
  {
    // The servers that failed a transfer lately go last (stable: the router's order otherwise).
    std::lock_guard<std::mutex> lock(failed_mu_);
    const auto now = Clock::now();
    std::erase_if(failed_until_, [&](const auto& kv) { return kv.second <= now; });
    std::stable_partition(prefill_urls.begin(), prefill_urls.end(),
                          [&](const std::string& u) { return !failed_until_.contains(u); });
  }
  auto shared = std::make_shared<Request>(std::move(request));
  auto shared_resume = std::make_shared<Resume>(std::move(resume));
  const bool started = jobs_.start(
      [this, urls = std::move(prefill_urls), shared, first, client_gone = std::move(client_gone),
       shared_resume] {
        for (size_t i = 0; i < urls.size(); ++i) {
          if (i > 0) stats_->retries.fetch_add(1);
          Result<std::shared_ptr<void>> lease = transfer(urls[i], *shared, first, client_gone);
          if (lease.ok()) {
            stats_->imports.fetch_add(1);
            return (*shared_resume)(std::move(*shared), std::move(lease).value());
          }
          const ErrorCode code = lease.status().code();
          const bool gone = code == ErrorCode::engine_cancelled;
          const bool ours = code == ErrorCode::engine_overloaded;  // this server's region or slots are full
          const bool last = gone || ours || i + 1 == urls.size();
          log_->log(LogLevel::warn, "pd decode: KV from prefill server {} not imported ({}); {}", urls[i],
                    lease.status().to_string(), last ? "prefilling here" : "trying " + urls[i + 1]);
          if (!gone && !ours) {
            std::lock_guard<std::mutex> lock(failed_mu_);
            failed_until_[urls[i]] = Clock::now() + config_.failure_cooldown;
          }
          if (last) break;
        }
        stats_->fallbacks.fetch_add(1);
        (*shared_resume)(std::move(*shared), nullptr);
      },
      config_.max_transfers);
  if (!started) {
    stats_->fallbacks.fetch_add(1);
    (*shared_resume)(std::move(*shared), nullptr);
  }
}

Result<std::shared_ptr<void>> DecodeService::transfer(const std::string& prefill_url, Request& request,
                                                      size_t first,
                                                      const std::function<bool()>& client_gone) {
  const auto t0 = Clock::now();
  const Clock::time_point deadline = t0 + config_.lease_timeout;
  const std::vector<uint64_t> all_keys = identity_->transfer_keys(request.prompt_tokens, request.cache_salt);
  const auto n_blocks = static_cast<int64_t>(all_keys.size() - first);
  const auto block_bytes = static_cast<size_t>(identity_->block_bytes);
  // V4/V4.1: room for the sequence state (the prefill server's window rings and compressor partial
  // groups at the last transferred block, state_pages.h) in the landing region.
  const int64_t n_state = region_ ? state_pages_for(identity_->state_bytes, identity_->block_bytes) : 0;
  const transport::SharedSecret& secret = identity_->secret;

  // The lease: fresh pool blocks and state pages, from here; given back on every path — after a
  // failure once the prefill server cannot be writing any more (its HTTP call ended or its endpoint
  // failed), else not before its put deadline.
  Result<std::vector<int32_t>> reserved = lender_->reserve(static_cast<int32_t>(n_blocks));
  if (!reserved.ok())
    return Status(ErrorCode::engine_overloaded,
                  "no free KV blocks for the prompt's blocks here: " + reserved.status().message());
  // The leased-blocks gauge follows the pool blocks: into the lease on success, down otherwise.
  struct Blocks {
    PoolLender& lender;
    DecodeStats& stats;
    LandingRegion* region;
    std::vector<int32_t> pool_ids;
    std::vector<uint32_t> state_ids;
    std::optional<Clock::time_point> hold_until;  // set once the grant went out
    bool landed = false;
    ~Blocks() {
      if (landed) {
        if (region) region->release(state_ids);
        return;  // the pool blocks are the lease's now
      }
      stats.leased_blocks.fetch_sub(static_cast<int64_t>(pool_ids.size()));
      lender.release(std::move(pool_ids), hold_until);
      if (region && hold_until)
        region->quarantine(state_ids, *hold_until);
      else if (region)
        region->release(state_ids);
    }
  } blocks{*lender_, *stats_, region_.get(), std::move(reserved).value(), {}, std::nullopt, false};
  stats_->leased_blocks.fetch_add(n_blocks);
  if (n_state > 0) {
    std::optional<std::vector<uint32_t>> ids = region_->allocate(static_cast<size_t>(n_state));
    if (!ids)
      return Status(ErrorCode::engine_overloaded, "no room in the landing region for the sequence state");
    blocks.state_ids = std::move(*ids);
  }

  DS_ASSIGN_OR_RETURN(TransferSlots::Checkout slot, slots_->checkout());
  transport::UcxWorker& worker = *slot->worker;
  worker.accept_pending();
  worker.close_failed();
  const uint64_t request_id = next_request_id_.fetch_add(1);

  // Ask the prefill server to start (its answer comes when it is done or failed).
  auto call = std::make_shared<PrefillCall>();
  const std::string body = nlohmann::json{{"request_id", request_id},
                                          {"tokens", request.prompt_tokens},
                                          {"cache_salt", request.cache_salt},
                                          {"decode_host", config_.transfer_host},
                                          {"decode_port", worker.listen_port()},
                                          {"timeout_ms", config_.lease_timeout.count()}}
                               .dump();
  std::thread http([call, prefill_url, body, timeout = config_.lease_timeout + std::chrono::milliseconds(500),
                    key = config_.prefill_api_key] {
    Result<HttpReply> reply =
        http_post_json(prefill_url, "/v1/pd/prefill", body, timeout, &call->cancel, key);
    if (!reply.ok()) {
      call->status = reply.status();
    } else if (reply->status != 200) {
      call->status =
          Status(ErrorCode::transport_io, fmt::format("POST {}/v1/pd/prefill: HTTP {}: {}", prefill_url,
                                                      reply->status, reply->body.substr(0, 300)));
    }
    call->done.store(true);
  });
  // On success the prefill server answers right after kv_written; on any other way out the call is
  // cancelled, so the join is quick either way.
  struct Joiner {
    std::thread& t;
    PrefillCall& call;
    ~Joiner() {
      call.cancel.store(true);
      t.join();
    }
  } joiner{http, *call};

  // Every wait: short polls, so a failed prefill call, a client that left or the lease's end stop it.
  transport::UcxEndpoint* ep = nullptr;  // the endpoint the prefill server's hello came on
  const auto stop_reason = [&]() -> std::optional<Status> {
    if (client_gone && client_gone()) return Status(ErrorCode::engine_cancelled, "the client went away");
    // The lease first: the prefill call's own timeout is a little longer, so a silent prefill
    // server always ends as an expired lease.
    if (Clock::now() >= deadline)
      return Status(ErrorCode::transport_timeout, fmt::format("the lease of {} ms ran out before kv_written",
                                                              config_.lease_timeout.count()));
    if (call->done.load() && !call->status.ok()) return call->status;
    if (ep != nullptr && ep->failed())
      return Status(ErrorCode::transport_io, "the prefill server went away mid-transfer");
    return std::nullopt;
  };
  const auto abort_with = [&](const Status& why) -> Status {
    if (ep != nullptr && !ep->failed())
      (void)ep->send(
          transport::encode_control_message({ControlType::abort, request_id, why.message()}, secret),
          Clock::now() + std::chrono::seconds(1));
    // Once the grant went out, the connection goes too: nothing the prefill server still had in
    // flight lands. A prefill server whose call ended (it answered: done or failed, its endpoint to
    // us closed first) or whose endpoint failed puts nothing more: the blocks go back now; else they
    // are held until its put deadline.
    if (ep != nullptr && blocks.hold_until) {
      if (call->done.load() || ep->failed()) blocks.hold_until = std::nullopt;
      worker.close(ep);
    }
    return why;
  };
  const auto next_frame = [&]() -> Result<ControlMessage> {
    for (;;) {
      if (auto why = stop_reason()) return *why;
      worker.accept_pending();
      Result<transport::Frame> frame = worker.receive_frame(Clock::now() + kPoll);
      if (!frame.ok()) continue;
      if (answer_stale(worker, *frame, request_id)) continue;  // an earlier transfer's late frame
      // The prefill server's endpoint is the one its first frame came on (before the HMAC check, so a
      // refusal can be sent back on it).
      if (ep == nullptr) {
        ep = worker.find(frame->from);
        if (ep == nullptr)
          return Status(ErrorCode::transport_bad_message,
                        "a frame on an endpoint this server did not accept");
      }
      DS_ASSIGN_OR_RETURN(ControlMessage m, transport::decode_control_message(frame->bytes, secret));
      if (m.type == ControlType::abort)
        return Status(ErrorCode::transport_io, "the prefill server aborted: " + m.payload);
      return m;
    }
  };
  // The hello: another secret fails the HMAC, another model or layout the identity check.
  {
    const auto check_hello = [&]() -> Status {
      DS_ASSIGN_OR_RETURN(ControlMessage hello, next_frame());
      if (hello.type != ControlType::hello)
        return Status(ErrorCode::transport_bad_message, "expected hello from the prefill server");
      DS_ASSIGN_OR_RETURN(transport::PeerIdentity theirs, transport::decode_peer_identity(hello.payload));
      return transport::check_peer_identity(identity_->peer_identity(), theirs);
    };
    if (Status st = check_hello(); !st.ok()) {
      if (st.code() == ErrorCode::transport_auth_failed || st.code() == ErrorCode::transport_peer_mismatch) {
        stats_->refusals.fetch_add(1);
        log_->log(LogLevel::warn, "pd decode: refused prefill server {}: {}", prefill_url, st.to_string());
      }
      return abort_with(st);
    }
  }
  transport::KvGrant grant;
  for (size_t e = 0; e < lender_->extents().size(); ++e)
    grant.regions.push_back({reinterpret_cast<uint64_t>(lender_->extents()[e].address),
                             lender_->extents()[e].bytes, slot->pool_memory[e]->packed_rkey()});
  for (const KvPageArray& a : lender_->arrays())
    grant.arrays.push_back({reinterpret_cast<uint64_t>(a.base), static_cast<uint64_t>(a.block_bytes)});
  grant.n_blocks = static_cast<uint32_t>(lender_->n_blocks());
  grant.block_ids.assign(blocks.pool_ids.begin(), blocks.pool_ids.end());
  if (n_state > 0) {
    grant.regions.push_back(
        {reinterpret_cast<uint64_t>(region_->data()), region_->bytes(), slot->memory->packed_rkey()});
    grant.state_page_bytes = region_->block_bytes();
    for (uint32_t id : blocks.state_ids)
      grant.state_pages.push_back(reinterpret_cast<uint64_t>(region_->block(id)));
  }
  grant.shared = shared_ref_;
  grant.shared_ranges = shared_ranges_;
  DS_TRY(ep->send(
      transport::encode_control_message({ControlType::hello_accept, request_id,
                                         transport::encode_peer_identity(identity_->peer_identity())},
                                        secret),
      deadline));
  // The prefill server puts until its own deadline at the latest: its receipt of the call (before
  // its hello, so before ours) + the lease.
  blocks.hold_until = deadline + config_.lease_timeout + std::chrono::seconds(1);
  if (Status st =
          ep->send(transport::encode_control_message(
                       {ControlType::kv_grant, request_id, transport::encode_kv_grant(grant)}, secret),
                   deadline);
      !st.ok())
    return abort_with(st);
  Result<ControlMessage> written = next_frame();
  if (!written.ok()) return abort_with(written.status());
  if (written->type != ControlType::kv_written)
    return abort_with(
        Status(ErrorCode::transport_bad_message, "expected kv_written from the prefill server"));

  // Landed in the pool: the engine adopts the blocks as the prompt's (blocks [first, n) of its full
  // blocks), so the request's admission hits them.
  const auto bs = static_cast<size_t>(identity_->block_size_tokens);
  std::vector<int32_t> head(
      request.prompt_tokens.begin(),
      request.prompt_tokens.begin() + static_cast<std::ptrdiff_t>(all_keys.size() * bs));
  if (Result<int32_t> adopted =
          lender_->adopt(blocks.pool_ids, std::move(head), request.cache_salt, static_cast<int64_t>(first));
      !adopted.ok())
    return abort_with(adopted.status());
  int64_t state_pages_received = 0;  // the pages the state filled (the rest of the grant's are padding)
  if (n_state > 0) {
    std::vector<const std::byte*> pages;
    for (uint32_t id : blocks.state_ids) pages.push_back(region_->block(id));
    Result<std::vector<std::byte>> state =
        unpack_state_pages(pages, identity_->block_bytes, identity_->state_bytes);
    if (!state.ok()) return abort_with(state.status());
    state_pages_received = state_pages_for(static_cast<int64_t>(state->size()), identity_->block_bytes);
    // The engine continues from it once the blocks are in its pool (Request::state_import).
    request.state_import =
        SequenceStateImport{static_cast<int64_t>(all_keys.size()) * identity_->block_size_tokens,
                            std::make_shared<const std::vector<std::byte>>(std::move(state).value())};
  }
  blocks.landed = true;
  auto lease = std::make_shared<Lease>();
  lease->lender = lender_;
  lease->stats = stats_;
  lease->blocks = std::move(blocks.pool_ids);
  const int64_t transfer_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
  // The prefill server answers the call right after kv_written; a moment for it before the joiner
  // cancels the call.
  for (const auto until = Clock::now() + std::chrono::milliseconds(500);
       !call->done.load() && Clock::now() < until;) {
    worker.progress();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  stats_->blocks_received.fetch_add(n_blocks);
  stats_->bytes_received.fetch_add((n_blocks + state_pages_received) * static_cast<int64_t>(block_bytes));
  stats_->transfer_ns.fetch_add(transfer_ns);
  if (config_.observe_import) config_.observe_import(static_cast<double>(transfer_ns) * 1e-9);
  return std::shared_ptr<void>(std::move(lease));
}

}  // namespace ds::pd
