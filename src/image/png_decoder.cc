#include "src/image/png_decoder.h"

#include <libdeflate.h>
#include <spng.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace feedline::image {
namespace {

struct CtxDeleter {
  void operator()(spng_ctx* ctx) const { spng_ctx_free(ctx); }
};
using CtxPtr = std::unique_ptr<spng_ctx, CtxDeleter>;

Status SpngError(const char* what, int err) {
  const std::string msg = std::string(what) + ": " + spng_strerror(err);
  switch (err) {
    case SPNG_EMEM: return ResourceExhaustedError(msg);
    case SPNG_EWIDTH:
    case SPNG_EHEIGHT:
    case SPNG_EUSER_WIDTH:
    case SPNG_EUSER_HEIGHT:
    case SPNG_ECHUNK_LIMITS:
    case SPNG_ECHUNKAVAIL: return InvalidArgumentError(msg);
    default: return DataLossError(msg);
  }
}

// A context over `bytes` with our limits, IHDR read and checked.
Result<CtxPtr> Open(std::span<const uint8_t> bytes, const DecodeLimits& limits, spng_ihdr* ihdr) {
  CtxPtr ctx(spng_ctx_new(0));
  if (!ctx) return ResourceExhaustedError("PNG: cannot create a decoder context");
  spng_set_crc_action(ctx.get(), SPNG_CRC_ERROR, SPNG_CRC_ERROR);
  spng_set_image_limits(ctx.get(), limits.max_dimension, limits.max_dimension);
  // Ancillary chunks (text, ICC...) may use at most 4 chunk limits in all.
  spng_set_chunk_limits(ctx.get(), limits.max_png_chunk_bytes, 4 * limits.max_png_chunk_bytes);
  int err = spng_set_png_buffer(ctx.get(), bytes.data(), bytes.size());
  if (err) return SpngError("PNG", err);
  err = spng_get_ihdr(ctx.get(), ihdr);
  if (err) {
    if (err == SPNG_EUSER_WIDTH || err == SPNG_EUSER_HEIGHT) {
      return InvalidArgumentError(std::string("PNG dimensions over max_dimension ") +
                                  std::to_string(limits.max_dimension) + ": " + spng_strerror(err));
    }
    return SpngError("corrupt PNG header", err);
  }
  if (uint64_t{ihdr->width} * ihdr->height > limits.max_pixels) {
    return InvalidArgumentError("PNG is " + std::to_string(ihdr->width) + "x" +
                                std::to_string(ihdr->height) + ", over max_pixels " +
                                std::to_string(limits.max_pixels));
  }
  return ctx;
}

uint32_t Channels(uint8_t color_type) {
  switch (color_type) {
    case SPNG_COLOR_TYPE_GRAYSCALE: return 1;
    case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA: return 2;
    case SPNG_COLOR_TYPE_TRUECOLOR_ALPHA: return 4;
    default: return 3;  // truecolor, indexed
  }
}

}  // namespace

Status PngDecoder::ReadHeader(std::span<const uint8_t> bytes, const DecodeLimits& limits,
                              ImageInfo* info) {
  spng_ihdr ihdr{};
  FEEDLINE_ASSIGN_OR_RETURN(CtxPtr ctx, Open(bytes, limits, &ihdr));
  info->format = ImageFormat::kPng;
  info->width = ihdr.width;
  info->height = ihdr.height;
  info->channels = Channels(ihdr.color_type);
  info->progressive = ihdr.interlace_method != 0;
  return Status::OK();
}

namespace {

// After the last row: reads the chunks that follow the image data up to
// IEND, checking each CRC, so a file cut or corrupted after the pixels is an
// error too (Pillow reads to IEND as well).
Status CheckTail(spng_ctx* ctx) {
  const int err = spng_decode_chunks(ctx);
  if (err) return SpngError("corrupt PNG after the image data", err);
  return Status::OK();
}

}  // namespace

