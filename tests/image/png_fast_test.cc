// The PNG fast path (libdeflate + our defilter, src/image/png_decoder.cc)
// against libspng's path, the reference: the same bytes for every type it
// takes, every filter type on every row (the first row too), odd widths,
// image data split over many IDAT chunks, every crop; and the same errors
// for damaged files, since the fast path hands anything it doubts to
// libspng (docs/image.md, "PNG").
#include <zlib.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "feedline/image.h"
#include "gtest/gtest.h"
#include "src/image/png_decoder.h"
#include "tests/image/test_images.h"

namespace feedline {
namespace {

void Put32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
}

void PutChunk(std::vector<uint8_t>& out, const char* type, const uint8_t* data, size_t n) {
  Put32(out, static_cast<uint32_t>(n));
  const size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data, data + n);
  Put32(out, static_cast<uint32_t>(crc32(0, out.data() + start, static_cast<uInt>(n + 4))));
}

int PaethOf(int a, int b, int c) {
  const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}

struct PngSpec {
  uint32_t width, height;
  uint8_t color_type;           // 0, 2, 4, 6
  size_t idat_chunk = 1 << 20;  // bytes of zlib stream per IDAT
  uint32_t seed = 1;
  bool trailing_text = false;  // a tEXt chunk after the image data
};

uint32_t Bpp(uint8_t color_type) {
  return color_type == 0 ? 1 : color_type == 4 ? 2 : color_type == 2 ? 3 : 4;
}

// An 8-bit PNG written by hand: row y is filtered with type (y + seed) % 5,
// so every filter meets every row position; the zlib stream is cut into
// IDAT chunks of idat_chunk bytes.
std::vector<uint8_t> MakePng(const PngSpec& s, std::vector<uint8_t>* raw_out = nullptr) {
  const uint32_t bpp = Bpp(s.color_type);
  const size_t n = size_t{s.width} * bpp;
  std::mt19937 rng(s.seed);
  std::vector<uint8_t> raw(n * s.height);
  for (size_t i = 0; i < raw.size(); ++i) {  // smooth with noise: every predictor has work
    raw[i] = static_cast<uint8_t>((i % n) / bpp * 3 + (i / n) * 5 + rng() % 23);
  }
  std::vector<uint8_t> filtered;
  for (uint32_t y = 0; y < s.height; ++y) {
    const uint8_t type = static_cast<uint8_t>((y + s.seed) % 5);
    filtered.push_back(type);
    const uint8_t* r = raw.data() + y * n;
    const uint8_t* up = y > 0 ? r - n : nullptr;
    for (size_t i = 0; i < n; ++i) {
      const int a = i >= bpp ? r[i - bpp] : 0, b = up ? up[i] : 0,
                c = (up && i >= bpp) ? up[i - bpp] : 0;
      const int pred = type == 0   ? 0
                       : type == 1 ? a
                       : type == 2 ? b
                       : type == 3 ? (a + b) / 2
                                   : PaethOf(a, b, c);
      filtered.push_back(static_cast<uint8_t>(r[i] - pred));
    }
  }
  uLongf zn = compressBound(static_cast<uLong>(filtered.size()));
  std::vector<uint8_t> z(zn);
  EXPECT_EQ(compress2(z.data(), &zn, filtered.data(), static_cast<uLong>(filtered.size()), 6),
            Z_OK);
  z.resize(zn);
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  std::vector<uint8_t> ihdr;
  Put32(ihdr, s.width);
  Put32(ihdr, s.height);
  ihdr.insert(ihdr.end(), {8, s.color_type, 0, 0, 0});
  PutChunk(png, "IHDR", ihdr.data(), ihdr.size());
  const char text[] = "Comment\0written by hand";
  PutChunk(png, "tEXt", reinterpret_cast<const uint8_t*>(text), sizeof(text) - 1);
  PutChunk(png, "tIME", reinterpret_cast<const uint8_t*>("\x07\xea\x0c\x02\x06\x00\x00"), 7);
  for (size_t off = 0; off < z.size(); off += s.idat_chunk) {
    PutChunk(png, "IDAT", z.data() + off, std::min(s.idat_chunk, z.size() - off));
  }
  if (s.trailing_text) {
    PutChunk(png, "tEXt", reinterpret_cast<const uint8_t*>(text), sizeof(text) - 1);
  }
  PutChunk(png, "IEND", nullptr, 0);
  if (raw_out) *raw_out = raw;
  return png;
}

