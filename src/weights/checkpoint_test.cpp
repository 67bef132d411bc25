#include "weights/checkpoint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "weights/safetensors_writer.h"
#include "weights/weights_test_util.h"

namespace ds {
namespace {

using Json = nlohmann::json;
using testing_util::bf16_bytes;
using testing_util::read_bytes;
using testing_util::ScratchDir;
using testing_util::to_bytes;
using testing_util::write_bytes;

std::vector<uint8_t> filled(size_t n, uint8_t v) { return std::vector<uint8_t>(n, v); }

void write_index(const std::string& dir, const Json& weight_map) {
  const std::string text = Json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump();
  write_bytes(dir + "/model.safetensors.index.json", std::vector<uint8_t>(text.begin(), text.end()));
}

void write_shard(const std::string& path, const std::vector<std::string>& names) {
  SafetensorsWriter w;
  for (const auto& n : names) ASSERT_TRUE(w.add(n, DType::u8, {2}, filled(2, 1)).ok());
  ASSERT_TRUE(w.write(path).ok());
}

void expect_open_error(const std::string& dir, ErrorCode code, const std::vector<std::string>& parts) {
  auto c = Checkpoint::open(dir);
  ASSERT_FALSE(c.ok()) << "checkpoint accepted";
  EXPECT_EQ(c.status().code(), code) << c.status().to_string();
  for (const auto& p : parts)
    EXPECT_NE(c.status().message().find(p), std::string::npos) << c.status().message();
  EXPECT_EQ(c.status().message().find('\n'), std::string::npos);
}

TEST(Checkpoint, OpensASingleFileDirectory) {
  ScratchDir dir;
  SafetensorsWriter w;
  ASSERT_TRUE(w.add("b", DType::f32, {2}, to_bytes(std::vector<float>{1.5f, -2.0f})).ok());
  ASSERT_TRUE(w.add("a", DType::u8, {3}, filled(3, 7)).ok());
  ASSERT_TRUE(w.write(dir.file("model.safetensors")).ok());
  auto c = Checkpoint::open(dir.path().string());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->dir(), dir.path().string());
  const auto list = c->tensors();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]->name, "a");
  EXPECT_EQ(list[1]->name, "b");
  EXPECT_EQ(c->total_bytes(), 11u);
  EXPECT_EQ(*c->find("b")->file, dir.file("model.safetensors"));
  EXPECT_EQ(c->find("zzz"), nullptr);
}

TEST(Checkpoint, OpensShardsWrittenByTheWriterAndSurvivesAMove) {
  ScratchDir dir;
  SafetensorsWriter w;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(
        w.add("layers." + std::to_string(i) + ".w", DType::u8, {64}, filled(64, static_cast<uint8_t>(i)))
            .ok());
  }
  ASSERT_TRUE(w.write_sharded(dir.path().string(), 150).ok());  // two tensors per shard
  auto opened = Checkpoint::open(dir.path().string());
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  Checkpoint c = std::move(*opened);
  EXPECT_EQ(c.tensors().size(), 10u);
  EXPECT_EQ(c.total_bytes(), 640u);
  for (int i = 0; i < 10; ++i) {
    auto t = c.get("layers." + std::to_string(i) + ".w", DType::u8, {64});
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    EXPECT_EQ((*t)->data[63], i);
  }
  EXPECT_NE(c.find("layers.9.w")->file->find("model-00005-of-00005.safetensors"), std::string::npos);
}

TEST(Checkpoint, MissingDirectoryContentsIsNamed) {
  ScratchDir dir;
  expect_open_error(dir.path().string(), ErrorCode::not_found,
                    {dir.path().string(), "model.safetensors.index.json", "model.safetensors"});
}

TEST(Checkpoint, IndexNamingAMissingShard) {
  ScratchDir dir;
  write_shard(dir.file("s1.safetensors"), {"a"});
  write_index(dir.path().string(), {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}});
  expect_open_error(dir.path().string(), ErrorCode::io_error, {dir.file("s2.safetensors")});
}