namespace {

// The fast path's types: 8-bit gray, gray+alpha, RGB and RGBA, not
// interlaced. Bytes per pixel, or 0 for every other PNG (libspng's path).
uint32_t FastBytesPerPixel(const spng_ihdr& ihdr) {
  if (ihdr.bit_depth != 8 || ihdr.interlace_method != 0 ||
      ihdr.color_type == SPNG_COLOR_TYPE_INDEXED) {
    return 0;
  }
  return Channels(ihdr.color_type);  // one byte a channel
}

// The most compressed image data the fast path takes for `filtered` bytes
// of rows: deflate's stored blocks add 5 bytes per 65535, zlib 6. A stream
// larger than this (legal, but no encoder writes it) goes to libspng, which
// inflates it row by row in bounded memory.
uint64_t MaxFastIdatBytes(uint64_t filtered) { return filtered + filtered / 8192 * 5 + 1024; }

uint32_t Be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

bool IsIdat(const uint8_t* type) { return std::memcmp(type, "IDAT", 4) == 0; }

// PNG's Paeth predictor, as the specification orders its ties.
inline int Paeth(int a, int b, int c) {
  const int pa = std::abs(b - c), pb = std::abs(a - c), pc = std::abs(a + b - 2 * c);
  const int ab = pb < pa ? b : a, pab = pb < pa ? pb : pa;
  return pc < pab ? c : ab;
}

#if defined(__SSE2__)
// Avg and Paeth, whose every pixel waits for the one to its left, a pixel
// per step: its channels in the int16 lanes of one SSE2 vector (x86-64's
// baseline), so one chain of dependent operations serves all of them where
// the scalar loop runs one chain per channel. The same arithmetic as the
// scalar loops below (png_fast_test compares the two paths on every filter
// and width). Pixels whose 4-byte load or store would reach past the row
// (the last one when BPP is 3) are left to the caller's scalar loop;
// returns how many bytes were done.
inline __m128i Load4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm_unpacklo_epi8(_mm_cvtsi32_si128(v), _mm_setzero_si128());
}

inline void Store4(uint8_t* p, __m128i v) {
  const int32_t w = _mm_cvtsi128_si32(_mm_packus_epi16(v, v));
  std::memcpy(p, &w, 4);
}

inline __m128i Abs16(__m128i v) { return _mm_max_epi16(v, _mm_sub_epi16(_mm_setzero_si128(), v)); }

// `up` null: the first row, whose row above counts as zeros.
template <uint32_t BPP, bool kPaeth>
size_t DefilterPixels(const uint8_t* s, const uint8_t* up, size_t n, uint8_t* out) {
  const __m128i bytes = _mm_set1_epi16(0xFF);
  __m128i a = _mm_setzero_si128(), c = _mm_setzero_si128();  // left, above-left
  size_t i = 0;
  for (; i + 4 <= n; i += BPP) {
    const __m128i b = up ? Load4(up + i) : _mm_setzero_si128();
    __m128i pred;
    if constexpr (kPaeth) {
      // p = a + b - c; pa = |p - a|, pb = |p - b|, pc = |p - c|; ties to a, then b.
      const __m128i pa_s = _mm_sub_epi16(b, c), pb_s = _mm_sub_epi16(a, c);
      const __m128i pa = Abs16(pa_s), pb = Abs16(pb_s), pc = Abs16(_mm_add_epi16(pa_s, pb_s));
      const __m128i use_b = _mm_cmplt_epi16(pb, pa);
      const __m128i ab = _mm_or_si128(_mm_and_si128(use_b, b), _mm_andnot_si128(use_b, a));
      const __m128i use_c = _mm_cmplt_epi16(pc, _mm_min_epi16(pa, pb));
      pred = _mm_or_si128(_mm_and_si128(use_c, c), _mm_andnot_si128(use_c, ab));
    } else {
      pred = _mm_srli_epi16(_mm_add_epi16(a, b), 1);
    }
    a = _mm_and_si128(_mm_add_epi16(Load4(s + i), pred), bytes);
    Store4(out + i, a);
    c = b;
  }
  return i;
}
#endif

