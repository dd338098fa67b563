// Decoders: real photographs, limits from the header, corrupt and
// unsupported inputs (docs/reliability.md 9-14).
// clang-format off
#include <cstddef>
#include <cstdio>
#include <jpeglib.h>  // needs size_t and FILE first
// clang-format on
#include <spng.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "feedline/image.h"
#include "feedline/loader.h"
#include "gtest/gtest.h"
#include "src/image/jpeg_decoder.h"
#include "src/image/png_decoder.h"
#include "tests/image/test_images.h"

namespace feedline {
namespace {

using testing::FindSof;
using testing::MustDecode;
using testing::MustEncodeJpeg;
using testing::ReadTestFile;

TEST(DecodeTest, DecodesEveryPhotographAtItsSize) {
  struct Photo {
    const char* name;
    uint32_t w, h;
    ImageFormat format;
  };
  for (const Photo& p : {Photo{"chelsea.png", 451, 300, ImageFormat::kPng},
                         Photo{"coffee.png", 600, 400, ImageFormat::kPng},
                         Photo{"astronaut.png", 512, 512, ImageFormat::kPng},
                         Photo{"camera.png", 512, 512, ImageFormat::kPng},
                         Photo{"rocket.jpg", 640, 427, ImageFormat::kJpeg},
                         Photo{"hubble_deep_field.jpg", 1000, 872, ImageFormat::kJpeg}}) {
    SCOPED_TRACE(p.name);
    const std::vector<uint8_t> bytes = ReadTestFile(std::string("photos/") + p.name);
    Result<ImageInfo> info = ReadImageInfo(bytes);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->format, p.format);
    EXPECT_EQ(info->width, p.w);
    EXPECT_EQ(info->height, p.h);
    RgbImage img = MustDecode(bytes);
    EXPECT_EQ(img.width, p.w);
    EXPECT_EQ(img.pixels.size(), size_t{p.w} * p.h * 3);
  }
}

TEST(DecodeTest, GrayscaleJpegAndPngBecomeRgbWithEqualChannels) {
  const std::vector<uint8_t> png = ReadTestFile("photos/camera.png");
  RgbImage gray = MustDecode(png);
  for (size_t i = 0; i < gray.pixels.size(); i += 3) {
    ASSERT_EQ(gray.pixels[i], gray.pixels[i + 1]);
    ASSERT_EQ(gray.pixels[i], gray.pixels[i + 2]);
  }
  RgbImage color = MustDecode(ReadTestFile("photos/chelsea.png"));
  const std::vector<uint8_t> jpeg = MustEncodeJpeg(color, 90, /*gray=*/true);
  EXPECT_EQ(ReadImageInfo(jpeg)->channels, 1u);
  RgbImage decoded = MustDecode(jpeg);
  for (size_t i = 0; i < decoded.pixels.size(); i += 3) {
    ASSERT_EQ(decoded.pixels[i], decoded.pixels[i + 2]);
  }
}

TEST(DecodeTest, ProgressiveJpegDecodesLikeBaseline) {
  RgbImage img = MustDecode(ReadTestFile("photos/chelsea.png"));
  RgbImage base = MustDecode(MustEncodeJpeg(img, 92));
  const std::vector<uint8_t> prog_bytes = MustEncodeJpeg(img, 92, false, /*progressive=*/true);
  EXPECT_TRUE(ReadImageInfo(prog_bytes)->progressive);
  RgbImage prog = MustDecode(prog_bytes);
  ASSERT_EQ(prog.pixels.size(), base.pixels.size());
  double diff = 0;
  for (size_t i = 0; i < prog.pixels.size(); ++i) diff += std::abs(prog.pixels[i] - base.pixels[i]);
  EXPECT_LT(diff / prog.pixels.size(), 1.0);
}

// docs/reliability.md 9: huge declared sizes are refused from the header.
TEST(DecodeTest, HugeDeclaredJpegIsRejectedFromTheHeaderNamingTheLimit) {
  const std::vector<uint8_t> small = MustEncodeJpeg(testing::Noise(16, 16, 1), 90);
  Result<ImageInfo> r = ReadImageInfo(testing::WithDeclaredSize(small, 65535, 65535));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("over max_pixels 178956970"), std::string::npos)
      << r.status();
  // 65535 x 1 passes the header limits; the missing data is then an error,
  // and decoding it never allocates more than a row's worth per row.
  Result<RgbImage> thin = DecodeImage(testing::WithDeclaredSize(small, 65535, 1));
  ASSERT_FALSE(thin.ok());
  EXPECT_EQ(thin.status().code(), StatusCode::kDataLoss) << thin.status();
  DecodeLimits strict;
  strict.max_dimension = 4096;
  Result<ImageInfo> wide = ReadImageInfo(testing::WithDeclaredSize(small, 65535, 1), strict);
  EXPECT_NE(wide.status().message().find("over max_dimension 4096"), std::string::npos)
      << wide.status();
}

