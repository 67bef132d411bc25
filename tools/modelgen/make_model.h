// `deepinfer make-model`: writes a random-weight DeepSeek (V3 or V4) checkpoint in the real
// Hugging Face layout: config.json, sharded safetensors with model.safetensors.index.json, and the tokenizer
// files. Same options (seed included) → byte-identical files, whatever the thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"
#include "base/thread_pool.h"
#include "tensor_plan.h"
#include "weights/model_config.h"

namespace ds::modelgen {

struct MakeModelOptions {
  std::string arch = "deepseek_v3";  // deepseek_v3 | deepseek_v4
  std::string preset = "tiny";       // tiny | small | bench
  // V3: F8_E4M3 Linear weights with 128×128 F32 scales. V4: as released, F8_E4M3 with E8M0
  // scales and FP4 routed experts. false: everything BF16.
  bool fp8 = false;
  // V4.1: Engram on the preset's layers (its compressed vocabulary counted from the written
  // tokenizer); false writes a V4.1 checkpoint without Engram.
  bool engram = true;
  // V4.1: the preset's DSpark stages (`mtp.0..2`, docs/dspark.md); false writes none.
  bool dspark = true;
  uint64_t seed = 0;
  std::string out_dir;
  std::string tokenizer_dir;  // holds tokenizer.json and tokenizer_config.json
  // Called after each shard is generated (shards done, shard count), for a progress bar; may be empty.
  std::function<void(size_t, size_t)> on_shard_generated;
};

struct MakeModelReport {
  ModelConfig config;
  ModelBytes bytes;
  size_t n_tensors = 0;  // scale tensors included
  int n_shards = 0;
};

// Upper bound on one shard's tensor bytes for a preset (several shards even for tiny, so the
// sharded loading path is always exercised).
size_t shard_bytes_for_preset(const std::string& preset);

// Creates out_dir if needed and overwrites the files it writes; shard files of an earlier model
// in out_dir (model-*-of-*.safetensors, model.safetensors) that this one does not use are removed.
// Errors: invalid_argument (arch, preset), not_found (tokenizer dir/files), io_error (writing).
Result<MakeModelReport> make_model(const MakeModelOptions& options, ThreadPool& pool);

}  // namespace ds::modelgen
