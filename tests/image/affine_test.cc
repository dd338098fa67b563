// The geometric pixel ops and policies (src/image/affine.cc): the inverse
// matrix, the warp's exact cases (identity, whole-pixel shifts, the rotate
// fast paths, fill), and the policies' draws. Equality with torchvision on
// photographs is tests/python/test_affine_policies.py's.
#include "src/image/affine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "feedline/image.h"
#include "hwy/targets.h"

namespace feedline {
namespace {

std::vector<uint8_t> Planes(uint32_t w, uint32_t h, uint64_t seed) {
  SampleRng rng = SampleRng::ForSample(seed, 0, 0, 0);
  std::vector<uint8_t> px(size_t{w} * h * 3);
  for (auto& v : px) v = static_cast<uint8_t>(rng.UniformInt(256));
  return px;
}

PixelStep Affine(double angle, double tx, double ty, double scale, double shx, double shy) {
  PixelStep s;
  s.kind = PixelStepKind::kAffine;
  s.angle = angle, s.translate_x = tx, s.translate_y = ty, s.scale = scale;
  s.shear_x = shx, s.shear_y = shy;
  return s;
}

TEST(AffineTest, InverseMatrixMatchesTorchvisionForms) {
  auto m = image::InverseAffineMatrix(0, 0, 0, 0, 0, 1, 0, 0);
  const double id[6] = {1, 0, 0, 0, 1, 0};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(m[i], id[i], 1e-15);
  // 90 degrees about (0, 0): torchvision's matrix is [cos, sin, 0, -sin, cos, 0].
  m = image::InverseAffineMatrix(0, 0, 90, 0, 0, 1, 0, 0);
  EXPECT_NEAR(m[0], 0, 1e-12);
  EXPECT_NEAR(m[1], 1, 1e-12);
  EXPECT_NEAR(m[3], -1, 1e-12);
  EXPECT_NEAR(m[4], 0, 1e-12);
  // Scale 2 and translate (3, -4): input = (output - t) / 2.
  m = image::InverseAffineMatrix(0, 0, 0, 3, -4, 2, 0, 0);
  EXPECT_NEAR(m[0], 0.5, 1e-15);
  EXPECT_NEAR(m[2], -1.5, 1e-15);
  EXPECT_NEAR(m[5], 2.0, 1e-15);
  // A pure x shear of 45 degrees: x_in = x_out + tan(45) * y_out.
  m = image::InverseAffineMatrix(0, 0, 0, 0, 0, 1, 45, 0);
  EXPECT_NEAR(m[1], 1.0, 1e-12);
  EXPECT_NEAR(m[0], 1.0, 1e-12);
}

TEST(AffineTest, LinspaceIsTorchsFloat32) {
  EXPECT_EQ(image::LinspaceF32(0, 135, 31, 20), 90.0f);
  EXPECT_EQ(image::LinspaceF32(0, 32, 31, 30), 32.0f);
  EXPECT_EQ(image::LinspaceF32(0, 0.99, 31, 0), 0.0f);
  EXPECT_EQ(image::LinspaceF32(1, 0, 31, 30), 0.0f);
  EXPECT_FLOAT_EQ(image::LinspaceF32(0, 0.3, 31, 9), 0.09f);
}

TEST(AffineTest, IdentityAndWholePixelShiftsAreExact) {
  const uint32_t w = 37, h = 23;
  const std::vector<uint8_t> src = Planes(w, h, 1);
  for (auto interp : {WarpInterpolation::kNearest, WarpInterpolation::kBilinear}) {
    std::vector<uint8_t> px = src;
    PixelStep s = Affine(0, 0, 0, 1, 0, 0);
    s.interpolation = interp;
    s.has_fill = true;
    s.fill = {10, 20, 30};
    ApplyPixelSteps(std::vector<PixelStep>{s}, w, h, px.data());
    EXPECT_EQ(px, src);
    // Shift right by 5 and up by 2: out(x, y) = in(x - 5, y + 2), fill outside.
    px = src;
    s.translate_x = 5, s.translate_y = -2;
    ApplyPixelSteps(std::vector<PixelStep>{s}, w, h, px.data());
    for (int c = 0; c < 3; ++c) {
      for (uint32_t y = 0; y < h; ++y) {
        for (uint32_t x = 0; x < w; ++x) {
          const int sx = static_cast<int>(x) - 5, sy = static_cast<int>(y) + 2;
          const bool in = sx >= 0 && sy < static_cast<int>(h);
          const uint8_t want = in ? src[c * w * h + sy * w + sx] : static_cast<uint8_t>(s.fill[c]);
          ASSERT_EQ(px[c * w * h + y * w + x], want) << c << " " << x << " " << y;
        }
      }
    }
  }
}

TEST(AffineTest, RotateFastPathsAreExactCopies) {
  const uint32_t n = 9;
  const std::vector<uint8_t> src = Planes(n, n, 2);
  PixelStep s;
  s.kind = PixelStepKind::kAffine;
  s.rotate = true;
  s.angle = -270;  // counter-clockwise 90 after the modulo
  std::vector<uint8_t> px = src;
  ApplyPixelSteps(std::vector<PixelStep>{s}, n, n, px.data());
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t j = 0; j < n; ++j) ASSERT_EQ(px[i * n + j], src[j * n + (n - 1 - i)]);
  }
  // 180 on a non-square image, and through the general path (179.9999999):
  // the same pixels under NEAREST.
  const uint32_t w = 12, h = 7;
  const std::vector<uint8_t> r = Planes(w, h, 3);
  std::vector<uint8_t> a = r, b = r;
  s.angle = 180;
  ApplyPixelSteps(std::vector<PixelStep>{s}, w, h, a.data());
  s.angle = 180 - 1e-9;
  ApplyPixelSteps(std::vector<PixelStep>{s}, w, h, b.data());
  for (uint32_t i = 0; i < h; ++i) {
    for (uint32_t j = 0; j < w; ++j) ASSERT_EQ(a[i * w + j], r[(h - 1 - i) * w + (w - 1 - j)]);
  }
  EXPECT_EQ(a, b);
}