// docs/reliability.md 10: truncation is an error, never grey pixels.
TEST(DecodeTest, TruncatedJpegIsAnErrorByDefault) {
  const std::vector<uint8_t> full = ReadTestFile("photos/rocket.jpg");
  for (double fraction : {0.10, 0.50, 0.99}) {
    SCOPED_TRACE(fraction);
    std::vector<uint8_t> cut(full.begin(),
                             full.begin() + static_cast<long>(full.size() * fraction));
    Result<RgbImage> r = DecodeImage(cut);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(r.status().message().find("corrupt JPEG"), std::string::npos) << r.status();
    // Opt-out: libjpeg fills the rest with grey.
    DecodeLimits lenient;
    lenient.jpeg_warnings_fatal = false;
    EXPECT_TRUE(DecodeImage(cut, lenient).ok());
  }
}

// docs/reliability.md 11: a scan limit stops hostile progressive files early:
// the error comes as the first scan past the limit starts, before any of its
// data is decoded. Shown without a clock: the file cut just after the 4th
// scan's header (no data left for it or any later scan; an end marker
// follows) is refused with the same limit error, where the same cut file
// without the limit is corrupt (the decoder would have needed the data).
TEST(DecodeTest, ProgressiveJpegOverTheScanLimitIsRejectedAtTheFirstScanPastIt) {
  const std::vector<uint8_t> prog =
      MustEncodeJpeg(MustDecode(ReadTestFile("photos/chelsea.png")), 90, false, true);
  // Where each scan's data starts: just past its SOS segment. 0xFF 0xDA is
  // a marker wherever it appears (entropy-coded 0xFF bytes are stuffed).
  std::vector<size_t> scan_data;
  for (size_t i = 2; i + 3 < prog.size(); ++i) {
    if (prog[i] == 0xFF && prog[i + 1] == 0xDA)
      scan_data.push_back(i + 2 + (size_t{prog[i + 2]} << 8 | prog[i + 3]));
  }
  ASSERT_EQ(scan_data.size(), 10u) << "jpeg_simple_progression writes 10 scans";
  DecodeLimits limits;
  limits.max_jpeg_scans = 3;
  const std::string why = "more than 3 scans (max_jpeg_scans)";
  Result<RgbImage> r = DecodeImage(prog, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status();

  // (An end marker after the cut: a file without one is refused before decoding starts.)
  std::vector<uint8_t> cut(prog.begin(), prog.begin() + static_cast<long>(scan_data[3]));
  cut.insert(cut.end(), {0xFF, 0xD9});
  Result<RgbImage> at_scan_4 = DecodeImage(cut, limits);
  ASSERT_FALSE(at_scan_4.ok());
  EXPECT_NE(at_scan_4.status().message().find(why), std::string::npos) << at_scan_4.status();
  Result<RgbImage> unlimited = DecodeImage(cut);
  ASSERT_FALSE(unlimited.ok()) << "the cut file lacks the data of scans 4-10";
  EXPECT_EQ(unlimited.status().code(), StatusCode::kDataLoss) << unlimited.status();
  EXPECT_EQ(unlimited.status().message().find("max_jpeg_scans"), std::string::npos)
      << unlimited.status();
  // With the limit at 4 the cut file gets past scan 4's header: the missing
  // data is then what stops it (the limit counts scans, not bytes).
  limits.max_jpeg_scans = 4;
  Result<RgbImage> four = DecodeImage(cut, limits);
  ASSERT_FALSE(four.ok());
  EXPECT_EQ(four.status().message().find("max_jpeg_scans"), std::string::npos) << four.status();
}

std::vector<uint8_t> EncodePngRaw(uint32_t w, uint32_t h, uint8_t color_type, uint8_t depth,
                                  const std::vector<uint8_t>& data, const spng_plte* plte = nullptr,
                                  bool interlaced = false) {
  spng_ctx* ctx = spng_ctx_new(SPNG_CTX_ENCODER);
  spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
  spng_ihdr ihdr{};
  ihdr.width = w;
  ihdr.height = h;
  ihdr.bit_depth = depth;
  ihdr.color_type = color_type;
  ihdr.interlace_method = interlaced ? SPNG_INTERLACE_ADAM7 : SPNG_INTERLACE_NONE;
  spng_set_ihdr(ctx, &ihdr);
  if (plte) spng_set_plte(ctx, const_cast<spng_plte*>(plte));
  int err = spng_encode_image(ctx, data.data(), data.size(), SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
  EXPECT_EQ(err, 0) << spng_strerror(err);
  size_t size = 0;
  void* buf = spng_get_png_buffer(ctx, &size, &err);
  std::vector<uint8_t> out(static_cast<uint8_t*>(buf), static_cast<uint8_t*>(buf) + size);
  free(buf);
  spng_ctx_free(ctx);
  return out;
}

// docs/reliability.md 13: palette, gray+alpha, RGBA and 16-bit PNGs decode right.
TEST(DecodeTest, EveryPngColourTypeDecodesToRgb) {
  // Palette: index i -> (i, 2i, 255 - i).
  spng_plte plte{};
  plte.n_entries = 4;
  for (int i = 0; i < 4; ++i)
    plte.entries[i] = {uint8_t(i * 10), uint8_t(i * 20), uint8_t(255 - i), 255};
  RgbImage pal = MustDecode(EncodePngRaw(4, 1, SPNG_COLOR_TYPE_INDEXED, 8, {0, 1, 2, 3}, &plte));
  EXPECT_EQ(pal.pixels, (std::vector<uint8_t>{0, 0, 255, 10, 20, 254, 20, 40, 253, 30, 60, 252}));
  // Gray + alpha: alpha is dropped.
  RgbImage ga =
      MustDecode(EncodePngRaw(2, 1, SPNG_COLOR_TYPE_GRAYSCALE_ALPHA, 8, {7, 0, 200, 255}));
  EXPECT_EQ(ga.pixels, (std::vector<uint8_t>{7, 7, 7, 200, 200, 200}));
  // RGBA.
  RgbImage rgba = MustDecode(EncodePngRaw(1, 1, SPNG_COLOR_TYPE_TRUECOLOR_ALPHA, 8, {1, 2, 3, 4}));
  EXPECT_EQ(rgba.pixels, (std::vector<uint8_t>{1, 2, 3}));
  // 8-bit RGB, read as stored (no RGBA round trip): whole, and rows 1..2 of 4.
  std::vector<uint8_t> rgb8(3 * 4 * 3);
  for (size_t i = 0; i < rgb8.size(); ++i) rgb8[i] = static_cast<uint8_t>(i * 7 + 1);
  const std::vector<uint8_t> rgb8_png = EncodePngRaw(3, 4, SPNG_COLOR_TYPE_TRUECOLOR, 8, rgb8);
  EXPECT_EQ(MustDecode(rgb8_png).pixels, rgb8);
  image::PngDecoder d;
  image::RgbRegion r;
  ASSERT_TRUE(d.Decode(rgb8_png, {}, 3, 1, 3, &r).ok());
  ASSERT_EQ(r.y, 1u);
  ASSERT_EQ(r.height, 2u);
  EXPECT_EQ(std::vector<uint8_t>(r.pixels, r.pixels + 2 * 3 * 3),
            std::vector<uint8_t>(rgb8.begin() + 9, rgb8.begin() + 27));
  // 16-bit RGB (libspng's encoder takes host-order samples: 0x1234, 0xABCD,
  // 0xFFFF): the high byte survives.
  RgbImage deep = MustDecode(
      EncodePngRaw(1, 1, SPNG_COLOR_TYPE_TRUECOLOR, 16, {0x34, 0x12, 0xCD, 0xAB, 0xFF, 0xFF}));
  EXPECT_EQ(deep.pixels, (std::vector<uint8_t>{0x12, 0xAB, 0xFF}));
  // 16-bit gray 0x8001.
  RgbImage gray16 = MustDecode(EncodePngRaw(1, 1, SPNG_COLOR_TYPE_GRAYSCALE, 16, {0x01, 0x80}));
  EXPECT_EQ(gray16.pixels, (std::vector<uint8_t>{0x80, 0x80, 0x80}));
}

// Columns [0, x1) of rows [y0, y1), on every PNG path (the fast one, and
// libspng's for palette, 16-bit, Adam7-interlaced and any 8-bit file when the
// fast path is off): the full decode's pixels, the region x1 wide at x 0.
TEST(DecodeTest, PngColumnRangesOnEveryPathAreTheFullDecodesColumns) {
  constexpr uint32_t kW = 7, kH = 5;
  std::vector<uint8_t> rgb(kW * kH * 3), index(kW * kH), deep(kW * kH * 6);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 37 + 11);
  for (size_t i = 0; i < index.size(); ++i) index[i] = static_cast<uint8_t>(i % 4);
  for (size_t i = 0; i < deep.size(); ++i) deep[i] = static_cast<uint8_t>(i * 53 + 5);
  spng_plte plte{};
  plte.n_entries = 4;
  for (int i = 0; i < 4; ++i)
    plte.entries[i] = {uint8_t(i * 60), uint8_t(200 - i * 30), uint8_t(i * 5), 255};
  const struct {
    const char* what;
    std::vector<uint8_t> png;
  } files[] = {
      {"rgb8", EncodePngRaw(kW, kH, SPNG_COLOR_TYPE_TRUECOLOR, 8, rgb)},
      {"palette", EncodePngRaw(kW, kH, SPNG_COLOR_TYPE_INDEXED, 8, index, &plte)},
      {"rgb16", EncodePngRaw(kW, kH, SPNG_COLOR_TYPE_TRUECOLOR, 16, deep)},
      {"rgb8 interlaced", EncodePngRaw(kW, kH, SPNG_COLOR_TYPE_TRUECOLOR, 8, rgb, nullptr, true)},
  };
  for (const auto& [what, png] : files) {
    const RgbImage full = MustDecode(png);
    ASSERT_EQ(full.width, kW) << what;
    for (bool fast : {true, false}) {
      image::PngDecoder d(fast);
      for (uint32_t x1 : {1u, 4u, kW, kW + 3}) {
        for (auto [y0, y1] : {std::pair<uint32_t, uint32_t>{0, kH}, {2, 4}}) {
          ImageInfo info;
          ASSERT_TRUE(d.ReadHeader(png, {}, &info).ok()) << what;
          ASSERT_EQ(info.progressive, std::string(what).find("interlaced") != std::string::npos);
          image::RgbRegion r;
          const Status st = d.Decode(png, {}, x1, y0, y1, &r);
          ASSERT_TRUE(st.ok()) << what << ": " << st;
          const uint32_t kept = std::min(x1, kW);
          ASSERT_EQ(r.x, 0u) << what;
          ASSERT_EQ(r.width, kept) << what;
          ASSERT_EQ(r.y, y0) << what;
          ASSERT_EQ(r.height, y1 - y0) << what;
          for (uint32_t y = y0; y < y1; ++y) {
            const uint8_t* want = full.pixels.data() + size_t{y} * kW * 3;
            EXPECT_TRUE(std::equal(want, want + kept * 3, r.pixels + size_t{y - y0} * kept * 3))
                << what << (fast ? " fast" : " libspng") << ": columns 0.." << x1 << ", row " << y;
          }
        }
      }
    }
  }
}

// A 4-component (CMYK) JPEG through libjpeg's own encoder, which writes the
// Adobe marker, and libjpeg's CMYK samples of it (no conversion).
std::vector<uint8_t> EncodeCmykJpeg(uint32_t w, uint32_t h, const std::vector<uint8_t>& cmyk) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = w;
  c.image_height = h;
  c.input_components = 4;
  c.in_color_space = JCS_CMYK;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 90, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < h) {
    JSAMPROW row = const_cast<uint8_t*>(cmyk.data()) + size_t{c.next_scanline} * w * 4;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::vector<uint8_t> out(buf, buf + size);
  std::free(buf);
  return out;
}

