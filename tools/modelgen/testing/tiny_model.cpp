#include "modelgen/testing/tiny_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "base/thread_pool.h"
#include "engine/model_loader.h"
#include "kernels/isa.h"
#include "modelgen/make_model.h"

namespace ds::modelgen {

TinyModel::TinyModel(const TinyModelSpec& spec)
    : dir_(::testing::TempDir() + "/ds_tiny_" + spec.tag + "_" + spec.arch + "_" +
           std::to_string(::getpid())) {
  MakeModelOptions o;
  o.arch = spec.arch;
  o.preset = "tiny";
  o.seed = spec.seed;
  o.out_dir = dir_;
  o.tokenizer_dir = spec.tokenizer_dir;
  ThreadPool pool(2);
  Result<MakeModelReport> made = make_model(o, pool);
  EXPECT_TRUE(made.ok()) << made.status().to_string();
  if (!made.ok()) return;
  ModelOptions mo;
  mo.isa = best_isa();
  mo.n_threads = 2;
  mo.max_seq_len = spec.max_seq_len;
  Result<std::unique_ptr<ModelRunner>> m = load_model(dir_, mo);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  if (m.ok()) model = std::move(m).value();
  Result<Tokenizer> t = Tokenizer::load(dir_);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  if (t.ok()) tokenizer = std::make_unique<Tokenizer>(std::move(t).value());
}

TinyModel::~TinyModel() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

}  // namespace ds::modelgen