TEST(AffineTest, BilinearFillBlendsThroughTheInBoundsWeight) {
  // A constant image rotated by 45 degrees: the centre keeps its value, the
  // corners become the fill, and without a fill (fill=None) the edge values
  // fall towards 0 in proportion to the weight inside.
  const uint32_t w = 32, h = 32;
  std::vector<uint8_t> px(size_t{w} * h * 3, 200);
  PixelStep s;
  s.kind = PixelStepKind::kAffine;
  s.rotate = true;
  s.angle = 45;
  s.interpolation = WarpInterpolation::kBilinear;
  s.has_fill = true;
  s.fill = {50, 50, 50};
  std::vector<uint8_t> filled = px, unfilled = px;
  ApplyPixelSteps(std::vector<PixelStep>{s}, w, h, filled.data());
  s.has_fill = false;
  ApplyPixelSteps(std::vector<PixelStep>{s}, w, h, unfilled.data());
  EXPECT_EQ(filled[16 * w + 16], 200);
  EXPECT_EQ(filled[0], 50);
  EXPECT_EQ(unfilled[0], 0);
  // torchvision's blend: without fill, v = 200 m for the in-bounds weight m;
  // with it, (200 m - fill) m + fill (the mask weighs the sampled sum, which
  // already carries m, once more; so edge values dip below the fill).
  size_t between = 0;
  for (size_t i = 0; i < size_t{w} * h; ++i) {
    const double m = unfilled[i] / 200.0;
    EXPECT_NEAR(filled[i], (200 * m - 50) * m + 50, 1.5) << i;
    between += unfilled[i] > 0 && unfilled[i] < 200;
  }
  EXPECT_GT(between, 0u);
}

