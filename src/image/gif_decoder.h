// GIF decoding through giflib: the first frame only, composited on the
// canvas as PIL's Image.open(p).convert("RGB") shows it. The canvas is the
// logical screen, enlarged to hold the frame if the frame reaches past it;
// pixels outside the frame take the colour of the transparent index (when
// the frame's graphic control extension has one) or of index 0. Transparent
// pixels inside the frame show their palette colour (convert("RGB") ignores
// transparency). Indices past the colour table, and all indices of a GIF
// without one, are gray levels (i, i, i), as PIL shows them.
//
// Only the records up to the first frame are read: later frames, however
// many, cost nothing.
//
// Thread safety: one GifDecoder per thread.
#ifndef FEEDLINE_SRC_IMAGE_GIF_DECODER_H_
#define FEEDLINE_SRC_IMAGE_GIF_DECODER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "feedline/image.h"
#include "feedline/status.h"
#include "src/image/jpeg_decoder.h"

namespace feedline::image {

class GifDecoder {
 public:
  // Reads the records up to the first image descriptor (no LZW data) and
  // checks the limits on the canvas.
  Status ReadHeader(std::span<const uint8_t> bytes, const DecodeLimits& limits, ImageInfo* info);
  // The first frame on its canvas, RGB. `out->pixels` points into this
  // decoder's scratch until the next call.
  Status Decode(std::span<const uint8_t> bytes, const DecodeLimits& limits, RgbRegion* out);

  uint64_t scratch_bytes() const { return rgb_.capacity() + row_.capacity(); }
  // The scratch a Decode of an image with this header needs (the canvas,
  // plus one row of indices).
  static uint64_t ScratchBytesFor(const ImageInfo& info) {
    return uint64_t{info.width} * info.height * 3 + info.width;
  }

 private:
  std::vector<uint8_t> rgb_;
  std::vector<uint8_t> row_;
};

}  // namespace feedline::image

#endif  // FEEDLINE_SRC_IMAGE_GIF_DECODER_H_
