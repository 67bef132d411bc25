// Loads a model runner as an application does: model/model_registry.h's load_model_runner plus
// what the model module cannot read itself because it does not depend on the tokenizer — for a
// V4.1 checkpoint with Engram, the compressed token map of the checkpoint's own tokenizer
// (tokenizer/engram_token_map.h, model-spec §5.7), built at load and checked against
// text_config.engram_compressed_vocab_size.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "model/model_options.h"
#include "model/model_runner.h"

namespace ds {

// The checkpoint in `dir` (config.json, weights, tokenizer.json). A compressed map of the wrong
// size is tokenizer_bad_file naming dir/tokenizer.json and the key; opts.engram_token_map, when
// set, is used as given.
Result<std::unique_ptr<ModelRunner>> load_model(const std::string& dir, ModelOptions opts);

}  // namespace ds