// Every compiled SIMD target's warp writes the scalar reference's bytes:
// both compute the same float32 operations in the same order. Odd sizes
// (a partial last vector, a 1-pixel image), rotations, shears, scales and
// translations that push samples past every edge, both interpolations,
// with and without fill.
TEST(AffineTest, EveryTargetWarpsAsTheScalarReference) {
  struct Size {
    uint32_t w, h;
  };
  const Size sizes[] = {{1, 1}, {2, 3}, {17, 9}, {37, 53}, {64, 64}, {97, 61}, {224, 224}};
  struct Params {
    double angle, tx, ty, scale, shx, shy;
  };
  const Params params[] = {{17.3, 0, 0, 1, 0, 0},       {-33, 3, -2, 1, 0, 0},
                           {0, 0, 0, 1, 28.5, 0},       {0, 0, 0, 1, 0, -17},
                           {5, -7, 11, 0.7, 9, -4},     {145, 2, 2, 1.6, -20, 12},
                           {89.9, 0, 0, 1, 0, 0},       {0, 0.5, 0, 1, 0, 0},
                           {270.01, -1, 1, 0.35, 0, 0}, {0, 0, 0, 1, 89.99, 0}};
  std::vector<int64_t> targets;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) targets.push_back(t);
  ASSERT_FALSE(targets.empty());
  std::vector<uint8_t> scratch;
  for (const Size& z : sizes) {
    const std::vector<uint8_t> src = Planes(z.w, z.h, z.w * 1000 + z.h);
    for (const Params& p : params) {
      for (auto interp : {WarpInterpolation::kNearest, WarpInterpolation::kBilinear}) {
        for (bool fill : {false, true}) {
          PixelStep s = Affine(p.angle, p.tx, p.ty, p.scale, p.shx, p.shy);
          s.interpolation = interp;
          s.has_fill = fill;
          s.fill = {7, 130, 251};
          std::vector<uint8_t> ref = src;
          image::ApplyAffineStep(s, z.w, z.h, ref.data(), &scratch, /*reference=*/true);
          for (int64_t t : targets) {
            hwy::SetSupportedTargetsForTest(t);
            std::vector<uint8_t> got = src;
            image::ApplyAffineStep(s, z.w, z.h, got.data(), &scratch);
            hwy::SetSupportedTargetsForTest(0);
            size_t first = 0;
            while (first < got.size() && got[first] == ref[first]) ++first;
            ASSERT_EQ(first, got.size())
                << hwy::TargetName(t) << " " << z.w << "x" << z.h << " angle " << p.angle
                << " shear " << p.shx << "," << p.shy << " scale " << p.scale
                << (interp == WarpInterpolation::kNearest ? " nearest" : " bilinear")
                << (fill ? " fill" : "") << ": byte " << first << " is " << int{got[first]}
                << ", the reference's " << int{ref[first]};
          }
        }
      }
    }
  }
}

// Whole-pixel translations take row copies (ApplyAffineStep's shift path):
// the same bytes as the grid's reference, for both interpolations, with and
// without fill, shifts inside, at and past every edge, on odd and even sizes.
TEST(AffineTest, WholePixelTranslationsCopyRowsAsTheGridSamples) {
  const std::pair<uint32_t, uint32_t> sizes[] = {{1, 1}, {2, 3}, {17, 9}, {64, 64}, {97, 61}};
  std::vector<uint8_t> scratch;
  int shifted = 0;
  for (auto [w, h] : sizes) {
    const std::vector<uint8_t> src = Planes(w, h, w * 31 + h);
    const auto iw = static_cast<int>(w), ih = static_cast<int>(h);
    for (int tx : {0, 1, -1, 5, -7, iw - 1, -iw + 1, iw, -iw, iw + 3, 1000}) {
      for (int ty : {0, 2, -3, ih - 1, -ih, ih + 2, -999}) {
        for (auto interp : {WarpInterpolation::kNearest, WarpInterpolation::kBilinear}) {
          for (bool fill : {false, true}) {
            PixelStep s = Affine(0, tx, ty, 1, 0, 0);
            s.interpolation = interp;
            s.has_fill = fill;
            s.fill = {7, 130, 251};
            std::vector<uint8_t> ref = src, got = src;
            image::ApplyAffineStep(s, w, h, ref.data(), &scratch, /*reference=*/true);
            image::ApplyAffineStep(s, w, h, got.data(), &scratch);
            ASSERT_EQ(got, ref) << w << "x" << h << " translate " << tx << "," << ty
                                << (interp == WarpInterpolation::kNearest ? " nearest"
                                                                          : " bilinear")
                                << (fill ? " fill" : "");
            ++shifted;
          }
        }
      }
    }
  }
  EXPECT_EQ(shifted, 5 * 11 * 7 * 4);
}

