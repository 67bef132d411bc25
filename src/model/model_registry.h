// Which model class runs a checkpoint: one factory per config.json model_type. A new model
// (deepseek_v41) is one more row in model_registry.cpp; callers only see ModelRunner.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "model/model_options.h"
#include "model/model_runner.h"
#include "weights/model_config.h"

namespace ds {

// Builds the model of `cfg` (already parsed from dir/config.json) with `opts`; each factory reads
// the model-specific part of `opts` itself (opts.numerics, docs/numerics.md).
using ModelFactory = Result<std::unique_ptr<ModelRunner>> (*)(const std::string& dir, const ModelConfig& cfg,
                                                              const ModelOptions& opts);

struct ModelRegistration {
  std::string_view model_type;  // config.json "model_type"
  ModelFactory factory;
};

// Every model_type the engine runs (a fixed table, no registration at run time).
std::span<const ModelRegistration> registered_models();

// What the caller must build from the checkpoint's tokenizer before load_model_runner, since the
// model module reads no tokenizer: V4.1 Engram's compressed token map over vocab_size ids, of
// compressed_size ids (text_config.engram_compressed_vocab_size). nullopt when not needed.
struct EngramMapRequest {
  int32_t vocab_size = 0;
  int32_t compressed_size = 0;
};
Result<std::optional<EngramMapRequest>> engram_map_request(const std::string& dir);

// The model dir/config.json asks for; model_unsupported naming the model_type when none runs it.
Result<std::unique_ptr<ModelRunner>> load_model_runner(const std::string& dir, const ModelOptions& opts);

}  // namespace ds