std::vector<uint8_t> LibjpegCmykSamples(const std::vector<uint8_t>& bytes) {
  jpeg_decompress_struct d{};
  jpeg_error_mgr err{};
  d.err = jpeg_std_error(&err);
  jpeg_create_decompress(&d);
  jpeg_mem_src(&d, bytes.data(), bytes.size());
  jpeg_read_header(&d, TRUE);
  d.out_color_space = JCS_CMYK;
  jpeg_start_decompress(&d);
  std::vector<uint8_t> out(size_t{d.output_width} * d.output_height * 4);
  while (d.output_scanline < d.output_height) {
    JSAMPROW row = out.data() + size_t{d.output_scanline} * d.output_width * 4;
    jpeg_read_scanlines(&d, &row, 1);
  }
  EXPECT_TRUE(d.saw_Adobe_marker);
  jpeg_finish_decompress(&d);
  jpeg_destroy_decompress(&d);
  return out;
}

// CMYK JPEGs (Adobe's inverted samples) convert to RGB as R = C * K / 255
// (rounded), G and B likewise, in the whole image and in a crop whose rows
// the decoder converts in place.
TEST(DecodeTest, CmykJpegsConvertToRgbWholeAndCropped) {
  const uint32_t w = 53, h = 37;
  std::vector<uint8_t> cmyk(size_t{w} * h * 4);
  for (uint32_t y = 0; y < h; ++y) {
    for (uint32_t x = 0; x < w; ++x) {
      uint8_t* p = &cmyk[(size_t{y} * w + x) * 4];
      p[0] = static_cast<uint8_t>(x * 4);
      p[1] = static_cast<uint8_t>(y * 6);
      p[2] = static_cast<uint8_t>(255 - x * 3);
      p[3] = static_cast<uint8_t>(128 + (x + y) % 100);
    }
  }
  const std::vector<uint8_t> jpeg = EncodeCmykJpeg(w, h, cmyk);
  const std::vector<uint8_t> stored = LibjpegCmykSamples(jpeg);
  auto want = [&](uint32_t x, uint32_t y, int c) {
    const uint8_t* p = &stored[(size_t{y} * w + x) * 4];
    return static_cast<uint8_t>((uint32_t{p[c]} * p[3] + 127) / 255);
  };
  const RgbImage whole = MustDecode(jpeg);
  ASSERT_EQ(whole.width, w);
  ASSERT_EQ(whole.height, h);
  for (uint32_t y = 0; y < h; ++y) {
    for (uint32_t x = 0; x < w; ++x) {
      for (int c = 0; c < 3; ++c)
        ASSERT_EQ(whole.pixels[(size_t{y} * w + x) * 3 + c], want(x, y, c)) << x << "," << y;
    }
  }
  image::JpegDecoder d;
  ImageInfo info;
  ASSERT_TRUE(d.ReadHeader(jpeg, {}, &info).ok());
  image::RgbRegion r;
  ASSERT_TRUE(d.Decode(8, 19, 5, 40, 30, &r).ok());
  ASSERT_LE(r.x, 19u);
  ASSERT_GE(r.x + r.width, 40u);
  ASSERT_EQ(r.y, 5u);
  ASSERT_EQ(r.height, 25u);
  for (uint32_t y = 0; y < r.height; ++y) {
    for (uint32_t x = 0; x < r.width; ++x) {
      for (int c = 0; c < 3; ++c) {
        ASSERT_EQ(r.pixels[(size_t{y} * r.width + x) * 3 + c], want(r.x + x, r.y + y, c))
            << "crop " << x << "," << y;
      }
    }
  }
}

