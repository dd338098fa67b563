// RandomErasing, MixUp and CutMix (src/image/augment_ops.cc): parameter
// checks, the draws' ranges and distributions, the kernels on both layouts
// and every dtype, and the erase inside the fused op. Equality with
// torchvision.transforms.v2 is tests/python/test_batch_augment.py's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "feedline/image.h"
#include "tests/image/test_images.h"

namespace feedline {
namespace {

TEST(AugmentOpsTest, EraseChecksNameTheParameter) {
  EraseOp op;
  EXPECT_TRUE(CheckEraseOps({&op, 1}, DType::kFloat32).ok());
  op.scale = {0.5, 1.5};
  Status st = CheckEraseOps({&op, 1}, DType::kFloat32);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("scale"), std::string::npos) << st;
  op = EraseOp();
  op.value = {1, 2};
  st = CheckEraseOps({&op, 1}, DType::kFloat32);
  EXPECT_NE(st.message().find("single value or 3"), std::string::npos) << st;
  op = EraseOp();
  op.random_value = true;
  st = CheckEraseOps({&op, 1}, DType::kUInt8);
  EXPECT_NE(st.message().find("uint8"), std::string::npos) << st;
  op = EraseOp();
  op.value = {300};
  EXPECT_FALSE(CheckEraseOps({&op, 1}, DType::kUInt8).ok());
  EXPECT_TRUE(CheckEraseOps({&op, 1}, DType::kFloat16).ok());
}

TEST(AugmentOpsTest, EraseRectanglesStayInsideAndFollowTheArea) {
  EraseOp op;
  op.p = 1.0;
  double area_sum = 0;
  int erased = 0;
  constexpr int kDraws = 4000;
  for (int i = 0; i < kDraws; ++i) {
    SampleRng rng = SampleRng::ForSample(7, 0, i, 0);
    const EraseRect r = DrawErase(op, 37, 53, rng);
    if (!r.erase) continue;
    ++erased;
    ASSERT_LT(r.height, 37u);
    ASSERT_LT(r.width, 53u);
    ASSERT_LE(r.top + r.height, 37u);
    ASSERT_LE(r.left + r.width, 53u);
    area_sum += double(r.height) * r.width / (37.0 * 53.0);
  }
  // A failed attempt is retried (up to 10), so almost every draw erases,
  // and the kept areas are near uniform on [0.02, 0.33] (mean ~0.175, a
  // little less: large, elongated boxes are the ones refused).
  EXPECT_GT(erased, kDraws * 0.98);
  const double mean = area_sum / erased;
  EXPECT_GT(mean, 0.13);
  EXPECT_LT(mean, 0.19);
  // p = 0: never.
  op.p = 0;
  SampleRng rng = SampleRng::ForSample(7, 0, 0, 0);
  EXPECT_FALSE(DrawErase(op, 37, 53, rng).erase);
  // Every attempt impossible (the area is the whole image): no erase.
  op.p = 1;
  op.scale = {1, 1};
  op.ratio = {1, 1};
  rng = SampleRng::ForSample(7, 0, 0, 0);
  EXPECT_FALSE(DrawErase(op, 10, 10, rng).erase);
}

TEST(AugmentOpsTest, EraseWritesBothLayoutsAndDtypes) {
  const uint32_t c = 3, h = 5, w = 7;
  EraseRect r{true, 1, 2, 3, 4};
  const std::vector<float> values = {0.5f, -1.25f, 2.0f};
  std::vector<float> chw(c * h * w, 9.0f), hwc(c * h * w, 9.0f);
  ApplyErase(r, values, false, DType::kFloat32, Layout::kCHW, c, h, w, chw.data());
  ApplyErase(r, values, false, DType::kFloat32, Layout::kHWC, c, h, w, hwc.data());
  for (uint32_t ch = 0; ch < c; ++ch) {
    for (uint32_t y = 0; y < h; ++y) {
      for (uint32_t x = 0; x < w; ++x) {
        const bool in = y >= 1 && y < 4 && x >= 2 && x < 6;
        const float want = in ? values[ch] : 9.0f;
        EXPECT_EQ(chw[(ch * h + y) * w + x], want);
        EXPECT_EQ(hwc[(y * w + x) * c + ch], want);
      }
    }
  }
  std::vector<uint16_t> half(c * h * w, 0);
  ApplyErase(r, values, false, DType::kFloat16, Layout::kCHW, c, h, w, half.data());
  EXPECT_EQ(half[(0 * h + 1) * w + 2], 0x3800u);  // 0.5
  EXPECT_EQ(half[(1 * h + 1) * w + 2], 0xBD00u);  // -1.25
  std::vector<uint16_t> bf(c * h * w, 0);
  ApplyErase(r, values, false, DType::kBFloat16, Layout::kCHW, c, h, w, bf.data());
  EXPECT_EQ(bf[(2 * h + 1) * w + 2], 0x4000u);  // 2.0
  std::vector<uint8_t> u8(c * h * w, 0);
  const std::vector<float> u8_values = {10.9f, 0.0f, 255.0f};
  ApplyErase(r, u8_values, false, DType::kUInt8, Layout::kCHW, c, h, w, u8.data());
  EXPECT_EQ(u8[(0 * h + 1) * w + 2], 10);  // truncated, as torch casts
  EXPECT_EQ(u8[(2 * h + 3) * w + 5], 255);
}

TEST(AugmentOpsTest, RandomValuesAreStandardNormal) {
  EraseOp op;
  op.random_value = true;
  EraseRect r{true, 0, 0, 100, 100};
  std::vector<float> values;
  SampleRng rng = SampleRng::ForSample(3, 0, 0, 0);
  DrawEraseValues(op, r, 3, rng, &values);
  ASSERT_EQ(values.size(), 30000u);
  double sum = 0, sq = 0;
  for (float v : values) {
    sum += v;
    sq += double(v) * v;
  }
  const double mean = sum / values.size(), var = sq / values.size() - mean * mean;
  EXPECT_LT(std::abs(mean), 0.05);  // 8.7 standard errors
  EXPECT_NEAR(var, 1.0, 0.06);
}

TEST(AugmentOpsTest, BetaMeanAndVariance) {
  for (double a : {0.2, 1.0, 2.5}) {
    SampleRng rng = SampleRng::ForSample(11, 0, 0, 0);
    constexpr int kDraws = 20000;
    double sum = 0, sq = 0;
    for (int i = 0; i < kDraws; ++i) {
      const double x = SampleBeta(a, a, rng);
      ASSERT_GE(x, 0.0);
      ASSERT_LE(x, 1.0);
      sum += x;
      sq += x * x;
    }
    const double mean = sum / kDraws, var = sq / kDraws - mean * mean;
    const double want_var = 1.0 / (4.0 * (2.0 * a + 1.0));  // Beta(a, a)
    EXPECT_NEAR(mean, 0.5, 0.02) << a;
    EXPECT_NEAR(var, want_var, 0.1 * want_var + 0.003) << a;
  }
}

TEST(AugmentOpsTest, BatchMixChecks) {
  BatchMixOp op;
  op.num_classes = 10;
  EXPECT_TRUE(CheckBatchMix({&op, 1}).ok());
  EXPECT_FALSE(CheckBatchMix({}).ok());
  op.alpha = 0;
  EXPECT_NE(CheckBatchMix({&op, 1}).message().find("alpha"), std::string::npos);
  op.alpha = 1;
  op.num_classes = 0;
  EXPECT_NE(CheckBatchMix({&op, 1}).message().find("num_classes"), std::string::npos);
  BatchMixOp two[2];
  two[0].num_classes = 10;
  two[1].num_classes = 11;
  two[1].kind = BatchMixKind::kCutMix;
  EXPECT_NE(CheckBatchMix(two).message().find("differs"), std::string::npos);
}

TEST(AugmentOpsTest, MixUpBlendsWithTheRolledBatch) {
  const uint32_t n = 3, c = 3, h = 2, w = 3, size = c * h * w;
  std::vector<float> images(n * size);
  for (size_t i = 0; i < images.size(); ++i) images[i] = static_cast<float>(i % 17) * 0.25f - 1;
  const std::vector<float> original = images;
  BatchMixParams p;
  p.kind = BatchMixKind::kMixUp;
  p.lam = p.label_lam = 0.3;
  const std::vector<int64_t> labels = {2, 0, 0};
  std::vector<float> soft(n * 4, -1);
  ASSERT_TRUE(ApplyBatchMix(p, DType::kFloat32, Layout::kCHW, n, c, h, w, images.data(), labels, 4,
                            {}, soft.data())
                  .ok());
  const float l = 0.3f, m = static_cast<float>(1.0 - 0.3);
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t j = (i + n - 1) % n;
    for (uint32_t k = 0; k < size; ++k) {
      EXPECT_EQ(images[i * size + k], original[j * size + k] * m + original[i * size + k] * l);
    }
  }
  // Sample 0 (label 2) partners sample 2 (label 0); sample 2 partners 1 (both 0).
  EXPECT_EQ(soft[0 * 4 + 2], l);
  EXPECT_EQ(soft[0 * 4 + 0], m);
  EXPECT_EQ(soft[1 * 4 + 0], l);
  EXPECT_EQ(soft[1 * 4 + 2], m);
  EXPECT_EQ(soft[2 * 4 + 0], m + l);
  EXPECT_EQ(soft[2 * 4 + 1], 0.0f);
}