TEST(AffineTest, CoordinatesFarOutsideGiveTheFill) {
  // A tiny scale maps every output pixel ~1e12 pixels away: all fill, and
  // no out-of-range integer conversion (UBSan would flag one).
  const uint32_t w = 16, h = 12;  // even: no output pixel centre on the image centre
  for (auto interp : {WarpInterpolation::kNearest, WarpInterpolation::kBilinear}) {
    std::vector<uint8_t> px = Planes(w, h, 4);
    PixelStep s = Affine(0, 0, 0, 1e-12, 0, 0);
    s.interpolation = interp;
    s.has_fill = true;
    s.fill = {1, 2, 3};
    ApplyPixelSteps(std::vector<PixelStep>{s}, w, h, px.data());
    for (int c = 0; c < 3; ++c) {
      for (size_t i = 0; i < size_t{w} * h; ++i) ASSERT_EQ(px[c * w * h + i], c + 1);
    }
  }
}

TEST(AffineTest, ChecksNameTheParameter) {
  PixelOp op;
  op.kind = PixelOpKind::kRandAugment;
  op.magnitude = 31;
  Status st = CheckPixelOps(std::vector<PixelOp>{op});
  EXPECT_NE(st.message().find("pixel op 0 (RandAugment): magnitude 31 must be below"),
            std::string::npos)
      << st.ToString();
  op = PixelOp{};
  op.kind = PixelOpKind::kAffine;
  op.has_scale = true;
  op.scale_range = {0, 1};
  st = CheckPixelOps(std::vector<PixelOp>{op});
  EXPECT_NE(st.message().find("(RandomAffine): scale"), std::string::npos) << st.ToString();
  op = PixelOp{};
  op.kind = PixelOpKind::kRotation;
  op.has_fill = true;
  op.fill = {0, 300, 0};
  st = CheckPixelOps(std::vector<PixelOp>{op});
  EXPECT_NE(st.message().find("(RandomRotation): fill"), std::string::npos) << st.ToString();
}

// The kind of step a policy op becomes, for counting.
std::string Describe(const std::vector<PixelStep>& steps) {
  if (steps.empty()) return "Identity";
  const PixelStep& s = steps[0];
  switch (s.kind) {
    case PixelStepKind::kAffine:
      if (s.rotate) return "Rotate";
      if (s.corner_center) return s.shear_y != 0 ? "ShearY" : "ShearX";  // bin 0: "ShearX"
      if (s.translate_x != 0) return "TranslateX";
      if (s.translate_y != 0) return "TranslateY";
      return "Affine0";
    case PixelStepKind::kBrightness: return "Brightness";
    case PixelStepKind::kSaturation: return "Color";
    case PixelStepKind::kContrast: return "Contrast";
    case PixelStepKind::kSharpness: return "Sharpness";
    case PixelStepKind::kPosterize: return "Posterize";
    case PixelStepKind::kSolarize: return "Solarize";
    case PixelStepKind::kAutocontrast: return "AutoContrast";
    case PixelStepKind::kEqualize: return "Equalize";
    default: return "other";
  }
}

TEST(AffineTest, TrivialAugmentWideDrawsEveryOpAndBinValues) {
  PixelOp op;
  op.kind = PixelOpKind::kTrivialAugmentWide;
  std::set<double> brightness, rotate, posterize;
  std::map<std::string, int> seen;
  for (uint64_t i = 0; i < 4000; ++i) {
    SampleRng rng = SampleRng::ForSample(7, 0, i, 0);
    std::vector<PixelStep> steps;
    DrawPixelSteps(std::vector<PixelOp>{op}, rng, &steps);
    ASSERT_LE(steps.size(), 1u);
    ++seen[Describe(steps)];
    if (steps.empty()) continue;
    const PixelStep& s = steps[0];
    if (s.kind == PixelStepKind::kBrightness) brightness.insert(s.value);
    if (s.kind == PixelStepKind::kAffine && s.rotate) rotate.insert(s.angle);
    if (s.kind == PixelStepKind::kPosterize) posterize.insert(s.value);
  }
  // 14 ops (shear counted by axis; a zero shear bin is a no-op affine).
  for (const char* name :
       {"Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color",
        "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize"}) {
    EXPECT_GT(seen[name], 150) << name;  // ~286 expected each
  }
  for (double b : brightness) {
    const double m = std::fabs(b - 1.0);
    const double bin = m / (0.99 / 30);
    EXPECT_NEAR(bin, std::round(bin), 1e-4) << b;
    EXPECT_LE(m, 0.99 + 1e-6);
  }
  EXPECT_GT(brightness.size(), 40u);  // both signs, most of the 31 bins
  EXPECT_TRUE(rotate.count(90.0) && rotate.count(-135.0));
  EXPECT_EQ(posterize, (std::set<double>{2, 3, 4, 5, 6, 7, 8}));
}

