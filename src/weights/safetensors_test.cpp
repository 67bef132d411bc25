#include "weights/safetensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "weights/safetensors_writer.h"
#include "weights/weights_test_util.h"

namespace ds {
namespace {

using Json = nlohmann::json;
using testing_util::raw_safetensors;
using testing_util::read_bytes;
using testing_util::ScratchDir;
using testing_util::to_bytes;
using testing_util::write_bytes;

std::vector<uint8_t> iota_bytes(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 7 + 3);
  return v;
}

TEST(Safetensors, RoundTripsEveryDtypeShapeAndMetadata) {
  ScratchDir dir;
  SafetensorsWriter w;
  struct Spec {
    std::string name;
    DType dtype;
    Shape shape;
  };
  const std::vector<Spec> specs = {
      {"f64", DType::f64, {2}},        {"f32", DType::f32, {2, 3}},
      {"f16", DType::f16, {5}},        {"bf16", DType::bf16, {1, 2, 3, 1}},
      {"fp8", DType::f8_e4m3, {3, 4}}, {"e8m0", DType::f8_e8m0, {7}},
      {"i64", DType::i64, {1}},        {"i32", DType::i32, {3}},
      {"i16", DType::i16, {2, 2}},     {"i8", DType::i8, {9}},
      {"u8", DType::u8, {1, 1}},       {"bool", DType::boolean, {4}},
      {"scalar", DType::f32, {}},      {"empty", DType::bf16, {0, 16}},
  };
  for (const Spec& s : specs) {
    ASSERT_TRUE(w.add(s.name, s.dtype, s.shape,
                      iota_bytes(static_cast<size_t>(s.shape.numel()) * dtype_size(s.dtype)))
                    .ok());
  }
  w.set_metadata("format", "pt");
  ASSERT_TRUE(w.write(dir.file("m.safetensors")).ok());

  auto f = SafetensorsFile::open(dir.file("m.safetensors"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->path(), dir.file("m.safetensors"));
  EXPECT_EQ(f->tensors().size(), specs.size());
  EXPECT_EQ(f->metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  for (const Spec& s : specs) {
    const TensorEntry* t = f->find(s.name);
    ASSERT_NE(t, nullptr) << s.name;
    EXPECT_EQ(t->dtype, s.dtype) << s.name;
    EXPECT_TRUE(t->shape == s.shape) << s.name << " " << t->shape.to_string();
    const auto expected = iota_bytes(static_cast<size_t>(s.shape.numel()) * dtype_size(s.dtype));
    ASSERT_EQ(t->nbytes, expected.size()) << s.name;
    EXPECT_EQ(std::vector<uint8_t>(t->data, t->data + t->nbytes), expected) << s.name;
    EXPECT_EQ(t->file, &f->path());
    EXPECT_EQ(t->view().nbytes(), t->nbytes);
  }
  EXPECT_EQ(f->find("nope"), nullptr);
  // Entries stay valid after the file object moves (the mapping and the path do not move).
  SafetensorsFile moved = std::move(*f);
  const TensorEntry* t = moved.find("f32");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(*t->file, dir.file("m.safetensors"));
  EXPECT_EQ(t->data[0], iota_bytes(1)[0]);
}

TEST(Safetensors, EmptyHeaderAndZeroSizeTensorsAreLegal) {
  const auto empty = raw_safetensors("{}", 0);
  EXPECT_TRUE(SafetensorsFile::parse(empty.data(), empty.size(), "e").ok());
  const auto zeros = raw_safetensors(
      R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
      R"("c":{"dtype":"I8","shape":[3,0],"data_offsets":[2,2]}})",
      2);
  auto f = SafetensorsFile::parse(zeros.data(), zeros.size(), "z");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->find("a")->nbytes, 0u);
  EXPECT_EQ(f->find("c")->shape.numel(), 0);
}

TEST(Safetensors, DeeplyNestedHeaderIsRejectedWithoutRecursion) {
  // 1M levels would overflow the stack of a recursive parser or destructor.
  const size_t depth = 1'000'000;
  const std::string header = "{\"a\":" + std::string(depth, '[') + std::string(depth, ']') + "}";
  const auto bytes = raw_safetensors(header, 0);
  auto f = SafetensorsFile::parse(bytes.data(), bytes.size(), "deep");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ErrorCode::weights_bad_tensor);
  EXPECT_NE(f.status().message().find("'a': entry is not an object"), std::string::npos)
      << f.status().message();
}

TEST(Safetensors, OpenReportsMissingFileByName) {
  auto f = SafetensorsFile::open("/nonexistent/x.safetensors");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ErrorCode::io_error);
  EXPECT_NE(f.status().message().find("/nonexistent/x.safetensors"), std::string::npos);
}