TEST(AugmentOpsTest, CutMixPastesTheBoxInBothLayouts) {
  const uint32_t n = 2, c = 3, h = 4, w = 5, size = c * h * w;
  BatchMixParams p;
  p.kind = BatchMixKind::kCutMix;
  p.x1 = 1;
  p.x2 = 4;
  p.y1 = 2;
  p.y2 = 4;
  p.label_lam = 1.0 - 6.0 / 20.0;
  for (Layout layout : {Layout::kCHW, Layout::kHWC}) {
    std::vector<uint8_t> images(n * size);
    for (uint32_t i = 0; i < n; ++i) std::fill_n(images.begin() + i * size, size, uint8_t(10 + i));
    const std::vector<int64_t> labels = {0, 1};
    std::vector<float> soft(n * 2);
    ASSERT_TRUE(ApplyBatchMix(p, DType::kUInt8, layout, n, c, h, w, images.data(), labels, 2, {},
                              soft.data())
                    .ok());
    for (uint32_t i = 0; i < n; ++i) {
      for (uint32_t ch = 0; ch < c; ++ch) {
        for (uint32_t y = 0; y < h; ++y) {
          for (uint32_t x = 0; x < w; ++x) {
            const size_t at = layout == Layout::kCHW ? (ch * h + y) * w + x : (y * w + x) * c + ch;
            const bool in = x >= 1 && x < 4 && y >= 2;
            EXPECT_EQ(images[i * size + at], in ? 10 + (1 - i) : 10 + i);
          }
        }
      }
    }
    EXPECT_FLOAT_EQ(soft[0], 0.7f);
    EXPECT_FLOAT_EQ(soft[1], 0.3f);
  }
}

