// A tiny generated checkpoint, loaded, for tests that drive a real model (engine invariance,
// grammar, KV tiers, speculative decoding): make-model writes it into the test temp dir, the model
// runner and tokenizer are loaded from it, and the folder is removed at the end. Failures are gtest
// failures (the members stay null), so a test checks `model != nullptr` before use.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "model/model_runner.h"
#include "tokenizer/tokenizer.h"

namespace ds::modelgen {

struct TinyModelSpec {
  std::string arch = "deepseek_v3";
  uint64_t seed = 5;
  int32_t max_seq_len = 256;
  std::string tokenizer_dir;  // the real tokenizer files make-model copies (DS_DEFAULT_TOKENIZER_DIR)
  std::string tag;            // names the temp folder: several fixtures may exist in one process
};

class TinyModel {
 public:
  explicit TinyModel(const TinyModelSpec& spec);
  ~TinyModel();
  TinyModel(const TinyModel&) = delete;
  TinyModel& operator=(const TinyModel&) = delete;

  const std::string& dir() const { return dir_; }

  std::unique_ptr<ModelRunner> model;
  std::unique_ptr<Tokenizer> tokenizer;

 private:
  std::string dir_;
};

}  // namespace ds::modelgen
