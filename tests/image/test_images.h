// Test images: the repo's photographs and crafted faulty files.
#ifndef FEEDLINE_TESTS_IMAGE_TEST_IMAGES_H_
#define FEEDLINE_TESTS_IMAGE_TEST_IMAGES_H_

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "feedline/image.h"
#include "gtest/gtest.h"

namespace feedline::testing {

inline std::vector<uint8_t> ReadTestFile(const std::string& relative) {
  const std::string path = std::string(FEEDLINE_TEST_DATA_DIR) + "/" + relative;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing test file " << path;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline RgbImage MustDecode(const std::vector<uint8_t>& bytes) {
  Result<RgbImage> r = DecodeImage(bytes);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? std::move(r).value() : RgbImage{};
}

inline std::vector<uint8_t> MustEncodeJpeg(const RgbImage& img, int quality, bool gray = false,
                                           bool progressive = false) {
  Result<std::vector<uint8_t>> r = EncodeJpeg(img, quality, gray, progressive);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? std::move(r).value() : std::vector<uint8_t>{};
}

// Offset of the first SOFn marker's frame header (the byte after the length).
inline size_t FindSof(const std::vector<uint8_t>& jpeg) {
  size_t i = 2;
  while (i + 4 < jpeg.size()) {
    if (jpeg[i] != 0xFF) return 0;
    const uint8_t m = jpeg[i + 1];
    const size_t len = size_t{jpeg[i + 2]} << 8 | jpeg[i + 3];
    if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) return i + 4;
    i += 2 + len;
  }
  return 0;
}

// A copy of `jpeg` whose frame header declares width x height.
inline std::vector<uint8_t> WithDeclaredSize(std::vector<uint8_t> jpeg, uint16_t width,
                                             uint16_t height) {
  const size_t sof = FindSof(jpeg);
  EXPECT_GT(sof, 0u);
  jpeg[sof + 1] = static_cast<uint8_t>(height >> 8);
  jpeg[sof + 2] = static_cast<uint8_t>(height);
  jpeg[sof + 3] = static_cast<uint8_t>(width >> 8);
  jpeg[sof + 4] = static_cast<uint8_t>(width);
  return jpeg;
}

// A small noisy RGB image (compresses badly: many bytes of entropy-coded data).
inline RgbImage Noise(uint32_t w, uint32_t h, uint64_t seed) {
  RgbImage img{w, h, std::vector<uint8_t>(size_t{w} * h * 3)};
  uint64_t s = seed * 6364136223846793005ull + 1;
  for (auto& p : img.pixels) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    p = static_cast<uint8_t>(s >> 56);
  }
  return img;
}

}  // namespace feedline::testing

#endif  // FEEDLINE_TESTS_IMAGE_TEST_IMAGES_H_
