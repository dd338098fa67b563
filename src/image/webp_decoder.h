// WebP decoding through libwebp: still images, lossy or lossless, with or
// without alpha. Alpha is dropped (PIL's convert("RGB")); animated WebP is
// refused with Unimplemented (PIL would composite the first frame; we do not
// guess at it).
//
// Thread safety: one WebpDecoder per thread.
#ifndef FEEDLINE_SRC_IMAGE_WEBP_DECODER_H_
#define FEEDLINE_SRC_IMAGE_WEBP_DECODER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "feedline/image.h"
#include "feedline/status.h"
#include "src/image/jpeg_decoder.h"

namespace feedline::image {

class WebpDecoder {
 public:
  // Parses the RIFF/VP8 headers and checks the limits. DataLoss for a
  // corrupt or truncated header, Unimplemented for animations.
  Status ReadHeader(std::span<const uint8_t> bytes, const DecodeLimits& limits, ImageInfo* info);
  // The whole image as RGB. `out->pixels` points into this decoder's scratch
  // until the next call. DataLoss for corrupt or truncated data.
  Status Decode(std::span<const uint8_t> bytes, const DecodeLimits& limits, RgbRegion* out);

  uint64_t scratch_bytes() const { return rgb_.capacity(); }
  // The scratch a Decode of an image with this header needs.
  static uint64_t ScratchBytesFor(const ImageInfo& info) {
    return uint64_t{info.width} * info.height * 3;
  }

 private:
  std::vector<uint8_t> rgb_;
};

}  // namespace feedline::image

#endif  // FEEDLINE_SRC_IMAGE_WEBP_DECODER_H_
