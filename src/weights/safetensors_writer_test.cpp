#include "weights/safetensors_writer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "weights/safetensors.h"
#include "weights/weights_test_util.h"

namespace ds {
namespace {

using Json = nlohmann::json;
using testing_util::read_bytes;
using testing_util::ScratchDir;
using testing_util::to_bytes;

std::vector<uint8_t> iota_bytes(size_t n, uint8_t start) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(start + i);
  return v;
}

struct Parsed {
  uint64_t header_len;
  std::string header_text;
  Json header;
};

Parsed split(const std::vector<uint8_t>& bytes) {
  Parsed p{};
  for (int i = 0; i < 8; ++i) p.header_len |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  p.header_text.assign(bytes.begin() + 8, bytes.begin() + 8 + static_cast<ptrdiff_t>(p.header_len));
  p.header = Json::parse(p.header_text);
  return p;
}

TEST(SafetensorsWriter, HeaderIsSortedCompactAndPaddedToEight) {
  ScratchDir dir;
  SafetensorsWriter w;
  ASSERT_TRUE(w.add("b.weight", DType::bf16, {3}, iota_bytes(6, 10)).ok());
  ASSERT_TRUE(w.add("a.weight", DType::u8, {1}, iota_bytes(1, 50)).ok());
  w.set_metadata("format", "pt");
  ASSERT_TRUE(w.write(dir.file("m.safetensors")).ok());
  const auto bytes = read_bytes(dir.file("m.safetensors"));
  const Parsed p = split(bytes);
  EXPECT_EQ(p.header_len % 8, 0u);
  // Data section = header end to file end, exactly the tensors' bytes.
  EXPECT_EQ(bytes.size(), 8 + p.header_len + 7);
  const std::string compact = p.header.dump();  // nlohmann sorts keys, dump() is compact
  EXPECT_EQ(p.header_text.substr(0, compact.size()), compact);
  EXPECT_EQ(p.header_text.find_first_not_of(' ', compact.size()), std::string::npos);
  EXPECT_LT(p.header_text.size() - compact.size(), 8u);
  EXPECT_EQ(p.header["__metadata__"], Json({{"format", "pt"}}));
  // BF16 (2-byte elements) is laid out before U8 so each tensor is aligned to its element size.
  EXPECT_EQ(p.header["b.weight"]["data_offsets"], Json::array({0, 6}));
  EXPECT_EQ(p.header["a.weight"]["data_offsets"], Json::array({6, 7}));
  EXPECT_EQ(p.header["b.weight"]["dtype"], "BF16");
  EXPECT_EQ(p.header["b.weight"]["shape"], Json::array({3}));
  EXPECT_EQ(bytes[8 + p.header_len], 10);
  EXPECT_EQ(bytes[8 + p.header_len + 6], 50);
}

TEST(SafetensorsWriter, LayoutAlignsEveryTensorToItsElementSize) {
  ScratchDir dir;
  SafetensorsWriter w;
  // Names chosen so name order alone would misalign the F64 and F32 tensors.
  ASSERT_TRUE(w.add("a", DType::u8, {3}, iota_bytes(3, 0)).ok());
  ASSERT_TRUE(w.add("b", DType::bf16, {1}, iota_bytes(2, 0)).ok());
  ASSERT_TRUE(w.add("c", DType::f32, {1}, iota_bytes(4, 0)).ok());
  ASSERT_TRUE(w.add("d", DType::f64, {1}, iota_bytes(8, 0)).ok());
  ASSERT_TRUE(w.add("e", DType::f32, {0}, {}).ok());
  ASSERT_TRUE(w.write(dir.file("m.safetensors")).ok());
  auto f = SafetensorsFile::open(dir.file("m.safetensors"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  for (const TensorEntry& t : f->tensors()) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % dtype_size(t.dtype), 0u) << t.name;
  }
}

TEST(SafetensorsWriter, BytesAreDeterministicWhateverTheAddOrder) {
  ScratchDir dir;
  SafetensorsWriter w1, w2;
  ASSERT_TRUE(w1.add("x", DType::f32, {2}, iota_bytes(8, 1)).ok());
  ASSERT_TRUE(w1.add("y", DType::i8, {2, 2}, iota_bytes(4, 9)).ok());
  ASSERT_TRUE(w2.add("y", DType::i8, {2, 2}, iota_bytes(4, 9)).ok());
  ASSERT_TRUE(w2.add("x", DType::f32, {2}, iota_bytes(8, 1)).ok());
  ASSERT_TRUE(w1.write(dir.file("1.safetensors")).ok());
  ASSERT_TRUE(w2.write(dir.file("2.safetensors")).ok());
  EXPECT_EQ(read_bytes(dir.file("1.safetensors")), read_bytes(dir.file("2.safetensors")));
  EXPECT_EQ(w1.total_bytes(), 12u);
  EXPECT_EQ(w1.n_tensors(), 2u);
}

TEST(SafetensorsWriter, AddRejectsInconsistentTensors) {
  SafetensorsWriter w;
  Status wrong_size = w.add("t", DType::f32, {2, 3}, iota_bytes(23, 0));
  EXPECT_EQ(wrong_size.code(), ErrorCode::invalid_argument);
  EXPECT_NE(wrong_size.message().find("'t'"), std::string::npos);
  EXPECT_NE(wrong_size.message().find("expected 24"), std::string::npos);
  ASSERT_TRUE(w.add("t", DType::f32, {2, 3}, iota_bytes(24, 0)).ok());
  EXPECT_EQ(w.add("t", DType::f32, {2, 3}, iota_bytes(24, 0)).code(), ErrorCode::invalid_argument);
  EXPECT_EQ(w.add("__metadata__", DType::u8, {1}, iota_bytes(1, 0)).code(), ErrorCode::invalid_argument);
  EXPECT_EQ(w.add("", DType::u8, {1}, iota_bytes(1, 0)).code(), ErrorCode::invalid_argument);
  EXPECT_EQ(w.add("neg", DType::u8, {-1}, {}).code(), ErrorCode::invalid_argument);
  EXPECT_EQ(w.add("bad\xff", DType::u8, {1}, iota_bytes(1, 0)).code(), ErrorCode::invalid_argument);
  EXPECT_EQ(w.n_tensors(), 1u);
}

TEST(SafetensorsWriter, NonUtf8MetadataIsAnErrorNotAnException) {
  ScratchDir dir;
  SafetensorsWriter w;
  w.set_metadata("k", "caf\xe9");
  EXPECT_EQ(w.write(dir.file("m.safetensors")).code(), ErrorCode::invalid_argument);
  EXPECT_EQ(w.write_sharded(dir.file("d"), 100).code(), ErrorCode::invalid_argument);
  EXPECT_FALSE(std::filesystem::exists(dir.file("m.safetensors")));
}

TEST(SafetensorsWriter, FailedWriteLeavesNoFileBehind) {
  ScratchDir dir;
  SafetensorsWriter w;
  ASSERT_TRUE(w.add("t", DType::u8, {1}, iota_bytes(1, 0)).ok());
  Status s = w.write(dir.file("missing_subdir/m.safetensors"));
  EXPECT_EQ(s.code(), ErrorCode::io_error);
  EXPECT_NE(s.message().find("missing_subdir"), std::string::npos);
  ASSERT_TRUE(w.write(dir.file("m.safetensors")).ok());
  // Only the final file: the temporary was renamed, not left next to it.
  size_t n_files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    ++n_files;
    EXPECT_EQ(e.path().filename(), "m.safetensors");
  }
  EXPECT_EQ(n_files, 1u);
}