// ---- Corruptions of a valid file -------------------------------------------------------------

class SafetensorsCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    SafetensorsWriter w;
    ASSERT_TRUE(w.add("layer.weight", DType::f32, {2, 2}, iota_bytes(16)).ok());
    ASSERT_TRUE(w.add("layer.bias", DType::bf16, {2}, iota_bytes(4)).ok());
    path_ = dir_.file("model.safetensors");
    ASSERT_TRUE(w.write(path_).ok());
    bytes_ = read_bytes(path_);
    ASSERT_TRUE(SafetensorsFile::open(path_).ok());
    for (int i = 0; i < 8; ++i) header_len_ |= static_cast<uint64_t>(bytes_[i]) << (8 * i);
    header_ = Json::parse(
        std::string(bytes_.begin() + 8, bytes_.begin() + 8 + static_cast<ptrdiff_t>(header_len_)));
  }

  // Rewrites the file with `header` (re-padded) in front of the original data section.
  void rewrite_header(const Json& header, size_t data_delta_bytes = 0, bool shrink = false) {
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    const size_t old_data_bytes = bytes_.size() - 8 - header_len_;
    ASSERT_LE(shrink ? data_delta_bytes : 0, old_data_bytes);
    const size_t new_data_bytes =
        shrink ? old_data_bytes - data_delta_bytes : old_data_bytes + data_delta_bytes;
    // raw_safetensors fills the data section with 0, 1, 2, ...; overwrite the kept prefix.
    auto out = raw_safetensors(text, new_data_bytes);
    std::memcpy(out.data() + 8 + text.size(), bytes_.data() + 8 + header_len_,
                std::min(old_data_bytes, new_data_bytes));
    write_bytes(path_, out);
  }

  // Opens the corrupted file and checks the code and that the message is one line naming the
  // file, the tensor (when given) and the problem.
  void expect_error(ErrorCode code, const std::string& tensor, const std::string& what) {
    auto f = SafetensorsFile::open(path_);
    ASSERT_FALSE(f.ok()) << "corrupted file accepted: expected " << what;
    const std::string& msg = f.status().message();
    EXPECT_EQ(f.status().code(), code) << msg;
    EXPECT_EQ(msg.rfind(path_ + ": ", 0), 0u) << msg;
    if (!tensor.empty()) {
      EXPECT_NE(msg.find("'" + tensor + "'"), std::string::npos) << msg;
    }
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }

  ScratchDir dir_;
  std::string path_;
  std::vector<uint8_t> bytes_;
  uint64_t header_len_ = 0;
  Json header_;
};

TEST_F(SafetensorsCorruption, FileShorterThanEightBytes) {
  for (size_t keep : {0u, 1u, 7u}) {
    write_bytes(path_, std::vector<uint8_t>(bytes_.begin(), bytes_.begin() + static_cast<ptrdiff_t>(keep)));
    expect_error(ErrorCode::weights_bad_header, "", "shorter than the 8-byte header length");
  }
}

TEST_F(SafetensorsCorruption, TruncatedInsideTheHeader) {
  write_bytes(path_, std::vector<uint8_t>(bytes_.begin(), bytes_.begin() + 20));
  expect_error(ErrorCode::weights_bad_header, "", "exceeds file size 20");
}

TEST_F(SafetensorsCorruption, TruncatedInsideTheData) {
  bytes_.pop_back();
  write_bytes(path_, bytes_);
  expect_error(ErrorCode::weights_bad_tensor, "", "beyond the data section");
}

