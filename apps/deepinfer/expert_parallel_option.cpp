#include "expert_parallel_option.h"

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

Result<ExpertPlacement> place_experts(const ModelConfig& cfg, const ExpertParallelOptions& o, int n_ranks) {
  const int64_t n_experts = cfg.n_routed_experts;
  if (o.redundant_experts == 0 && o.expert_load.empty())
    return ExpertPlacement::contiguous(n_experts, n_ranks);
  if (o.redundant_experts < 0)
    return Status(ErrorCode::invalid_argument, "--ep-redundant-experts must be >= 0");
  std::vector<float> load(static_cast<size_t>(n_experts), 1.0f);
  if (!o.expert_load.empty()) {
    DS_ASSIGN_OR_RETURN(load, parse_load(o.expert_load, n_experts));
  }
  const EplbShape shape{n_experts + o.redundant_experts, std::max(1, cfg.n_group), o.n_nodes, n_ranks};
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
  return rt;
}

std::string ExpertParallelRuntime::stats_json() const {
  const EpStats& s = exchange_->stats();
  nlohmann::json j;
  j["rank"] = rank();
  j["n_ranks"] = n_ranks();
  j["local_experts"] = exchange_->placement().local_experts(rank());
  j["expert_rows"] = s.expert_rows;
  j["exchanges"] = s.exchanges;
  j["rows_sent"] = s.rows_sent;
  j["bytes_sent"] = s.bytes_sent;
  j["bytes_received"] = s.bytes_received;
  j["alltoall_seconds"] = s.alltoall_seconds;
  return j.dump();
}

std::string per_rank_path(const std::string& path, int rank) {
  const std::string key = "{rank}";
  const size_t at = path.find(key);
  if (at == std::string::npos) return path;
  return path.substr(0, at) + std::to_string(rank) + path.substr(at + key.size());
}

}  // namespace ds::cli
