#include "client/model_list.h"

#include <nlohmann/json.hpp>

namespace ds::client {

Result<std::string> first_model_id(const BaseUrl& base, const std::string& api_key) {
  const HttpCall call{.method = "GET", .path = "/v1/models", .body = {}, .api_key = api_key};
  DS_ASSIGN_OR_RETURN(HttpAnswer answer, http_call(base, call));
  if (answer.status != 200) {
    return Status(ErrorCode::invalid_argument, "GET /v1/models answered " + std::to_string(answer.status) +
                                                   ": " + answer.body.substr(0, 300));
  }
  const nlohmann::json j = nlohmann::json::parse(answer.body, nullptr, false);
  if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
      !j["data"][0].contains("id") || !j["data"][0]["id"].is_string()) {
    return Status(ErrorCode::invalid_argument, "GET /v1/models listed no model; pass --model");
  }
  return j["data"][0]["id"].get<std::string>();
}

}  // namespace ds::client
