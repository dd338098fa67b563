// PNG decoding through libspng, with image-size and chunk limits set before
// any data is inflated. Every PNG colour type and bit depth becomes 8-bit
// RGB (16-bit channels keep their high byte; alpha is dropped, as PIL's
// convert("RGB") does).
//
// Thread safety: one PngDecoder per thread.
#ifndef FEEDLINE_SRC_IMAGE_PNG_DECODER_H_
#define FEEDLINE_SRC_IMAGE_PNG_DECODER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "feedline/image.h"
#include "feedline/status.h"
#include "src/image/jpeg_decoder.h"

namespace feedline::image {

class PngDecoder {
 public:
  // Parses the header and checks the limits.
  Status ReadHeader(std::span<const uint8_t> bytes, const DecodeLimits& limits, ImageInfo* info);
  // Decodes rows [y0, y1) to RGB (all columns). The whole file is read and
  // verified either way (every IDAT CRC, zlib's Adler-32, the chunks up to
  // IEND): rows outside the range are inflated but not kept, because zlib
  // checks its stream only at the end (docs/reliability.md 35).
  // `out->pixels` points into this decoder's scratch until the next call.
  Status Decode(std::span<const uint8_t> bytes, const DecodeLimits& limits, uint32_t y0,
                uint32_t y1, RgbRegion* out);

  uint64_t scratch_bytes() const { return rgba_.capacity() + rgb_.capacity(); }
  // What Decode(y0, y1) of an image with this header allocates, at most
  // (ours and libspng's), for charging it to a budget first.
  static uint64_t DecodeScratchBytes(const ImageInfo& info, uint32_t y0, uint32_t y1);
  // Frees the scratch buffers.
  void TrimScratch();

 private:
  std::vector<uint8_t> rgba_;
  std::vector<uint8_t> rgb_;
};

}  // namespace feedline::image

#endif  // FEEDLINE_SRC_IMAGE_PNG_DECODER_H_