// Row `row` (its filter type byte first) defiltered into out against `up`,
// the row above it defiltered (null for the first row). False for a filter
// type outside 0..4. BPP channels, one chain each, interleaved.
template <uint32_t BPP>
bool Defilter(const uint8_t* row, const uint8_t* up, size_t n, uint8_t* out) {
  const uint8_t type = row[0];
  const uint8_t* s = row + 1;
  switch (type) {
    case 0: std::memcpy(out, s, n); return true;
    case 1:
      for (size_t i = 0; i < n; ++i)
        out[i] = static_cast<uint8_t>(s[i] + (i >= BPP ? out[i - BPP] : 0));
      return true;
    case 2:
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(s[i] + (up ? up[i] : 0));
      return true;
    case 3: {
      size_t i = 0;
#if defined(__SSE2__)
      if constexpr (BPP >= 3) i = DefilterPixels<BPP, false>(s, up, n, out);
#endif
      for (; i < n; ++i) {
        const int left = i >= BPP ? out[i - BPP] : 0, above = up ? up[i] : 0;
        out[i] = static_cast<uint8_t>(s[i] + ((left + above) >> 1));
      }
      return true;
    }
    case 4: {
      if (up == nullptr) {  // Paeth over the first row is Sub
        for (size_t i = 0; i < n; ++i)
          out[i] = static_cast<uint8_t>(s[i] + (i >= BPP ? out[i - BPP] : 0));
        return true;
      }
      size_t i = 0;
#if defined(__SSE2__)
      if constexpr (BPP >= 3) i = DefilterPixels<BPP, true>(s, up, n, out);
#endif
      for (; i < std::min<size_t>(BPP, n); ++i) out[i] = static_cast<uint8_t>(s[i] + up[i]);
      for (; i < n; ++i) {
        out[i] = static_cast<uint8_t>(s[i] + Paeth(out[i - BPP], up[i], up[i - BPP]));
      }
      return true;
    }
    default: return false;
  }
}

bool DefilterRow(uint32_t bpp, const uint8_t* row, const uint8_t* up, size_t n, uint8_t* out) {
  switch (bpp) {
    case 1: return Defilter<1>(row, up, n, out);
    case 2: return Defilter<2>(row, up, n, out);
    case 3: return Defilter<3>(row, up, n, out);
    default: return Defilter<4>(row, up, n, out);
  }
}

}  // namespace

uint64_t PngDecoder::DecodeScratchBytes(const ImageInfo& info, uint32_t y0, uint32_t y1) {
  const uint64_t w = info.width;
  // libspng's own row buffers (two rows of up to 8 bytes a pixel, plus
  // zlib's window and state).
  const uint64_t lib = 2 * w * 8 + (64u << 10);
  if (info.progressive) return lib + w * info.height * 4;  // interlaced: the whole image as RGBA
  const uint64_t rows =
      y1 > y0 ? std::min<uint64_t>(y1, info.height) - std::min<uint64_t>(y0, info.height) : 0;
  // The fast path holds every filtered row (up to 4 bytes a pixel), the
  // joined image data, two defiltered rows and the kept rows; libspng's
  // path less. The larger of the two, as if every PNG took the fast one.
  const uint64_t filtered = (w * 4 + 1) * info.height;
  const uint64_t fast = filtered + MaxFastIdatBytes(filtered) + 2 * w * 4 + (160u << 10);
  return std::max(lib + w * 4, fast) + rows * w * 3;
}

void PngDecoder::TrimScratch() {
  std::vector<uint8_t>().swap(rgba_);
  std::vector<uint8_t>().swap(rgb_);
  std::vector<uint8_t>().swap(idat_);
  std::vector<uint8_t>().swap(filtered_);
}

void PngDecoder::InflaterDeleter::operator()(libdeflate_decompressor* d) const {
  libdeflate_free_decompressor(d);
}

