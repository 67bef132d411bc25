#include "expert_parallel_option.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "weights/model_config.h"

namespace ds::cli {

namespace {

// "3,0.5,7" -> one non-negative number per expert.
Result<std::vector<float>> parse_load(const std::string& text, int64_t n_experts) {
  std::vector<float> load;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(begin, end - begin);
    char* stop = nullptr;
    const float v = std::strtof(item.c_str(), &stop);
    if (item.empty() || stop != item.c_str() + item.size() || !(v >= 0.0f)) {
      return Status(ErrorCode::invalid_argument,
                    "--ep-expert-load: '" + item + "' is not a non-negative number");
    }
    load.push_back(v);
    begin = end + 1;
  }
  if (static_cast<int64_t>(load.size()) != n_experts) {
    return Status(ErrorCode::invalid_argument, "--ep-expert-load: " + std::to_string(load.size()) +
                                                   " loads for a model with " + std::to_string(n_experts) +
                                                   " routed experts");
  }
  return load;
}

EplbShape eplb_shape(const ModelConfig& cfg, const ExpertParallelOptions& o, int n_ranks) {
  return EplbShape{cfg.n_routed_experts + o.redundant_experts, std::max(1, cfg.n_group), o.n_nodes, n_ranks};
}

Result<ExpertPlacement> place_experts(const ModelConfig& cfg, const ExpertParallelOptions& o, int n_ranks) {
  const int64_t n_experts = cfg.n_routed_experts;
  if (o.redundant_experts < 0)
    return Status(ErrorCode::invalid_argument, "--ep-redundant-experts must be >= 0");
  if (o.redundant_experts == 0 && o.expert_load.empty())
    return ExpertPlacement::contiguous(n_experts, n_ranks);
  const EplbShape shape = eplb_shape(cfg, o, n_ranks);
  std::vector<float> load(static_cast<size_t>(n_experts), 1.0f);
  if (!o.expert_load.empty()) {
    DS_ASSIGN_OR_RETURN(load, parse_load(o.expert_load, n_experts));
  }
  DS_ASSIGN_OR_RETURN(EplbPlacement eplb, eplb_rebalance(load, shape));
  return ExpertPlacement::from_eplb(eplb, n_experts, n_ranks);
}

}  // namespace

Result<std::unique_ptr<ExpertParallelRuntime>> ExpertParallelRuntime::start(
    const std::string& model_dir, const ExpertParallelOptions& options) {
  DS_ASSIGN_OR_RETURN(ModelConfig cfg, load_model_config(model_dir));
  if (cfg.n_routed_experts <= 0) {
    return Status(ErrorCode::model_unsupported,
                  model_dir + "/config.json: --expert-parallel needs routed experts (n_routed_experts is 0)");
  }
  std::unique_ptr<ExpertParallelRuntime> rt(new ExpertParallelRuntime());
  DS_ASSIGN_OR_RETURN(MpiSession session, MpiSession::init());
  rt->session_.emplace(std::move(session));
  DS_ASSIGN_OR_RETURN(MpiComm comm, MpiComm::dup_world());
  rt->comm_.emplace(std::move(comm));
  DS_ASSIGN_OR_RETURN(ExpertPlacement placement, place_experts(cfg, options, rt->comm_->size()));
  DS_ASSIGN_OR_RETURN(MpiExpertExchange ex, MpiExpertExchange::create(*rt->comm_, std::move(placement)));
  rt->exchange_.emplace(std::move(ex));
  if (options.rebalance_interval != 0) {
    LiveEplbOptions live{options.rebalance_interval, options.rebalance_window, options.rebalance_min_gain,
                         eplb_shape(cfg, options, rt->comm_->size())};
    DS_ASSIGN_OR_RETURN(LiveEplb eplb, LiveEplb::create(live, cfg.n_routed_experts));
    rt->live_eplb_.emplace(std::move(eplb));
  }
  return rt;
}

Status ExpertParallelRuntime::after_step(std::span<RoutedExpertSet* const> layers) {
  if (!live_eplb_) return Status();
  return live_eplb_->after_step(*comm_, *exchange_, layers);
}

std::string ExpertParallelRuntime::stats_json() const {
  const EpStats& s = exchange_->stats();
  nlohmann::json j;
  j["rank"] = rank();
  j["n_ranks"] = n_ranks();
  j["local_experts"] = exchange_->local_experts();
  // Per layer that ran here (live EPLB places each on its own): {"layer": [experts held]}.
  nlohmann::json per_layer = nlohmann::json::object();
  for (size_t l = 0; l < s.layer_expert_rows.size(); ++l) {
    if (s.layer_expert_rows[l].empty()) continue;
    per_layer[std::to_string(l)] = exchange_->placement(static_cast<int32_t>(l)).local_experts(rank());
  }
  j["layer_local_experts"] = per_layer;
  j["expert_rows"] = s.expert_rows;
  j["exchanges"] = s.exchanges;
  j["rows_sent"] = s.rows_sent;
  j["bytes_sent"] = s.bytes_sent;
  j["bytes_received"] = s.bytes_received;
  j["alltoall_seconds"] = s.alltoall_seconds;
  if (live_eplb_) {
    const LiveEplbStats& r = live_eplb_->stats();
    j["rebalance"] = {{"checks", r.checks},
                      {"rebalances", r.rebalances},
                      {"layers_rebalanced", r.layers_rebalanced},
                      {"experts_received", r.experts_received},
                      {"bytes_received", r.bytes_received},
                      {"experts_dropped", r.experts_dropped},
                      {"seconds", r.seconds},
                      {"pack_seconds", r.pack_seconds},
                      {"transfer_seconds", r.transfer_seconds},
                      {"install_seconds", r.install_seconds},
                      {"imbalance_before", r.imbalance_before},
                      {"imbalance_after", r.imbalance_after}};
  }
  return j.dump();
}

void add_expert_parallel_options(CLI::App* sub, ExpertParallelOptions& o) {
  sub->add_option("--ep-redundant-experts", o.redundant_experts,
                  "Extra expert copies placed by EPLB (ranks must divide experts + R)")
      ->capture_default_str();
  sub->add_option("--ep-nodes", o.n_nodes, "Machines, for EPLB's hierarchical policy")->capture_default_str();
  sub->add_option("--ep-expert-load", o.expert_load,
                  "Per-expert load l0,l1,... that EPLB balances at start (default: uniform)");
  sub->add_option("--ep-rebalance-interval", o.rebalance_interval,
                  "Live EPLB: every this-many forward steps, re-place the experts from the measured load "
                  "and move their weights between ranks (0 = off)")
      ->capture_default_str();
  sub->add_option("--ep-rebalance-window", o.rebalance_window,
                  "Live EPLB: the load is summed over this many intervals")
      ->capture_default_str();
  sub->add_option("--ep-rebalance-min-gain", o.rebalance_min_gain,
                  "Live EPLB: move experts only when the rank imbalance (max/mean) falls by this fraction")
      ->capture_default_str();
}

std::string per_rank_path(const std::string& path, int rank) {
  const std::string key = "{rank}";
  const size_t at = path.find(key);
  if (at == std::string::npos) return path;
  return path.substr(0, at) + std::to_string(rank) + path.substr(at + key.size());
}

}  // namespace ds::cli
