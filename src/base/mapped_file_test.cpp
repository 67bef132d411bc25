#include "base/mapped_file.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace ds {
namespace {

TEST(MappedFile, MapsContentsAndReportsMissingFileByName) {
  const auto path = std::filesystem::temp_directory_path() / "ds_mapped_file_test.bin";
  {
    std::ofstream out(path, std::ios::binary);
    out << "hello";
  }
  auto f = MappedFile::open(path.string());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  ASSERT_EQ(f->size(), 5u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f->data()), 5), "hello");
  MappedFile moved = std::move(*f);
  EXPECT_EQ(moved.size(), 5u);
  std::filesystem::remove(path);

  auto missing = MappedFile::open("/nonexistent/dir/x.safetensors");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::io_error);
  EXPECT_NE(missing.status().message().find("/nonexistent/dir/x.safetensors"), std::string::npos);
}

TEST(MappedFile, DirectoryIsNotARegularFile) {
  auto d = MappedFile::open(std::filesystem::temp_directory_path().string());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), ErrorCode::io_error);
}

}  // namespace
}  // namespace ds
