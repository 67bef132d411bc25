#include "engine/model_loader.h"

#include <optional>
#include <vector>

#include "model/model_registry.h"
#include "tokenizer/engram_token_map.h"
#include "tokenizer/tokenizer.h"

namespace ds {

Result<std::unique_ptr<ModelRunner>> load_model(const std::string& dir, ModelOptions opts) {
  DS_ASSIGN_OR_RETURN(const std::optional<EngramMapRequest> engram, engram_map_request(dir));
  if (engram && !opts.engram_token_map) {
    DS_ASSIGN_OR_RETURN(const Tokenizer tok, Tokenizer::load(dir));
    DS_ASSIGN_OR_RETURN(EngramTokenMap map, build_engram_token_map(tok, engram->vocab_size));
    if (map.n_compressed != engram->compressed_size) {
      return Status(ErrorCode::tokenizer_bad_file,
                    dir + "/tokenizer.json: the Engram compressed token map has " +
                        std::to_string(map.n_compressed) +
                        " ids, config.json text_config.engram_compressed_vocab_size is " +
                        std::to_string(engram->compressed_size));
    }
    opts.engram_token_map = std::make_shared<const std::vector<int32_t>>(std::move(map.compressed));
  }
  return load_model_runner(dir, opts);
}

}  // namespace ds
