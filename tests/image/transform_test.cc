// Kernels and crop geometry: half-precision conversion, resampling plans,
// torchvision's boxes, fused output layouts, region and scaled decodes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "feedline/image.h"
#include "gtest/gtest.h"
#include "src/image/half.h"
#include "src/image/jpeg_decoder.h"
#include "src/image/resample.h"
#include "tests/image/test_images.h"

namespace feedline {
namespace {

using image::FloatToBFloat16;
using image::FloatToHalf;

TEST(HalfTest, RoundsToNearestEvenLikeIeee) {
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(0.1f), 0x2E66);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);                      // rounds up to infinity
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);         // smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);         // tie to even: 0
  EXPECT_EQ(FloatToHalf(std::ldexp(1.5f, -24)), 0x0002);         // tie to even: 2
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);         // smallest normal
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie to even
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(FloatToHalf(INFINITY), 0x7C00);
  EXPECT_EQ(FloatToHalf(NAN) & 0x7C00, 0x7C00);
  EXPECT_NE(FloatToHalf(NAN) & 0x03FF, 0);
}

TEST(HalfTest, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);  // tie to even
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  EXPECT_EQ(FloatToBFloat16(-2.5f), 0xC020);
  EXPECT_EQ(FloatToBFloat16(NAN) & 0x7F80, 0x7F80);
  EXPECT_NE(FloatToBFloat16(NAN) & 0x007F, 0);
}

TEST(ResamplePlanTest, WeightsSumToOneAndStayInside) {
  for (auto interp : {Interpolation::kBilinear, Interpolation::kBicubic}) {
    for (uint32_t in : {1u, 7u, 100u, 333u}) {
      for (uint32_t out : {1u, 5u, 224u}) {
        image::AxisPlan p;
        image::PlanAxis(interp, in, 0.0, double(in) / out, out, &p);
        for (uint32_t i = 0; i < out; ++i) {
          float sum = 0;
          for (int32_t k = 0; k < p.count[i]; ++k) sum += p.weights[i * p.taps + k];
          EXPECT_NEAR(sum, 1.0f, 1e-5f);
          EXPECT_GE(p.start[i], 0);
          EXPECT_LE(p.start[i] + p.count[i], static_cast<int32_t>(in));
        }
      }
    }
  }
}

TEST(ResamplePlanTest, SameSizeIsTheIdentity) {
  image::AxisPlan p;
  image::PlanAxis(Interpolation::kBicubic, 10, 0.0, 1.0, 10, &p);
  for (uint32_t i = 0; i < 10; ++i) {
    for (int32_t k = 0; k < p.count[i]; ++k) {
      EXPECT_FLOAT_EQ(p.weights[i * p.taps + k], p.start[i] + k == int32_t(i) ? 1.0f : 0.0f);
    }
  }
}

// The production kernel (fixed-point SIMD horizontal pass) against the float
// reference, on odd sizes, up- and downscaling, both filters, flipped, on
// noise (the worst case). Each pass may round one level differently, so a
// value may differ by up to 2; on average far less.
TEST(ResampleTest, SimdKernelMatchesTheReference) {
  const RgbImage img = testing::Noise(97, 61, 5);
  for (auto interp : {Interpolation::kBilinear, Interpolation::kBicubic}) {
    for (auto [ow, oh] : {std::pair{13u, 7u}, {31u, 45u}, {97u, 61u}, {150u, 101u}, {224u, 224u}}) {
      for (bool flip : {false, true}) {
        image::AxisPlan ph, pv;
        image::PlanAxis(interp, 97, 0.0, 97.0 / ow, ow, &ph);
        image::PlanAxis(interp, 61, 0.0, 61.0 / oh, oh, &pv);
        image::RgbSource src{img.pixels.data(), 97 * 3, 0, 0};
        image::OutputFormat f;
        f.dtype = DType::kUInt8;
        f.layout = Layout::kHWC;
        std::vector<uint8_t> fast(size_t{ow} * oh * 3), ref(fast.size());
        std::vector<float> scratch;
        image::Resample(src, ph, pv, flip, f, &scratch, fast.data());
        image::ResampleReference(src, ph, pv, flip, f, &scratch, ref.data());
        double total = 0;
        for (size_t i = 0; i < fast.size(); ++i) {
          ASSERT_LE(std::abs(int(fast[i]) - int(ref[i])), 2) << ow << "x" << oh << " at " << i;
          total += std::abs(int(fast[i]) - int(ref[i]));
        }
        EXPECT_LT(total / fast.size(), 0.1) << ow << "x" << oh;
      }
    }
  }
}

