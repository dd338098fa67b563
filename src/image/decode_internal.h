// Decode helpers shared by decode.cc, transform.cc and the decoders
// (internal).
#ifndef FEEDLINE_SRC_IMAGE_DECODE_INTERNAL_H_
#define FEEDLINE_SRC_IMAGE_DECODE_INTERNAL_H_

#include <cstdint>
#include <span>

#include "feedline/image.h"
#include "feedline/status.h"

namespace feedline::image {

// The error for bytes outside the allow-list {jpeg, png, webp, tiff, gif,
// bmp, pnm}: names the format it sniffed (pdf, ...) or says it is not an
// image.
Status UnsupportedFormat(std::span<const uint8_t> bytes);

// InvalidArgument naming `format` if width x height breaks max_dimension or
// max_pixels; InvalidArgument/DataLoss for an empty image. Decoders call it
// from the header, before any pixel memory is allocated.
Status CheckImageLimits(const char* format, uint64_t width, uint64_t height,
                        const DecodeLimits& limits);

}  // namespace feedline::image

#endif  // FEEDLINE_SRC_IMAGE_DECODE_INTERNAL_H_
