#include "cluster/router/request_router.h"

#include <functional>

namespace ds::cluster {

RequestRouter::RequestRouter(WorkerPool& pool, RouterMetrics& metrics, const RoutingConfig& config)
    : pool_(pool),
      metrics_(metrics),
      config_(config),
      policy_(make_policy(config.policy, config.thresholds, config.seed)),
      index_(config.max_index_blocks_per_worker),
      kv_events_(index_, config.block_size_tokens) {}

RoutePick RequestRouter::pick(std::span<const uint64_t> prompt_blocks,
                              const std::optional<std::string>& session, const std::vector<bool>& excluded,
                              size_t n_prompt_tokens, bool record) {
  const std::vector<std::shared_ptr<WorkerState>> workers = pool_.all();
  RouteInput in;
  in.n_prompt_blocks = prompt_blocks.size();
  if (session) in.session_hash = std::hash<std::string>{}(*session);
  const std::vector<size_t> matched = index_.match(prompt_blocks, workers.size());
  in.workers.resize(workers.size());
  for (size_t i = 0; i < workers.size(); ++i) {
    WorkerView& v = in.workers[i];
    v.eligible = workers[i]->usable() && !(i < excluded.size() && excluded[i]);
    v.load = workers[i]->load();
    v.matched_blocks = matched[i];
    v.index_blocks = index_.n_blocks(i);
    v.identity_hash = std::hash<std::string>{}(workers[i]->address.url);
  }
  const Decision d = policy_->choose(in);
  RoutePick out;
  out.worker = d.worker;
  out.reason = d.reason;
  if (d.worker < 0) return out;
  const auto w = static_cast<size_t>(d.worker);
  out.matched_blocks = matched[w];
  if (!record) return out;
  if (workers[w]->address.events_endpoint.empty()) index_.record(w, prompt_blocks);  // routing history
  const std::string& url = workers[w]->address.url;
  metrics_.decisions.with({policy_name(config_.policy), d.reason, url}).inc();
  metrics_.estimated_hit_tokens.with({url}).inc(
      static_cast<double>(out.matched_blocks * static_cast<size_t>(config_.block_size_tokens)));
  metrics_.prompt_tokens.with({url}).inc(static_cast<double>(n_prompt_tokens));
  return out;
}

}  // namespace ds::cluster
