// The colour and pixel ops (src/image/color_ops.cc): parameter checks, the
// draws, and the fused pipeline (table ops composed, the last table folded
// into the output conversion) against the same steps applied one at a time,
// on odd sizes. Equality with torchvision is tests/python/test_pixel_ops.py's.
#include "src/image/color_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "feedline/image.h"
#include "hwy/targets.h"
#include "src/image/color_ops_pixel.h"
#include "tests/image/test_images.h"

namespace feedline {
namespace {

using image::OutputFormat;
using image::PixelScratch;

std::vector<uint8_t> RandomPlanes(uint32_t w, uint32_t h, uint64_t seed) {
  SampleRng rng = SampleRng::ForSample(seed, 0, 0, 0);
  std::vector<uint8_t> px(size_t{w} * h * 3);
  // Smooth-ish content with a narrow range, so autocontrast/equalize act.
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(60 + rng.UniformInt(90));
  return px;
}

std::vector<PixelStep> AllSteps() {
  using K = PixelStepKind;
  return {{K::kBrightness, 1.2}, {K::kInvert},        {K::kContrast, 0.7},
          {K::kPosterize, 5},    {K::kAutocontrast},  {K::kEqualize},
          {K::kSaturation, 1.4}, {K::kSolarize, 200}, {K::kHue, -0.1},
          {K::kSharpness, 1.7},  {K::kContrast, 1.3}, {K::kGaussianBlur, 1.1, 5, 3},
          {K::kBrightness, 0.9}, {K::kAutocontrast},  {K::kGrayscale}};
}

TEST(ColorOpsTest, CheckNamesTheOpAndParameter) {
  PixelOp jitter;
  jitter.has_hue = true;
  jitter.hue = {-0.7, 0.1};
  Status st = CheckPixelOps(std::vector<PixelOp>{PixelOp{}, jitter});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("pixel op 1 (ColorJitter): hue range"), std::string::npos)
      << st.ToString();
  PixelOp blur;
  blur.kind = PixelOpKind::kGaussianBlur;
  blur.kernel_width = 4;
  st = CheckPixelOps(std::vector<PixelOp>{blur});
  EXPECT_NE(st.message().find("GaussianBlur): kernel size"), std::string::npos) << st.ToString();
  PixelOp inv;
  inv.kind = PixelOpKind::kInvert;
  inv.p = 1.5;
  EXPECT_FALSE(CheckPixelOps(std::vector<PixelOp>{inv}).ok());
  ImageTransform t;
  t.pixel_ops = {blur};
  std::vector<uint8_t> out(ImageField(t).SampleBytes());
  st = TransformImage(testing::MustEncodeJpeg(testing::Noise(64, 48, 1), 90), t, CropBox{},
                      out.data());
  EXPECT_NE(st.message().find("kernel size"), std::string::npos) << st.ToString();
}

TEST(ColorOpsTest, FusedChainEqualsOneStepAtATimeOnOddSizes) {
  const std::vector<PixelStep> steps = AllSteps();
  for (auto [w, h] : std::vector<std::pair<uint32_t, uint32_t>>{
           {1, 1}, {2, 3}, {3, 2}, {3, 3}, {7, 5}, {31, 17}, {64, 1}}) {
    for (size_t len = 1; len <= steps.size(); ++len) {
      const std::span<const PixelStep> prefix(steps.data(), len);
      std::vector<uint8_t> one_by_one = RandomPlanes(w, h, w * 100 + h);
      for (const PixelStep& s : prefix) ApplyPixelSteps({&s, 1}, w, h, one_by_one.data());
      std::vector<uint8_t> fused = RandomPlanes(w, h, w * 100 + h);
      std::vector<uint8_t> out(fused.size());
      OutputFormat f;
      f.dtype = DType::kUInt8;
      f.layout = Layout::kCHW;
      PixelScratch scratch;
      image::ApplyStepsAndConvert(prefix, w, h, fused.data(), f, &scratch, out.data());
      ASSERT_EQ(out, one_by_one) << w << "x" << h << ", " << len << " steps";
    }
  }
}

// The SIMD kernels (color_ops_hwy.h: saturation, grayscale, contrast's mean, autocontrast's bounds,
// sharpness, hue, the blur's passes, the float32 CHW conversion, also through a pending table)
// write the scalar reference's bytes on every compiled target: odd sizes down to 1x1, sizes around
// a vector's width, full-range noise, flat extremes and three-level images (ties), factors that
// clamp at both ends, each op alone, after a table op (the flushed table) and chained, into every
// output format.
TEST(ColorOpsTest, EveryTargetWritesTheScalarReferenceBytes) {
  using K = PixelStepKind;
  const std::vector<std::vector<PixelStep>> lists = {
      {{K::kSaturation, 0.0}},
      {{K::kSaturation, 0.37}},
      {{K::kSaturation, 1.9}},
      {{K::kSaturation, 9.0}},
      {{K::kGrayscale}},
      {{K::kContrast, 0.4}},
      {{K::kContrast, 2.7}},
      {{K::kSharpness, 0.0}},
      {{K::kSharpness, 0.55}},
      {{K::kSharpness, 3.1}},
      {{K::kBrightness, 1.3}, {K::kSaturation, 1.6}},
      {{K::kPosterize, 3}, {K::kContrast, 1.5}},
      {{K::kSolarize, 100}, {K::kSharpness, 1.8}},
      {{K::kInvert}, {K::kGrayscale}},
      {{K::kSaturation, 0.6}, {K::kContrast, 1.4}, {K::kSharpness, 2.0}, {K::kGrayscale}},
      {{K::kGaussianBlur, 0.6, 3, 3}},
      {{K::kGaussianBlur, 1.7, 5, 9}},
      {{K::kGaussianBlur, 4.0, 23, 23}},
      {{K::kPosterize, 4}, {K::kGaussianBlur, 1.1, 7, 1}},
      {{K::kHue, -0.5}},
      {{K::kHue, -0.07}},
      {{K::kHue, 0.13}},
      {{K::kHue, 0.5}},
      {{K::kBrightness, 0.8}, {K::kHue, 0.31}},
      {{K::kBrightness, 1.2}, {K::kContrast, 0.8}, {K::kSaturation, 1.3}, {K::kHue, -0.2}},
      // Table ops only: the table is still pending at the conversion.
      {{K::kBrightness, 1.3}},
      {{K::kPosterize, 3}, {K::kSolarize, 100}, {K::kInvert}},
      // Autocontrast's bounds from the planes (identity table) and through a
      // pending table (the histograms).
      {{K::kAutocontrast}},
      {{K::kSolarize, 90}, {K::kAutocontrast}, {K::kEqualize}},
  };
  std::vector<OutputFormat> formats(4);
  formats[0].dtype = DType::kFloat32;  // CHW: the SIMD conversion
  formats[0].mul = {1 / 58.4f, 1 / 57.1f, 1 / 57.4f};
  formats[0].add = {-2.11f, -2.03f, -1.80f};
  formats[1] = formats[0];
  formats[1].layout = Layout::kHWC;
  formats[2].dtype = DType::kUInt8;
  formats[3].dtype = DType::kBFloat16;
  std::vector<int64_t> targets;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) targets.push_back(t);
  ASSERT_FALSE(targets.empty());
  PixelScratch scratch;
  for (auto [w, h] : std::vector<std::pair<uint32_t, uint32_t>>{
           {1, 1}, {2, 3}, {3, 3}, {4, 5}, {17, 9}, {18, 4}, {33, 3}, {37, 53}, {224, 224}}) {
    const size_t n = size_t{w} * h;
    // Noise, flat white, flat black, and three levels (ties between
    // channels: hue's max-channel branches and grey pixels).
    for (int content = 0; content < 4; ++content) {
      std::vector<uint8_t> src(n * 3);
      SampleRng rng = SampleRng::ForSample(w * 7919 + h, 0, 0, 0);
      for (uint8_t& v : src) {
        v = content == 0   ? static_cast<uint8_t>(rng.UniformInt(256))
            : content == 1 ? 255
            : content == 2 ? 0
                           : static_cast<uint8_t>(127 * rng.UniformInt(3));
      }
      for (const std::vector<PixelStep>& steps : lists) {
        for (size_t fi = 0; fi < formats.size(); ++fi) {
          const OutputFormat& f = formats[fi];
          std::vector<uint8_t> px = src;
          // The same filler past a narrower format's bytes.
          std::vector<float> want(n * 3, -1.0f), got(n * 3);
          image::ApplyStepsAndConvert(steps, w, h, px.data(), f, &scratch, want.data(),
                                      /*reference=*/true);
          for (int64_t t : targets) {
            hwy::SetSupportedTargetsForTest(t);
            px = src;
            std::fill(got.begin(), got.end(), -1.0f);
            image::ApplyStepsAndConvert(steps, w, h, px.data(), f, &scratch, got.data());
            hwy::SetSupportedTargetsForTest(0);
            ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
                << hwy::TargetName(t) << " " << w << "x" << h << ", content " << content
                << ", format " << fi << ", first step kind " << static_cast<int>(steps[0].kind)
                << " value " << steps[0].value;
          }
        }
      }
    }
  }
}