// took_fast: whether the decoder took the fast path (a test that only
// compared libspng with itself would prove nothing).
// x1: the columns [0, x1) kept (all by default).
Result<std::vector<uint8_t>> DecodeRows(const std::vector<uint8_t>& png, bool fast, uint32_t y0,
                                        uint32_t y1, DecodeLimits limits = {},
                                        bool* took_fast = nullptr, uint32_t x1 = UINT32_MAX) {
  image::PngDecoder d(fast);
  ImageInfo info;
  FEEDLINE_RETURN_IF_ERROR(d.ReadHeader(png, limits, &info));
  image::RgbRegion r;
  const Status st = d.Decode(png, limits, x1, y0, y1, &r);
  if (st.ok() && (r.x != 0 || r.width != std::min(x1, info.width))) {
    return InternalError("region at x " + std::to_string(r.x) + ", " + std::to_string(r.width) +
                         " wide");
  }
  if (took_fast != nullptr) *took_fast = d.last_was_fast();
  FEEDLINE_RETURN_IF_ERROR(st);
  const uint8_t* p = r.pixels;
  return std::vector<uint8_t>(p, p + size_t{r.height} * r.width * 3);
}

TEST(PngFastPathTest, EveryTypeFilterAndWidthEqualsLibspngAndTheSourceRows) {
  for (uint8_t type : {0, 2, 4, 6}) {
    for (uint32_t w : {1u, 2u, 3u, 5u, 31u, 64u, 257u}) {
      for (size_t chunk : {size_t{1} << 20, size_t{7}, size_t{1}}) {
        const PngSpec spec{w, 11, type, chunk, w + type};
        std::vector<uint8_t> raw;
        const std::vector<uint8_t> png = MakePng(spec, &raw);
        bool took_fast = false;
        Result<std::vector<uint8_t>> fast = DecodeRows(png, true, 0, spec.height, {}, &took_fast);
        Result<std::vector<uint8_t>> ref = DecodeRows(png, false, 0, spec.height);
        ASSERT_TRUE(took_fast);
        ASSERT_TRUE(fast.ok()) << fast.status();
        ASSERT_TRUE(ref.ok()) << ref.status();
        ASSERT_EQ(*fast, *ref) << "type " << int{type} << " width " << w << " chunk " << chunk;
        // And the pixels written (gray repeated, alpha dropped).
        const uint32_t bpp = Bpp(type);
        for (size_t px = 0; px < size_t{w} * spec.height; ++px) {
          for (int c = 0; c < 3; ++c) {
            const uint8_t want = raw[px * bpp + (bpp <= 2 ? 0 : c)];
            ASSERT_EQ((*fast)[px * 3 + c], want) << "pixel " << px;
          }
        }
      }
    }
  }
}

TEST(PngFastPathTest, EveryRowRangeEqualsLibspng) {
  for (uint8_t type : {0, 2, 6}) {
    const PngSpec spec{13, 9, type, 50, 3};
    const std::vector<uint8_t> png = MakePng(spec);
    for (uint32_t y0 = 0; y0 < spec.height; ++y0) {
      for (uint32_t y1 = y0 + 1; y1 <= spec.height; ++y1) {
        bool took_fast = false;
        Result<std::vector<uint8_t>> fast = DecodeRows(png, true, y0, y1, {}, &took_fast);
        Result<std::vector<uint8_t>> ref = DecodeRows(png, false, y0, y1);
        ASSERT_TRUE(took_fast);
        ASSERT_TRUE(fast.ok() && ref.ok()) << fast.status() << ref.status();
        ASSERT_EQ(*fast, *ref) << "rows " << y0 << ".." << y1;
      }
    }
  }
}