TEST(Checkpoint, IndexedTensorAbsentFromItsShard) {
  ScratchDir dir;
  write_shard(dir.file("s1.safetensors"), {"a"});
  write_index(dir.path().string(), {{"a", "s1.safetensors"}, {"ghost", "s1.safetensors"}});
  expect_open_error(dir.path().string(), ErrorCode::weights_missing_tensor,
                    {"'ghost'", dir.file("s1.safetensors"), "model.safetensors.index.json"});
}

TEST(Checkpoint, IndexedTensorInAnotherShardThanTheIndexSays) {
  ScratchDir dir;
  write_shard(dir.file("s1.safetensors"), {"a"});
  write_shard(dir.file("s2.safetensors"), {"b"});
  write_index(dir.path().string(), {{"a", "s2.safetensors"}, {"b", "s2.safetensors"}});
  expect_open_error(dir.path().string(), ErrorCode::weights_missing_tensor,
                    {"'a'", "is not in shard " + dir.file("s2.safetensors")});
}

TEST(Checkpoint, TensorInTwoShards) {
  ScratchDir dir;
  write_shard(dir.file("s1.safetensors"), {"a", "dup"});
  write_shard(dir.file("s2.safetensors"), {"b", "dup"});
  write_index(dir.path().string(), {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}});
  expect_open_error(dir.path().string(), ErrorCode::weights_bad_tensor,
                    {"'dup'", "two shards", "s1.safetensors", "s2.safetensors"});
}

TEST(Checkpoint, ShardNamesMustStayInsideTheDirectory) {
  ScratchDir dir;
  std::filesystem::create_directories(dir.path() / "inner");
  write_shard(dir.file("outside.safetensors"), {"a"});
  for (const char* bad : {"../outside.safetensors", "/etc/passwd", "sub/x.safetensors", "..", "."}) {
    write_index((dir.path() / "inner").string(), {{"a", bad}});
    SCOPED_TRACE(bad);
    expect_open_error((dir.path() / "inner").string(), ErrorCode::weights_bad_header,
                      {"'a'", "plain file name", "model.safetensors.index.json"});
  }
}

TEST(Checkpoint, MalformedIndex) {
  ScratchDir dir;
  const std::string d = dir.path().string();
  const std::pair<std::string, std::string> cases[] = {
      {"{not json", "not valid JSON"},
      {"[1]", "not a JSON object"},
      {"{\"metadata\": {}}", "missing weight_map"},
      {"{\"weight_map\": [1]}", "weight_map is not an object"},
      {"{\"weight_map\": {\"a\": 3}}", "is not a string"},
  };
  for (const auto& [text, what] : cases) {
    write_bytes(dir.file("model.safetensors.index.json"), std::vector<uint8_t>(text.begin(), text.end()));
    SCOPED_TRACE(text);
    expect_open_error(d, ErrorCode::weights_bad_header, {dir.file("model.safetensors.index.json"), what});
  }
}

TEST(Checkpoint, ACorruptShardFailsTheOpenNamingTheShard) {
  ScratchDir dir;
  write_shard(dir.file("s1.safetensors"), {"a"});
  write_bytes(dir.file("s2.safetensors"), {1, 2, 3});
  write_index(dir.path().string(), {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}});
  expect_open_error(dir.path().string(), ErrorCode::weights_bad_header,
                    {dir.file("s2.safetensors"), "shorter"});
}

TEST(Checkpoint, TensorsAbsentFromTheIndexAreStillReachable) {
  ScratchDir dir;
  write_shard(dir.file("s1.safetensors"), {"a", "extra"});
  write_index(dir.path().string(), {{"a", "s1.safetensors"}});
  auto c = Checkpoint::open(dir.path().string());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_NE(c->find("extra"), nullptr);
}