TEST(CropTest, EvalBoxIsTorchvisionResizeThenCenterCrop) {
  // 500x375 -> Resize(256) -> 341x256; CenterCrop(224): top round(16) = 16,
  // left round(58.5) = 58 (half to even).
  SampleRng rng = SampleRng::ForSample(0, 0, 0, 0);
  CropBox b = ChooseCrop(ImageNetEval(), 500, 375, rng);
  EXPECT_EQ(b.region_width, 500u);
  EXPECT_EQ(b.region_height, 375u);
  EXPECT_DOUBLE_EQ(b.x, 58 * 500.0 / 341);
  EXPECT_DOUBLE_EQ(b.y, 16 * 375.0 / 256);
  EXPECT_DOUBLE_EQ(b.width, 224 * 500.0 / 341);
  EXPECT_FALSE(b.flip);
}

TEST(CropTest, RandomResizedCropsStayInsideAndAreReproducible) {
  const ImageTransform t = ImageNetTrain();
  for (auto [w, h] : {std::pair{1u, 1u}, {3u, 1000u}, {1000u, 3u}, {500u, 375u}, {17u, 9u}}) {
    for (uint64_t id = 0; id < 500; ++id) {
      SampleRng a = SampleRng::ForSample(1, 2, id, 0), b = SampleRng::ForSample(1, 2, id, 0);
      CropBox x = ChooseCrop(t, w, h, a), y = ChooseCrop(t, w, h, b);
      ASSERT_EQ(x.region_x, y.region_x);
      ASSERT_EQ(x.region_width, y.region_width);
      ASSERT_EQ(x.flip, y.flip);
      ASSERT_GT(x.region_width, 0u);
      ASSERT_GT(x.region_height, 0u);
      ASSERT_LE(x.region_x + x.region_width, w);
      ASSERT_LE(x.region_y + x.region_height, h);
    }
  }
}

std::vector<uint8_t> Transform(const std::vector<uint8_t>& bytes, const ImageTransform& t,
                               const CropBox& box) {
  std::vector<uint8_t> out(ImageField(t).SampleBytes());
  Status st = TransformImage(bytes, t, box, out.data());
  EXPECT_TRUE(st.ok()) << st;
  return out;
}

TEST(TransformTest, LayoutsAndFlipAreExactPermutations) {
  const std::vector<uint8_t> jpeg = testing::ReadTestFile("photos/rocket.jpg");
  ImageTransform t = ImageNetTrain(64);
  t.dtype = DType::kUInt8;
  CropBox box{100, 50, 300, 200, 0, 0, 300, 200, false};
  t.layout = Layout::kHWC;
  const std::vector<uint8_t> hwc = Transform(jpeg, t, box);
  t.layout = Layout::kCHW;
  const std::vector<uint8_t> chw = Transform(jpeg, t, box);
  box.flip = true;
  const std::vector<uint8_t> flipped = Transform(jpeg, t, box);
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 64; ++y) {
      for (int x = 0; x < 64; ++x) {
        ASSERT_EQ(chw[(c * 64 + y) * 64 + x], hwc[(y * 64 + x) * 3 + c]);
        ASSERT_EQ(flipped[(c * 64 + y) * 64 + x], chw[(c * 64 + y) * 64 + 63 - x]);
      }
    }
  }
}