TEST_F(SafetensorsCorruption, HeaderLengthOverTheCap) {
  const uint64_t huge = (100ull << 20) + 1;
  for (int i = 0; i < 8; ++i) bytes_[i] = static_cast<uint8_t>(huge >> (8 * i));
  write_bytes(path_, bytes_);
  expect_error(ErrorCode::weights_bad_header, "", "exceeds the 104857600-byte limit");
  for (int i = 0; i < 8; ++i) bytes_[i] = 0xff;  // 2^64 - 1: no wrap-around in the size check
  write_bytes(path_, bytes_);
  expect_error(ErrorCode::weights_bad_header, "", "limit");
}

TEST_F(SafetensorsCorruption, HeaderNotUtf8) {
  const size_t pos = 8 + std::string(bytes_.begin() + 8, bytes_.end()).find("layer.bias") + 1;
  bytes_[pos] = 0xff;
  write_bytes(path_, bytes_);
  expect_error(ErrorCode::weights_bad_header, "", "header is not valid UTF-8");
  bytes_[pos] = 0xc0;  // overlong lead byte
  bytes_[pos + 1] = 0x80;
  write_bytes(path_, bytes_);
  expect_error(ErrorCode::weights_bad_header, "", "header is not valid UTF-8");
}

TEST_F(SafetensorsCorruption, HeaderNotJson) {
  bytes_[8] = '[';  // '{' -> '['
  write_bytes(path_, bytes_);
  expect_error(ErrorCode::weights_bad_header, "", "header is not valid JSON");
}

TEST_F(SafetensorsCorruption, HeaderNotAnObject) {
  rewrite_header(Json::array({1, 2}));
  expect_error(ErrorCode::weights_bad_header, "", "header is not a JSON object");
}

TEST_F(SafetensorsCorruption, DuplicateTensorName) {
  // Two entries for layer.bias; nlohmann would silently keep one.
  std::string text = header_.dump();
  const std::string entry = "\"layer.bias\":" + header_["layer.bias"].dump() + ",";
  text.insert(1, entry);
  text.append((8 - text.size() % 8) % 8, ' ');
  auto out = raw_safetensors(text, 0);
  out.insert(out.end(), bytes_.begin() + 8 + static_cast<ptrdiff_t>(header_len_), bytes_.end());
  write_bytes(path_, out);
  expect_error(ErrorCode::weights_bad_header, "layer.bias", "appears twice");
}

TEST_F(SafetensorsCorruption, EntryNotAnObject) {
  header_["layer.bias"] = Json::array({1});
  rewrite_header(header_);
  expect_error(ErrorCode::weights_bad_tensor, "layer.bias", "entry is not an object");
}

TEST_F(SafetensorsCorruption, MissingFields) {
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    Json h = header_;
    h["layer.weight"].erase(field);
    rewrite_header(h);
    SCOPED_TRACE(field);
    expect_error(ErrorCode::weights_bad_tensor, "layer.weight", std::string("missing ") + field);
  }
}

TEST_F(SafetensorsCorruption, BadDtype) {
  header_["layer.weight"]["dtype"] = "F31";
  rewrite_header(header_);
  expect_error(ErrorCode::weights_bad_tensor, "layer.weight", "unknown dtype 'F31'");
  header_["layer.weight"]["dtype"] = 4;
  rewrite_header(header_);
  expect_error(ErrorCode::weights_bad_tensor, "layer.weight", "dtype is not a string");
}

TEST_F(SafetensorsCorruption, BadShapes) {
  struct Case {
    Json shape;
    const char* what;
  };
  const Case cases[] = {
      {"[2,2]", "shape is not an array"},
      {Json::array({2, -2}), "non-negative integers"},
      {Json::array({2, 2.0}), "non-negative integers"},
      {Json::array({2, "2"}), "non-negative integers"},
      {Json::array({1, 1, 1, 2, 2}), "rank 5 exceeds 4"},
      {Json::array({1ull << 32, 1ull << 32}), "overflows the byte count"},
      {Json::array({18446744073709551615ull}), "overflows the byte count"},
  };
  for (const Case& c : cases) {
    Json h = header_;
    h["layer.weight"]["shape"] = c.shape;
    rewrite_header(h);
    SCOPED_TRACE(c.shape.dump());
    expect_error(ErrorCode::weights_bad_tensor, "layer.weight", c.what);
  }
}

