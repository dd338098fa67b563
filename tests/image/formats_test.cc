// The whole-decoded formats (WebP, TIFF, GIF, BMP, PNM): round trips through
// the codecs' own encoders, limits from the header, truncated and hostile
// files, the scratch estimate, and the fused op's crop of a whole decode.
// Pixel equality with PIL is tests/integration/test_formats.py.
#include <gif_lib.h>
#include <tiffio.h>
#include <webp/encode.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "feedline/image.h"
#include "gtest/gtest.h"
#include "src/image/whole_decoders.h"
#include "tests/image/test_images.h"

namespace feedline {
namespace {

using Bytes = std::vector<uint8_t>;
using testing::Noise;

// ---- fixtures, written at test time ----

Bytes WebpLossless(const RgbImage& img) {
  uint8_t* out = nullptr;
  const size_t n =
      WebPEncodeLosslessRGB(img.pixels.data(), static_cast<int>(img.width),
                            static_cast<int>(img.height), static_cast<int>(img.width * 3), &out);
  Bytes b(out, out + n);
  WebPFree(out);
  EXPECT_GT(n, 0u);
  return b;
}

Bytes Tiff(const RgbImage& img, uint16_t compression = COMPRESSION_LZW) {
  const std::string path = ::testing::TempDir() + "/formats_test.tif";
  TIFF* t = TIFFOpen(path.c_str(), "w");
  EXPECT_NE(t, nullptr);
  TIFFSetField(t, TIFFTAG_IMAGEWIDTH, img.width);
  TIFFSetField(t, TIFFTAG_IMAGELENGTH, img.height);
  TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, 3);
  TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 8);
  TIFFSetField(t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_RGB);
  TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
  TIFFSetField(t, TIFFTAG_COMPRESSION, compression);
  TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, 4);
  for (uint32_t y = 0; y < img.height; ++y) {
    Bytes row(img.pixels.begin() + y * img.width * 3, img.pixels.begin() + (y + 1) * img.width * 3);
    EXPECT_EQ(TIFFWriteScanline(t, row.data(), y, 0), 1);
  }
  TIFFClose(t);
  std::ifstream in(path, std::ios::binary);
  Bytes b((std::istreambuf_iterator<char>(in)), {});
  std::remove(path.c_str());
  return b;
}

int AppendBytes(GifFileType* g, const GifByteType* data, int n) {
  auto* out = static_cast<Bytes*>(g->UserData);
  out->insert(out->end(), data, data + n);
  return n;
}

// A GIF of indices into a 256-entry palette (entry i = (i, 255 - i, i / 2)),
// the frame at (left, top) on a screen_w x screen_h screen.
Bytes Gif(const std::vector<uint8_t>& indices, int w, int h, int screen_w, int screen_h,
          int left = 0, int top = 0) {
  Bytes out;
  int err = 0;
  GifFileType* g = EGifOpen(&out, AppendBytes, &err);
  EXPECT_NE(g, nullptr);
  GifColorType colors[256];
  for (int i = 0; i < 256; ++i) colors[i] = {uint8_t(i), uint8_t(255 - i), uint8_t(i / 2)};
  ColorMapObject* map = GifMakeMapObject(256, colors);
  EXPECT_EQ(EGifPutScreenDesc(g, screen_w, screen_h, 8, 0, map), GIF_OK);
  EXPECT_EQ(EGifPutImageDesc(g, left, top, w, h, false, nullptr), GIF_OK);
  std::vector<GifPixelType> row(w);
  for (int y = 0; y < h; ++y) {
    std::memcpy(row.data(), &indices[size_t(y) * w], w);
    EXPECT_EQ(EGifPutLine(g, row.data(), w), GIF_OK);
  }
  EXPECT_EQ(EGifCloseFile(g, &err), GIF_OK);
  GifFreeMapObject(map);
  return out;
}

void Put16(Bytes& b, uint16_t v) { b.push_back(v & 0xFF), b.push_back(v >> 8); }
void Put32(Bytes& b, uint32_t v) { Put16(b, v & 0xFFFF), Put16(b, v >> 16); }

// A 24-bit bottom-up BMP with a BITMAPINFOHEADER.
Bytes Bmp(const RgbImage& img) {
  const uint32_t stride = (img.width * 3 + 3) / 4 * 4;
  Bytes b = {'B', 'M'};
  Put32(b, 54 + stride * img.height), Put32(b, 0), Put32(b, 54);
  Put32(b, 40), Put32(b, img.width), Put32(b, img.height), Put16(b, 1), Put16(b, 24);
  Put32(b, 0), Put32(b, stride * img.height), Put32(b, 2835), Put32(b, 2835), Put32(b, 0),
      Put32(b, 0);
  for (uint32_t y = img.height; y-- > 0;) {
    for (uint32_t x = 0; x < img.width; ++x) {
      const uint8_t* p = &img.pixels[(size_t{y} * img.width + x) * 3];
      b.insert(b.end(), {p[2], p[1], p[0]});
    }
    b.resize(b.size() + stride - img.width * 3, 0);
  }
  return b;
}