TEST(AffineTest, RandAugmentUsesItsFixedMagnitude) {
  PixelOp op;
  op.kind = PixelOpKind::kRandAugment;
  op.num_ops = 2;
  op.magnitude = 9;
  std::set<double> values[16];
  for (uint64_t i = 0; i < 3000; ++i) {
    SampleRng rng = SampleRng::ForSample(11, 0, i, 0);
    std::vector<PixelStep> steps;
    DrawPixelSteps(std::vector<PixelOp>{op}, rng, &steps);
    ASSERT_LE(steps.size(), 2u);
    for (const PixelStep& s : steps) {
      if (s.kind == PixelStepKind::kAffine) {
        if (s.rotate) values[0].insert(s.angle);
        if (s.translate_unit == AffineTranslate::kRandAugment) {
          values[1].insert(s.translate_x + s.translate_y);
        }
      } else {
        values[2 + static_cast<int>(s.kind)].insert(s.value);
      }
    }
  }
  EXPECT_EQ(values[0], (std::set<double>{-9.0, 9.0}));  // linspace(0, 30, 31)[9]
  EXPECT_EQ(values[1], (std::set<double>{-9.0, 9.0}));  // the bin, resolved per image
  const double b = image::LinspaceF32(0, 0.9, 31, 9);
  EXPECT_EQ(values[2 + static_cast<int>(PixelStepKind::kBrightness)],
            (std::set<double>{1.0 - b, 1.0 + b}));
  EXPECT_EQ(values[2 + static_cast<int>(PixelStepKind::kPosterize)], (std::set<double>{7.0}));
  EXPECT_EQ(values[2 + static_cast<int>(PixelStepKind::kSolarize)],
            (std::set<double>{255.0 * image::LinspaceF32(1, 0, 31, 9)}));
}

TEST(AffineTest, RandomAffineDrawsInItsRanges) {
  PixelOp op;
  op.kind = PixelOpKind::kAffine;
  op.degrees = {-10, 20};
  op.has_translate = true;
  op.translate = {0.1, 0.2};
  op.has_scale = true;
  op.scale_range = {0.8, 1.2};
  op.has_shear = op.has_shear_y = true;
  op.shear = {-5, 5, 1, 2};
  double sum_angle = 0;
  const int n = 2000;
  for (int i = 0; i < n; ++i) {
    SampleRng rng = SampleRng::ForSample(3, 0, i, 0);
    std::vector<PixelStep> steps;
    DrawPixelSteps(std::vector<PixelOp>{op}, rng, &steps);
    ASSERT_EQ(steps.size(), 1u);
    const PixelStep& s = steps[0];
    ASSERT_TRUE(s.angle >= -10 && s.angle <= 20);
    ASSERT_TRUE(std::fabs(s.translate_x) <= 0.1 && std::fabs(s.translate_y) <= 0.2);
    ASSERT_EQ(s.translate_unit, AffineTranslate::kRoundFraction);
    ASSERT_TRUE(s.scale >= 0.8 && s.scale <= 1.2);
    ASSERT_TRUE(s.shear_x >= -5 && s.shear_x <= 5 && s.shear_y >= 1 && s.shear_y <= 2);
    sum_angle += s.angle;
  }
  EXPECT_NEAR(sum_angle / n, 5.0, 1.0);  // mean 5, sd of the mean ~0.19
}

PixelOp AugMixOp() {
  PixelOp op;
  op.kind = PixelOpKind::kAugMix;
  op.num_magnitude_bins = 10;
  op.interpolation = WarpInterpolation::kBilinear;
  return op;
}