// docs/reliability.md 12: CRC errors and chunk limits.
TEST(DecodeTest, BadPngCrcAndOversizedChunksAreErrors) {
  const std::vector<uint8_t> png = ReadTestFile("photos/chelsea.png");
  // Flip a byte inside the first IDAT's data.
  std::vector<uint8_t> bad = png;
  const std::string idat = "IDAT";
  auto it = std::search(bad.begin(), bad.end(), idat.begin(), idat.end());
  ASSERT_NE(it, bad.end());
  *(it + 20) ^= 0x01;
  Result<RgbImage> r = DecodeImage(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status();
  EXPECT_NE(r.status().message().find("PNG"), std::string::npos);

  DecodeLimits tiny;
  tiny.max_png_chunk_bytes = 1000;
  Result<RgbImage> big = DecodeImage(png, tiny);  // its IDAT chunks are 8 KiB
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument) << big.status();
}

TEST(DecodeTest, PngRowRangeDecodeMatchesFullDecodeAndStillNeedsTheWholeFile) {
  const std::vector<uint8_t> png = ReadTestFile("photos/coffee.png");
  const RgbImage full = MustDecode(png);
  image::PngDecoder d;
  image::RgbRegion r;
  ASSERT_TRUE(d.Decode(png, {}, full.width, 100, 150, &r).ok());
  ASSERT_EQ(r.y, 100u);
  ASSERT_EQ(r.height, 50u);
  EXPECT_EQ(std::memcmp(r.pixels, full.pixels.data() + size_t{100} * full.width * 3,
                        size_t{50} * full.width * 3),
            0);
  // Cut after row 150's data: the rows are there, the end is not.
  std::vector<uint8_t> cut(png.begin(), png.end() - 100);
  Status st = d.Decode(cut, {}, full.width, 100, 150, &r);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st;
  EXPECT_NE(st.message().find("corrupt PNG"), std::string::npos) << st;
  EXPECT_FALSE(DecodeImage(cut).ok());
}

