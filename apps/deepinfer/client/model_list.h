// GET /v1/models: the tools send the first model listed when the user names none (vLLM, llama.cpp
// and deepinfer all list the served model there).
#pragma once

#include <string>

#include "client/http_client.h"

namespace ds::client {

// The "id" of data[0]; io_error for an unreachable server, invalid_argument for a non-200 answer
// (the body is quoted: 401 means --api-key is missing or wrong) or a list without models.
Result<std::string> first_model_id(const BaseUrl& base, const std::string& api_key);

}  // namespace ds::client
