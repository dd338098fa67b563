// PNG decoding: libspng, with image-size and chunk limits set before any
// data is inflated. 8-bit non-interlaced gray, gray+alpha, RGB and RGBA go
// through a fast path (libdeflate inflates all the image data at once, our
// defilter) that checks the same CRCs, Adler-32 and lengths and hands
// anything it does not take, and every error, to libspng. Every PNG colour
// type and bit depth becomes 8-bit RGB (16-bit channels keep their high
// byte; alpha is dropped, as PIL's convert("RGB") does).
//
// Thread safety: one PngDecoder per thread.
#ifndef FEEDLINE_SRC_IMAGE_PNG_DECODER_H_
#define FEEDLINE_SRC_IMAGE_PNG_DECODER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "feedline/image.h"
#include "feedline/status.h"
#include "src/image/jpeg_decoder.h"

struct libdeflate_decompressor;

namespace feedline::image {

class PngDecoder {
 public:
  // fast_path = false: every PNG through libspng (the reference the fast
  // path is tested against).
  explicit PngDecoder(bool fast_path = true) : fast_path_(fast_path) {}

  // Parses the header and checks the limits.
  Status ReadHeader(std::span<const uint8_t> bytes, const DecodeLimits& limits, ImageInfo* info);
  // Decodes columns [0, x1) of rows [y0, y1) to RGB (x1 and y1 clamped to
  // the image; out->x is 0, out->width the clamped x1). The whole file is
  // read and verified either way (every IDAT CRC, zlib's Adler-32, the
  // chunks up to IEND): rows outside the range are inflated but not kept,
  // because zlib checks its stream only at the end (docs/reliability.md 35).
  // PNG's filters predict from the left and from above, so the fast path
  // defilters only columns [0, x1) of rows [0, y1).
  // `out->pixels` points into this decoder's scratch until the next call.
  Status Decode(std::span<const uint8_t> bytes, const DecodeLimits& limits, uint32_t x1,
                uint32_t y0, uint32_t y1, RgbRegion* out);

  // Whether the last Decode took the fast path (for tests and benchmarks).
  bool last_was_fast() const { return last_was_fast_; }

  uint64_t scratch_bytes() const {
    return rgba_.capacity() + rgb_.capacity() + idat_.capacity() + filtered_.capacity();
  }
  // What Decode(y0, y1) of an image with this header allocates, at most
  // (ours and libspng's), for charging it to a budget first.
  static uint64_t DecodeScratchBytes(const ImageInfo& info, uint32_t y0, uint32_t y1);
  // Frees the scratch buffers.
  void TrimScratch();

 private:
  struct InflaterDeleter {
    void operator()(libdeflate_decompressor* d) const;
  };
  // The fast path: columns [0, x1) of rows [y0, y1) of an 8-bit,
  // non-interlaced gray, gray+alpha, RGB or RGBA PNG of `bpp` bytes a pixel
  // into rgb_ (rows x1 * 3 bytes apart). False when any check fails or the
  // file is outside it: libspng's path then decodes it or names the error.
  bool DecodeFast(std::span<const uint8_t> bytes, const DecodeLimits& limits, uint32_t width,
                  uint32_t height, uint32_t bpp, uint32_t x1, uint32_t y0, uint32_t y1);

  std::vector<uint8_t> rgba_;
  std::vector<uint8_t> rgb_;
  std::vector<uint8_t> idat_;      // the IDAT chunks' data, joined (several chunks)
  std::vector<uint8_t> filtered_;  // every row, inflated, filter type first
  bool fast_path_;
  bool last_was_fast_ = false;
  std::unique_ptr<libdeflate_decompressor, InflaterDeleter> inflater_;
};

}  // namespace feedline::image

#endif  // FEEDLINE_SRC_IMAGE_PNG_DECODER_H_
