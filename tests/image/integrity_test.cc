// Integrity is never traded for speed, and what Pillow accepts is accepted
// (docs/reliability.md 35, issue 12): a crop's reduced decode still verifies the
// whole record; JPEG oddities that phones and editors write still decode.
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "feedline/image.h"
#include "feedline/loader.h"
#include "gtest/gtest.h"
#include "src/image/jpeg_decoder.h"
#include "src/image/png_decoder.h"
#include "tests/image/test_images.h"

namespace feedline {
namespace {

using testing::MustDecode;
using testing::MustEncodeJpeg;
using testing::ReadTestFile;

struct Chunk {
  size_t offset;  // of the length field
  uint32_t length;
  std::string type;
};

std::vector<Chunk> PngChunks(const std::vector<uint8_t>& png) {
  std::vector<Chunk> chunks;
  for (size_t i = 8; i + 12 <= png.size();) {
    const uint32_t len = uint32_t{png[i]} << 24 | uint32_t{png[i + 1]} << 16 |
                         uint32_t{png[i + 2]} << 8 | png[i + 3];
    chunks.push_back({i, len, std::string(png.begin() + i + 4, png.begin() + i + 8)});
    i += 12 + len;
  }
  return chunks;
}

void FixCrc(std::vector<uint8_t>& png, const Chunk& c) {
  const uLong crc = crc32(0, png.data() + c.offset + 4, c.length + 4);
  const size_t at = c.offset + 8 + c.length;
  for (int k = 0; k < 4; ++k) png[at + k] = static_cast<uint8_t>(crc >> (24 - 8 * k));
}

// Decodes rows [y0, y1) through the fused op, as a crop at the top would.
Status DecodeTopRows(const std::vector<uint8_t>& bytes, uint32_t rows) {
  Result<ImageInfo> info = ReadImageInfo(bytes);
  if (!info.ok()) return info.status();
  ImageTransform t;
  t.crop = CropMode::kResizeFull;
  t.height = t.width = 8;
  t.dtype = DType::kUInt8;
  t.normalize = false;
  CropBox box;
  box.region_width = info->width;
  box.region_height = rows;
  box.width = info->width;
  box.height = rows;
  std::vector<uint8_t> out(ImageField(t).SampleBytes());
  return TransformImage(bytes, t, box, out.data());
}

// A PNG with many IDAT chunks, so the rows of a top crop live in the first.
std::vector<uint8_t> MultiIdatPng() {
  std::vector<uint8_t> png = ReadTestFile("photos/coffee.png");
  int idats = 0;
  for (const Chunk& c : PngChunks(png)) idats += c.type == "IDAT";
  EXPECT_GT(idats, 4) << "coffee.png is expected to hold several IDAT chunks";
  return png;
}

TEST(PngIntegrityTest, FlippedBitInALaterIdatIsAnErrorEvenForATopCrop) {
  const std::vector<uint8_t> png = MultiIdatPng();
  ASSERT_TRUE(DecodeTopRows(png, 4).ok());
  std::vector<Chunk> idat;
  for (const Chunk& c : PngChunks(png)) {
    if (c.type == "IDAT") idat.push_back(c);
  }
  // The stale CRC, then (with the CRC fixed up, as a corrupting copy tool
  // would) zlib's own checks: both must be caught.
  for (bool fix_crc : {false, true}) {
    for (size_t k : {size_t{1}, idat.size() / 2, idat.size() - 1}) {
      SCOPED_TRACE("fix_crc=" + std::to_string(fix_crc) + " idat=" + std::to_string(k));
      std::vector<uint8_t> bad = png;
      bad[idat[k].offset + 8 + idat[k].length / 2] ^= 0x10;
      if (fix_crc) FixCrc(bad, idat[k]);
      const Status st = DecodeTopRows(bad, 4);
      ASSERT_FALSE(st.ok());
      EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st;
      EXPECT_NE(st.message().find("PNG"), std::string::npos) << st;
      EXPECT_FALSE(DecodeImage(bad).ok());
    }
  }
}

TEST(PngIntegrityTest, CorruptChunkAfterTheImageDataIsAnError) {
  std::vector<uint8_t> png = MultiIdatPng();
  const Chunk iend = PngChunks(png).back();
  ASSERT_EQ(iend.type, "IEND");
  // A tEXt chunk after the last IDAT with a wrong CRC.
  const std::string text = "Comment";
  std::vector<uint8_t> chunk = {0, 0, 0, static_cast<uint8_t>(text.size()), 't', 'E', 'X', 't'};
  chunk.insert(chunk.end(), text.begin(), text.end());
  chunk.insert(chunk.end(), {0xDE, 0xAD, 0xBE, 0xEF});
  png.insert(png.begin() + static_cast<long>(iend.offset), chunk.begin(), chunk.end());
  EXPECT_EQ(DecodeTopRows(png, 4).code(), StatusCode::kDataLoss);
  EXPECT_FALSE(DecodeImage(png).ok());
}

TEST(PngIntegrityTest, TopCropOfAnIntactPngEqualsTheFullDecode) {
  const std::vector<uint8_t> png = MultiIdatPng();
  const RgbImage full = MustDecode(png);
  image::PngDecoder d;
  image::RgbRegion r;
  ASSERT_TRUE(d.Decode(png, {}, full.width, 0, 3, &r).ok());
  EXPECT_EQ(std::memcmp(r.pixels, full.pixels.data(), size_t{3} * full.width * 3), 0);
}

// Phones append data after the end-of-image marker (MPF thumbnails, depth
// maps, motion-photo video): Pillow and libjpeg decode the primary image.
TEST(JpegToleranceTest, DataAppendedAfterTheEndMarkerIsIgnoredWhateverItsSize) {
  const std::vector<uint8_t> jpeg = ReadTestFile("photos/rocket.jpg");
  const RgbImage expect = MustDecode(jpeg);
  for (size_t extra : {size_t{10}, size_t{70'000}, size_t{3'000'000}}) {
    SCOPED_TRACE(extra);
    std::vector<uint8_t> with_tail = jpeg;
    // A second JPEG's start, then bytes with no EOI in them.
    with_tail.insert(with_tail.end(), {0xFF, 0xD8, 0xFF, 0xE1});
    for (size_t i = 0; i < extra; ++i) with_tail.push_back(static_cast<uint8_t>(i * 7 % 251));
    Result<RgbImage> got = DecodeImage(with_tail);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->pixels, expect.pixels);
  }
}

// Junk bytes between header segments: libjpeg warns ("extraneous bytes
// before marker") and decodes, and so does Pillow; no pixel data is lost.
TEST(JpegToleranceTest, JunkBetweenHeaderSegmentsIsTolerated) {
  const std::vector<uint8_t> jpeg =
      MustEncodeJpeg(MustDecode(ReadTestFile("photos/chelsea.png")), 90);
  const RgbImage expect = MustDecode(jpeg);
  // After SOI and the APP0 segment that follows it.
  ASSERT_EQ(jpeg[2], 0xFF);
  const size_t app0_end = 4 + (size_t{jpeg[4]} << 8 | jpeg[5]);
  std::vector<uint8_t> junk = jpeg;
  const std::vector<uint8_t> bytes = {0x00, 0x12, 0x34, 0xD9, 0x00};
  junk.insert(junk.begin() + static_cast<long>(app0_end), bytes.begin(), bytes.end());
  Result<RgbImage> got = DecodeImage(junk);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->pixels, expect.pixels);
}

TEST(JpegToleranceTest, TruncationIsStillAnErrorWithAnyCrop) {
  const std::vector<uint8_t> jpeg = ReadTestFile("photos/rocket.jpg");
  for (double fraction : {0.5, 0.95, 0.999}) {
    SCOPED_TRACE(fraction);
    std::vector<uint8_t> cut(jpeg.begin(),
                             jpeg.begin() + static_cast<long>(jpeg.size() * fraction));
    const Status st = DecodeTopRows(cut, 8);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st;
  }
  // Cut just before the end marker: the entropy data ends without EOI.
  std::vector<uint8_t> no_eoi(jpeg.begin(), jpeg.end() - 2);
  EXPECT_FALSE(DecodeTopRows(no_eoi, 8).ok());
}

TEST(DecodeLimitsTest, DefaultPixelLimitIsPillowsDecompressionBombLimit) {
  EXPECT_EQ(DecodeLimits{}.max_pixels, 2 * uint64_t{89478485});
  // 13380 x 13380 = 179,024,400 pixels: over Pillow's limit, refused from the header.
  const std::vector<uint8_t> small = MustEncodeJpeg(testing::Noise(16, 16, 1), 90);
  Result<ImageInfo> r = ReadImageInfo(testing::WithDeclaredSize(small, 13380, 13380));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("max_pixels 178956970"), std::string::npos) << r.status();
}

TEST(ScratchEstimateTest, ProgressiveJpegCountsItsWholeCoefficientBuffer) {
  const RgbImage img = MustDecode(ReadTestFile("photos/chelsea.png"));  // 451 x 300
  const std::vector<uint8_t> base = MustEncodeJpeg(img, 90);
  const std::vector<uint8_t> prog = MustEncodeJpeg(img, 90, false, /*progressive=*/true);
  image::JpegDecoder d;
  ImageInfo info;
  ASSERT_TRUE(d.ReadHeader(base, {}, &info).ok());
  const uint64_t base_bytes = d.DecodeScratchBytes(8, 0, 0, 10, 10);
  ASSERT_TRUE(d.ReadHeader(prog, {}, &info).ok());
  const uint64_t prog_bytes = d.DecodeScratchBytes(8, 0, 0, 10, 10);
  // 4:2:0: luma 57x38 blocks (rounded to 58x38), chroma 29x19, 128 bytes a block.
  const uint64_t coefficients = (58 * 38 + 2 * 29 * 19) * 128;
  EXPECT_EQ(prog_bytes - base_bytes, coefficients);
  // What the decoder keeps after a full decode fits in the estimate.
  ASSERT_TRUE(d.ReadHeader(base, {}, &info).ok());
  const uint64_t full = d.DecodeScratchBytes(8, 0, 0, 451, 300);
  image::RgbRegion r;
  ASSERT_TRUE(d.Decode(8, 0, 0, 451, 300, &r).ok());
  EXPECT_LE(d.scratch_bytes(), full);
}

}  // namespace
}  // namespace feedline

