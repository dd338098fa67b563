// BMP decoding with our own parser (no Debian library reads BMP alone):
// BITMAPCOREHEADER (12 bytes), BITMAPINFOHEADER (40) and its successors
// (52, 56, 64, 108, 124); 1/4/8-bit palette, 16/24/32-bit BI_RGB
// (16-bit is 5-5-5, 32-bit ignores the fourth byte) and BI_BITFIELDS (any
// contiguous masks; alpha dropped); bottom-up and top-down rows. Channels
// of n bits scale to 8 as v * 255 / (2^n - 1), truncated, as PIL does.
// RLE4/RLE8 and embedded JPEG/PNG are refused with Unimplemented.
//
// Every offset and length is checked against the file: a hostile header
// gives DataLoss or InvalidArgument, never an out-of-bounds read.
//
// Thread safety: one BmpDecoder per thread.
#ifndef FEEDLINE_SRC_IMAGE_BMP_DECODER_H_
#define FEEDLINE_SRC_IMAGE_BMP_DECODER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "feedline/image.h"
#include "feedline/status.h"
#include "src/image/jpeg_decoder.h"

namespace feedline::image {

class BmpDecoder {
 public:
  // Parses the file and info headers, the palette and masks, checks the
  // limits and that the pixel array lies inside the file.
  Status ReadHeader(std::span<const uint8_t> bytes, const DecodeLimits& limits, ImageInfo* info);
  // The whole image as RGB, top row first. `out->pixels` points into this
  // decoder's scratch until the next call.
  Status Decode(std::span<const uint8_t> bytes, const DecodeLimits& limits, RgbRegion* out);

  uint64_t scratch_bytes() const { return rgb_.capacity(); }
  static uint64_t ScratchBytesFor(const ImageInfo& info) {
    return uint64_t{info.width} * info.height * 3;
  }

 private:
  std::vector<uint8_t> rgb_;
};

}  // namespace feedline::image

#endif  // FEEDLINE_SRC_IMAGE_BMP_DECODER_H_