// SharpenRow's rounded mean, round(s / 13) = (2 s + 13) / 26, comes from a
// multiply and a shift: the same for every sum a 3x3 window can have.
TEST(ColorOpsTest, TheMultiplyAndShiftOfSharpnessIsTheIntegerQuotient) {
  for (uint32_t s = 0; s <= 13 * 255; ++s) {
    ASSERT_EQ(image::detail::RoundedThirteenth(s), (2 * s + 13) / 26) << s;
  }
}

TEST(ColorOpsTest, ConversionFoldsTheTableIntoEveryOutputFormat) {
  const uint32_t w = 13, h = 7;
  const size_t n = size_t{w} * h;
  using K = PixelStepKind;
  const std::vector<PixelStep> steps = {{K::kBrightness, 1.3}, {K::kPosterize, 6}};
  std::vector<uint8_t> want = RandomPlanes(w, h, 5);
  ApplyPixelSteps(steps, w, h, want.data());
  for (Layout layout : {Layout::kCHW, Layout::kHWC}) {
    for (DType dtype : {DType::kUInt8, DType::kFloat32}) {
      OutputFormat f;
      f.dtype = dtype;
      f.layout = layout;
      f.mul = {0.5f, 2.0f, -1.0f};
      f.add = {1.0f, 0.0f, 3.0f};
      std::vector<uint8_t> px = RandomPlanes(w, h, 5);
      std::vector<float> out(n * 3);
      PixelScratch scratch;
      image::ApplyStepsAndConvert(steps, w, h, px.data(), f, &scratch, out.data());
      for (int c = 0; c < 3; ++c) {
        for (size_t i = 0; i < n; ++i) {
          const size_t at = layout == Layout::kCHW ? c * n + i : i * 3 + c;
          const uint8_t v = want[c * n + i];
          if (dtype == DType::kUInt8) {
            ASSERT_EQ(reinterpret_cast<const uint8_t*>(out.data())[at], v);
          } else {
            ASSERT_EQ(out[at], static_cast<float>(v) * f.mul[c] + f.add[c]);
          }
        }
      }
    }
  }
}

