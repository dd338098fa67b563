// Restart intervals: the lossless pack-time transcode, the interval index,
// and crop decodes from only the intervals around the crop, which must give
// exactly the pixels of the whole-file path (docs/restart_intervals.md).
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>
// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>

#include "feedline/image.h"
#include "gtest/gtest.h"
#include "src/image/jpeg_decoder.h"
#include "src/image/jpeg_restart.h"
#include "src/image/jpeg_transcode.h"
#include "tests/image/test_images.h"

namespace feedline {
namespace {

using image::FindRestartIntervals;
using image::JpegDecoder;
using image::RestartLayout;
using image::TranscodeJpegWithRestarts;

// An encoder with the knobs EncodeJpeg lacks: sampling factors, restart
// markers written by the encoder itself (as cameras do), arithmetic coding.
struct EncodeOptions {
  int h = 2, v = 2;  // luma sampling: 2x2 = 4:2:0, 1x1 = 4:4:4
  bool gray = false;
  unsigned restart_interval = 0;
  int restart_rows = 0;
  bool arith = false;
  bool progressive = false;
};

struct TestError {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
};

[[noreturn]] void TestErrorExit(j_common_ptr cinfo) {
  std::longjmp(reinterpret_cast<TestError*>(cinfo->err)->jump, 1);
}

// Plain data between setjmp and longjmp.
int EncodeC(const RgbImage* img, const EncodeOptions* o, unsigned char** out, unsigned long* size) {
  jpeg_compress_struct c;
  TestError err;
  c.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = TestErrorExit;
  if (setjmp(err.jump)) {
    jpeg_destroy_compress(&c);
    return -1;
  }
  jpeg_create_compress(&c);
  jpeg_mem_dest(&c, out, size);
  c.image_width = img->width;
  c.image_height = img->height;
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  if (o->gray) jpeg_set_colorspace(&c, JCS_GRAYSCALE);
  jpeg_set_quality(&c, 90, TRUE);
  c.comp_info[0].h_samp_factor = o->gray ? 1 : o->h;
  c.comp_info[0].v_samp_factor = o->gray ? 1 : o->v;
  c.restart_interval = o->restart_interval;
  c.restart_in_rows = o->restart_rows;
  c.arith_code = o->arith ? TRUE : FALSE;
  if (o->progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row =
        const_cast<uint8_t*>(img->pixels.data()) + size_t{c.next_scanline} * img->width * 3;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  return 0;
}

std::vector<uint8_t> Encode(const RgbImage& img, const EncodeOptions& o) {
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  const int rc = EncodeC(&img, &o, &buf, &size);
  std::unique_ptr<unsigned char, decltype(&std::free)> owned(buf, &std::free);
  EXPECT_EQ(rc, 0);
  return rc == 0 ? std::vector<uint8_t>(buf, buf + size) : std::vector<uint8_t>{};
}

// A photograph resized to an odd size: real image statistics, awkward MCUs.
RgbImage Photo(const std::string& name, uint32_t w, uint32_t h) {
  const RgbImage full = testing::MustDecode(testing::ReadTestFile("photos/" + name));
  Result<RgbImage> r = ResizedCrop(full, 0, 0, full.width, full.height, w, h);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? std::move(r).value() : RgbImage{};
}

std::vector<uint8_t> MustTranscode(const std::vector<uint8_t>& jpeg, uint32_t interval) {
  std::vector<uint8_t> out;
  const Status st = TranscodeJpegWithRestarts(jpeg, interval, &out);
  EXPECT_TRUE(st.ok()) << st;
  return out;
}

struct Case {
  std::string name;
  std::vector<uint8_t> jpeg;
};

// 4:2:0, 4:4:4, 4:2:2, gray and progressive sources at odd sizes, and the
// repository's own JPEG photographs.
std::vector<Case> Sources() {
  std::vector<Case> cases;
  const RgbImage a = Photo("astronaut.png", 333, 217), b = Photo("chelsea.png", 150, 401);
  cases.push_back({"420 333x217", Encode(a, {})});
  cases.push_back({"444 333x217", Encode(a, {.h = 1, .v = 1})});
  cases.push_back({"422 150x401", Encode(b, {.h = 2, .v = 1})});
  cases.push_back({"gray 150x401", Encode(b, {.gray = true})});
  cases.push_back({"progressive 420 333x217", Encode(a, {.progressive = true})});
  cases.push_back({"420 17x9", Encode(Photo("coffee.png", 17, 9), {})});
  cases.push_back({"rocket.jpg", testing::ReadTestFile("photos/rocket.jpg")});
  cases.push_back({"hubble_deep_field.jpg", testing::ReadTestFile("photos/hubble_deep_field.jpg")});
  return cases;
}

TEST(RestartTranscodeTest, DecodesToTheSamePixelsAtEveryInterval) {
  for (const Case& c : Sources()) {
    const RgbImage want = testing::MustDecode(c.jpeg);
    for (uint32_t n : {0u, 1u, 2u, 3u, 5u, 16u, 100u, 4000u}) {
      SCOPED_TRACE(c.name + " interval " + std::to_string(n));
      const std::vector<uint8_t> t = MustTranscode(c.jpeg, n);
      const RgbImage got = testing::MustDecode(t);
      ASSERT_EQ(got.width, want.width);
      ASSERT_EQ(got.height, want.height);
      ASSERT_TRUE(got.pixels == want.pixels);
      RestartLayout l;
      ASSERT_EQ(FindRestartIntervals(t, &l), n > 0);
      if (n > 0) {
        EXPECT_EQ(l.interval, image::SnapRestartInterval(n, l.mcus_x));
        EXPECT_EQ(l.begin.size(), (uint64_t{l.mcus_x} * l.mcus_y + l.interval - 1) / l.interval);
      }
    }
  }
}

TEST(RestartTranscodeTest, SnapsIntervalsToTileTheRows) {
  EXPECT_EQ(image::SnapRestartInterval(0, 21), 0u);
  EXPECT_EQ(image::SnapRestartInterval(1, 21), 1u);
  EXPECT_EQ(image::SnapRestartInterval(5, 21), 3u);  // divisors of 21: 1 3 7 21
  EXPECT_EQ(image::SnapRestartInterval(8, 21), 7u);
  EXPECT_EQ(image::SnapRestartInterval(21, 21), 21u);
  EXPECT_EQ(image::SnapRestartInterval(50, 21), 42u);  // two rows
  EXPECT_EQ(image::SnapRestartInterval(65535, 4096), 61440u);
  EXPECT_EQ(image::SnapRestartInterval(2, 13), 1u);
}

TEST(RestartTranscodeTest, KeepsMetadataSegments) {
  // An APP1 (EXIF-like) and a comment survive the transcode.
  std::vector<uint8_t> jpeg = Encode(Photo("coffee.png", 64, 48), {});
  const std::vector<uint8_t> app1 = {0xFF, 0xE1, 0x00, 0x0A, 'E', 'x', 'i', 'f', 0, 0, 'M', 'M'};
  const std::vector<uint8_t> com = {0xFF, 0xFE, 0x00, 0x07, 'h', 'e', 'l', 'l', 'o'};
  jpeg.insert(jpeg.begin() + 2, com.begin(), com.end());
  jpeg.insert(jpeg.begin() + 2, app1.begin(), app1.end());
  const std::vector<uint8_t> t = MustTranscode(jpeg, 1);
  EXPECT_NE(std::search(t.begin(), t.end(), app1.begin(), app1.end()), t.end());
  EXPECT_NE(std::search(t.begin(), t.end(), com.begin(), com.end()), t.end());
}

TEST(RestartTranscodeTest, RefusesCorruptAndUnsupportedInput) {
  const std::vector<uint8_t> jpeg = Encode(Photo("coffee.png", 64, 48), {});
  std::vector<uint8_t> out = {1, 2, 3};
  // Truncated: libjpeg would pad with grey; the transcode must not.
  const std::vector<uint8_t> cut(jpeg.begin(),
                                 jpeg.begin() + static_cast<ptrdiff_t>(jpeg.size() / 2));
  EXPECT_EQ(TranscodeJpegWithRestarts(cut, 1, &out).code(), StatusCode::kDataLoss);
  EXPECT_EQ(out, (std::vector<uint8_t>{1, 2, 3}));  // untouched on error
  const std::vector<uint8_t> arith = Encode(Photo("coffee.png", 64, 48), {.arith = true});
  EXPECT_EQ(TranscodeJpegWithRestarts(arith, 1, &out).code(), StatusCode::kUnimplemented);
  const std::vector<uint8_t> png = testing::ReadTestFile("photos/coffee.png");
  EXPECT_EQ(TranscodeJpegWithRestarts(png, 1, &out).code(), StatusCode::kUnimplemented);
}

TEST(RestartLayoutTest, RefusesWhatIsNotATileOfIntervals) {
  const RgbImage img = Photo("astronaut.png", 333, 217);  // 21 MCUs per row at 4:2:0
  RestartLayout l;
  EXPECT_FALSE(FindRestartIntervals(Encode(img, {}), &l));                       // no DRI
  EXPECT_FALSE(FindRestartIntervals(Encode(img, {.restart_interval = 5}), &l));  // straddles rows
  EXPECT_FALSE(FindRestartIntervals(Encode(img, {.restart_interval = 3, .arith = true}), &l));
  EXPECT_FALSE(FindRestartIntervals(Encode(img, {.restart_interval = 3, .progressive = true}), &l));
  ASSERT_TRUE(FindRestartIntervals(Encode(img, {.restart_interval = 3}), &l));
  EXPECT_EQ(l.intervals_per_row, 7u);
  ASSERT_TRUE(FindRestartIntervals(Encode(img, {.restart_rows = 2}), &l));
  EXPECT_EQ(l.rows_per_interval, 2u);
  EXPECT_EQ(l.mcus_y, 14u);
}

// Every RST marker's offset in `jpeg` (the byte after 0xFF).
std::vector<size_t> RstOffsets(const std::vector<uint8_t>& jpeg) {
  RestartLayout l;
  EXPECT_TRUE(FindRestartIntervals(jpeg, &l));
  std::vector<size_t> at;
  for (size_t i = 1; i < l.begin.size(); ++i) at.push_back(l.begin[i] - 1);
  return at;
}

// Decodes region [x0,x1)x[y0,y1) at scale m; the pixels, row by row.
std::vector<uint8_t> DecodeRegion(JpegDecoder& d, const std::vector<uint8_t>& jpeg, int m,
                                  uint32_t x0, uint32_t y0, uint32_t x1, uint32_t y1,
                                  image::RgbRegion* region, Status* st) {
  ImageInfo info;
  *st = d.ReadHeader(jpeg, DecodeLimits{}, &info);
  if (!st->ok()) return {};
  *st = d.Decode(m, x0, y0, x1, y1, region);
  if (!st->ok()) return {};
  return std::vector<uint8_t>(region->pixels,
                              region->pixels + size_t{region->width} * region->height * 3);
}

TEST(RestartDecodeTest, RegionsFromIntervalsEqualTheWholeFilePath) {
  uint64_t seed = 20261201;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  for (const Case& c : Sources()) {
    for (uint32_t n : {1u, 3u, 4000u, 64u}) {
      const std::vector<uint8_t> t = MustTranscode(c.jpeg, n);
      RestartLayout l;
      if (!FindRestartIntervals(t, &l)) continue;  // (progressive sources become baseline)
      JpegDecoder plain, fast;
      ImageInfo info;
      ASSERT_TRUE(plain.ReadHeader(c.jpeg, DecodeLimits{}, &info).ok());
      const uint32_t w = info.width, h = info.height;
      int used = 0, tried = 0;
      for (int m : {8, 4, 2, 1, 3}) {
        uint32_t sw = 0, sh = 0;
        plain.ScaledSize(m, &sw, &sh);
        for (int k = 0; k < 40; ++k) {
          seed = seed * 6364136223846793005ull + 1442695040888963407ull;
          auto pick = [&](uint32_t lim) {
            seed = seed * 6364136223846793005ull + 1;
            return static_cast<uint32_t>((seed >> 33) % lim);
          };
          uint32_t x0 = pick(sw), y0 = pick(sh);
          uint32_t x1 = x0 + 1 + pick(sw - x0), y1 = y0 + 1 + pick(sh - y0);
          if (k == 0) x0 = 0, y0 = 0, x1 = 1, y1 = 1;              // top-left corner
          if (k == 1) x0 = sw - 1, y0 = sh - 1, x1 = sw, y1 = sh;  // bottom-right corner
          if (k == 2) x0 = 0, x1 = sw;                             // full rows
          SCOPED_TRACE(c.name + " n=" + std::to_string(n) + " m=" + std::to_string(m) + " region " +
                       std::to_string(x0) + "," + std::to_string(y0) + "-" + std::to_string(x1) +
                       "," + std::to_string(y1) + " of " + std::to_string(w) + "x" +
                       std::to_string(h));
          image::RgbRegion ra, rb;
          Status sa, sb;
          const std::vector<uint8_t> a = DecodeRegion(plain, c.jpeg, m, x0, y0, x1, y1, &ra, &sa);
          const std::vector<uint8_t> b = DecodeRegion(fast, t, m, x0, y0, x1, y1, &rb, &sb);
          ASSERT_TRUE(sa.ok()) << sa;
          ASSERT_TRUE(sb.ok()) << sb;
          EXPECT_FALSE(plain.last_decode_used_restarts());
          used += fast.last_decode_used_restarts();
          ++tried;
          ASSERT_EQ(ra.x, rb.x);
          ASSERT_EQ(ra.y, rb.y);
          ASSERT_EQ(ra.width, rb.width);
          ASSERT_EQ(ra.height, rb.height);
          ASSERT_EQ(ra.full_width, rb.full_width);
          ASSERT_EQ(ra.full_height, rb.full_height);
          ASSERT_TRUE(a == b);
        }
      }
      // Most regions of an image several MCU rows tall skip something.
      if (l.mcus_y >= 8 && l.rows_per_interval == 1) {
        EXPECT_GT(used, tried / 2) << c.name << " n=" << n;
      }
    }
  }
}

TEST(RestartDecodeTest, TransformOutputIsIdenticalForRandomCrops) {
  for (const Case& c : Sources()) {
    for (uint32_t n : {1u, 2u, 4000u}) {
      const std::vector<uint8_t> t = MustTranscode(c.jpeg, n);
      Result<ImageInfo> read = ReadImageInfo(c.jpeg);
      ASSERT_TRUE(read.ok()) << read.status();
      const ImageInfo info = *read;
      for (bool dct : {true, false}) {
        for (ImageTransform tr : {ImageNetTrain(32), ImageNetTrain(7), ImageNetEval(40, 32)}) {
          tr.dtype = DType::kUInt8;
          tr.dct_scaling = dct;
          tr.scale = {0.01, 1.0};  // small crops too, anywhere, edges included
          for (uint64_t id = 0; id < 30; ++id) {
            SampleRng rng = SampleRng::ForSample(7, 0, id, 0);
            const CropBox box = ChooseCrop(tr, info.width, info.height, rng);
            std::vector<uint8_t> a(ImageField(tr).SampleBytes()), b(a.size());
            ASSERT_TRUE(TransformImage(c.jpeg, tr, box, a.data()).ok());
            ASSERT_TRUE(TransformImage(t, tr, box, b.data()).ok());
            ASSERT_TRUE(a == b) << c.name << " n=" << n << " dct=" << dct << " sample " << id;
          }
        }
      }
    }
  }
}

TEST(RestartDecodeTest, MarkersWrittenByTheEncoderAreUsedToo) {
  // Loose files from cameras often carry restart markers already.
  const RgbImage img = Photo("chelsea.png", 300, 451);
  for (EncodeOptions o :
       {EncodeOptions{.restart_rows = 1}, EncodeOptions{.h = 1, .v = 1, .restart_interval = 2}}) {
    const std::vector<uint8_t> camera = Encode(img, o);
    const std::vector<uint8_t> plain = MustTranscode(camera, 0);  // markers removed, same pixels
    JpegDecoder a, b;
    image::RgbRegion ra, rb;
    Status sa, sb;
    const auto pa = DecodeRegion(a, plain, 8, 40, 200, 90, 260, &ra, &sa);
    const auto pb = DecodeRegion(b, camera, 8, 40, 200, 90, 260, &rb, &sb);
    ASSERT_TRUE(sa.ok() && sb.ok()) << sa << sb;
    EXPECT_TRUE(b.last_decode_used_restarts());
    EXPECT_TRUE(pa == pb);
  }
}

TEST(RestartDecodeTest, BrokenMarkersFallBackAndNeverGiveWrongPixels) {
  const std::vector<uint8_t> t = MustTranscode(Encode(Photo("astronaut.png", 333, 217), {}), 21);
  const std::vector<size_t> rst = RstOffsets(t);
  ASSERT_GT(rst.size(), 6u);
  ImageTransform tr = ImageNetTrain(16);
  tr.dtype = DType::kUInt8;
  const CropBox box{100, 150, 100, 50, 0, 0, 100, 50, false};  // rows near the bottom
  std::vector<uint8_t> out(ImageField(tr).SampleBytes());
  std::vector<std::pair<std::string, std::vector<uint8_t>>> broken;
  {
    std::vector<uint8_t> b = t;  // two markers swapped: out of order
    std::swap(b[rst[2]], b[rst[3]]);
    broken.emplace_back("swapped", b);
  }
  {
    std::vector<uint8_t> b = t;  // one renumbered
    b[rst[4]] = static_cast<uint8_t>(0xD0 + (b[rst[4]] - 0xD0 + 3) % 8);
    broken.emplace_back("renumbered", b);
  }
  {
    std::vector<uint8_t> b = t;  // one missing
    b.erase(b.begin() + static_cast<ptrdiff_t>(rst[1]) - 1,
            b.begin() + static_cast<ptrdiff_t>(rst[1]) + 1);
    broken.emplace_back("missing", b);
  }
  for (const auto& [name, b] : broken) {
    RestartLayout l;
    EXPECT_FALSE(FindRestartIntervals(b, &l)) << name;
    // The whole-file path decodes and libjpeg's resync warning is fatal.
    const Status st = TransformImage(b, tr, box, out.data());
    EXPECT_EQ(st.code(), StatusCode::kDataLoss) << name << ": " << st;
    JpegDecoder d;
    image::RgbRegion r;
    Status s;
    DecodeRegion(d, b, 8, 100, 150, 200, 200, &r, &s);
    EXPECT_FALSE(s.ok()) << name;
    EXPECT_FALSE(d.last_decode_used_restarts()) << name;
  }
}

TEST(RestartDecodeTest, CorruptIntervalInTheWindowFallsBackToTheWholeFileResult) {
  // Bytes of an interval the window needs are damaged: whatever the window
  // decode says, the result is the whole-file path's (here: an error).
  const std::vector<uint8_t> t = MustTranscode(Encode(Photo("astronaut.png", 333, 217), {}), 21);
  const std::vector<size_t> rst = RstOffsets(t);
  std::vector<uint8_t> b = t;
  // Garbage marker inside interval 10 (rows 10 of 14).
  b[rst[9] + 3] = 0xFF;
  b[rst[9] + 4] = 0xC4;
  JpegDecoder d;
  image::RgbRegion r;
  Status s;
  DecodeRegion(d, b, 8, 0, 150, 333, 170, &r, &s);
  EXPECT_FALSE(s.ok());
}

TEST(RestartDecodeTest, EveryTruncationAndByteFlipIsSafe) {
  // The index and the window are built from untrusted bytes: each cut and
  // each flipped byte gives pixels or an error, never a crash (ASan).
  const std::vector<uint8_t> t = MustTranscode(Encode(Photo("coffee.png", 70, 52), {}), 1);
  ImageTransform tr = ImageNetTrain(8);
  tr.dtype = DType::kUInt8;
  const CropBox box{30, 20, 30, 30, 0, 0, 30, 30, false};
  std::vector<uint8_t> out(ImageField(tr).SampleBytes());
  ASSERT_TRUE(TransformImage(t, tr, box, out.data()).ok());
  int errors = 0;
  for (size_t cut = 0; cut < t.size(); ++cut) {
    const std::vector<uint8_t> b(t.begin(), t.begin() + static_cast<ptrdiff_t>(cut));
    errors += !TransformImage(b, tr, box, out.data()).ok();
  }
  EXPECT_EQ(errors, static_cast<int>(t.size()));  // no EOI: every cut is an error
  JpegDecoder d;
  for (size_t i = 2; i < t.size(); ++i) {
    for (uint8_t v : {uint8_t{0xFF}, uint8_t{0x00}, static_cast<uint8_t>(t[i] ^ 0x10)}) {
      std::vector<uint8_t> b = t;
      b[i] = v;
      (void)TransformImage(b, tr, box, out.data());
      image::RgbRegion r;
      Status st;
      DecodeRegion(d, b, 8, 30, 20, 60, 50, &r, &st);
    }
  }
}

}  // namespace
}  // namespace feedline
