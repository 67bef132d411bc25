// Runs SafetensorsFile::parse over every file of the fuzz corpus (fuzz/corpus/safetensors_header),
// so the gcc CI build exercises what the fuzzer found. Seeds named valid_* must parse and invalid_*
// must be rejected; fuzzer-found files (named by hash) only have to return without crashing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "weights/safetensors.h"

#ifndef DS_FUZZ_CORPUS_DIR
#error "DS_FUZZ_CORPUS_DIR must name fuzz/corpus"
#endif

namespace ds {
namespace {

TEST(SafetensorsCorpus, EveryFileParsesOrFailsCleanly) {
  const std::filesystem::path dir = std::filesystem::path(DS_FUZZ_CORPUS_DIR) / "safetensors_header";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  size_t n_files = 0, n_valid = 0, n_invalid = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    // Exactly-sized heap copy so sanitizer builds catch any read past the end.
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const std::string name = e.path().filename().string();
    SCOPED_TRACE(name);
    ++n_files;
    auto f = SafetensorsFile::parse(bytes.data(), bytes.size(), name);
    if (f.ok()) {
      for (const TensorEntry& t : f->tensors()) {
        ASSERT_GE(t.data, bytes.data());
        ASSERT_LE(t.data + t.nbytes, bytes.data() + bytes.size());
        EXPECT_EQ(static_cast<size_t>(t.shape.numel()) * dtype_size(t.dtype), t.nbytes);
      }
    } else {
      EXPECT_TRUE(f.status().code() == ErrorCode::weights_bad_header ||
                  f.status().code() == ErrorCode::weights_bad_tensor)
          << f.status().to_string();
      EXPECT_EQ(f.status().message().rfind(name + ": ", 0), 0u) << f.status().message();
      EXPECT_EQ(f.status().message().find('\n'), std::string::npos);
    }
    if (name.rfind("valid_", 0) == 0) {
      ++n_valid;
      EXPECT_TRUE(f.ok()) << f.status().to_string();
    } else if (name.rfind("invalid_", 0) == 0) {
      ++n_invalid;
      EXPECT_FALSE(f.ok());
    }
  }
  // The generator (fuzz/make_fuzz_corpus.py) writes 7 valid and 28 invalid seeds.
  EXPECT_GE(n_valid, 7u);
  EXPECT_GE(n_invalid, 28u);
  EXPECT_LT(n_files, 200u) << "keep the committed corpus minimised";
}

}  // namespace
}  // namespace ds
