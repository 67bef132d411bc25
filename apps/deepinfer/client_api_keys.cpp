#include "client_api_keys.h"

#include "command_support.h"

namespace ds::cli {

int load_client_api_keys(const std::string& command, const std::vector<std::string>& keys,
                         const std::string& key_file, server::ApiKeySet& into) {
  if (!keys.empty()) {
    Result<server::ApiKeySet> loaded = server::ApiKeySet::from_keys(keys);
    if (!loaded.ok()) return report_usage_error(command, "--api-key: " + loaded.status().message());
    into.merge(*loaded);
  }
  if (!key_file.empty()) {
    Result<server::ApiKeySet> loaded = server::ApiKeySet::from_file(key_file);
    if (!loaded.ok()) return report_error(command, loaded.status());
    into.merge(*loaded);
  }
  return 0;
}

}  // namespace ds::cli
