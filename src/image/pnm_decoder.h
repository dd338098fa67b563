// Netpbm decoding with our own parser: PBM (P1 plain, P4 binary), PGM
// (P2, P5) and PPM (P3, P6), maxval 1..65535 (16-bit samples big-endian).
// Samples scale to 8 bits as round-half-even(v / maxval * 255) in double
// precision, PIL's formula; a sample above maxval is DataLoss. Only the
// first image of a multi-image file is read. PAM (P7) is not sniffed.
//
// Thread safety: one PnmDecoder per thread.
#ifndef FEEDLINE_SRC_IMAGE_PNM_DECODER_H_
#define FEEDLINE_SRC_IMAGE_PNM_DECODER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "feedline/image.h"
#include "feedline/status.h"
#include "src/image/jpeg_decoder.h"

namespace feedline::image {

class PnmDecoder {
 public:
  // Parses the text header (comments allowed) and checks the limits and,
  // for binary files, that the samples lie inside the file.
  Status ReadHeader(std::span<const uint8_t> bytes, const DecodeLimits& limits, ImageInfo* info);
  // The whole image as RGB. `out->pixels` points into this decoder's
  // scratch until the next call.
  Status Decode(std::span<const uint8_t> bytes, const DecodeLimits& limits, RgbRegion* out);

  uint64_t scratch_bytes() const { return rgb_.capacity(); }
  static uint64_t ScratchBytesFor(const ImageInfo& info) {
    return uint64_t{info.width} * info.height * 3;
  }

 private:
  std::vector<uint8_t> rgb_;
};

}  // namespace feedline::image

#endif  // FEEDLINE_SRC_IMAGE_PNM_DECODER_H_
