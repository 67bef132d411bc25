// The client API keys of serve and route: --api-key (repeatable) and --api-key-file, merged into the
// server config. Shared so both commands refuse bad keys the same way.
#pragma once

#include <string>
#include <vector>

#include "http/api_keys.h"

namespace ds::cli {

// 0 when every key loaded into `into`; otherwise the exit code after printing one line: 2 for a bad
// --api-key (usage), 1 for a key file that cannot be read or parsed.
int load_client_api_keys(const std::string& command, const std::vector<std::string>& keys,
                         const std::string& key_file, server::ApiKeySet& into);

}  // namespace ds::cli