TEST(Checkpoint, GetChecksDtypeAndShape) {
  ScratchDir dir;
  write_shard(dir.file("model.safetensors"), {"a"});
  auto c = Checkpoint::open(dir.path().string());
  ASSERT_TRUE(c.ok());
  auto missing = c->get("b");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::weights_missing_tensor);
  EXPECT_NE(missing.status().message().find("'b'"), std::string::npos);
  EXPECT_NE(missing.status().message().find(dir.path().string()), std::string::npos);
  auto wrong = c->get("a", DType::f32, {2});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), ErrorCode::weights_shape_mismatch);
  EXPECT_NE(wrong.status().message().find("'a': expected F32 [2], got U8 [2]"), std::string::npos)
      << wrong.status().message();
  EXPECT_FALSE(c->get("a", DType::u8, {1, 2}).ok());
  EXPECT_TRUE(c->get("a", DType::u8, {2}).ok());
}

// ---- load_linear / load_f32 -------------------------------------------------------------------

// W[r, c] as the kernels see it through the WeightMatrix contract.
float dequant(const WeightMatrix& m, int64_t r, int64_t c) {
  const auto* bytes = static_cast<const uint8_t*>(m.data);
  switch (m.format) {
    case WeightFormat::f32: {
      float v;
      std::memcpy(&v, bytes + 4 * (r * m.cols + c), 4);
      return v;
    }
    case WeightFormat::bf16: {
      uint16_t h;
      std::memcpy(&h, bytes + 2 * (r * m.cols + c), 2);
      return bf16_to_f32(h);
    }
    case WeightFormat::fp8_e4m3_block:
      return fp8_e4m3_to_f32(bytes[r * m.cols + c]) *
             m.scales[(r / m.block_rows) * m.scale_cols() + c / m.block_cols];
    case WeightFormat::fp4_e2m1_block:
      return NAN;  // checkpoint_v4_test.cpp covers FP4
  }
  return NAN;
}

class LoadLinear : public ::testing::Test {
 protected:
  // rows and cols are not multiples of the block so the scale grid rounds up: [2, 3].
  static constexpr int64_t kRows = 5, kCols = 9;
  static constexpr int kBlock = 4;

  void add_fp8_weight(const std::string& prefix) {
    std::vector<uint8_t> q(kRows * kCols);
    for (size_t i = 0; i < q.size(); ++i) q[i] = f32_to_fp8_e4m3(static_cast<float>(i % 7) - 3.0f);
    ASSERT_TRUE(w_.add(prefix + ".weight", DType::f8_e4m3, {kRows, kCols}, q).ok());
  }
  Checkpoint open() {
    EXPECT_TRUE(w_.write(dir_.file("model.safetensors")).ok());
    auto c = Checkpoint::open(dir_.path().string());
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return std::move(*c);
  }

  ScratchDir dir_;
  SafetensorsWriter w_;
};

TEST_F(LoadLinear, Bf16AndF32PointIntoTheMapping) {
  std::vector<float> values(kRows * kCols);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.25f * static_cast<float>(i) - 3.0f;
  ASSERT_TRUE(w_.add("p.weight", DType::bf16, {kRows, kCols}, bf16_bytes(values)).ok());
  ASSERT_TRUE(w_.add("q.weight", DType::f32, {kRows, kCols}, to_bytes(values)).ok());
  Checkpoint c = open();
  std::vector<float> storage;
  auto p = load_linear(c, "p", kRows, kCols, kBlock, storage);
  auto q = load_linear(c, "q", kRows, kCols, kBlock, storage);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ(p->format, WeightFormat::bf16);
  EXPECT_EQ(q->format, WeightFormat::f32);
  EXPECT_EQ(p->data, c.find("p.weight")->data);
  EXPECT_EQ(p->scales, nullptr);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t col = 0; col < kCols; ++col) {
      // values are multiples of 0.25 below 8 in magnitude: exact in bf16.
      EXPECT_EQ(dequant(*p, r, col), values[r * kCols + col]);
      EXPECT_EQ(dequant(*q, r, col), values[r * kCols + col]);
    }
  }
  EXPECT_TRUE(storage.empty());
}

