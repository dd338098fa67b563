// The resampler's SIMD kernels against the scalar reference, on every
// instruction set Highway compiled that this CPU runs (each forced in turn
// with hwy::SetSupportedTargetsForTest), for every output dtype and layout,
// odd sizes, both filters, flipped or not, up- and downscaling:
//  - every target gives the same bytes (the fixed-point arithmetic is one
//    definition, whatever the vector width);
//  - values stay within two 8-bit levels of the float reference, < 0.1 on
//    average (14-bit coefficients round differently, rarely);
//  - float16 / bfloat16 outputs are exactly the scalar conversions
//    (half.h) of the float32 output, including subnormals and overflow.
// resample_hwy.cc compiles AVX3_DL (VNNI) too: list it here as well.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#include "src/image/resample.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hwy/targets.h"
#include "src/image/half.h"
#include "src/image/resample_hwy.h"
#include "tests/hwy_targets.h"
#include "tests/image/test_images.h"

namespace feedline {
namespace {

struct Case {
  uint32_t iw, ih, ow, oh;
};

std::vector<uint8_t> Resampled(const RgbImage& img, const Case& c, Interpolation interp, bool flip,
                               const image::OutputFormat& f, bool reference) {
  image::AxisPlan ph, pv;
  image::PlanAxis(interp, c.iw, 0.0, double(c.iw) / c.ow, c.ow, &ph);
  image::PlanAxis(interp, c.ih, 0.0, double(c.ih) / c.oh, c.oh, &pv);
  image::RgbSource src{img.pixels.data(), size_t{img.width} * 3, 0, 0};
  std::vector<uint8_t> out(size_t{c.ow} * c.oh * 3 * DTypeSize(f.dtype) + 64);
  // Offset by 4 bytes: the streaming-store path must handle misalignment.
  void* dst = out.data() + 4;
  std::vector<float> scratch;
  if (reference) {
    image::ResampleReference(src, ph, pv, flip, f, &scratch, dst);
  } else {
    image::Resample(src, ph, pv, flip, f, &scratch, dst);
  }
  return {out.begin() + 4,
          out.begin() + 4 + static_cast<ptrdiff_t>(size_t{c.ow} * c.oh * 3 * DTypeSize(f.dtype))};
}

const Case kCases[] = {{1, 1, 1, 1},     {3, 5, 1, 2},     {17, 9, 5, 3},      {97, 61, 13, 7},
                       {97, 61, 31, 45}, {40, 30, 97, 61}, {61, 97, 224, 224}, {255, 129, 63, 65}};

using testing_hwy::Targets;

class ResampleTargetsTest : public testing_hwy::TargetsTest {};

TEST_F(ResampleTargetsTest, EveryTargetGivesTheSameBytesWithinTwoLevelsOfTheReference) {
  const RgbImage img = testing::Noise(255, 129, 9);
  ASSERT_FALSE(Targets().empty());
  for (DType dtype : {DType::kUInt8, DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (Layout layout : {Layout::kCHW, Layout::kHWC}) {
      image::OutputFormat f;
      f.dtype = dtype;
      f.layout = layout;
      for (const Case& c : kCases) {
        for (auto interp : {Interpolation::kBilinear, Interpolation::kBicubic}) {
          for (bool flip : {false, true}) {
            const std::string what =
                std::string(DTypeName(dtype)) + (layout == Layout::kCHW ? " CHW " : " HWC ") +
                std::to_string(c.iw) + "x" + std::to_string(c.ih) + "->" + std::to_string(c.ow) +
                "x" + std::to_string(c.oh) + (flip ? " flip" : "");
            const std::vector<uint8_t> ref = Resampled(img, c, interp, flip, f, true);
            std::vector<uint8_t> first;
            for (int64_t t : Targets()) {
              hwy::SetSupportedTargetsForTest(t);
              const std::vector<uint8_t> got = Resampled(img, c, interp, flip, f, false);
              if (first.empty()) {
                first = got;
              } else {
                ASSERT_EQ(got, first) << what << " on " << hwy::TargetName(t);
              }
            }
            if (dtype != DType::kUInt8 && dtype != DType::kFloat32)
              continue;  // checked through float32 below
            double total = 0;
            const size_t n = first.size() / DTypeSize(dtype);
            for (size_t i = 0; i < n; ++i) {
              double a, b;
              if (dtype == DType::kUInt8) {
                a = first[i];
                b = ref[i];
              } else {
                float fa, fb;
                std::memcpy(&fa, first.data() + 4 * i, 4);
                std::memcpy(&fb, ref.data() + 4 * i, 4);
                a = fa;
                b = fb;
              }
              ASSERT_LE(std::abs(a - b), 2.0) << what << " at " << i;
              total += std::abs(a - b);
            }
            EXPECT_LT(total / n, 0.1) << what;
          }
        }
      }
    }
  }
}

TEST_F(ResampleTargetsTest, HalfAndBFloat16OutputsAreTheScalarConversionsOfTheFloatOutput) {
  const RgbImage img = testing::Noise(97, 61, 3);
  const Case c{97, 61, 45, 31};
  // Scales that reach subnormal halves, ordinary values, and overflow to inf.
  for (float mul : {1e-7f, 3e-6f, 1.0f / 58.4f, 1.0f, 300.0f}) {
    for (float add : {0.0f, -2.1f}) {
      image::OutputFormat f;
      f.mul = {mul, mul * 0.5f, -mul};
      f.add = {add, add, add};
      f.dtype = DType::kFloat32;
      const std::vector<uint8_t> f32 = Resampled(img, c, Interpolation::kBilinear, false, f, false);
      for (int64_t t : Targets()) {
        hwy::SetSupportedTargetsForTest(t);
        for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
          f.dtype = dtype;
          const std::vector<uint8_t> got =
              Resampled(img, c, Interpolation::kBilinear, false, f, false);
          for (size_t i = 0; i < f32.size() / 4; ++i) {
            float v;
            std::memcpy(&v, f32.data() + 4 * i, 4);
            uint16_t h;
            std::memcpy(&h, got.data() + 2 * i, 2);
            const uint16_t want =
                dtype == DType::kFloat16 ? image::FloatToHalf(v) : image::FloatToBFloat16(v);
            ASSERT_EQ(h, want) << DTypeName(dtype) << " of " << v << " (mul " << mul << ") on "
                               << hwy::TargetName(t);
          }
        }
      }
    }
  }
}

TEST(ResampleDispatchTest, TheChosenTargetIsNamed) {
  const std::string name = image::ResampleTargetName();
  std::string all;
  bool tested = false;
  for (int64_t t : Targets()) {
    (all += ' ') += hwy::TargetName(t);
    tested = tested || name == hwy::TargetName(t);
  }
  std::printf("dispatch: %s; tested:%s\n", name.c_str(), all.c_str());
  EXPECT_FALSE(name.empty());
  EXPECT_NE(name, "Unknown");
  // The kernel this CPU runs is among those the tests above compare.
  EXPECT_TRUE(tested) << name << " is not among the tested targets:" << all;
}

}  // namespace
}  // namespace feedline