// docs/reliability.md 13: formats outside the allow-list and non-images.
TEST(DecodeTest, UnsupportedFormatsAndNonImagesAreClearErrors) {
  struct Case {
    std::string bytes;
    const char* expect;
  };
  // (gif, tiff, bmp, webp and pnm are decoded: formats_test.cc covers them.)
  for (const Case& c : {Case{"%PDF-1.7\n", "unsupported image format 'pdf'"},
                        Case{"%PDF-1.7\n", "allowed: jpeg, png, webp, tiff, gif, bmp, pnm"},
                        Case{"P7\nWIDTH 1\n", "not an image"}, Case{"hello, world", "not an image"},
                        Case{"", "not an image"}}) {
    std::vector<uint8_t> bytes(c.bytes.begin(), c.bytes.end());
    Result<RgbImage> r = DecodeImage(bytes);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status();
  }
  // 12-bit and lossless JPEGs: a clear "unsupported", not a crash.
  std::vector<uint8_t> twelve = MustEncodeJpeg(testing::Noise(8, 8, 2), 90);
  twelve[FindSof(twelve)] = 12;
  Result<RgbImage> r12 = DecodeImage(twelve);
  ASSERT_FALSE(r12.ok());
  EXPECT_NE(r12.status().message().find("12-bit"), std::string::npos) << r12.status();
  std::vector<uint8_t> lossless = MustEncodeJpeg(testing::Noise(8, 8, 3), 90);
  lossless[FindSof(lossless) - 3] = 0xC3;  // SOF0 -> SOF3
  Result<RgbImage> rl = DecodeImage(lossless);
  ASSERT_FALSE(rl.ok());
  EXPECT_EQ(rl.status().code(), StatusCode::kUnimplemented) << rl.status();
}

