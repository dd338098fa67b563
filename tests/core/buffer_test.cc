#include "feedline/buffer.h"

#include <cstdint>
#include <cstring>

#include "gtest/gtest.h"

namespace feedline {
namespace {

TEST(HostAllocatorTest, BuffersAreAlignedAndWritable) {
  auto alloc = NewHostAllocator();
  EXPECT_EQ(alloc->name(), "host");
  for (size_t bytes : {size_t{1}, size_t{63}, size_t{64}, size_t{1000}, size_t{1} << 20}) {
    Result<std::unique_ptr<Buffer>> b = alloc->Allocate(bytes);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ((*b)->size(), bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>((*b)->data()) % kBufferAlignment, 0u);
    std::memset((*b)->data(), 0xAB, bytes);  // ASan checks the whole range is ours
  }
}

TEST(HostAllocatorTest, ImpossibleSizeIsResourceExhaustedNamingBytes) {
  Result<std::unique_ptr<Buffer>> b = NewHostAllocator()->Allocate(SIZE_MAX - 8);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(b.status().message().find(std::to_string(SIZE_MAX - 8)), std::string::npos);
}

TEST(FieldSpecTest, SampleBytesMultipliesShapeAndDtype) {
  EXPECT_EQ((FieldSpec{"image", DType::kFloat32, {3, 224, 224}}.SampleBytes()), 3u * 224 * 224 * 4);
  EXPECT_EQ((FieldSpec{"label", DType::kInt64, {}}.SampleBytes()), 8u);
  EXPECT_EQ((FieldSpec{"x", DType::kBFloat16, {5}}.SampleBytes()), 10u);
  EXPECT_EQ((FieldSpec{"bad", DType::kUInt8, {3, 0}}.SampleBytes()), 0u);
  EXPECT_EQ((FieldSpec{"neg", DType::kUInt8, {-1}}.SampleBytes()), 0u);
}

TEST(DTypeTest, NamesAndSizesMatchTorch) {
  EXPECT_EQ(DTypeName(DType::kBFloat16), "bfloat16");
  EXPECT_EQ(DTypeSize(DType::kFloat16), 2u);
  EXPECT_EQ(DTypeSize(DType::kInt64), 8u);
  EXPECT_EQ(DTypeSize(DType::kUInt8), 1u);
}

}  // namespace
}  // namespace feedline
