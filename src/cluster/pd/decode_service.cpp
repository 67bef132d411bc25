#include "cluster/pd/decode_service.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "cluster/pd/http_post.h"
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

// The landed blocks of one request: removed from the landing tier (whatever the engine did not read)
// when the request ends.
struct DecodeService::Lease {
  std::shared_ptr<TransitTier> landing;
  std::shared_ptr<DecodeStats> stats;
  std::vector<uint64_t> keys;
  ~Lease() {
    if (landing) landing->drop(keys);
    stats->leased_blocks.fetch_sub(static_cast<int64_t>(keys.size()));
  }
};

DecodeService::DecodeService(std::shared_ptr<TransitTier> landing, std::shared_ptr<const PdIdentity> identity,
                             std::shared_ptr<const PoolIndex> pool, DecodeServiceConfig config,
                             const Logger* log)
    : landing_(std::move(landing)),
      identity_(std::move(identity)),
      pool_(std::move(pool)),
      config_(std::move(config)),
      log_(log),
      stats_(std::make_shared<DecodeStats>()),
      next_request_id_(std::random_device{}() | (uint64_t{std::random_device{}()} << 32)) {}

DecodeService::~DecodeService() = default;

void DecodeService::start(std::string prefill_url, Request request, std::function<bool()> client_gone,
                          Resume resume) {
  const std::vector<uint64_t> keys = identity_->transfer_keys(request.prompt_tokens, request.cache_salt);
  const auto first = static_cast<size_t>(pool_ ? pool_->count_prefix(keys) : 0);
  stats_->local_blocks.fetch_add(static_cast<int64_t>(first));
  if (first == keys.size()) {
    // Shorter than a block, or every block cached here: nothing to move.
    if (!keys.empty()) stats_->local_only.fetch_add(1);
    return resume(std::move(request), nullptr);
  }
  auto shared = std::make_shared<Request>(std::move(request));
  auto shared_resume = std::make_shared<Resume>(std::move(resume));
  const bool started = jobs_.start(
      [this, url = std::move(prefill_url), shared, first, client_gone = std::move(client_gone),
       shared_resume] {
        Result<std::shared_ptr<void>> lease = transfer(url, *shared, first, client_gone);
        if (lease.ok()) {
          stats_->imports.fetch_add(1);
          return (*shared_resume)(std::move(*shared), std::move(lease).value());
        }
        stats_->fallbacks.fetch_add(1);
        log_->log(LogLevel::warn, "pd decode: KV from prefill server {} not imported ({}); prefilling here",
                  url, lease.status().to_string());
        (*shared_resume)(std::move(*shared), nullptr);
      },
      config_.max_transfers);
  if (!started) {
    stats_->fallbacks.fetch_add(1);
    (*shared_resume)(std::move(*shared), nullptr);
  }
}