Bytes Ppm(const RgbImage& img) {
  const std::string head =
      "P6\n# feedline\n" + std::to_string(img.width) + " " + std::to_string(img.height) + "\n255\n";
  Bytes b(head.begin(), head.end());
  b.insert(b.end(), img.pixels.begin(), img.pixels.end());
  return b;
}

struct Fixture {
  const char* name;
  ImageFormat format;
  Bytes bytes;
};

// One lossless file of each format holding exactly `img`.
std::vector<Fixture> AllFormats(const RgbImage& img) {
  return {{"webp", ImageFormat::kWebp, WebpLossless(img)},
          {"tiff", ImageFormat::kTiff, Tiff(img)},
          {"bmp", ImageFormat::kBmp, Bmp(img)},
          {"pnm", ImageFormat::kPnm, Ppm(img)}};
}

// The GIF palette's colour of index i.
std::array<uint8_t, 3> GifColor(uint8_t i) { return {i, uint8_t(255 - i), uint8_t(i / 2)}; }

// ---- tests ----

TEST(FormatsTest, SniffsEveryFormatByItsMagic) {
  const RgbImage img = Noise(5, 3, 1);
  for (const Fixture& f : AllFormats(img)) {
    EXPECT_EQ(SniffImageFormat(f.bytes), f.format) << f.name;
  }
  EXPECT_EQ(SniffImageFormat(Gif(Bytes(6, 1), 3, 2, 3, 2)), ImageFormat::kGif);
  for (const char* pnm : {"P1 ", "P2\n", "P3\t", "P4\r", "P5 ", "P6\n"}) {
    EXPECT_EQ(SniffImageFormat(std::span(reinterpret_cast<const uint8_t*>(pnm), 3)),
              ImageFormat::kPnm)
        << pnm;
  }
  for (const char* not_pnm : {"P7\n", "P0 ", "P6x", "P6"}) {
    EXPECT_EQ(SniffImageFormat(
                  std::span(reinterpret_cast<const uint8_t*>(not_pnm), std::strlen(not_pnm))),
              ImageFormat::kUnknown)
        << not_pnm;
  }
  EXPECT_EQ(ImageFormatName(ImageFormat::kPnm), "pnm");
}

TEST(FormatsTest, LosslessFilesDecodeToTheirExactPixels) {
  for (auto [w, h] : {std::pair{1u, 1u}, {37u, 19u}, {64u, 3u}}) {
    const RgbImage img = Noise(w, h, w * h);
    for (const Fixture& f : AllFormats(img)) {
      SCOPED_TRACE(std::string(f.name) + " " + std::to_string(w) + "x" + std::to_string(h));
      Result<ImageInfo> info = ReadImageInfo(f.bytes);
      ASSERT_TRUE(info.ok()) << info.status();
      EXPECT_EQ(info->format, f.format);
      EXPECT_EQ(info->width, w);
      EXPECT_EQ(info->height, h);
      Result<RgbImage> d = DecodeImage(f.bytes);
      ASSERT_TRUE(d.ok()) << d.status();
      EXPECT_EQ(d->width, w);
      EXPECT_EQ(d->height, h);
      EXPECT_EQ(d->pixels, img.pixels);
    }
  }
}

TEST(FormatsTest, GifFirstFrameSitsAtItsOffsetOnTheScreen) {
  std::vector<uint8_t> idx(4 * 3);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<uint8_t>(10 + i);
  const Bytes gif = Gif(idx, 4, 3, 9, 7, /*left=*/2, /*top=*/3);
  Result<RgbImage> d = DecodeImage(gif);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->width, 9u);
  ASSERT_EQ(d->height, 7u);
  for (uint32_t y = 0; y < 7; ++y) {
    for (uint32_t x = 0; x < 9; ++x) {
      const bool inside = x >= 2 && x < 6 && y >= 3 && y < 6;
      const auto want = GifColor(inside ? idx[(y - 3) * 4 + (x - 2)] : 0);  // outside: index 0
      const uint8_t* p = &d->pixels[(size_t{y} * 9 + x) * 3];
      ASSERT_EQ(std::vector<uint8_t>(p, p + 3), std::vector<uint8_t>(want.begin(), want.end()))
          << x << "," << y;
    }
  }
  // A frame reaching past the screen enlarges the canvas (as PIL does).
  Result<ImageInfo> big = ReadImageInfo(Gif(idx, 4, 3, 3, 2, 5, 1));
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(big->width, 9u);
  EXPECT_EQ(big->height, 4u);
}

