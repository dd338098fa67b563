// Fuzzes the PNG decode path alone (src/image/png_decoder.cc): inputs that
// do not start with the PNG signature get it prepended, so every run goes
// through libspng and our limits instead of the JPEG/format sniffing the
// image_decode_fuzzer also covers. Seeds (tests/fuzz/corpus/png, made by
// tests/fuzz/make_png_seeds.py) cover interlaced, palette with tRNS,
// 1/2/4/16-bit and alpha images. Header, full decode and the fused
// crop/resize, under two chunk limits; every output byte is read. Then,
// with every chunk CRC repaired (so mutations reach the image data and the
// chunk structure), the fast path (libdeflate + our defilter) against
// libspng's path: the same outcome, the same bytes or the same message.
#include <libdeflate.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "feedline/image.h"
#include "src/image/png_decoder.h"

namespace {

constexpr uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

void Touch(std::span<const uint8_t> bytes) {
  unsigned sum = 0;
  for (uint8_t v : bytes) sum += v;
  if (sum == 0xFFFFFFFFu) __builtin_trap();  // keeps the reads
}

uint32_t Be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// Every whole chunk's CRC rewritten to match its type and data.
void RepairCrcs(std::vector<uint8_t>& png) {
  size_t p = 8;
  while (p + 12 <= png.size()) {
    const uint32_t n = Be32(png.data() + p);
    if (n > png.size() - p - 12) break;
    const uint32_t crc = libdeflate_crc32(0, png.data() + p + 4, size_t{n} + 4);
    for (int k = 0; k < 4; ++k) png[p + 8 + n + k] = static_cast<uint8_t>(crc >> (24 - 8 * k));
    p += size_t{n} + 12;
  }
}

// The two PNG paths on columns [0, x1) of rows [y0, y1): one outcome.
void CompareFastAndReference(std::span<const uint8_t> bytes, const feedline::DecodeLimits& limits) {
  feedline::image::PngDecoder fast(true), ref(false);
  feedline::ImageInfo info;
  if (!ref.ReadHeader(bytes, limits, &info).ok()) return;
  struct Box {
    uint32_t x1, y0, y1;
  };
  for (const Box& box : {Box{info.width, 0, info.height}, Box{info.width, 0, (info.height + 1) / 2},
                         Box{(info.width + 1) / 2, info.height / 3, info.height}}) {
    feedline::image::RgbRegion a, b;
    const feedline::Status sa = fast.Decode(bytes, limits, box.x1, box.y0, box.y1, &a);
    const feedline::Status sb = ref.Decode(bytes, limits, box.x1, box.y0, box.y1, &b);
    if (sa.ok() != sb.ok()) __builtin_trap();
    if (!sa.ok()) {
      if (sa.message() != sb.message()) __builtin_trap();
      continue;
    }
    const size_t n = size_t{a.width} * a.height * 3;
    if (a.width != b.width || a.height != b.height || std::memcmp(a.pixels, b.pixels, n) != 0)
      __builtin_trap();
  }
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
  std::vector<uint8_t> repaired = png;
  RepairCrcs(repaired);
  for (uint64_t chunk_limit : {uint64_t{1} << 20, uint64_t{4096}}) {
    feedline::DecodeLimits limits;
    limits.max_pixels = 1u << 20;
    limits.max_dimension = 4096;
    limits.max_png_chunk_bytes = chunk_limit;
    CompareFastAndReference(repaired, limits);
  }
  return 0;
}