TEST(ColorOpsTest, ColorJitterDrawsEveryOrderAndSkipsNoneFactors) {
  PixelOp op;
  op.has_brightness = op.has_contrast = op.has_saturation = op.has_hue = true;
  op.brightness = {0.5, 1.5};
  op.hue = {-0.2, 0.2};
  std::set<std::vector<int>> orders;
  for (uint64_t id = 0; id < 2000; ++id) {
    SampleRng rng = SampleRng::ForSample(7, 0, id, 0);
    std::vector<PixelStep> steps;
    DrawPixelSteps(std::vector<PixelOp>{op}, rng, &steps);
    ASSERT_EQ(steps.size(), 4u);
    std::vector<int> order;
    for (const PixelStep& s : steps) order.push_back(static_cast<int>(s.kind));
    orders.insert(order);
  }
  EXPECT_EQ(orders.size(), 24u);
  op.has_brightness = op.has_hue = false;
  SampleRng rng = SampleRng::ForSample(7, 0, 0, 0);
  std::vector<PixelStep> steps;
  DrawPixelSteps(std::vector<PixelOp>{op}, rng, &steps);
  ASSERT_EQ(steps.size(), 2u);
  for (const PixelStep& s : steps) {
    EXPECT_TRUE(s.kind == PixelStepKind::kContrast || s.kind == PixelStepKind::kSaturation);
    EXPECT_EQ(s.value, 1.0);  // range {1, 1}
  }
}

