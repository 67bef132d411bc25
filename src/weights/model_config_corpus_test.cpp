// Replays fuzz/corpus/model_config (the model_config_fuzz corpus) in the gcc build: valid_* seeds
// parse and round-trip through model_config_to_json, invalid_* are rejected, the rest must not crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "weights/model_config.h"

namespace ds {
namespace {

TEST(ModelConfigCorpus, EveryFileParsesOrFailsCleanlyAndRoundTrips) {
  const std::filesystem::path dir = std::filesystem::path(DS_FUZZ_CORPUS_DIR) / "model_config";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  size_t n_valid = 0, n_invalid = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const std::string name = e.path().filename().string();
    SCOPED_TRACE(name);
    auto c = parse_model_config(text.str(), name);
    if (c.ok()) {
      auto again = parse_model_config(model_config_to_json(*c), name);
      ASSERT_TRUE(again.ok()) << again.status().to_string();
      EXPECT_TRUE(*again == *c);
    } else {
      EXPECT_EQ(c.status().code(), ErrorCode::weights_bad_config);
      EXPECT_EQ(c.status().message().rfind(name + ": ", 0), 0u) << c.status().message();
    }
    if (name.rfind("valid_", 0) == 0) {
      ++n_valid;
      EXPECT_TRUE(c.ok()) << c.status().to_string();
    } else if (name.rfind("invalid_", 0) == 0) {
      ++n_invalid;
      EXPECT_FALSE(c.ok());
    }
  }
  EXPECT_GE(n_valid, 4u);
  EXPECT_GE(n_invalid, 5u);
}

}  // namespace
}  // namespace ds