// Columns [0, x1): the fast path defilters only those (the filters predict
// from the left and from above); both paths give the full decode's columns.
TEST(PngFastPathTest, EveryColumnRangeEqualsLibspngAndTheFullDecode) {
  for (uint8_t type : {0, 2, 4, 6}) {
    const PngSpec spec{13, 9, type, 50, 4};
    const std::vector<uint8_t> png = MakePng(spec);
    Result<std::vector<uint8_t>> full = DecodeRows(png, false, 0, spec.height);
    ASSERT_TRUE(full.ok()) << full.status();
    for (uint32_t x1 = 1; x1 <= spec.width + 1; ++x1) {
      for (auto [y0, y1] : {std::pair<uint32_t, uint32_t>{0, spec.height}, {4, 7}, {8, 9}}) {
        bool took_fast = false;
        Result<std::vector<uint8_t>> fast = DecodeRows(png, true, y0, y1, {}, &took_fast, x1);
        Result<std::vector<uint8_t>> ref = DecodeRows(png, false, y0, y1, {}, nullptr, x1);
        ASSERT_TRUE(took_fast);
        ASSERT_TRUE(fast.ok() && ref.ok()) << fast.status() << ref.status();
        ASSERT_EQ(*fast, *ref) << "type " << int{type} << " columns 0.." << x1 << " rows " << y0
                               << ".." << y1;
        const size_t kept = std::min(x1, spec.width) * size_t{3};
        for (uint32_t y = y0; y < y1; ++y) {
          const uint8_t* want = full->data() + size_t{y} * spec.width * 3;
          ASSERT_TRUE(std::equal(want, want + kept, fast->data() + (y - y0) * kept))
              << "type " << int{type} << " columns 0.." << x1 << " row " << y;
        }
      }
    }
  }
}

TEST(PngFastPathTest, RealPhotographsEqualLibspng) {
  int fast_decodes = 0;
  for (const char* name : {"chelsea.png", "coffee.png", "astronaut.png", "camera.png"}) {
    const std::vector<uint8_t> png = testing::ReadTestFile(std::string("photos/") + name);
    ImageInfo info;
    image::PngDecoder d;
    ASSERT_TRUE(d.ReadHeader(png, DecodeLimits(), &info).ok());
    for (auto [y0, y1] :
         {std::pair<uint32_t, uint32_t>{0, info.height}, {info.height / 3, info.height / 2}}) {
      bool took_fast = false;
      Result<std::vector<uint8_t>> fast = DecodeRows(png, true, y0, y1, {}, &took_fast);
      Result<std::vector<uint8_t>> ref = DecodeRows(png, false, y0, y1);
      fast_decodes += took_fast;
      ASSERT_TRUE(fast.ok() && ref.ok()) << name << fast.status() << ref.status();
      ASSERT_EQ(*fast, *ref) << name;
    }
  }
  EXPECT_GE(fast_decodes, 4) << "the photographs are 8-bit RGB or gray: the fast path's";
}

// A chunk after the image data (other than IEND) sends the file to
// libspng's path, which checks its contents; the pixels are the same.
TEST(PngFastPathTest, ChunksAfterTheImageDataGoToLibspng) {
  PngSpec spec{9, 5, 2, 1 << 20, 2};
  spec.trailing_text = true;
  const std::vector<uint8_t> png = MakePng(spec);
  bool took_fast = true;
  Result<std::vector<uint8_t>> fast = DecodeRows(png, true, 0, spec.height, {}, &took_fast);
  ASSERT_TRUE(fast.ok()) << fast.status();
  EXPECT_FALSE(took_fast);
  spec.trailing_text = false;
  Result<std::vector<uint8_t>> plain =
      DecodeRows(MakePng(spec), true, 0, spec.height, {}, &took_fast);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(took_fast);
  EXPECT_EQ(*fast, *plain);
}

// Every damage gives the error libspng's path gives: same code, same
// message (the fast path hands the file over rather than judging it).
TEST(PngFastPathTest, DamagedFilesFailAsOnLibspngsPath) {
  const PngSpec spec{40, 30, 2, 300, 9};
  const std::vector<uint8_t> good = MakePng(spec);
  std::vector<std::pair<std::string, std::vector<uint8_t>>> cases;
  // A bit flipped anywhere after the signature (CRCs, lengths, zlib data,
  // Adler-32, IEND).
  for (size_t at = 8; at < good.size(); at += 37) {
    std::vector<uint8_t> bad = good;
    bad[at] ^= 0x10;
    cases.emplace_back("bit flipped at " + std::to_string(at), bad);
  }
  for (size_t cut : {good.size() - 1, good.size() - 12, good.size() / 2, size_t{60}}) {
    cases.emplace_back("cut at " + std::to_string(cut),
                       std::vector<uint8_t>(good.begin(), good.begin() + static_cast<long>(cut)));
  }
  for (const auto& [what, png] : cases) {
    Result<std::vector<uint8_t>> fast = DecodeRows(png, true, 0, spec.height);
    Result<std::vector<uint8_t>> ref = DecodeRows(png, false, 0, spec.height);
    ASSERT_EQ(fast.ok(), ref.ok()) << what << ": " << fast.status() << " vs " << ref.status();
    if (!ref.ok()) {
      EXPECT_EQ(fast.status().code(), ref.status().code()) << what;
      EXPECT_EQ(fast.status().message(), ref.status().message()) << what;
    } else {
      EXPECT_EQ(*fast, *ref) << what;  // a flip libspng tolerates (e.g. an ancillary bit)
    }
  }
}

