// The formats decoded whole, then cropped: WebP, TIFF, GIF, BMP and PNM.
// Unlike JPEG (region + DCT scale) and PNG (rows up to the crop), their
// decoders produce the full image; the fused op crops it afterwards.
//
// Thread safety: one WholeDecoders per thread (it is per-worker op state).
#ifndef FEEDLINE_SRC_IMAGE_WHOLE_DECODERS_H_
#define FEEDLINE_SRC_IMAGE_WHOLE_DECODERS_H_

#include <cstdint>
#include <span>

#include "feedline/image.h"
#include "feedline/status.h"
#include "src/image/bmp_decoder.h"
#include "src/image/gif_decoder.h"
#include "src/image/jpeg_decoder.h"
#include "src/image/pnm_decoder.h"
#include "src/image/tiff_decoder.h"
#include "src/image/webp_decoder.h"

namespace feedline::image {

// True for the formats WholeDecoders handles.
bool IsWholeDecodeFormat(ImageFormat format);

struct WholeDecoders {
  WebpDecoder webp;
  TiffDecoder tiff;
  GifDecoder gif;
  BmpDecoder bmp;
  PnmDecoder pnm;

  // `format` must satisfy IsWholeDecodeFormat (else Internal).
  Status ReadHeader(ImageFormat format, std::span<const uint8_t> bytes, const DecodeLimits& limits,
                    ImageInfo* info);
  // The whole image as RGB; `out->pixels` points into the format's decoder
  // scratch until its next call.
  Status DecodeRegion(ImageFormat format, std::span<const uint8_t> bytes,
                      const DecodeLimits& limits, RgbRegion* out);

  uint64_t scratch_bytes() const {
    return webp.scratch_bytes() + tiff.scratch_bytes() + gif.scratch_bytes() + bmp.scratch_bytes() +
           pnm.scratch_bytes();
  }
  // The scratch a decode of an image with this header (from ReadHeader)
  // needs, so that a caller can charge it to a memory budget first.
  static uint64_t ScratchBytesFor(const ImageInfo& info);
  // Frees every decoder's scratch (fresh decoders; handles are per decode).
  void TrimScratch() {
    webp = WebpDecoder();
    tiff = TiffDecoder();
    gif = GifDecoder();
    bmp = BmpDecoder();
    pnm = PnmDecoder();
  }
};

}  // namespace feedline::image

#endif  // FEEDLINE_SRC_IMAGE_WHOLE_DECODERS_H_
