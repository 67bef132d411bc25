#include "base/status.h"

#include <gtest/gtest.h>

namespace ds {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return Status(ErrorCode::invalid_argument, "value must be positive");
  return v;
}

Result<int> doubled(int v) {
  DS_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

Status check(int v) {
  DS_TRY(parse_positive(v).status());
  return ok_status();
}

TEST(Status, OkAndErrorCarryCodeKindAndMessage) {
  EXPECT_TRUE(Status().ok());
  Status s(ErrorCode::weights_bad_header, "a.safetensors: bad");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.kind(), ErrorKind::user);
  EXPECT_EQ(s.to_string(), "weights_bad_header: a.safetensors: bad");
  EXPECT_EQ(Status(ErrorCode::kvcache_out_of_blocks, "x").kind(), ErrorKind::retryable);
  EXPECT_EQ(Status(ErrorCode::internal, "x").kind(), ErrorKind::bug);
}

TEST(Result, PropagatesThroughMacros) {
  auto ok = doubled(21);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 42);
  auto bad = doubled(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::invalid_argument);
  EXPECT_TRUE(check(3).ok());
  EXPECT_EQ(check(0).code(), ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace ds