Result<std::shared_ptr<void>> DecodeService::transfer(const std::string& prefill_url, const Request& request,
                                                      size_t first,
                                                      const std::function<bool()>& client_gone) {
  const auto t0 = Clock::now();
  const Clock::time_point deadline = t0 + config_.lease_timeout;
  const std::vector<uint64_t> all_keys = identity_->transfer_keys(request.prompt_tokens, request.cache_salt);
  const std::vector<uint64_t> keys(all_keys.begin() + static_cast<std::ptrdiff_t>(first), all_keys.end());
  const auto n_blocks = static_cast<int64_t>(keys.size());
  const auto block_bytes = static_cast<size_t>(identity_->block_bytes);
  const transport::SharedSecret& secret = identity_->secret;

  // The lease: counted from here; the Lease object gives it back on every path.
  if (stats_->leased_blocks.fetch_add(n_blocks) + n_blocks > config_.max_leased_blocks) {
    stats_->leased_blocks.fetch_sub(n_blocks);
    return Status(ErrorCode::engine_overloaded, "no room to lease the prompt's blocks");
  }
  auto lease = std::make_shared<Lease>();
  lease->stats = stats_;
  lease->keys = keys;

  std::vector<std::byte> region(static_cast<size_t>(n_blocks) * block_bytes);
  DS_ASSIGN_OR_RETURN(std::unique_ptr<transport::UcxWorker> worker, transport::UcxWorker::create());
  DS_TRY(worker->listen(config_.transfer_host, 0));
  DS_ASSIGN_OR_RETURN(std::unique_ptr<transport::RegisteredMemory> memory,
                      worker->register_memory(region.data(), region.size()));
  const uint64_t request_id = next_request_id_.fetch_add(1);

  // Ask the prefill server to start (its answer comes when it is done or failed).
  auto call = std::make_shared<PrefillCall>();
  const std::string body = nlohmann::json{{"request_id", request_id},
                                          {"tokens", request.prompt_tokens},
                                          {"cache_salt", request.cache_salt},
                                          {"decode_host", config_.transfer_host},
                                          {"decode_port", worker->listen_port()},
                                          {"timeout_ms", config_.lease_timeout.count()}}
                               .dump();
  std::thread http(
      [call, prefill_url, body, timeout = config_.lease_timeout + std::chrono::milliseconds(500)] {
        Result<HttpReply> reply = http_post_json(prefill_url, "/v1/pd/prefill", body, timeout, &call->cancel);
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
  std::unique_ptr<transport::UcxEndpoint> ep;
  const auto stop_reason = [&]() -> std::optional<Status> {
    if (client_gone && client_gone()) return Status(ErrorCode::engine_cancelled, "the client went away");
    // The lease first: the prefill call's own timeout is a little longer, so a silent prefill
    // server always ends as an expired lease.
    if (Clock::now() >= deadline)
      return Status(ErrorCode::transport_timeout, fmt::format("the lease of {} ms ran out before kv_written",
                                                              config_.lease_timeout.count()));
    if (call->done.load() && !call->status.ok()) return call->status;
    if (ep && ep->failed())
      return Status(ErrorCode::transport_io, "the prefill server went away mid-transfer");
    return std::nullopt;
  };
  const auto abort_with = [&](const Status& why) -> Status {
    if (ep && !ep->failed())
      (void)ep->send(
          transport::encode_control_message({ControlType::abort, request_id, why.message()}, secret),
          Clock::now() + std::chrono::seconds(1));
    return why;
  };
  while (!ep) {
    if (auto why = stop_reason()) return abort_with(*why);
    Result<std::unique_ptr<transport::UcxEndpoint>> accepted = worker->accept(Clock::now() + kPoll);
    if (accepted.ok()) ep = std::move(accepted).value();
  }
  const auto next_frame = [&]() -> Result<ControlMessage> {
    for (;;) {
      if (auto why = stop_reason()) return *why;
      Result<std::string> frame = worker->receive(Clock::now() + kPoll);
      if (!frame.ok()) continue;
      DS_ASSIGN_OR_RETURN(ControlMessage m, transport::decode_control_message(*frame, secret));
      if (m.request_id != request_id)
        return Status(ErrorCode::transport_bad_message,
                      fmt::format("a frame for request {}, expected {}", m.request_id, request_id));
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
  transport::KvGrant grant{
      memory->address(), memory->bytes(), memory->packed_rkey(), static_cast<uint32_t>(block_bytes), {}};
  for (int64_t i = 0; i < n_blocks; ++i) grant.block_ids.push_back(static_cast<uint32_t>(i));
  DS_TRY(ep->send(
      transport::encode_control_message({ControlType::hello_accept, request_id,
                                         transport::encode_peer_identity(identity_->peer_identity())},
                                        secret),
      deadline));
  DS_TRY(ep->send(transport::encode_control_message(
                      {ControlType::kv_grant, request_id, transport::encode_kv_grant(grant)}, secret),
                  deadline));
  Result<ControlMessage> written = next_frame();
  if (!written.ok()) return abort_with(written.status());
  if (written->type != ControlType::kv_written)
    return abort_with(
        Status(ErrorCode::transport_bad_message, "expected kv_written from the prefill server"));

  // Landed: into the landing tier under the engine's keys, with the tokens its restore checks.
  const auto bs = static_cast<size_t>(identity_->block_size_tokens);
  for (size_t i = 0; i < keys.size(); ++i) {
    const size_t block = first + i;  // in the prompt
    TierEntry e;
    e.key = all_keys[block];
    e.prev_key = block == 0 ? 0 : all_keys[block - 1];
    e.tokens.assign(request.prompt_tokens.begin() + static_cast<std::ptrdiff_t>(block * bs),
                    request.prompt_tokens.begin() + static_cast<std::ptrdiff_t>((block + 1) * bs));
    e.bytes.assign(region.begin() + static_cast<std::ptrdiff_t>(i * block_bytes),
                   region.begin() + static_cast<std::ptrdiff_t>((i + 1) * block_bytes));
    landing_->add(std::move(e));
  }
  lease->landing = landing_;
  const int64_t transfer_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
  // The prefill server's answer follows kv_written once its endpoint closed, which needs this worker
  // to progress; give it a moment before the joiner cancels the call.
  for (const auto until = Clock::now() + std::chrono::seconds(2);
       !call->done.load() && Clock::now() < until;) {
    worker->progress();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  stats_->blocks_received.fetch_add(n_blocks);
  stats_->bytes_received.fetch_add(static_cast<int64_t>(region.size()));
  stats_->transfer_ns.fetch_add(transfer_ns);
  if (config_.observe_import) config_.observe_import(static_cast<double>(transfer_ns) * 1e-9);
  return std::shared_ptr<void>(std::move(lease));
}

}  // namespace ds::pd