namespace feedline {
namespace {

// A smooth image (small when encoded) of the given size.
RgbImage Gradient(uint32_t w, uint32_t h) {
  RgbImage img{w, h, std::vector<uint8_t>(size_t{w} * h * 3)};
  for (uint32_t y = 0; y < h; ++y) {
    for (uint32_t x = 0; x < w; ++x) {
      uint8_t* p = &img.pixels[(size_t{y} * w + x) * 3];
      p[0] = static_cast<uint8_t>(x * 255 / w);
      p[1] = static_cast<uint8_t>(y * 255 / h);
      p[2] = 128;
    }
  }
  return img;
}

Pipeline OneImagePipeline(std::vector<uint8_t> bytes, uint64_t samples) {
  Pipeline p;
  p.num_samples = samples;
  const ImageTransform t = ImageNetEval(64, 56);
  p.fields = {ImageField(t)};
  auto data = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  p.ops = {MakeOp("read",
                  [data](Sample& s) {
                    s.location().key = "big-" + std::to_string(s.id()) + ".jpg";
                    s.set_data(*data);
                    return Status::OK();
                  }),
           MakeImageOp(t)};
  return p;
}

// docs/reliability.md 36: a 4000 x 3000 progressive JPEG holds 36 MB of DCT
// coefficients while it decodes, over the 32 MiB a worker keeps.
TEST(ScratchBudgetTest, ProgressiveJpegOverTheAllowanceFailsNamingItsSizeAndTheBudget) {
  const std::vector<uint8_t> prog = MustEncodeJpeg(Gradient(4000, 3000), 80, false, true);
  LoaderOptions o;
  o.batch_size = 2;
  o.num_threads = 2;
  o.ring_depth = 2;
  o.max_bytes = uint64_t{64} << 20;  // a 16 MiB allowance
  Result<std::unique_ptr<Loader>> loader = Loader::Create(OneImagePipeline(prog, 4), o);
  ASSERT_TRUE(loader.ok()) << loader.status();
  Batch batch;
  bool end = false;
  const Status st = (*loader)->Next(&batch, &end);
  ASSERT_EQ(st.code(), StatusCode::kResourceExhausted) << st;
  EXPECT_NE(st.message().find("4000x3000 jpeg (progressive)"), std::string::npos) << st;
  EXPECT_NE(st.message().find("max_bytes=67108864"), std::string::npos) << st;
  EXPECT_NE(st.message().find("big-"), std::string::npos) << st;  // the sample's key
}

TEST(ScratchBudgetTest, LargeSamplesWithinTheAllowanceDecodeAndTheirScratchIsReturned) {
  const std::vector<uint8_t> prog = MustEncodeJpeg(Gradient(4000, 3000), 80, false, true);
  for (uint32_t threads : {1u, 3u}) {
    SCOPED_TRACE(threads);
    LoaderOptions o;
    o.batch_size = 2;
    o.num_threads = threads;
    o.ring_depth = 2;
    o.max_bytes = uint64_t{1} << 30;  // a 256 MiB allowance
    Result<std::unique_ptr<Loader>> loader = Loader::Create(OneImagePipeline(prog, 6), o);
    ASSERT_TRUE(loader.ok()) << loader.status();
    int batches = 0;
    while (true) {
      Batch batch;
      bool end = false;
      const Status st = (*loader)->Next(&batch, &end);
      ASSERT_TRUE(st.ok()) << st;
      if (end) break;
      ++batches;
    }
    EXPECT_EQ(batches, 3);
    const MetricsSnapshot m = (*loader)->Metrics();
    EXPECT_EQ(m.tuner.scratch_allowance_bytes, uint64_t{256} << 20);
    for (const WorkerMetrics& w : m.workers) EXPECT_LE(w.scratch_bytes, kRetainedScratchBytes);
  }
}

TEST(ScratchBudgetTest, SmallImagesNeverTouchTheAllowance) {
  const std::vector<uint8_t> jpeg = ReadTestFile("photos/rocket.jpg");
  LoaderOptions o;
  o.batch_size = 4;
  o.num_threads = 2;
  o.max_bytes = uint64_t{64} << 20;
  Result<std::unique_ptr<Loader>> loader = Loader::Create(OneImagePipeline(jpeg, 8), o);
  ASSERT_TRUE(loader.ok()) << loader.status();
  for (int i = 0; i < 2; ++i) {
    Batch batch;
    bool end = false;
    ASSERT_TRUE((*loader)->Next(&batch, &end).ok());
  }
  EXPECT_EQ((*loader)->Metrics().tuner.scratch_waits, 0u);
}

}  // namespace
}  // namespace feedline