TEST_F(LoadLinear, Fp8WithWeightScaleInv) {
  add_fp8_weight("l");
  const std::vector<float> scales = {0.5f, 1.0f, 2.0f, 4.0f, 8.0f, 16.0f};  // [2, 3]
  ASSERT_TRUE(w_.add("l.weight_scale_inv", DType::f32, {2, 3}, to_bytes(scales)).ok());
  Checkpoint c = open();
  std::vector<float> storage;
  auto m = load_linear(c, "l", kRows, kCols, kBlock, storage);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->format, WeightFormat::fp8_e4m3_block);
  EXPECT_EQ(m->block_rows, kBlock);
  EXPECT_EQ(m->block_cols, kBlock);
  EXPECT_EQ(m->scale_rows(), 2);
  EXPECT_EQ(m->scale_cols(), 3);
  EXPECT_EQ(m->scales, reinterpret_cast<const float*>(c.find("l.weight_scale_inv")->data));  // no copy
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t col = 0; col < kCols; ++col) {
      const float q = static_cast<float>((r * kCols + col) % 7) - 3.0f;
      EXPECT_EQ(dequant(*m, r, col), q * scales[(r / kBlock) * 3 + col / kBlock]) << r << "," << col;
    }
  }
}

TEST_F(LoadLinear, Fp8WithE8m0ScaleConvertsIntoStorage) {
  add_fp8_weight("l");
  const std::vector<uint8_t> e8 = {127, 128, 126, 130, 1, 254};  // 1, 2, 0.5, 8, 2^-126, 2^127
  ASSERT_TRUE(w_.add("l.scale", DType::f8_e8m0, {2, 3}, e8).ok());
  Checkpoint c = open();
  std::vector<float> storage;
  auto m = load_linear(c, "l", kRows, kCols, kBlock, storage);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_EQ(storage.size(), 6u);
  EXPECT_EQ(m->scales, storage.data());
  const float expected[6] = {1.0f, 2.0f, 0.5f, 8.0f, 0x1p-126f, 0x1p127f};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(storage[i], expected[i]) << i;
  EXPECT_EQ(dequant(*m, 4, 8), (static_cast<float>((4 * kCols + 8) % 7) - 3.0f) * 0x1p127f);
}

TEST_F(LoadLinear, ShapeAndDtypeErrorsNameTheTensorExpectedAndActual) {
  add_fp8_weight("a");  // scale grid wrong
  ASSERT_TRUE(w_.add("a.weight_scale_inv", DType::f32, {2, 2}, filled(16, 0)).ok());
  add_fp8_weight("b");  // scale dtype wrong
  ASSERT_TRUE(w_.add("b.weight_scale_inv", DType::bf16, {2, 3}, filled(12, 0)).ok());
  add_fp8_weight("c");  // no scale at all
  add_fp8_weight("d");  // E8M0 scale with the wrong dtype
  ASSERT_TRUE(w_.add("d.scale", DType::u8, {2, 3}, filled(6, 127)).ok());
  ASSERT_TRUE(w_.add("e.weight", DType::i8, {kRows, kCols}, filled(kRows * kCols, 0)).ok());
  Checkpoint c = open();
  std::vector<float> storage;
  struct Case {
    std::string prefix;
    int64_t rows, cols;
    ErrorCode code;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"a",
       kRows,
       kCols,
       ErrorCode::weights_shape_mismatch,
       {"'a.weight_scale_inv'", "expected F32 [2, 3], got F32 [2, 2]"}},
      {"b",
       kRows,
       kCols,
       ErrorCode::weights_shape_mismatch,
       {"'b.weight_scale_inv'", "expected F32 [2, 3], got BF16 [2, 3]"}},
      {"c",
       kRows,
       kCols,
       ErrorCode::weights_missing_tensor,
       {"'c.weight'", "'c.weight_scale_inv'", "'c.scale'"}},
      {"d",
       kRows,
       kCols,
       ErrorCode::weights_shape_mismatch,
       {"'d.scale'", "expected F8_E8M0 [2, 3], got U8 [2, 3]"}},
      {"e",
       kRows,
       kCols,
       ErrorCode::weights_shape_mismatch,
       {"'e.weight'", "in_features a multiple of 32 for packed FP4"}},
      {"a",
       kCols,
       kRows,
       ErrorCode::weights_shape_mismatch,
       {"'a.weight'", "expected shape [9, 5], got F8_E4M3 [5, 9]"}},
      {"zz", kRows, kCols, ErrorCode::weights_missing_tensor, {"'zz.weight'"}},
  };
  for (const Case& k : cases) {
    auto m = load_linear(c, k.prefix, k.rows, k.cols, kBlock, storage);
    SCOPED_TRACE(k.prefix);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), k.code) << m.status().to_string();
    for (const auto& p : k.parts)
      EXPECT_NE(m.status().message().find(p), std::string::npos) << m.status().message();
  }
  EXPECT_EQ(load_linear(c, "a", kRows, kCols, 0, storage).status().code(), ErrorCode::invalid_argument);
}