TEST(FormatsTest, HeaderLimitsAreCheckedBeforeDecoding) {
  const RgbImage img = Noise(40, 30, 2);
  std::vector<Fixture> all = AllFormats(img);
  all.push_back({"gif", ImageFormat::kGif, Gif(Bytes(40 * 30, 7), 40, 30, 40, 30)});
  for (const Fixture& f : all) {
    SCOPED_TRACE(f.name);
    DecodeLimits dim;
    dim.max_dimension = 39;
    DecodeLimits pixels;
    pixels.max_pixels = 40 * 30 - 1;
    for (const DecodeLimits& l : {dim, pixels}) {
      Result<ImageInfo> info = ReadImageInfo(f.bytes, l);
      ASSERT_FALSE(info.ok());
      EXPECT_EQ(info.status().code(), StatusCode::kInvalidArgument) << info.status();
      EXPECT_NE(info.status().message().find("40x30, over max_"), std::string::npos)
          << info.status();
      Result<RgbImage> d = DecodeImage(f.bytes, l);
      ASSERT_FALSE(d.ok());
      EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << d.status();
    }
    // The decoder refused before allocating any scratch.
    image::WholeDecoders w;
    image::RgbRegion r;
    EXPECT_FALSE(w.DecodeRegion(f.format, f.bytes, dim, &r).ok());
    EXPECT_EQ(w.scratch_bytes(), 0u);
  }
}

TEST(FormatsTest, ScratchEstimateCoversTheDecodeAndIsReused) {
  const RgbImage img = Noise(33, 21, 3);
  std::vector<Fixture> all = AllFormats(img);
  all.push_back({"gif", ImageFormat::kGif, Gif(Bytes(33 * 21, 7), 33, 21, 33, 21)});
  for (const Fixture& f : all) {
    SCOPED_TRACE(f.name);
    image::WholeDecoders w;
    ImageInfo info;
    ASSERT_TRUE(w.ReadHeader(f.format, f.bytes, {}, &info).ok());
    const uint64_t estimate = image::WholeDecoders::ScratchBytesFor(info);
    EXPECT_GE(estimate, uint64_t{33} * 21 * 3);
    image::RgbRegion r;
    ASSERT_TRUE(w.DecodeRegion(f.format, f.bytes, {}, &r).ok());
    EXPECT_LE(w.scratch_bytes(), estimate);
    EXPECT_GT(w.scratch_bytes(), 0u);
    const uint64_t after_one = w.scratch_bytes();
    ASSERT_TRUE(w.DecodeRegion(f.format, f.bytes, {}, &r).ok());
    EXPECT_EQ(w.scratch_bytes(), after_one);  // reused, not regrown
  }
}

TEST(FormatsTest, EveryTruncationIsAnErrorNamingTheFormat) {
  const RgbImage img = Noise(13, 9, 4);
  std::vector<Fixture> all = AllFormats(img);
  all.push_back({"gif", ImageFormat::kGif, Gif(img.pixels, 13, 9, 13, 9)});
  const std::map<ImageFormat, std::string> names = {{ImageFormat::kWebp, "WebP"},
                                                    {ImageFormat::kTiff, "TIFF"},
                                                    {ImageFormat::kBmp, "BMP"},
                                                    {ImageFormat::kPnm, "PNM"},
                                                    {ImageFormat::kGif, "GIF"}};
  for (const Fixture& f : all) {
    SCOPED_TRACE(f.name);
    // GIF: the trailer and the LZW end-of-data code are not needed for the
    // pixels; every cut before the last 3 bytes loses pixel data.
    const size_t ok_from = f.format == ImageFormat::kGif ? f.bytes.size() - 3 : f.bytes.size();
    for (size_t n = 1; n < ok_from; ++n) {
      const Bytes cut(f.bytes.begin(), f.bytes.begin() + n);
      if (SniffImageFormat(cut) != f.format) continue;  // too short to recognise
      Result<RgbImage> d = DecodeImage(cut);
      ASSERT_FALSE(d.ok()) << "cut at " << n << " of " << f.bytes.size();
      EXPECT_EQ(d.status().code(), StatusCode::kDataLoss) << d.status();
      EXPECT_NE(d.status().message().find("corrupt " + names.at(f.format)), std::string::npos)
          << d.status();
    }
  }
}

TEST(FormatsTest, TiffErrorsCarryLibtiffsMessageAndStayOffStderr) {
  Bytes t = Tiff(Noise(8, 8, 5));
  t[4] = 0xFF;  // first IFD offset far past the end
  t[5] = 0xFF;
  ::testing::internal::CaptureStderr();
  Result<RgbImage> d = DecodeImage(t);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kDataLoss) << d.status();
  EXPECT_NE(d.status().message().find("corrupt TIFF: "), std::string::npos) << d.status();
  EXPECT_GT(d.status().message().size(), std::string("corrupt TIFF: ").size());
  EXPECT_EQ(err, "");
}

