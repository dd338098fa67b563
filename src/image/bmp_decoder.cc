#include "src/image/bmp_decoder.h"

#include <array>
#include <bit>
#include <cstring>
#include <string>

#include "src/image/decode_internal.h"

namespace feedline::image {
namespace {

constexpr size_t kFileHeaderBytes = 14;
constexpr uint32_t kBiRgb = 0, kBiRle8 = 1, kBiRle4 = 2, kBiBitfields = 3, kBiJpeg = 4, kBiPng = 5,
                   kBiAlphaBitfields = 6;

uint16_t U16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
uint32_t U32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// One colour channel of a bitfield pixel: shift and width of its mask.
struct Channel {
  uint32_t shift = 0;
  uint32_t max = 0;  // 2^bits - 1; 0 for an absent channel
};

Result<Channel> MaskChannel(uint32_t mask) {
  Channel c;
  if (mask == 0) return c;
  c.shift = static_cast<uint32_t>(std::countr_zero(mask));
  const uint32_t m = mask >> c.shift;
  if ((m & (m + 1)) != 0) return DataLossError("corrupt BMP: non-contiguous bitfield mask");
  c.max = m;
  return c;
}

// PIL's unpackers scale an n-bit channel as v * 255 / max (integer division).
uint8_t Scale(uint32_t pixel, const Channel& c) {
  if (c.max == 0) return 0;
  const uint64_t v = (pixel >> c.shift) & c.max;
  return static_cast<uint8_t>(c.max == 255 ? v : v * 255 / c.max);
}

// Everything Decode needs, from the headers, all checked.
struct Layout {
  uint32_t width = 0, height = 0;
  bool top_down = false;
  uint32_t bits = 0;
  size_t stride = 0;        // bytes per stored row (4-byte aligned)
  size_t pixel_offset = 0;  // of the first stored row
  std::array<uint8_t, size_t{256} * 3>
      palette;                        // RGB; indices past the table: gray (i, i, i), as PIL
  std::array<Channel, 3> channels{};  // R, G, B for 16/32-bit
};

Status Parse(std::span<const uint8_t> b, const DecodeLimits& limits, Layout* l) {
  if (b.size() < kFileHeaderBytes + 4) return DataLossError("corrupt BMP: truncated file header");
  const uint32_t bf_offset = U32(&b[10]);
  const uint32_t header_size = U32(&b[14]);
  const size_t h0 = kFileHeaderBytes;
  if (header_size != 12 && header_size != 40 && header_size != 52 && header_size != 56 &&
      header_size != 64 && header_size != 108 && header_size != 124) {
    return UnimplementedError("unsupported BMP header size " + std::to_string(header_size));
  }
  if (b.size() < h0 + header_size) return DataLossError("corrupt BMP: truncated info header");
  int64_t width, height;
  uint32_t compression = kBiRgb, colors = 0;
  size_t entry_bytes;
  if (header_size == 12) {  // BITMAPCOREHEADER: unsigned 16-bit sizes, RGB triples
    width = U16(&b[h0 + 4]);
    height = U16(&b[h0 + 6]);
    l->bits = U16(&b[h0 + 10]);
    entry_bytes = 3;
  } else {
    width = static_cast<int32_t>(U32(&b[h0 + 4]));
    height = static_cast<int32_t>(U32(&b[h0 + 8]));
    l->bits = U16(&b[h0 + 14]);
    compression = U32(&b[h0 + 16]);
    colors = U32(&b[h0 + 32]);
    entry_bytes = 4;
  }
  if (compression == kBiRle8 || compression == kBiRle4) {
    return UnimplementedError("run-length encoded BMP (RLE" +
                              std::string(compression == kBiRle8 ? "8" : "4") +
                              ") is not supported");
  }
  if (compression == kBiJpeg || compression == kBiPng) {
    return UnimplementedError("BMP with embedded JPEG/PNG is not supported");
  }
  if (compression != kBiRgb && compression != kBiBitfields && compression != kBiAlphaBitfields) {
    return DataLossError("corrupt BMP: unknown compression " + std::to_string(compression));
  }
  if (l->bits != 1 && l->bits != 4 && l->bits != 8 && l->bits != 16 && l->bits != 24 &&
      l->bits != 32) {
    return UnimplementedError("unsupported BMP bit depth " + std::to_string(l->bits));
  }
  if (width <= 0 || height == 0) return DataLossError("corrupt BMP: empty image");
  l->top_down = height < 0;
  const int64_t abs_height = height < 0 ? -height : height;  // int32 source: no overflow
  FEEDLINE_RETURN_IF_ERROR(CheckImageLimits("BMP", static_cast<uint64_t>(width),
                                            static_cast<uint64_t>(abs_height), limits));
  l->width = static_cast<uint32_t>(width);
  l->height = static_cast<uint32_t>(abs_height);
  l->stride = (uint64_t{l->width} * l->bits + 31) / 32 * 4;

  size_t pos = h0 + header_size;  // masks (40-byte headers), then the palette
  if (compression == kBiBitfields || compression == kBiAlphaBitfields) {
    if (l->bits != 16 && l->bits != 32) {
      return DataLossError("corrupt BMP: bitfields with " + std::to_string(l->bits) + " bits");
    }
    size_t masks_at;
    if (header_size >= 52) {
      masks_at = h0 + 40;  // inside the header
    } else {
      masks_at = pos;
      pos += compression == kBiAlphaBitfields ? 16 : 12;
      if (b.size() < pos) return DataLossError("corrupt BMP: truncated bitfield masks");
    }
    for (size_t c = 0; c < 3; ++c) {
      FEEDLINE_ASSIGN_OR_RETURN(l->channels[c], MaskChannel(U32(&b[masks_at + 4 * c])));
    }
  } else if (l->bits == 16) {  // BI_RGB 16-bit is 5-5-5
    l->channels = {Channel{10, 31}, Channel{5, 31}, Channel{0, 31}};
  } else if (l->bits == 32) {
    l->channels = {Channel{16, 255}, Channel{8, 255}, Channel{0, 255}};
  }
  if (l->bits <= 8) {
    for (size_t i = 0; i < 256; ++i) {
      l->palette[3 * i] = l->palette[3 * i + 1] = l->palette[3 * i + 2] = static_cast<uint8_t>(i);
    }
    if (colors == 0 || header_size == 12) colors = 1u << l->bits;
    if (colors > 256) {
      return DataLossError("corrupt BMP: palette of " + std::to_string(colors) + " colours");
    }
    if (b.size() - pos < size_t{colors} * entry_bytes) {
      return DataLossError("corrupt BMP: truncated palette");
    }
    for (size_t i = 0; i < colors; ++i) {  // stored B, G, R (, reserved)
      const uint8_t* e = &b[pos + i * entry_bytes];
      l->palette[3 * i] = e[2];
      l->palette[3 * i + 1] = e[1];
      l->palette[3 * i + 2] = e[0];
    }
    pos += size_t{colors} * entry_bytes;
  }
  l->pixel_offset = bf_offset != 0 ? bf_offset : pos;
  if (l->pixel_offset > b.size() ||
      (b.size() - l->pixel_offset) / l->stride < l->height) {  // stride > 0: width >= 1
    return DataLossError("corrupt BMP: pixel data needs " +
                         std::to_string(uint64_t{l->height} * l->stride) + " bytes at offset " +
                         std::to_string(l->pixel_offset) + ", file has " +
                         std::to_string(b.size()) + " (truncated file?)");
  }
  return Status::OK();
}

}  // namespace

Status BmpDecoder::ReadHeader(std::span<const uint8_t> bytes, const DecodeLimits& limits,
                              ImageInfo* info) {
  Layout l;
  FEEDLINE_RETURN_IF_ERROR(Parse(bytes, limits, &l));
  info->format = ImageFormat::kBmp;
  info->width = l.width;
  info->height = l.height;
  info->channels = 3;
  info->progressive = false;
  return Status::OK();
}

Status BmpDecoder::Decode(std::span<const uint8_t> bytes, const DecodeLimits& limits,
                          RgbRegion* out) {
  Layout l;
  FEEDLINE_RETURN_IF_ERROR(Parse(bytes, limits, &l));
  const size_t w = l.width, h = l.height;
  if (rgb_.size() < w * h * 3) rgb_.resize(w * h * 3);
  for (size_t y = 0; y < h; ++y) {
    const size_t stored = l.top_down ? y : h - 1 - y;
    const uint8_t* src = bytes.data() + l.pixel_offset + stored * l.stride;
    uint8_t* dst = rgb_.data() + y * w * 3;
    switch (l.bits) {
      case 1:
      case 4:
      case 8: {
        const uint32_t per_byte = 8 / l.bits, mask = (1u << l.bits) - 1;
        for (size_t x = 0; x < w; ++x) {
          const uint32_t shift = 8 - l.bits * (1 + x % per_byte);
          const uint32_t index = (src[x / per_byte] >> shift) & mask;
          std::memcpy(dst + 3 * x, &l.palette[size_t{3} * index], 3);
        }
        break;
      }
      case 24:
        for (size_t x = 0; x < w; ++x) {
          dst[3 * x] = src[3 * x + 2];
          dst[3 * x + 1] = src[3 * x + 1];
          dst[3 * x + 2] = src[3 * x];
        }
        break;
      default: {  // 16 or 32 through the channel masks
        const size_t step = l.bits / 8;
        for (size_t x = 0; x < w; ++x) {
          const uint32_t p = step == 2 ? U16(src + 2 * x) : U32(src + 4 * x);
          for (int c = 0; c < 3; ++c) dst[3 * x + c] = Scale(p, l.channels[c]);
        }
        break;
      }
    }
  }
  out->full_width = out->width = l.width;
  out->full_height = out->height = l.height;
  out->x = out->y = 0;
  out->pixels = rgb_.data();
  return Status::OK();
}

}  // namespace feedline::image
