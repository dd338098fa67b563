// TIFF decoding through libtiff, from memory: the first directory (page),
// every layout libtiff's RGBA interface reads (strips or tiles, contiguous
// or planar, 1/2/4/8/16-bit gray, palette, RGB, YCbCr, CMYK; uncompressed,
// LZW, Deflate, PackBits, JPEG...). Pixels keep the stored order, as PIL
// does: the Orientation tag is not applied. Extra samples (alpha) are
// dropped without premultiplying (PIL's convert("RGB")); 16-bit samples
// keep their high byte (as for PNG).
//
// libtiff's messages never reach stderr: errors become DataLoss (or
// Unimplemented for layouts it cannot convert) carrying libtiff's text.
//
// Thread safety: one TiffDecoder per thread.
#ifndef FEEDLINE_SRC_IMAGE_TIFF_DECODER_H_
#define FEEDLINE_SRC_IMAGE_TIFF_DECODER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "feedline/image.h"
#include "feedline/status.h"
#include "src/image/jpeg_decoder.h"

namespace feedline::image {

class TiffDecoder {
 public:
  // Reads the first directory's tags and checks the limits.
  Status ReadHeader(std::span<const uint8_t> bytes, const DecodeLimits& limits, ImageInfo* info);
  // The whole first page as RGB. `out->pixels` points into this decoder's
  // scratch until the next call.
  Status Decode(std::span<const uint8_t> bytes, const DecodeLimits& limits, RgbRegion* out);

  // Our raster (libtiff's own strip/tile buffers are per decode and capped).
  uint64_t scratch_bytes() const { return raster_.capacity() * sizeof(uint32_t); }
  // The scratch a Decode of an image with this header needs: one 32-bit
  // RGBA raster, packed to RGB in place.
  static uint64_t ScratchBytesFor(const ImageInfo& info) {
    return uint64_t{info.width} * info.height * 4;
  }

 private:
  std::vector<uint32_t> raster_;
};

}  // namespace feedline::image

#endif  // FEEDLINE_SRC_IMAGE_TIFF_DECODER_H_