TEST(FormatsTest, HostileBmpHeadersAreRefused) {
  const Bytes good = Bmp(Noise(6, 4, 6));
  struct Case {
    const char* what;
    size_t at;
    uint32_t value;
    const char* expect;
  };
  for (const Case& c :
       {Case{"offset past the end", 10, 0xFFFFFFF0u, "pixel data"},
        Case{"height INT_MIN", 22, 0x80000000u, "over max_dimension"},
        Case{"negative width", 18, 0xFFFFFFFFu, "empty image"},
        Case{"header size 99", 14, 99, "header size"}, Case{"compression 9", 30, 9, "compression"},
        Case{"rle8", 30, 1, "RLE8"}, Case{"bits 0", 28, 0, "bit depth"}}) {
    SCOPED_TRACE(c.what);
    Bytes b = good;
    if (c.at == 28) {  // 16-bit field
      b[c.at] = static_cast<uint8_t>(c.value), b[c.at + 1] = 0;
    } else {
      std::memcpy(&b[c.at], &c.value, 4);  // little-endian host, as the test machines are
    }
    Result<RgbImage> d = DecodeImage(b);
    ASSERT_FALSE(d.ok());
    EXPECT_NE(d.status().message().find(c.expect), std::string::npos) << d.status();
  }
  // An 8-bit image claiming a huge palette.
  Bytes huge = good;
  huge[28] = 8;
  std::memset(&huge[46], 0x7F, 4);
  Result<RgbImage> h = DecodeImage(huge);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("palette of 2139062143 colours"), std::string::npos)
      << h.status();
  // A palette image whose indices run past a 2-entry table: gray levels, as in PIL.
  Bytes pal = {'B', 'M'};
  Put32(pal, 14 + 40 + 8 + 4), Put32(pal, 0), Put32(pal, 14 + 40 + 8);
  Put32(pal, 40), Put32(pal, 2), Put32(pal, 1), Put16(pal, 1), Put16(pal, 8), Put32(pal, 0),
      Put32(pal, 4), Put32(pal, 0), Put32(pal, 0), Put32(pal, 2), Put32(pal, 0);
  pal.insert(pal.end(), {1, 2, 3, 0, 4, 5, 6, 0, /*pixels*/ 1, 200, 0, 0});
  Result<RgbImage> d = DecodeImage(pal);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->pixels, (Bytes{6, 5, 4, 200, 200, 200}));
}

TEST(FormatsTest, MalformedPnmIsDataLoss) {
  for (const char* text :
       {"P6\n2 2\n0\n", "P6\n2 2\n65536\n", "P5\n2 1\n255", "P5\n2 x\n255\n", "P2\n2 1\n10\n3 11\n",
        "P3\n1 1\n255\n1 2\n", "P1\n2 1\n1 2\n", "P5\n99999999999 1\n255\n"}) {
    SCOPED_TRACE(text);
    const Bytes b(text, text + std::strlen(text));
    Result<RgbImage> d = DecodeImage(b);
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), StatusCode::kDataLoss) << d.status();
    EXPECT_NE(d.status().message().find("corrupt PNM"), std::string::npos) << d.status();
  }
  // Binary samples above maxval are refused too.
  const std::string over = std::string("P5\n2 1\n100\n") + char(50) + char(101);
  Result<RgbImage> d = DecodeImage(Bytes(over.begin(), over.end()));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("over maxval 100"), std::string::npos) << d.status();
}

// The fused op crops a whole-decoded image exactly as it crops a PNG of the
// same pixels (the PNG path is checked against torchvision elsewhere).
TEST(FormatsTest, FusedOpOnWholeDecodedFormatsMatchesPng) {
  const RgbImage img = Noise(50, 34, 7);
  Result<Bytes> png = EncodePng(img);
  ASSERT_TRUE(png.ok());
  std::vector<Fixture> all = AllFormats(img);
  for (ImageTransform t : {ImageNetTrain(24), ImageNetEval(32, 28)}) {
    t.dtype = DType::kUInt8;
    for (uint64_t id = 0; id < 6; ++id) {
      SampleRng rng = SampleRng::ForSample(1, 0, id, 0);
      const CropBox box = ChooseCrop(t, img.width, img.height, rng);
      std::vector<uint8_t> want(ImageField(t).SampleBytes()), got(want.size());
      ASSERT_TRUE(TransformImage(*png, t, box, want.data()).ok());
      for (const Fixture& f : all) {
        SCOPED_TRACE(f.name);
        Status st = TransformImage(f.bytes, t, box, got.data());
        ASSERT_TRUE(st.ok()) << st;
        EXPECT_EQ(got, want) << "sample " << id;
      }
    }
  }
}

}  // namespace
}  // namespace feedline
