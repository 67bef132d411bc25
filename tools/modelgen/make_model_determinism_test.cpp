// make-model determinism for DeepSeek-V4 (V3's is tests/reference/check_make_model_determinism.py):
// the same seed gives byte-identical files whatever the thread count, another seed changes every
// shard and nothing else. Label `model`: it writes three tiny checkpoints (~40 MB each).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "make_model.h"

namespace ds::modelgen {
namespace {

namespace fs = std::filesystem;

std::map<std::string, std::string> read_dir(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    files[entry.path().filename().string()] = {std::istreambuf_iterator<char>(in),
                                               std::istreambuf_iterator<char>()};
  }
  return files;
}

TEST(MakeModelDeterminism, V4TinySameSeedSameBytesAcrossThreadCounts) {
  const fs::path root = fs::temp_directory_path() / "modelgen_v4_determinism";
  fs::remove_all(root);
  fs::create_directories(root / "tok");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    // A minimal tokenizer.json: V4 make-model adds its template markers to it.
    std::ofstream(root / "tok" / f) << (std::string(f) == "tokenizer.json"
                                            ? R"({"added_tokens":[],"model":{"vocab":{}}})"
                                            : "{}");
  }
  auto make = [&](const std::string& name, uint64_t seed, int n_threads) {
    MakeModelOptions o;
    o.arch = "deepseek_v4";
    o.preset = "tiny";
    o.fp8 = true;
    o.seed = seed;
    o.out_dir = (root / name).string();
    o.tokenizer_dir = (root / "tok").string();
    ThreadPool pool(n_threads);
    const Result<MakeModelReport> r = make_model(o, pool);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return read_dir(root / name);
  };
  const auto a = make("a", 7, 1);
  const auto b = make("b", 7, 2);
  const auto c = make("c", 8, 2);
  ASSERT_EQ(a.size(), b.size());
  size_t n_shards = 0;
  for (const auto& [name, bytes] : a) {
    ASSERT_TRUE(b.count(name) && c.count(name)) << name;
    EXPECT_TRUE(bytes == b.at(name)) << name << " differs between 1 and 2 threads";
    if (name.ends_with(".safetensors")) {
      ++n_shards;
      EXPECT_FALSE(bytes == c.at(name)) << name << " did not change with the seed";
    } else {
      EXPECT_TRUE(bytes == c.at(name)) << name << " depends on the seed";
    }
  }
  EXPECT_GE(n_shards, 2u);
  fs::remove_all(root);
}

}  // namespace
}  // namespace ds::modelgen
