// Fuzzes the image decode path: header parsing, limits, full decode, and
// the fused crop/scale/resample op with crops chosen from the input. Small
// limits keep each run fast; every output byte is read so that ASan/MSan
// see uninitialised or out-of-bounds writes.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "feedline/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  feedline::DecodeLimits limits;
  limits.max_pixels = 1u << 20;
  limits.max_dimension = 4096;
  limits.max_jpeg_scans = 64;
  limits.max_png_chunk_bytes = 1u << 20;

  auto info = feedline::ReadImageInfo(bytes, limits);
  auto decoded = feedline::DecodeImage(bytes, limits);
  if (decoded.ok()) {
    if (decoded->pixels.size() != size_t{decoded->width} * decoded->height * 3) __builtin_trap();
    unsigned sum = 0;
    for (uint8_t p : decoded->pixels) sum += p;
    if (sum == 0xFFFFFFFFu) __builtin_trap();  // keeps the read
  }
  if (!info.ok()) return 0;

  // Two transforms, with a crop derived from the input bytes.
  for (bool eval : {false, true}) {
    feedline::ImageTransform t =
        eval ? feedline::ImageNetEval(40, 32) : feedline::ImageNetTrain(24);
    t.limits = limits;
    t.dtype = eval ? feedline::DType::kUInt8 : feedline::DType::kFloat16;
    feedline::SampleRng rng(size, data[size / 2], 0);
    const feedline::CropBox box = feedline::ChooseCrop(t, info->width, info->height, rng);
    std::vector<uint8_t> out(feedline::ImageField(t).SampleBytes());
    if (feedline::TransformImage(bytes, t, box, out.data()).ok()) {
      unsigned sum = 0;
      for (uint8_t v : out) sum += v;
      if (sum == 0xFFFFFFFFu) __builtin_trap();
    }
  }
  return 0;
}