TEST(TransformTest, RegionDecodeEqualsTheSameRegionOfAFullDecode) {
  const std::vector<uint8_t> jpeg = testing::ReadTestFile("photos/hubble_deep_field.jpg");
  const RgbImage full = testing::MustDecode(jpeg);
  image::JpegDecoder d;
  for (auto [x0, y0, x1, y1] : {std::array<uint32_t, 4>{0, 0, 1000, 872},
                                {13, 7, 500, 300},
                                {333, 411, 999, 871},
                                {990, 0, 1000, 5}}) {
    ImageInfo info;
    ASSERT_TRUE(d.ReadHeader(jpeg, {}, &info).ok());
    image::RgbRegion r;
    ASSERT_TRUE(d.Decode(8, x0, y0, x1, y1, &r).ok());
    ASSERT_LE(r.x, x0);
    ASSERT_GE(r.x + r.width, x1);
    ASSERT_EQ(r.y, y0);
    for (uint32_t y = y0; y < y1; ++y) {
      ASSERT_EQ(
          std::memcmp(r.pixels + (size_t{y - y0} * r.width + (x0 - r.x)) * 3,
                      full.pixels.data() + (size_t{y} * full.width + x0) * 3, size_t{x1 - x0} * 3),
          0)
          << "row " << y;
    }
  }
}

// libjpeg's fancy upsampling replicates a cropped row's edge columns; the
// decoder widens its crop so that every requested column is upsampled from
// its real neighbours. Before, a 4:2:0 file's region edges differed from the
// full decode by up to 67 levels on noise.
TEST(TransformTest, RegionDecodeOfASubsampledJpegEqualsAFullDecodeAtEveryEdge) {
  for (bool gray : {false, true}) {
    const std::vector<uint8_t> jpeg = testing::MustEncodeJpeg(testing::Noise(150, 41, 5), 90, gray);
    const RgbImage full = testing::MustDecode(jpeg);
    image::JpegDecoder d;
    for (uint32_t x0 = 0; x0 < 149; x0 += 3) {
      for (uint32_t x1 = x0 + 1; x1 <= 150; x1 += 5) {
        for (uint32_t y0 : {0u, 7u, 16u, 33u}) {
          ImageInfo info;
          ASSERT_TRUE(d.ReadHeader(jpeg, {}, &info).ok());
          image::RgbRegion r;
          const uint32_t y1 = std::min(41u, y0 + 8);
          ASSERT_TRUE(d.Decode(8, x0, y0, x1, y1, &r).ok());
          for (uint32_t y = y0; y < y1; ++y) {
            ASSERT_EQ(std::memcmp(r.pixels + (size_t{y - y0} * r.width + (x0 - r.x)) * 3,
                                  full.pixels.data() + (size_t{y} * full.width + x0) * 3,
                                  size_t{x1 - x0} * 3),
                      0)
                << (gray ? "gray" : "4:2:0") << " columns " << x0 << ".." << x1 << " row " << y;
          }
        }
      }
    }
  }
}

TEST(TransformTest, ScaledDecodeStaysCloseToFullDecode) {
  const std::vector<uint8_t> jpeg = testing::ReadTestFile("photos/hubble_deep_field.jpg");
  ImageTransform t = ImageNetEval();
  t.dtype = DType::kUInt8;
  SampleRng rng = SampleRng::ForSample(0, 0, 0, 0);
  const CropBox box = ChooseCrop(t, 1000, 872, rng);  // 256/872 -> 3/8 scale
  const std::vector<uint8_t> scaled = Transform(jpeg, t, box);
  t.dct_scaling = false;
  const std::vector<uint8_t> full = Transform(jpeg, t, box);
  double mse = 0;
  for (size_t i = 0; i < full.size(); ++i) mse += std::pow(double(scaled[i]) - full[i], 2);
  mse /= full.size();
  EXPECT_GT(10 * std::log10(255.0 * 255.0 / mse), 30.0);
}

TEST(TransformTest, InvalidTransformsAreRejected) {
  ImageTransform t = ImageNetEval(200, 224);  // resize smaller than the crop
  std::vector<uint8_t> out(ImageField(t).SampleBytes());
  EXPECT_EQ(TransformImage({}, t, {}, out.data()).code(), StatusCode::kInvalidArgument);
  t = ImageNetTrain();
  t.dtype = DType::kInt64;
  EXPECT_NE(TransformImage({}, t, {}, out.data()).message().find("int64"), std::string::npos);
}

}  // namespace
}  // namespace feedline