TEST_F(SafetensorsCorruption, ShapeDisagreesWithByteCount) {
  header_["layer.weight"]["shape"] = Json::array({2, 3});
  rewrite_header(header_);
  expect_error(ErrorCode::weights_bad_tensor, "layer.weight", "span 16 bytes but F32 [2, 3] needs 24");
}

TEST_F(SafetensorsCorruption, BadDataOffsets) {
  struct Case {
    Json offsets;
    const char* what;
  };
  const Case cases[] = {
      {Json::array({0}), "two non-negative integers"},
      {Json::array({0, 16, 32}), "two non-negative integers"},
      {Json::array({-16, 0}), "two non-negative integers"},
      {Json::array({0.0, 16}), "two non-negative integers"},
      {Json::object(), "two non-negative integers"},
      {Json::array({16, 0}), "begin after end"},
      {Json::array({8, 1000}), "beyond the data section (20 bytes)"},
  };
  for (const Case& c : cases) {
    Json h = header_;
    h["layer.weight"]["data_offsets"] = c.offsets;
    rewrite_header(h);
    SCOPED_TRACE(c.offsets.dump());
    expect_error(ErrorCode::weights_bad_tensor, "layer.weight", c.what);
  }
}

TEST_F(SafetensorsCorruption, OverlappingTensors) {
  // bias moved to [12, 16): inside weight's [0, 16); data section trimmed so nothing else fails first.
  header_["layer.weight"]["data_offsets"] = Json::array({0, 16});
  header_["layer.bias"]["data_offsets"] = Json::array({12, 16});
  rewrite_header(header_, 4, /*shrink=*/true);
  auto f = SafetensorsFile::open(path_);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ErrorCode::weights_bad_tensor);
  EXPECT_NE(f.status().message().find("overlap"), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find("'layer.weight'"), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find("'layer.bias'"), std::string::npos) << f.status().message();
}

TEST_F(SafetensorsCorruption, HoleInTheDataSection) {
  // The data section is [bias 0..4)[weight 4..20) (larger elements first); move weight up by 4.
  ASSERT_EQ(header_["layer.weight"]["data_offsets"], Json::array({0, 16}));
  header_["layer.weight"]["data_offsets"] = Json::array({4, 20});
  header_["layer.bias"]["data_offsets"] = Json::array({20, 24});
  rewrite_header(header_, 4);
  expect_error(ErrorCode::weights_bad_tensor, "layer.weight", "hole in the data section: bytes [0, 4)");
}

TEST_F(SafetensorsCorruption, TrailingBytesAfterTheLastTensor) {
  rewrite_header(header_, 3);
  expect_error(ErrorCode::weights_bad_header, "", "3 trailing bytes");
}

TEST_F(SafetensorsCorruption, BadMetadata) {
  header_["__metadata__"] = Json::array({"x"});
  rewrite_header(header_);
  expect_error(ErrorCode::weights_bad_header, "", "__metadata__ is not an object");
  header_["__metadata__"] = {{"format", "pt"}, {"version", 2}};
  rewrite_header(header_);
  expect_error(ErrorCode::weights_bad_header, "version", "is not a string");
}

TEST_F(SafetensorsCorruption, EmptyTensorName) {
  header_[""] = header_["layer.bias"];
  header_.erase("layer.bias");
  rewrite_header(header_);
  expect_error(ErrorCode::weights_bad_tensor, "", "empty tensor name");
}

TEST_F(SafetensorsCorruption, HostileNamesKeepTheMessageOnOneLine) {
  const std::string name = "evil\nname\x01" + std::string(500, 'x');
  header_[name] = header_["layer.bias"];
  header_[name]["dtype"] = "NOPE";
  header_.erase("layer.bias");
  rewrite_header(header_);
  auto f = SafetensorsFile::open(path_);
  ASSERT_FALSE(f.ok());
  const std::string& msg = f.status().message();
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_NE(msg.find("'evil\\nname\\x01xxx"), std::string::npos) << msg;
  EXPECT_LT(msg.size(), 400u);
}

}  // namespace
}  // namespace ds
