#include "feedline/status.h"

#include <memory>
#include <set>
#include <string>

#include "gtest/gtest.h"

namespace feedline {
namespace {

TEST(StatusTest, DefaultIsOkWithEmptyMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = DataLossError("shard a.fls record 3: checksum mismatch");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.ToString(), "DataLoss: shard a.fls record 3: checksum mismatch");
}

TEST(StatusTest, OkCodeNeverCarriesAMessage) {
  EXPECT_TRUE(Status(StatusCode::kOk, "ignored").ok());
}

TEST(StatusTest, CopiesAreIndependentAndEqual) {
  Status a = NotFoundError("x");
  Status b = a;
  EXPECT_EQ(a, b);
  b = InternalError("y");
  EXPECT_EQ(a.message(), "x");
  EXPECT_NE(a, b);
}

TEST(StatusTest, WithContextPrependsAndKeepsCode) {
  Status s = UnavailableError("timed out").WithContext("GET http://127.0.0.1/a");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "GET http://127.0.0.1/a: timed out");
  EXPECT_TRUE(Status::OK().WithContext("ctx").ok());
}

TEST(StatusTest, EveryCodeHasADistinctName) {
  std::set<std::string_view> names;
  for (int c = 0; c <= 15; ++c) names.insert(StatusCodeName(static_cast<StatusCode>(c)));
  EXPECT_EQ(names.size(), 16u);
}

Result<int> Half(int x) {
  if (x % 2) return InvalidArgumentError("odd");
  return x / 2;
}

Status Quarter(int x, int* out) {
  FEEDLINE_ASSIGN_OR_RETURN(int h, Half(x));
  FEEDLINE_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::OK();
}

TEST(ResultTest, HoldsValueOrError) {
  Result<int> ok = Half(8);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 4);
  EXPECT_TRUE(ok.status().ok());
  Result<int> bad = Half(3);
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(ResultTest, AssignOrReturnPropagates) {
  int out = 0;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  EXPECT_EQ(Quarter(6, &out).code(), StatusCode::kInvalidArgument);
}

TEST(ResultTest, MoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 7);
}

TEST(ResultDeathTest, ValueOfErrorAborts) {
  Result<int> bad = Half(3);
  EXPECT_DEATH((void)bad.value(), "Result holding an error: InvalidArgument: odd");
}

}  // namespace
}  // namespace feedline
