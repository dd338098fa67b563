// The colour and pixel ops alone (src/image/color_ops.cc) on a 224x224
// resize of a real photograph (tests/data/photos/chelsea.png), one step per
// run plus the fused chains, each ending in the float32 CHW normalising
// conversion the loader writes. Reports output pixels per second; the
// "none" row is the copy + conversion every row includes, so an op's own
// cost is its row minus that one (docs/augmentations.md's cost table).
//
//   BM_PixelOp/<case>/<SIMD, scalar reference> (the last three cases: the
//     affine warp, src/image/affine.cc, whose reference is BM_Warp's; the
//     second argument selects color_ops.cc's scalar kernels in place of
//     color_ops_hwy.cc's for saturation, grayscale, contrast's mean,
//     sharpness and the float32 conversion)
//   BM_Warp/<rotate_nearest, rotate_bilinear, affine_bilinear>/<SIMD, scalar reference>
//   BM_AugMix/<default, blend>, BM_RandomErasing/<constant, random>,
//   BM_BatchMix/<mixup, cutmix>/<f32, bf16>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "feedline/image.h"
#include "src/image/affine.h"
#include "src/image/color_ops.h"

namespace feedline {
namespace {

constexpr uint32_t kSide = 224;

// The photo resized to 224x224, as 8-bit planes.
const std::vector<uint8_t>& Planes() {
  static const std::vector<uint8_t> planes = [] {
    const std::string path = std::string(FEEDLINE_TEST_DATA_DIR) + "/photos/chelsea.png";
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
    Result<RgbImage> img = DecodeImage(bytes);
    if (!img.ok()) {
      std::fprintf(stderr, "%s: %s\n", path.c_str(), img.status().ToString().c_str());
      std::abort();
    }
    Result<RgbImage> small = ResizedCrop(*img, 0, 0, img->width, img->height, kSide, kSide);
    if (!small.ok()) std::abort();
    const size_t n = size_t{kSide} * kSide;
    std::vector<uint8_t> p(3 * n);
    for (size_t i = 0; i < n; ++i) {
      for (int c = 0; c < 3; ++c) p[c * n + i] = small->pixels[i * 3 + c];
    }
    return p;
  }();
  return planes;
}

struct Case {
  const char* name;
  std::vector<PixelStep> steps;
};

// A warp (src/image/affine.cc): rotate or affine, NEAREST or BILINEAR.
PixelStep Warp(bool rotate, WarpInterpolation interpolation, bool fill) {
  PixelStep s;
  s.kind = PixelStepKind::kAffine;
  s.rotate = rotate;
  s.angle = 17.3;
  if (!rotate) s.translate_x = 5, s.scale = 1.1, s.shear_x = 8;
  s.interpolation = interpolation;
  s.has_fill = fill;
  return s;
}

// RandAugment's TranslateX/Y: whole pixels, NEAREST, filled.
PixelStep Translate(double x, double y) {
  PixelStep s;
  s.kind = PixelStepKind::kAffine;
  s.translate_x = x, s.translate_y = y;
  s.interpolation = WarpInterpolation::kNearest;
  s.has_fill = true;
  return s;
}

const std::vector<Case>& Cases() {
  using K = PixelStepKind;
  static const std::vector<Case> cases = {
      {"none", {}},
      {"brightness", {{K::kBrightness, 1.3}}},
      {"contrast", {{K::kContrast, 0.7}}},
      {"saturation", {{K::kSaturation, 1.4}}},
      {"hue", {{K::kHue, 0.1}}},
      {"grayscale", {{K::kGrayscale}}},
      {"invert", {{K::kInvert}}},
      {"posterize", {{K::kPosterize, 4}}},
      {"solarize", {{K::kSolarize, 128}}},
      {"autocontrast", {{K::kAutocontrast}}},
      {"equalize", {{K::kEqualize}}},
      {"sharpness", {{K::kSharpness, 2.0}}},
      {"blur3", {{K::kGaussianBlur, 1.0, 3, 3}}},
      {"blur23", {{K::kGaussianBlur, 1.5, 23, 23}}},
      {"jitter4",
       {{K::kBrightness, 1.2}, {K::kContrast, 0.8}, {K::kSaturation, 1.3}, {K::kHue, 0.05}}},
      {"tables5",
       {{K::kBrightness, 1.2},
        {K::kInvert},
        {K::kPosterize, 5},
        {K::kAutocontrast},
        {K::kEqualize}}},
      {"rotate_nearest", {Warp(true, WarpInterpolation::kNearest, false)}},
      {"rotate_bilinear", {Warp(true, WarpInterpolation::kBilinear, true)}},
      {"affine_bilinear", {Warp(false, WarpInterpolation::kBilinear, true)}},
      {"translate_nearest", {Translate(30, -12)}},
      // A table op, then an op that reads the pixels: the table is written
      // into them first (the flush).
      {"brightness_saturation", {{K::kBrightness, 1.3}, {K::kSaturation, 1.4}}},
  };
  return cases;
}

void BM_PixelOp(benchmark::State& state) {
  const Case& c = Cases()[static_cast<size_t>(state.range(0))];
  const bool reference = state.range(1) != 0;
  const std::vector<uint8_t>& src = Planes();
  std::vector<uint8_t> planes(src.size());
  std::vector<float> out(src.size());
  image::OutputFormat format;  // float32 CHW, ImageNet-like normalisation
  format.mul = {1 / 58.4f, 1 / 57.1f, 1 / 57.4f};
  format.add = {-2.1f, -2.0f, -1.8f};
  image::PixelScratch scratch;
  for (auto _ : state) {
    std::memcpy(planes.data(), src.data(), src.size());
    image::ApplyStepsAndConvert(c.steps, kSide, kSide, planes.data(), format, &scratch, out.data(),
                                reference);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kSide * kSide);
  state.SetLabel(std::string(c.name) + (reference ? " (scalar reference)" : " (SIMD)"));
}
BENCHMARK(BM_PixelOp)->ArgsProduct({benchmark::CreateDenseRange(0, 20, 1), {0, 1}});

// The warp alone, on the 8-bit planes: the SIMD kernel (arg 1 = 0) against
// the scalar reference (1), for the four warp cases above.
void BM_Warp(benchmark::State& state) {
  static constexpr std::string_view kWarps[] = {"rotate_nearest", "rotate_bilinear",
                                                "affine_bilinear", "translate_nearest"};
  const std::string_view name = kWarps[state.range(0)];
  const Case& c =
      *std::find_if(Cases().begin(), Cases().end(), [&](const Case& k) { return k.name == name; });
  const bool reference = state.range(1) != 0;
  const std::vector<uint8_t>& src = Planes();
  std::vector<uint8_t> planes(src.size()), scratch;
  for (auto _ : state) {
    std::memcpy(planes.data(), src.data(), src.size());
    image::ApplyAffineStep(c.steps[0], kSide, kSide, planes.data(), &scratch, reference);
    benchmark::DoNotOptimize(planes.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kSide * kSide);
  state.SetLabel(std::string(c.name) + (reference ? " (scalar reference)" : " (SIMD)"));
}
BENCHMARK(BM_Warp)->ArgsProduct({{0, 1, 2, 3}, {0, 1}});

// RandomErasing on a float32 224x224 output (issue 17): the draw and the
// write of one rectangle (p = 1, torchvision's default scale and ratio),
// constant and "random" values, per output pixel of the image.
void BM_RandomErasing(benchmark::State& state) {
  EraseOp op;
  op.p = 1;
  op.random_value = state.range(0) == 1;
  std::vector<float> out(size_t{3} * kSide * kSide, 0.5f);
  std::vector<float> values;
  uint64_t sample = 0;
  for (auto _ : state) {
    SampleRng rng = SampleRng::ForSample(1, 0, sample++, 0);
    const EraseRect r = DrawErase(op, kSide, kSide, rng);
    DrawEraseValues(op, r, 3, rng, &values);
    ApplyErase(r, values, op.random_value, DType::kFloat32, Layout::kCHW, 3, kSide, kSide,
               out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kSide * kSide);
  state.SetLabel(op.random_value ? "erase-random" : "erase-constant");
}
BENCHMARK(BM_RandomErasing)->DenseRange(0, 1);

// AugMix on the 224x224 planes, then the float32 conversion (so minus the
// `none` row is its own cost). range(0): 0 torchvision's defaults (three
// chains of 1..3 ops, all ops, severity 3), drawn per iteration from a new
// sample's stream, so the figure averages over the ops drawn; 1 the blend
// alone (three chains of one brightness step: table ops, folded).
void BM_AugMix(benchmark::State& state) {
  const bool blend_only = state.range(0) == 1;
  PixelOp op;
  op.kind = PixelOpKind::kAugMix;
  op.interpolation = WarpInterpolation::kBilinear;
  op.num_magnitude_bins = 10;
  if (!CheckPixelOps({&op, 1}).ok()) std::abort();
  std::vector<PixelStep> steps;
  if (blend_only) {
    using K = PixelStepKind;
    steps = {{K::kMixBegin, 0.4},   {K::kMixChain, 0.2}, {K::kBrightness, 1.2}, {K::kMixChain, 0.2},
             {K::kBrightness, 0.8}, {K::kMixChain, 0.2}, {K::kBrightness, 1.1}, {K::kMixEnd}};
  }
  const std::vector<uint8_t>& src = Planes();
  std::vector<uint8_t> planes(src.size());
  std::vector<float> out(src.size());
  image::OutputFormat format;
  format.mul = {1 / 58.4f, 1 / 57.1f, 1 / 57.4f};
  format.add = {-2.1f, -2.0f, -1.8f};
  image::PixelScratch scratch;
  uint64_t sample = 0;
  for (auto _ : state) {
    if (!blend_only) {
      steps.clear();
      SampleRng rng = SampleRng::ForSample(1, 0, sample++, 0);
      DrawPixelSteps({&op, 1}, rng, &steps);
    }
    std::memcpy(planes.data(), src.data(), src.size());
    image::ApplyStepsAndConvert(steps, kSide, kSide, planes.data(), format, &scratch, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kSide * kSide);
  state.SetLabel(blend_only ? "augmix-blend" : "augmix-default");
}
BENCHMARK(BM_AugMix)->DenseRange(0, 1);

// MixUp and CutMix on a batch of 32 float32 224x224 images (range(1): 0
// float32, 1 bfloat16), per output pixel of the batch.
void BM_BatchMix(benchmark::State& state) {
  constexpr uint32_t kBatch = 32, kClasses = 1000;
  const bool bf16 = state.range(1) == 1;
  BatchMixOp op;
  op.kind = state.range(0) == 0 ? BatchMixKind::kMixUp : BatchMixKind::kCutMix;
  op.alpha = 1.0;
  op.num_classes = kClasses;
  const size_t n = size_t{kBatch} * 3 * kSide * kSide;
  std::vector<float> f32(bf16 ? 0 : n, 0.25f);
  std::vector<uint16_t> b16(bf16 ? n : 0, 0x3E80);
  std::vector<int64_t> labels(kBatch);
  for (uint32_t i = 0; i < kBatch; ++i) labels[i] = i * 31 % kClasses;
  std::vector<float> soft(size_t{kBatch} * kClasses);
  uint64_t batch = 0;
  for (auto _ : state) {
    SampleRng rng = SampleRng::ForSample(1, 0, batch++, 0);
    const BatchMixParams p = DrawBatchMix({&op, 1}, kSide, kSide, rng);
    void* images = bf16 ? static_cast<void*>(b16.data()) : static_cast<void*>(f32.data());
    const Status st =
        ApplyBatchMix(p, bf16 ? DType::kBFloat16 : DType::kFloat32, Layout::kCHW, kBatch, 3, kSide,
                      kSide, images, labels, kClasses, {}, soft.data());
    if (!st.ok()) std::abort();
    benchmark::DoNotOptimize(images);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kBatch * kSide * kSide);
  state.SetLabel(std::string(op.kind == BatchMixKind::kMixUp ? "mixup" : "cutmix") +
                 (bf16 ? "-bf16" : "-f32"));
}
BENCHMARK(BM_BatchMix)->ArgsProduct({{0, 1}, {0, 1}});

}  // namespace
}  // namespace feedline

BENCHMARK_MAIN();
