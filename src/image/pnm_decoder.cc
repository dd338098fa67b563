#include "src/image/pnm_decoder.h"

#include <array>
#include <cmath>
#include <string>

#include "src/image/decode_internal.h"

namespace feedline::image {
namespace {

bool IsSpace(uint8_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// Reads tokens from the text parts of a file: skips whitespace and
// '#' comments (to the end of the line).
class Tokens {
 public:
  Tokens(std::span<const uint8_t> b, size_t pos) : b_(b), pos_(pos) {}

  void SkipSpaceAndComments() {
    while (pos_ < b_.size()) {
      if (b_[pos_] == '#') {
        while (pos_ < b_.size() && b_[pos_] != '\n' && b_[pos_] != '\r') ++pos_;
      } else if (IsSpace(b_[pos_])) {
        ++pos_;
      } else {
        return;
      }
    }
  }

  // A decimal number up to `max`; false if none, or too large.
  bool Number(uint32_t max, uint32_t* v) {
    SkipSpaceAndComments();
    uint64_t n = 0;
    size_t digits = 0;
    while (pos_ < b_.size() && b_[pos_] >= '0' && b_[pos_] <= '9') {
      n = n * 10 + (b_[pos_++] - '0');
      if (n > max) return false;
      ++digits;
    }
    if (digits == 0) return false;
    *v = static_cast<uint32_t>(n);
    return true;
  }

  // One P1 sample: '0' or '1', separators optional.
  bool Bit(uint32_t* v) {
    SkipSpaceAndComments();
    if (pos_ >= b_.size() || (b_[pos_] != '0' && b_[pos_] != '1')) return false;
    *v = b_[pos_++] - '0';
    return true;
  }

  size_t pos() const { return pos_; }
  void set_pos(size_t p) { pos_ = p; }

 private:
  std::span<const uint8_t> b_;
  size_t pos_;
};

struct Header {
  char kind = 0;  // '1'..'6'
  uint32_t width = 0, height = 0;
  uint32_t maxval = 1;
  uint32_t channels = 1;  // 3 for P3/P6
  size_t data = 0;        // offset of the first sample (binary) or token (plain)
};

Status Parse(std::span<const uint8_t> b, const DecodeLimits& limits, Header* h) {
  if (b.size() < 3 || b[0] != 'P' || b[1] < '1' || b[1] > '6' || !IsSpace(b[2])) {
    return DataLossError("corrupt PNM: bad magic");
  }
  h->kind = static_cast<char>(b[1]);
  h->channels = h->kind == '3' || h->kind == '6' ? 3 : 1;
  const bool bitmap = h->kind == '1' || h->kind == '4';
  Tokens t(b, 2);
  uint32_t w = 0, ht = 0;
  if (!t.Number(0xFFFFFFFFu, &w) || !t.Number(0xFFFFFFFFu, &ht)) {
    return DataLossError("corrupt PNM: bad or missing width/height");
  }
  if (!bitmap && (!t.Number(65535, &h->maxval) || h->maxval == 0)) {
    return DataLossError("corrupt PNM: maxval must be 1..65535");
  }
  FEEDLINE_RETURN_IF_ERROR(CheckImageLimits("PNM", w, ht, limits));
  h->width = w;
  h->height = ht;
  // Binary samples start after exactly one whitespace byte.
  if (t.pos() >= b.size() || !IsSpace(b[t.pos()])) {
    return DataLossError("corrupt PNM: no whitespace after the header (truncated file?)");
  }
  h->data = t.pos() + 1;
  uint64_t need = 0;
  if (h->kind == '4') need = (uint64_t{w} + 7) / 8 * ht;
  if (h->kind == '5' || h->kind == '6') {
    need = uint64_t{w} * ht * h->channels * (h->maxval > 255 ? 2 : 1);
  }
  if (need > b.size() - h->data) {
    return DataLossError("corrupt PNM: pixel data needs " + std::to_string(need) +
                         " bytes, file has " + std::to_string(b.size() - h->data) +
                         " after the header (truncated file?)");
  }
  return Status::OK();
}

}  // namespace

Status PnmDecoder::ReadHeader(std::span<const uint8_t> bytes, const DecodeLimits& limits,
                              ImageInfo* info) {
  Header h;
  FEEDLINE_RETURN_IF_ERROR(Parse(bytes, limits, &h));
  info->format = ImageFormat::kPnm;
  info->width = h.width;
  info->height = h.height;
  info->channels = h.channels;
  info->progressive = false;
  return Status::OK();
}

Status PnmDecoder::Decode(std::span<const uint8_t> bytes, const DecodeLimits& limits,
                          RgbRegion* out) {
  Header h;
  FEEDLINE_RETURN_IF_ERROR(Parse(bytes, limits, &h));
  const size_t w = h.width, n = size_t{h.width} * h.height;
  if (rgb_.size() < n * 3) rgb_.resize(n * 3);
  uint8_t* px = rgb_.data();
  const uint8_t* data = bytes.data() + h.data;

  // Level table for 8-bit maxvals; 16-bit ones compute per sample.
  std::array<uint8_t, 256> level{};
  auto scale = [&h](uint32_t v) {
    return static_cast<uint8_t>(std::nearbyint(static_cast<double>(v) / h.maxval * 255.0));
  };
  if (h.maxval <= 255) {
    for (uint32_t v = 0; v <= h.maxval; ++v) level[v] = scale(v);
  }
  auto too_large = [&h](size_t i, uint32_t v) {
    return DataLossError("corrupt PNM: sample " + std::to_string(i) + " is " + std::to_string(v) +
                         ", over maxval " + std::to_string(h.maxval));
  };

  switch (h.kind) {
    case '4':  // 1 bit per pixel, rows padded to bytes, 1 = black
      for (size_t y = 0; y < h.height; ++y) {
        const uint8_t* row = data + y * ((w + 7) / 8);
        for (size_t x = 0; x < w; ++x) {
          const uint8_t v = (row[x / 8] >> (7 - x % 8)) & 1 ? 0 : 255;
          uint8_t* d = px + 3 * (y * w + x);
          d[0] = d[1] = d[2] = v;
        }
      }
      break;
    case '5':
    case '6': {
      const size_t samples = n * h.channels;
      for (size_t i = 0; i < samples; ++i) {
        uint32_t v;
        if (h.maxval > 255) {
          v = uint32_t{data[2 * i]} << 8 | data[2 * i + 1];
        } else {
          v = data[i];
        }
        if (v > h.maxval) return too_large(i, v);
        const uint8_t l = h.maxval <= 255 ? level[v] : scale(v);
        if (h.channels == 3) {
          px[i] = l;
        } else {
          px[3 * i] = px[3 * i + 1] = px[3 * i + 2] = l;
        }
      }
      break;
    }
    default: {  // plain: P1, P2, P3
      Tokens t(bytes, h.data - 1);
      const size_t samples = n * h.channels;
      for (size_t i = 0; i < samples; ++i) {
        uint32_t v = 0;
        const bool ok = h.kind == '1' ? t.Bit(&v) : t.Number(0xFFFFFFFFu, &v);
        if (!ok) {
          return DataLossError("corrupt PNM: sample " + std::to_string(i) + " of " +
                               std::to_string(samples) + " is missing or not a number" +
                               " (truncated file?)");
        }
        uint8_t l;
        if (h.kind == '1') {
          l = v ? 0 : 255;
        } else {
          if (v > h.maxval) return too_large(i, v);
          l = h.maxval <= 255 ? level[v] : scale(v);
        }
        if (h.channels == 3) {
          px[i] = l;
        } else {
          px[3 * i] = px[3 * i + 1] = px[3 * i + 2] = l;
        }
      }
      break;
    }
  }
  out->full_width = out->width = h.width;
  out->full_height = out->height = h.height;
  out->x = out->y = 0;
  out->pixels = px;
  return Status::OK();
}

}  // namespace feedline::image