bool PngDecoder::DecodeFast(std::span<const uint8_t> bytes, const DecodeLimits& limits,
                            uint32_t width, uint32_t height, uint32_t bpp, uint32_t x1, uint32_t y0,
                            uint32_t y1) {
  // The chunks after the signature: every CRC right, no chunk over the
  // limit, the IDATs in one run, then IEND and nothing else. Any other file
  // is left to libspng's path, which decodes it or names its fault.
  size_t p = 8;
  const uint8_t* single = nullptr;  // the only IDAT's data, not copied
  size_t idat_bytes = 0, idat_chunks = 0;
  bool iend = false;
  const uint64_t filtered = (uint64_t{width} * bpp + 1) * height;
  idat_.clear();
  while (p + 12 <= bytes.size()) {
    const uint32_t n = Be32(bytes.data() + p);
    const uint8_t* type = bytes.data() + p + 4;
    if (n > limits.max_png_chunk_bytes || n > bytes.size() - p - 12) return false;
    if (Be32(bytes.data() + p + 8 + n) != libdeflate_crc32(0, type, size_t{n} + 4)) return false;
    const uint8_t* data = type + 4;
    if (IsIdat(type)) {
      idat_bytes += n;
      if (idat_bytes > MaxFastIdatBytes(filtered)) return false;
      if (idat_chunks++ == 0) {
        single = data;
      } else {
        if (idat_chunks == 2) idat_.assign(single, single + (idat_bytes - n));
        idat_.insert(idat_.end(), data, data + n);
      }
    } else if (idat_chunks > 0) {
      // After the image data only IEND: libspng judges the contents of the
      // chunks before it (spng_decode_chunks) but could not be asked about
      // later ones, so a file with any is decoded by libspng's path.
      if (std::memcmp(type, "IEND", 4) != 0) return false;
      iend = n == 0;
      break;
    }
    p += size_t{n} + 12;
  }
  if (!iend || idat_chunks == 0) return false;
  const uint8_t* in = idat_chunks == 1 ? single : idat_.data();
  if (!inflater_) inflater_.reset(libdeflate_alloc_decompressor());
  if (!inflater_) return false;
  if (filtered_.size() < filtered) filtered_.resize(filtered);
  size_t used = 0;
  // Exactly `filtered` bytes, the Adler-32 checked, nothing after the stream.
  if (libdeflate_zlib_decompress_ex(inflater_.get(), in, idat_bytes, filtered_.data(), filtered,
                                    &used, nullptr) != LIBDEFLATE_SUCCESS ||
      used != idat_bytes) {
    return false;
  }
  // Defilter columns [0, x1) of rows [0, y1): each byte needs the one to
  // its left and those above. Rows from y1 on are never kept, but their
  // filter types are checked as libspng's would be.
  const size_t stride = size_t{width} * bpp + 1, n = size_t{x1} * bpp;
  for (uint32_t y = y1; y < height; ++y) {
    if (filtered_[y * stride] > 4) return false;
  }
  if (rgba_.size() < 2 * n) rgba_.resize(2 * n);
  if (rgb_.size() < size_t{y1 - y0} * x1 * 3) rgb_.resize(size_t{y1 - y0} * x1 * 3);
  // Rows not kept (and every row of a type other than RGB) alternate
  // between two scratch rows; kept RGB rows are defiltered in place.
  uint8_t* rows[2] = {rgba_.data(), rgba_.data() + n};
  const uint8_t* up = nullptr;  // the row above, defiltered
  for (uint32_t y = 0; y < y1; ++y) {
    uint8_t* cur = bpp == 3 && y >= y0 ? rgb_.data() + size_t{y - y0} * n : rows[y & 1];
    if (!DefilterRow(bpp, filtered_.data() + y * stride, up, n, cur)) return false;
    if (bpp != 3 && y >= y0) {
      uint8_t* dst = rgb_.data() + size_t{y - y0} * x1 * 3;
      for (size_t x = 0; x < x1; ++x) {
        const uint8_t* px = cur + x * bpp;
        dst[3 * x] = px[0];
        dst[3 * x + 1] = bpp <= 2 ? px[0] : px[1];
        dst[3 * x + 2] = bpp <= 2 ? px[0] : px[2];
      }
    }
    up = cur;
  }
  return true;
}