TEST(AugmentOpsTest, BadLabelsAndDtypesAreRefusedNamingTheSample) {
  BatchMixParams p;
  std::vector<float> images(2 * 3 * 2 * 2, 0);
  std::vector<float> soft(2 * 5);
  const std::vector<int64_t> labels = {1, 7};
  const std::vector<uint64_t> ids = {40, 41};
  Status st = ApplyBatchMix(p, DType::kFloat32, Layout::kCHW, 2, 3, 2, 2, images.data(), labels, 5,
                            ids, soft.data());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("label 7 of sample 1"), std::string::npos) << st;
  EXPECT_NE(st.message().find("sample id 41"), std::string::npos) << st;
  std::vector<uint8_t> u8(2 * 3 * 2 * 2);
  const std::vector<int64_t> ok = {1, 2};
  st = ApplyBatchMix(p, DType::kUInt8, Layout::kCHW, 2, 3, 2, 2, u8.data(), ok, 5, {}, soft.data());
  EXPECT_NE(st.message().find("uint8"), std::string::npos) << st;
}

TEST(AugmentOpsTest, CutMixBoxFollowsTorchvision) {
  BatchMixOp op;
  op.kind = BatchMixKind::kCutMix;
  op.num_classes = 3;
  for (int i = 0; i < 2000; ++i) {
    SampleRng rng = SampleRng::ForSample(5, 0, i, 0);
    const BatchMixParams p = DrawBatchMix({&op, 1}, 31, 47, rng);
    ASSERT_LE(p.x1, p.x2);
    ASSERT_LE(p.x2, 47u);
    ASSERT_LE(p.y1, p.y2);
    ASSERT_LE(p.y2, 31u);
    const double area = double(p.x2 - p.x1) * (p.y2 - p.y1);
    ASSERT_DOUBLE_EQ(p.label_lam, 1.0 - area / (31.0 * 47.0));
    // Half sides int(0.5 * sqrt(1 - lam) * W): the unclamped box bounds it.
    const double r = 0.5 * std::sqrt(1.0 - p.lam);
    ASSERT_LE(p.x2 - p.x1, 2 * static_cast<uint32_t>(r * 47));
    ASSERT_LE(p.y2 - p.y1, 2 * static_cast<uint32_t>(r * 31));
  }
}

