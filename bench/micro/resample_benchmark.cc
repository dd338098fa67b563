// The resampler alone: one crop of a real photograph (tests/data/photos)
// resized to 224x224, as the train recipe does after decoding, for the
// production kernel and the scalar reference, per output dtype. Reports
// output pixels per second; issue 15's SIMD work is measured here.
//
//   BM_Resample/<kernel>/<dtype>/<crop side>
//   kernel: 0 production, 1 reference; dtype: 0 float32 CHW, 1 uint8 HWC,
//   2 float16 CHW
//   BM_ResampleIntoBatch/<crop side>: production, float32 CHW, each
//   iteration writing the next slot of a 256-image batch (154 MB, far past
//   the caches), as the loader does; BM_Resample writes one hot buffer.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "feedline/image.h"
#include "src/image/resample.h"
#include "src/image/resample_hwy.h"

namespace feedline {
namespace {

const RgbImage& Photo() {
  static const RgbImage img = [] {
    const std::string path = std::string(FEEDLINE_TEST_DATA_DIR) + "/photos/chelsea.png";
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
    Result<RgbImage> r = DecodeImage(bytes);
    if (!r.ok()) {
      std::fprintf(stderr, "%s: %s\n", path.c_str(), r.status().ToString().c_str());
      std::abort();
    }
    return std::move(r).value();
  }();
  return img;
}

// The photo's top-left side x side crop (at most the photo) resized to
// 224x224 with ImageNet-like normalisation, float32 CHW unless changed.
struct Job {
  image::AxisPlan ph, pv;
  image::RgbSource src;
  image::OutputFormat format;

  explicit Job(uint32_t side) {
    const RgbImage& img = Photo();
    const uint32_t w = std::min(side, img.width), h = std::min(side, img.height);
    image::PlanAxis(Interpolation::kBilinear, w, 0.0, double(w) / 224, 224, &ph);
    image::PlanAxis(Interpolation::kBilinear, h, 0.0, double(h) / 224, 224, &pv);
    src.pixels = img.pixels.data();
    src.stride = size_t{img.width} * 3;
    format.mul = {1 / 58.4f, 1 / 57.1f, 1 / 57.4f};
    format.add = {-2.1f, -2.0f, -1.8f};
  }
};

void BM_Resample(benchmark::State& state) {
  const bool reference = state.range(0) == 1;
  const int dtype = static_cast<int>(state.range(1));
  Job job(static_cast<uint32_t>(state.range(2)));
  const auto& [ph, pv, src, format] = job;
  job.format.dtype = dtype == 0 ? DType::kFloat32 : dtype == 1 ? DType::kUInt8 : DType::kFloat16;
  job.format.layout = dtype == 1 ? Layout::kHWC : Layout::kCHW;
  std::vector<float> scratch;
  std::vector<uint8_t> out(224 * 224 * 3 * 4 + 64);
  void* dst = out.data() + (64 - reinterpret_cast<uintptr_t>(out.data()) % 64) % 64;
  for (auto _ : state) {
    if (reference) {
      image::ResampleReference(src, ph, pv, true, format, &scratch, dst);
    } else {
      image::Resample(src, ph, pv, true, format, &scratch, dst);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * 224 * 224);
  state.SetLabel(reference ? "reference" : image::ResampleTargetName());
}
BENCHMARK(BM_Resample)->ArgsProduct({{0, 1}, {0, 1, 2}, {160, 300, 450}});

void BM_ResampleIntoBatch(benchmark::State& state) {
  const Job job(static_cast<uint32_t>(state.range(0)));
  const auto& [ph, pv, src, format] = job;
  std::vector<float> scratch;
  constexpr size_t kSlots = 256, kSlotFloats = 224 * 224 * 3;
  std::vector<float> batch(kSlots * kSlotFloats + 16);
  float* base = batch.data() + (16 - reinterpret_cast<uintptr_t>(batch.data()) / 4 % 16) % 16;
  size_t slot = 0;
  for (auto _ : state) {
    image::Resample(src, ph, pv, true, format, &scratch, base + slot * kSlotFloats);
    slot = (slot + 1) % kSlots;
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * 224 * 224);
  state.SetLabel(image::ResampleTargetName());
}
BENCHMARK(BM_ResampleIntoBatch)->Arg(160)->Arg(300)->Arg(450);

}  // namespace
}  // namespace feedline

BENCHMARK_MAIN();
