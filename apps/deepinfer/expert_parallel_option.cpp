#include "expert_parallel_option.h"

#include <nlohmann/json.hpp>

#include "weights/model_config.h"

namespace ds::cli {

Result<std::unique_ptr<ExpertParallelRuntime>> ExpertParallelRuntime::start(const std::string& model_dir) {
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
  DS_ASSIGN_OR_RETURN(ExpertPlacement placement,
                      ExpertPlacement::contiguous(cfg.n_routed_experts, rt->comm_->size()));
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