TEST(ColorOpsTest, TransformImageRunsTheDrawnStepsAfterTheResample) {
  const std::vector<uint8_t> jpeg = testing::MustEncodeJpeg(testing::Noise(97, 61, 3), 90);
  ImageTransform plain;
  plain.crop = CropMode::kResizeFull;
  plain.height = 33;
  plain.width = 45;
  plain.dtype = DType::kUInt8;
  CropBox box;
  box.region_width = 97;
  box.region_height = 61;
  box.width = 97;
  box.height = 61;
  std::vector<uint8_t> want(ImageField(plain).SampleBytes());
  ASSERT_TRUE(TransformImage(jpeg, plain, box, want.data()).ok());
  ImageTransform t = plain;
  PixelOp jitter;
  jitter.has_contrast = jitter.has_saturation = true;
  jitter.contrast = {0.5, 1.5};
  jitter.saturation = {0.5, 1.5};
  PixelOp blur;
  blur.kind = PixelOpKind::kGaussianBlur;
  t.pixel_ops = {jitter, blur};
  std::vector<uint8_t> got(want.size());
  EXPECT_EQ(TransformImage(jpeg, t, box, got.data()).code(), StatusCode::kInvalidArgument);
  SampleRng rng = SampleRng::ForSample(4, 1, 2, 0);
  ASSERT_TRUE(TransformImage(jpeg, t, box, got.data(), &rng).ok());
  SampleRng again = SampleRng::ForSample(4, 1, 2, 0);
  std::vector<PixelStep> steps;
  DrawPixelSteps(t.pixel_ops, again, &steps);
  ASSERT_EQ(steps.size(), 3u);
  ApplyPixelSteps(steps, plain.width, plain.height, want.data());
  EXPECT_EQ(got, want);
}

TEST(ColorOpsTest, AugMixBlendTruncatesAndRestartsEachChainFromTheOriginal) {
  using K = PixelStepKind;
  const uint32_t w = 7, h = 5;
  const std::vector<uint8_t> px = RandomPlanes(w, h, 4);
  // 0.5 v + 0.25 (255 - v) + 0.25 posterize(v, 5), in float32, truncated.
  const std::vector<PixelStep> steps = {{K::kMixBegin, 0.5},  {K::kMixChain, 0.25}, {K::kInvert},
                                        {K::kMixChain, 0.25}, {K::kPosterize, 5},   {K::kMixEnd}};
  ASSERT_TRUE(CheckPixelSteps(steps).ok());
  std::vector<uint8_t> got = px;
  ApplyPixelSteps(steps, w, h, got.data());
  for (size_t i = 0; i < px.size(); ++i) {
    const float v = px[i];
    const float sum = (0.5f * v + 0.25f * (255.0f - v)) + 0.25f * static_cast<float>(px[i] & 0xF8);
    ASSERT_EQ(got[i], static_cast<uint8_t>(sum)) << i;
  }
  // Through the fused conversion (the table after the mix folded in).
  std::vector<uint8_t> planes = px, out(px.size());
  OutputFormat format;
  format.dtype = DType::kUInt8;
  PixelScratch scratch;
  std::vector<PixelStep> then_invert = steps;
  then_invert.push_back({K::kInvert});
  image::ApplyStepsAndConvert(then_invert, w, h, planes.data(), format, &scratch, out.data());
  for (size_t i = 0; i < px.size(); ++i) ASSERT_EQ(out[i], 255 - got[i]) << i;
}

TEST(ColorOpsTest, MixStepsOutOfPlaceAreRefusedNamingTheStep) {
  using K = PixelStepKind;
  const std::pair<std::vector<PixelStep>, const char*> cases[] = {
      {{{K::kMixChain, 1}}, "pixel step 0: MIX_CHAIN outside"},
      {{{K::kMixEnd}}, "pixel step 0: MIX_END without its MIX_BEGIN"},
      {{{K::kMixBegin, 0.5}, {K::kMixChain, 0.5}}, "a MIX_BEGIN without its MIX_END"},
      {{{K::kMixBegin, 0.5}, {K::kInvert}, {K::kMixChain, 0.5}, {K::kMixEnd}},
       "pixel step 1: an op between MIX_BEGIN and the first MIX_CHAIN"},
      {{{K::kMixBegin, 0.5}, {K::kMixBegin, 0.5}, {K::kMixEnd}}, "pixel step 1: MIX_BEGIN inside"},
      {{{K::kMixBegin, 0.5}, {K::kMixChain, INFINITY}, {K::kMixEnd}},
       "pixel step 1: a chain's weight"},
  };
  for (const auto& [steps, want] : cases) {
    const Status st = CheckPixelSteps(steps);
    EXPECT_NE(st.message().find(want), std::string::npos) << st.ToString() << " / " << want;
    // The kernel still runs them without reading out of bounds (ASan).
    std::vector<uint8_t> px = RandomPlanes(3, 2, 1);
    ApplyPixelSteps(steps, 3, 2, px.data());
  }
}

}  // namespace
}  // namespace feedline
