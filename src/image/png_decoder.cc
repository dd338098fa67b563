#include "src/image/png_decoder.h"

#include <spng.h>

#include <algorithm>
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

uint64_t PngDecoder::DecodeScratchBytes(const ImageInfo& info, uint32_t y0, uint32_t y1) {
  const uint64_t w = info.width;
  // libspng's own row buffers (two rows of up to 8 bytes a pixel, plus
  // zlib's window and state).
  const uint64_t lib = 2 * w * 8 + (64u << 10);
  if (info.progressive) return lib + w * info.height * 4;  // interlaced: the whole image as RGBA
  const uint64_t rows =
      y1 > y0 ? std::min<uint64_t>(y1, info.height) - std::min<uint64_t>(y0, info.height) : 0;
  return lib + w * 4 + rows * w * 3;
}

void PngDecoder::TrimScratch() {
  std::vector<uint8_t>().swap(rgba_);
  std::vector<uint8_t>().swap(rgb_);
}

Status PngDecoder::Decode(std::span<const uint8_t> bytes, const DecodeLimits& limits, uint32_t y0,
                          uint32_t y1, RgbRegion* out) {
  spng_ihdr ihdr{};
  FEEDLINE_ASSIGN_OR_RETURN(CtxPtr ctx, Open(bytes, limits, &ihdr));
  y1 = std::min(y1, ihdr.height);
  if (y0 >= y1) return InternalError("empty PNG decode region");
  const size_t w = ihdr.width;
  out->full_width = ihdr.width;
  out->full_height = ihdr.height;
  out->x = 0;
  out->width = ihdr.width;
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
    const size_t begin = y0 * w, end = y1 * w;
    for (size_t i = begin; i < end; ++i) {  // drop alpha, packing rows y0.. to the front
      p[3 * (i - begin)] = p[4 * i];
      p[3 * (i - begin) + 1] = p[4 * i + 1];
      p[3 * (i - begin) + 2] = p[4 * i + 2];
    }
    out->y = y0;
    out->height = y1 - y0;
    out->pixels = rgba_.data();
    return Status::OK();
  }
  // 8-bit RGB (most photographs saved as PNG) is decoded as it is stored,
  // straight into the kept rows; every other type through RGBA8, the one
  // format libspng converts every type to, then without its alpha.
  const bool rgb8 = ihdr.color_type == SPNG_COLOR_TYPE_TRUECOLOR && ihdr.bit_depth == 8;
  int err = spng_decode_image(ctx.get(), nullptr, 0, rgb8 ? SPNG_FMT_PNG : SPNG_FMT_RGBA8,
                              SPNG_DECODE_PROGRESSIVE);
  if (err) return SpngError("corrupt PNG", err);
  if (rgba_.size() < w * 4) rgba_.resize(w * 4);
  if (rgb_.size() < size_t{y1 - y0} * w * 3) rgb_.resize(size_t{y1 - y0} * w * 3);
  // Every row is inflated, also those below the crop: zlib's Adler-32 and the
  // CRCs of the later IDAT chunks are only checked once the whole stream has
  // been read, and pixels are not trusted before that (docs/reliability.md 35).
  // Rows outside [y0, y1) are inflated and defiltered, not kept.
  for (uint32_t y = 0; y < ihdr.height; ++y) {
    const bool keep = y >= y0 && y < y1;
    uint8_t* dst = keep ? rgb_.data() + size_t{y - y0} * w * 3 : nullptr;
    err = rgb8 ? spng_decode_row(ctx.get(), keep ? dst : rgba_.data(), w * 3)
               : spng_decode_row(ctx.get(), rgba_.data(), w * 4);
    if (err != 0 && !(err == SPNG_EOI && y + 1 == ihdr.height)) {
      return SpngError(("corrupt PNG at row " + std::to_string(y)).c_str(), err);
    }
    if (!keep || rgb8) continue;
    const uint8_t* src = rgba_.data();
    for (size_t x = 0; x < w; ++x) {
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
