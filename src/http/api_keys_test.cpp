#include "http/api_keys.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

namespace ds::server {
namespace {

using namespace std::string_view_literals;

TEST(ConstantTimeEqual, AgreesWithOperatorEqualsOnManyPairs) {
  std::mt19937 rng(42);
  const std::string alphabet = "ab";  // small alphabet: many shared prefixes and equal strings
  for (int i = 0; i < 5000; ++i) {
    std::string a, b;
    const int la = static_cast<int>(rng() % 6), lb = static_cast<int>(rng() % 6);
    for (int k = 0; k < la; ++k) a += alphabet[rng() % 2];
    for (int k = 0; k < lb; ++k) b += alphabet[rng() % 2];
    EXPECT_EQ(constant_time_equal(a, b), a == b) << "'" << a << "' vs '" << b << "'";
  }
}

TEST(ConstantTimeEqual, EdgeCases) {
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_FALSE(constant_time_equal("", "a"));
  EXPECT_FALSE(constant_time_equal("a", ""));
  // A trailing NUL must not be ignored (no C-string compare).
  EXPECT_FALSE(constant_time_equal("secret", "secret\0"sv));
  EXPECT_FALSE(constant_time_equal("secret", "secreT"));
  EXPECT_FALSE(constant_time_equal("secret", "secre"));
  EXPECT_TRUE(constant_time_equal("\xff\x00\x01"sv, "\xff\x00\x01"sv));
}

TEST(ApiKeySet, MatchesAnyOfSeveralKeys) {
  auto keys = ApiKeySet::from_keys({"sk-one", "sk-two"});
  ASSERT_TRUE(keys.ok());
  EXPECT_TRUE(keys->matches("sk-one"));
  EXPECT_TRUE(keys->matches("sk-two"));
  EXPECT_FALSE(keys->matches("sk-three"));
  EXPECT_FALSE(keys->matches("sk-on"));
  EXPECT_FALSE(keys->matches(""));
  EXPECT_FALSE(ApiKeySet().matches("anything"));
}

TEST(ApiKeySet, RejectsMalformedKeys) {
  EXPECT_FALSE(ApiKeySet::from_keys({""}).ok());
  EXPECT_FALSE(ApiKeySet::from_keys({"has space"}).ok());
  EXPECT_FALSE(ApiKeySet::from_keys({"newline\n"}).ok());
}

class ApiKeyFile : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    path_ = (std::filesystem::temp_directory_path() / ("ds_keys_" + std::to_string(::getpid()))).string();
    std::ofstream(path_, std::ios::binary) << text;
    return path_;
  }
  void TearDown() override {
    if (!path_.empty()) std::filesystem::remove(path_);
  }
  std::string path_;
};

TEST_F(ApiKeyFile, ReadsKeysSkippingCommentsAndBlanks) {
  auto keys = ApiKeySet::from_file(write("# operators\n\n  sk-a  \r\nsk-b\n#sk-c\n"));
  ASSERT_TRUE(keys.ok()) << keys.status().to_string();
  EXPECT_EQ(keys->size(), 2u);
  EXPECT_TRUE(keys->matches("sk-a"));
  EXPECT_TRUE(keys->matches("sk-b"));
  EXPECT_FALSE(keys->matches("#sk-c"));
  EXPECT_FALSE(keys->matches("sk-c"));
}

TEST_F(ApiKeyFile, EmptyFileAndMissingFileAreErrors) {
  auto empty = ApiKeySet::from_file(write("# nothing\n\n"));
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), ErrorCode::invalid_argument);
  auto missing = ApiKeySet::from_file("/nonexistent/keys.txt");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::io_error);
}

TEST_F(ApiKeyFile, MalformedKeyNamesTheLineNotTheKey) {
  auto keys = ApiKeySet::from_file(write("sk-good\nsk bad\n"));
  ASSERT_FALSE(keys.ok());
  EXPECT_NE(keys.status().message().find(":2:"), std::string::npos) << keys.status().message();
  EXPECT_EQ(keys.status().message().find("sk bad"), std::string::npos) << "a secret leaked into an error";
}

TEST(ApiKeySet, MergeKeepsBoth) {
  auto a = ApiKeySet::from_keys({"k1"});
  auto b = ApiKeySet::from_keys({"k2"});
  ASSERT_TRUE(a.ok() && b.ok());
  a->merge(*b);
  EXPECT_TRUE(a->matches("k1"));
  EXPECT_TRUE(a->matches("k2"));
}

TEST(PresentedApiKey, BearerWinsOverXApiKey) {
  EXPECT_EQ(presented_api_key("Bearer sk-bearer", "sk-x"), "sk-bearer");
  EXPECT_EQ(presented_api_key("bearer sk-lower", ""), "sk-lower");
  EXPECT_EQ(presented_api_key("BEARER  sk-spaces ", ""), "sk-spaces");
  EXPECT_EQ(presented_api_key("", "sk-x"), "sk-x");
  // Not a Bearer credential: x-api-key is used.
  EXPECT_EQ(presented_api_key("Basic dXNlcjpwYXNz", "sk-x"), "sk-x");
  EXPECT_EQ(presented_api_key("Bearer ", "sk-x"), "sk-x");
  EXPECT_EQ(presented_api_key("Basic dXNlcjpwYXNz", ""), std::nullopt);
  EXPECT_EQ(presented_api_key("", ""), std::nullopt);
  EXPECT_EQ(presented_api_key("Bearersk-nospace", ""), std::nullopt);
}

}  // namespace
}  // namespace ds::server