TEST(AffineTest, AugMixChecksNameTheParameter) {
  const std::pair<void (*)(PixelOp&), const char*> cases[] = {
      {[](PixelOp& o) { o.severity = 0; }, "(AugMix): The severity must be between [1, 10]. Got 0"},
      {[](PixelOp& o) { o.severity = 11; }, "The severity must be between [1, 10]. Got 11"},
      {[](PixelOp& o) { o.mixture_width = 0; }, "mixture_width must be in 1..64, got 0"},
      {[](PixelOp& o) { o.mixture_width = 65; }, "mixture_width must be in 1..64, got 65"},
      {[](PixelOp& o) { o.chain_depth = 65; }, "chain_depth must be at most 64"},
      {[](PixelOp& o) { o.alpha = 0; }, "alpha must be positive"},
      {[](PixelOp& o) { o.alpha = std::nan(""); }, "alpha must be positive"},
      {[](PixelOp& o) { o.num_magnitude_bins = 31; },
       "AugMix's magnitudes come in 10 bins, not 31"},
  };
  EXPECT_TRUE(CheckPixelOps(std::vector<PixelOp>{AugMixOp()}).ok());
  for (const auto& [edit, want] : cases) {
    PixelOp op = AugMixOp();
    edit(op);
    const Status st = CheckPixelOps(std::vector<PixelOp>{op});
    EXPECT_NE(st.message().find(want), std::string::npos) << st.ToString() << " / " << want;
  }
}

TEST(AffineTest, AugMixDrawsChainsOfItsOpsBetweenTheMixMarkers) {
  for (bool all_ops : {true, false}) {
    PixelOp op = AugMixOp();
    op.all_ops = all_ops;
    op.severity = 10;
    op.mixture_width = 4;
    std::map<std::string, int> counts;
    std::set<double> posterize_bits;
    std::map<size_t, int> depths;
    for (uint64_t i = 0; i < 2000; ++i) {
      SampleRng rng = SampleRng::ForSample(3, 0, i, 0);
      std::vector<PixelStep> steps;
      DrawPixelSteps(std::vector<PixelOp>{op}, rng, &steps);
      ASSERT_TRUE(CheckPixelSteps(steps).ok());
      ASSERT_EQ(steps.front().kind, PixelStepKind::kMixBegin);
      ASSERT_EQ(steps.back().kind, PixelStepKind::kMixEnd);
      double weights = steps.front().value;
      size_t chains = 0, depth = 0;
      for (size_t j = 1; j + 1 < steps.size(); ++j) {
        const PixelStep& s = steps[j];
        if (s.kind == PixelStepKind::kMixChain) {
          if (chains++ > 0) ++depths[depth];
          depth = 0;
          weights += s.value;
          continue;
        }
        ++depth;
        ++counts[Describe({s})];
        if (s.kind == PixelStepKind::kPosterize) posterize_bits.insert(s.value);
        if (s.kind == PixelStepKind::kAffine && !s.rotate && !s.corner_center) {
          EXPECT_EQ(s.translate_unit, AffineTranslate::kAugMix);
        }
      }
      ++depths[depth];
      EXPECT_EQ(chains, 4u);
      EXPECT_NEAR(weights, 1.0, 1e-12);
    }
    counts.erase("Affine0");  // a translation at bin 0 (ShearY at bin 0 counts as ShearX)
    EXPECT_EQ(counts.size(), all_ops ? 13u : 9u);
    EXPECT_EQ(counts.count("Brightness"), all_ops ? 1u : 0u);
    EXPECT_EQ(posterize_bits, (std::set<double>{0, 1, 2, 3, 4}));  // 4 - round(bin / 2.25)
    EXPECT_EQ(depths.size(), 3u);
    for (const auto& [d, n] : depths) EXPECT_NEAR(n / 8000.0, 1.0 / 3, 0.03) << d;
  }
}

TEST(AffineTest, AugMixTranslatesByAThirdOfTheSizeInTenBins) {
  // Bin 9 of linspace(0, W / 3, 10) is W / 3: a 30-pixel-wide image moves
  // by 10 pixels (int() of the float32 value).
  const uint32_t w = 30, h = 4;
  std::vector<uint8_t> px = Planes(w, h, 5);
  PixelStep s = Affine(0, -9, 0, 1, 0, 0);
  s.translate_unit = AffineTranslate::kAugMix;
  s.magnitude_bins = 10;
  std::vector<uint8_t> got = px;
  ApplyPixelSteps(std::vector<PixelStep>{s}, w, h, got.data());
  for (uint32_t c = 0; c < 3; ++c) {
    for (uint32_t y = 0; y < h; ++y) {
      for (uint32_t x = 0; x < w; ++x) {
        const size_t at = (size_t{c} * h + y) * w + x;
        EXPECT_EQ(got[at], x + 10 < w ? px[at + 10] : 0) << c << " " << y << " " << x;
      }
    }
  }
}

}  // namespace
}  // namespace feedline