// docs/reliability.md 14: thousands of corrupt files on many threads; the process
// survives and every error is reported with its sample.
TEST(DecodeTest, ThousandsOfCorruptFilesOnManyThreadsAreAllReported) {
  const std::vector<uint8_t> good = MustEncodeJpeg(testing::Noise(64, 48, 4), 85);
  constexpr uint64_t kSamples = 2000;
  Pipeline p;
  p.num_samples = kSamples;
  ImageTransform t = ImageNetTrain(32);
  p.fields = {ImageField(t)};
  // Even ids: truncated at a sample-dependent point; odd ids: good.
  p.ops.push_back(MakeOp("read", [&good](Sample& s) {
    auto& buf = s.scratch();
    buf = good;
    if (s.id() % 2 == 0) buf.resize(20 + (s.id() * 7919) % (good.size() - 40));
    s.set_data(buf);
    s.location().key = "img" + std::to_string(s.id());
    return Status::OK();
  }));
  p.ops.push_back(MakeImageOp(t));
  LoaderOptions o;
  o.batch_size = 50;
  o.num_threads = 8;
  o.error_policy = ErrorPolicy::kSkip;
  o.max_errors = kSamples;
  auto loader = Loader::Create(p, o);
  ASSERT_TRUE(loader.ok()) << loader.status();
  uint64_t kept = 0, skipped = 0;
  Batch b;
  bool end = false;
  while (true) {
    ASSERT_TRUE((*loader)->Next(&b, &end).ok());
    if (end) break;
    kept += b.size();
    for (const SampleError& e : b.skipped()) {
      EXPECT_EQ(e.sample_id % 2, 0u);
      EXPECT_EQ(e.op, "decode_transform");
      EXPECT_EQ(e.location.key, "img" + std::to_string(e.sample_id));
      ++skipped;
    }
  }
  EXPECT_EQ(kept, kSamples / 2);
  EXPECT_EQ(skipped, kSamples / 2);
  MetricsSnapshot m = (*loader)->Metrics();
  EXPECT_EQ(m.errors.by_reason.at("decode_transform/DataLoss"), kSamples / 2);
}

}  // namespace
}  // namespace feedline