// Valid CRCs, invalid structure: a bad filter type, extra data after the
// zlib stream, a second IDAT run, an IDAT over the chunk limit.
TEST(PngFastPathTest, StructuralFaultsWithGoodCrcsFailAsOnLibspngsPath) {
  const PngSpec spec{16, 8, 2, 1 << 20, 4};
  std::vector<std::pair<std::string, std::vector<uint8_t>>> cases;
  {  // Filter type 5 on the last row.
    std::vector<uint8_t> filtered;
    for (uint32_t y = 0; y < spec.height; ++y) {
      filtered.push_back(y + 1 == spec.height ? 5 : 0);
      filtered.insert(filtered.end(), spec.width * 3, static_cast<uint8_t>(y));
    }
    uLongf zn = compressBound(static_cast<uLong>(filtered.size()));
    std::vector<uint8_t> z(zn);
    compress2(z.data(), &zn, filtered.data(), static_cast<uLong>(filtered.size()), 6);
    const std::vector<uint8_t> base = MakePng(spec);
    std::vector<uint8_t> png(base.begin(), base.begin() + 33);  // signature + IHDR
    PutChunk(png, "IDAT", z.data(), zn);
    PutChunk(png, "IEND", nullptr, 0);
    cases.emplace_back("filter type 5", png);
  }
  {  // Image data split by an ancillary chunk.
    std::vector<uint8_t> good = MakePng(PngSpec{16, 8, 2, 20, 4});
    std::vector<uint8_t> png(good.begin(), good.begin() + 33);
    // Rebuild: IDAT, tEXt, IDAT...
    size_t p = 33;
    bool inserted = false;
    while (p + 12 <= good.size()) {
      uint32_t n =
          (uint32_t{good[p]} << 24) | (good[p + 1] << 16) | (good[p + 2] << 8) | good[p + 3];
      png.insert(png.end(), good.begin() + static_cast<long>(p),
                 good.begin() + static_cast<long>(p + 12 + n));
      if (!inserted && std::memcmp(&good[p + 4], "IDAT", 4) == 0) {
        PutChunk(png, "tEXt", reinterpret_cast<const uint8_t*>("a\0b"), 3);
        inserted = true;
      }
      p += 12 + n;
    }
    cases.emplace_back("IDAT runs split", png);
  }
  for (const auto& [what, png] : cases) {
    // Whole, and a top crop that never needs the damaged rows' pixels.
    for (uint32_t y1 : {spec.height, 2u}) {
      Result<std::vector<uint8_t>> fast = DecodeRows(png, true, 0, y1);
      Result<std::vector<uint8_t>> ref = DecodeRows(png, false, 0, y1);
      ASSERT_EQ(fast.ok(), ref.ok()) << what << ": " << fast.status() << " vs " << ref.status();
      ASSERT_FALSE(ref.ok()) << what;
      EXPECT_EQ(fast.status().message(), ref.status().message()) << what;
    }
  }
  // A chunk limit under the image data's chunks: the fast path leaves the
  // file to libspng, whatever libspng makes of it.
  DecodeLimits small;
  small.max_png_chunk_bytes = 64;
  const std::vector<uint8_t> big = MakePng(PngSpec{64, 64, 2, 1 << 20, 2});
  Result<std::vector<uint8_t>> fast = DecodeRows(big, true, 0, 64, small);
  Result<std::vector<uint8_t>> ref = DecodeRows(big, false, 0, 64, small);
  ASSERT_EQ(fast.ok(), ref.ok()) << fast.status() << " vs " << ref.status();
  if (ref.ok()) {
    EXPECT_EQ(*fast, *ref);
  } else {
    EXPECT_EQ(fast.status().message(), ref.status().message());
  }
}

}  // namespace
}  // namespace feedline