// Files from other writers need not align tensors: misaligned F32 scales are copied, misaligned
// weights are refused (the kernels read them as typed arrays in place).
TEST(LoadLinearAlignment, MisalignedScalesAreCopiedAndMisalignedWeightsRefused) {
  ScratchDir dir;
  const Json header = {
      {"l.weight", {{"dtype", "F8_E4M3"}, {"shape", {5, 9}}, {"data_offsets", {0, 45}}}},
      {"l.weight_scale_inv", {{"dtype", "F32"}, {"shape", {2, 3}}, {"data_offsets", {45, 69}}}},
      {"m.weight", {{"dtype", "BF16"}, {"shape", {1, 2}}, {"data_offsets", {69, 73}}}}};
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  auto bytes = testing_util::raw_safetensors(text, 73);
  const std::vector<float> scales = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
  std::memcpy(bytes.data() + 8 + text.size() + 45, scales.data(), 24);
  write_bytes(dir.file("model.safetensors"), bytes);
  auto c = Checkpoint::open(dir.path().string());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  std::vector<float> storage;
  auto l = load_linear(*c, "l", 5, 9, 4, storage);
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  EXPECT_EQ(l->scales, storage.data());
  EXPECT_EQ(storage, scales);
  auto m = load_linear(*c, "m", 1, 2, 4, storage);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::weights_bad_tensor);
  EXPECT_NE(m.status().message().find("'m.weight': data not aligned"), std::string::npos)
      << m.status().message();
}

TEST_F(LoadLinear, LoadF32ConvertsBf16F16AndF32) {
  const std::vector<float> values = {1.0f, -2.5f, 0.125f, 65504.0f};
  ASSERT_TRUE(w_.add("f32", DType::f32, {2, 2}, to_bytes(values)).ok());
  ASSERT_TRUE(w_.add("bf16", DType::bf16, {4}, bf16_bytes(values)).ok());
  std::vector<uint16_t> h;
  for (float v : values) h.push_back(f32_to_f16(v));
  ASSERT_TRUE(w_.add("f16", DType::f16, {4}, to_bytes(h)).ok());
  ASSERT_TRUE(w_.add("i32", DType::i32, {4}, filled(16, 0)).ok());
  Checkpoint c = open();
  auto a = load_f32(c, "f32", {2, 2});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(*a, values);
  auto b = load_f32(c, "bf16", {4});
  ASSERT_TRUE(b.ok());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ((*b)[i], round_to_bf16(values[i]));
  auto f = load_f32(c, "f16", {4});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f, values);  // all exactly representable in f16

  auto wrong_shape = load_f32(c, "f32", {4});
  ASSERT_FALSE(wrong_shape.ok());
  EXPECT_EQ(wrong_shape.status().code(), ErrorCode::weights_shape_mismatch);
  EXPECT_NE(wrong_shape.status().message().find("expected shape [4], got F32 [2, 2]"), std::string::npos)
      << wrong_shape.status().message();
  auto wrong_dtype = load_f32(c, "i32", {4});
  ASSERT_FALSE(wrong_dtype.ok());
  EXPECT_NE(wrong_dtype.status().message().find("'i32'"), std::string::npos);
  EXPECT_EQ(load_f32(c, "none", {4}).status().code(), ErrorCode::weights_missing_tensor);
}

}  // namespace
}  // namespace ds