Status PngDecoder::Decode(std::span<const uint8_t> bytes, const DecodeLimits& limits, uint32_t x1,
                          uint32_t y0, uint32_t y1, RgbRegion* out) {
  spng_ihdr ihdr{};
  FEEDLINE_ASSIGN_OR_RETURN(CtxPtr ctx, Open(bytes, limits, &ihdr));
  y1 = std::min(y1, ihdr.height);
  x1 = std::min(x1, ihdr.width);
  if (y0 >= y1 || x1 == 0) return InternalError("empty PNG decode region");
  const size_t w = ihdr.width, kept = x1;  // kept: the pixels kept of each row
  last_was_fast_ = false;
  out->full_width = ihdr.width;
  out->full_height = ihdr.height;
  out->x = 0;
  out->width = x1;
  if (ihdr.interlace_method != 0) {
    // Interlaced rows arrive in seven passes: decode all, keep [y0, y1).
    // RGBA8 is the one output format libspng converts every PNG type to.
    size_t size = 0;
    int err = spng_decoded_image_size(ctx.get(), SPNG_FMT_RGBA8, &size);
    if (err) return SpngError("PNG", err);
    if (rgba_.size() < size) rgba_.resize(size);
    err = spng_decode_image(ctx.get(), rgba_.data(), size, SPNG_FMT_RGBA8, 0);
    if (err) return SpngError("corrupt PNG", err);
    FEEDLINE_RETURN_IF_ERROR(CheckTail(ctx.get()));
    uint8_t* p = rgba_.data();
    size_t to = 0;  // drop alpha, packing columns [0, x1) of rows y0.. to the front
    for (size_t y = y0; y < y1; ++y) {
      for (size_t i = y * w; i < y * w + kept; ++i, ++to) {
        p[3 * to] = p[4 * i];
        p[3 * to + 1] = p[4 * i + 1];
        p[3 * to + 2] = p[4 * i + 2];
      }
    }
    out->y = y0;
    out->height = y1 - y0;
    out->pixels = rgba_.data();
    return Status::OK();
  }
  // 8-bit gray, gray+alpha, RGB and RGBA: the whole image data inflated at
  // once (libdeflate) and defiltered by us, when every check of the fast
  // path passes (docs/image.md, "PNG"); else, and for every error message,
  // libspng's path below.
  if (const uint32_t bpp = fast_path_ ? FastBytesPerPixel(ihdr) : 0; bpp != 0) {
    // libspng validates the chunks before the image data (their contents,
    // not only their CRCs), as its own decode would.
    if (spng_decode_chunks(ctx.get()) == 0 &&
        DecodeFast(bytes, limits, ihdr.width, ihdr.height, bpp, x1, y0, y1)) {
      last_was_fast_ = true;
      out->y = y0;
      out->height = y1 - y0;
      out->pixels = rgb_.data();
      return Status::OK();
    }
    FEEDLINE_ASSIGN_OR_RETURN(ctx,
                              Open(bytes, limits, &ihdr));  // a fresh context for libspng's path
  }
  // 8-bit RGB (most photographs saved as PNG) is decoded as it is stored,
  // straight into the kept rows; every other type through RGBA8, the one
  // format libspng converts every type to, then without its alpha.
  const bool rgb8 = ihdr.color_type == SPNG_COLOR_TYPE_TRUECOLOR && ihdr.bit_depth == 8;
  int err = spng_decode_image(ctx.get(), nullptr, 0, rgb8 ? SPNG_FMT_PNG : SPNG_FMT_RGBA8,
                              SPNG_DECODE_PROGRESSIVE);
  if (err) return SpngError("corrupt PNG", err);
  if (rgba_.size() < w * 4) rgba_.resize(w * 4);
  // Kept rows are kept * 3 bytes apart; an 8-bit RGB row is decoded whole
  // at its place, and the next row overwrites what lies past its x1.
  const size_t room = size_t{y1 - y0 - 1} * kept * 3 + w * 3;
  if (rgb_.size() < room) rgb_.resize(room);
  // Every row is inflated, also those below the crop: zlib's Adler-32 and the
  // CRCs of the later IDAT chunks are only checked once the whole stream has
  // been read, and pixels are not trusted before that (docs/reliability.md 35).
  // Rows outside [y0, y1) are inflated and defiltered, not kept.
  for (uint32_t y = 0; y < ihdr.height; ++y) {
    const bool keep = y >= y0 && y < y1;
    uint8_t* dst = keep ? rgb_.data() + size_t{y - y0} * kept * 3 : nullptr;
    err = rgb8 ? spng_decode_row(ctx.get(), keep ? dst : rgba_.data(), w * 3)
               : spng_decode_row(ctx.get(), rgba_.data(), w * 4);
    if (err != 0 && !(err == SPNG_EOI && y + 1 == ihdr.height)) {
      return SpngError(("corrupt PNG at row " + std::to_string(y)).c_str(), err);
    }
    if (!keep || rgb8) continue;
    const uint8_t* src = rgba_.data();
    for (size_t x = 0; x < kept; ++x) {
      dst[3 * x] = src[4 * x];
      dst[3 * x + 1] = src[4 * x + 1];
      dst[3 * x + 2] = src[4 * x + 2];
    }
  }
  FEEDLINE_RETURN_IF_ERROR(CheckTail(ctx.get()));
  out->y = y0;
  out->height = y1 - y0;
  out->pixels = rgb_.data();
  return Status::OK();
}

}  // namespace feedline::image