TEST(SafetensorsWriter, WriteShardedPacksGreedilyAndWritesTheIndex) {
  ScratchDir dir;
  SafetensorsWriter w;
  ASSERT_TRUE(w.add("a", DType::u8, {40}, iota_bytes(40, 0)).ok());
  ASSERT_TRUE(w.add("b", DType::u8, {50}, iota_bytes(50, 0)).ok());
  ASSERT_TRUE(w.add("c", DType::u8, {200}, iota_bytes(200, 0)).ok());  // larger than a shard: alone
  ASSERT_TRUE(w.add("d", DType::u8, {10}, iota_bytes(10, 0)).ok());
  ASSERT_TRUE(w.write_sharded(dir.file("ckpt"), 100).ok());
  const auto index = Json::parse(read_bytes(dir.file("ckpt/model.safetensors.index.json")));
  EXPECT_EQ(index["metadata"]["total_size"], 300);
  const Json expected_map = {{"a", "model-00001-of-00003.safetensors"},
                             {"b", "model-00001-of-00003.safetensors"},
                             {"c", "model-00002-of-00003.safetensors"},
                             {"d", "model-00003-of-00003.safetensors"}};
  EXPECT_EQ(index["weight_map"], expected_map);
  for (const char* shard : {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                            "model-00003-of-00003.safetensors"}) {
    auto f = SafetensorsFile::open(dir.file(std::string("ckpt/") + shard));
    EXPECT_TRUE(f.ok()) << f.status().to_string();
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("ckpt/model-00001-of-00004.safetensors")));
}

TEST(SafetensorsWriter, WriteShardedWithOneShardStillWritesTheIndex) {
  ScratchDir dir;
  SafetensorsWriter w;
  ASSERT_TRUE(w.add("a", DType::f32, {2}, to_bytes(std::vector<float>{1.0f, 2.0f})).ok());
  ASSERT_TRUE(w.write_sharded(dir.file("one"), size_t{1} << 30).ok());
  const auto index = Json::parse(read_bytes(dir.file("one/model.safetensors.index.json")));
  EXPECT_EQ(index["weight_map"], Json({{"a", "model-00001-of-00001.safetensors"}}));
  EXPECT_TRUE(std::filesystem::exists(dir.file("one/model-00001-of-00001.safetensors")));
}

}  // namespace
}  // namespace ds