TEST(AugmentOpsTest, FusedOpErasesTheNormalisedOutput) {
  const RgbImage img = testing::MustDecode(testing::ReadTestFile("photos/rocket.jpg"));
  ASSERT_GT(img.width, 0u);
  const std::vector<uint8_t> bytes = testing::MustEncodeJpeg(img, 90);
  ImageTransform t = ImageNetTrain(64);
  CropBox box;
  box.region_width = img.width;
  box.region_height = img.height;
  box.width = img.width;
  box.height = img.height;
  const size_t n = size_t{3} * 64 * 64;
  std::vector<float> plain(n), erased(n);
  SampleRng rng0 = SampleRng::ForSample(1, 0, 0, 0);
  ASSERT_TRUE(TransformImage(bytes, t, box, plain.data(), &rng0).ok());
  EraseOp op;
  op.p = 1;
  op.value = {-7.5f};
  t.erase_ops = {op};
  SampleRng rng1 = SampleRng::ForSample(1, 0, 0, 0);
  ASSERT_TRUE(TransformImage(bytes, t, box, erased.data(), &rng1).ok());
  SampleRng rng2 = SampleRng::ForSample(1, 0, 0, 0);
  const EraseRect r = DrawErase(op, 64, 64, rng2);
  ASSERT_TRUE(r.erase);
  ASSERT_GT(size_t{r.height} * r.width, 0u);
  size_t changed = 0;  // values the erase actually changed (normalised pixels are never -7.5)
  for (uint32_t c = 0; c < 3; ++c) {
    for (uint32_t y = 0; y < 64; ++y) {
      for (uint32_t x = 0; x < 64; ++x) {
        const size_t k = (size_t{c} * 64 + y) * 64 + x;
        const bool in = y >= r.top && y < r.top + r.height && x >= r.left && x < r.left + r.width;
        ASSERT_EQ(erased[k], in ? -7.5f : plain[k]) << c << " " << y << " " << x;
        changed += erased[k] != plain[k] ? 1 : 0;
      }
    }
  }
  EXPECT_EQ(changed, size_t{3} * r.height * r.width);
  // Without a generator the erase is refused, not skipped.
  EXPECT_EQ(TransformImage(bytes, t, box, erased.data()).code(), StatusCode::kInvalidArgument);
}

TEST(AugmentOpsTest, DirichletWeightsSumToOneWithTheirMoments) {
  // Dirichlet([a] * k): mean 1/k, variance (1/k)(1 - 1/k) / (k a + 1).
  for (double a : {0.02, 0.3, 1.0, 2.5}) {
    for (size_t k : {size_t{2}, size_t{3}, size_t{7}}) {
      SampleRng rng = SampleRng::ForSample(12, 0, k, 0);
      constexpr int kDraws = 20000;
      std::vector<double> w(k), sum(k, 0), sq(k, 0);
      for (int i = 0; i < kDraws; ++i) {
        SampleDirichlet(a, w, rng);
        double total = 0;
        for (size_t j = 0; j < k; ++j) {
          ASSERT_TRUE(w[j] >= 0 && w[j] <= 1) << a << " " << k << " " << w[j];
          total += w[j], sum[j] += w[j], sq[j] += w[j] * w[j];
        }
        ASSERT_NEAR(total, 1.0, 1e-12);
      }
      const double want_var = (1.0 / k) * (1 - 1.0 / k) / (k * a + 1);
      for (size_t j = 0; j < k; ++j) {
        const double mean = sum[j] / kDraws, var = sq[j] / kDraws - mean * mean;
        EXPECT_NEAR(mean, 1.0 / k, 5 * std::sqrt(want_var / kDraws)) << a << " " << k;
        EXPECT_NEAR(var, want_var, 0.06 * want_var) << a << " " << k;
      }
    }
  }
}

}  // namespace
}  // namespace feedline
