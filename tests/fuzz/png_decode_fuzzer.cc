// Fuzzes the PNG decode path alone (src/image/png_decoder.cc): inputs that
// do not start with the PNG signature get it prepended, so every run goes
// through libspng and our limits instead of the JPEG/format sniffing the
// image_decode_fuzzer also covers. Seeds (tests/fuzz/corpus/png, made by
// tests/fuzz/make_png_seeds.py) cover interlaced, palette with tRNS,
// 1/2/4/16-bit and alpha images. Header, full decode and the fused
// crop/resize, under two chunk limits; every output byte is read.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "feedline/image.h"

namespace {

constexpr uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

void Touch(std::span<const uint8_t> bytes) {
  unsigned sum = 0;
  for (uint8_t v : bytes) sum += v;
  if (sum == 0xFFFFFFFFu) __builtin_trap();  // keeps the reads
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> png;
  if (size < sizeof(kSignature) || std::memcmp(data, kSignature, sizeof(kSignature)) != 0) {
    png.assign(kSignature, kSignature + sizeof(kSignature));
  }
  png.insert(png.end(), data, data + size);
  const std::span<const uint8_t> bytes(png);

  for (uint64_t chunk_limit : {uint64_t{1} << 20, uint64_t{4096}}) {
    feedline::DecodeLimits limits;
    limits.max_pixels = 1u << 20;
    limits.max_dimension = 4096;
    limits.max_png_chunk_bytes = chunk_limit;
    auto info = feedline::ReadImageInfo(bytes, limits);
    auto decoded = feedline::DecodeImage(bytes, limits);
    if (decoded.ok()) {
      if (!info.ok() || info->width != decoded->width || info->height != decoded->height)
        __builtin_trap();
      if (decoded->pixels.size() != size_t{decoded->width} * decoded->height * 3) __builtin_trap();
      Touch(decoded->pixels);
    }
    if (!info.ok()) continue;
    for (bool eval : {false, true}) {
      feedline::ImageTransform t =
          eval ? feedline::ImageNetEval(20, 16) : feedline::ImageNetTrain(16);
      t.limits = limits;
      t.dtype = eval ? feedline::DType::kUInt8 : feedline::DType::kFloat32;
      feedline::SampleRng rng(size, size > 0 ? data[size / 2] : 0, 0);
      const feedline::CropBox box = feedline::ChooseCrop(t, info->width, info->height, rng);
      std::vector<uint8_t> out(feedline::ImageField(t).SampleBytes());
      if (feedline::TransformImage(bytes, t, box, out.data()).ok()) Touch(out);
    }
  }
  return 0;
}
