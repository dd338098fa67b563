// Decode helpers shared by decode.cc and transform.cc (internal).
#ifndef FEEDLINE_SRC_IMAGE_DECODE_INTERNAL_H_
#define FEEDLINE_SRC_IMAGE_DECODE_INTERNAL_H_

#include <cstdint>
#include <span>

#include "feedline/status.h"

namespace feedline::image {

// The error for bytes outside the allow-list {jpeg, png}: names the format
// it sniffed (gif, tiff, webp, pdf, ...) or says it is not an image.
Status UnsupportedFormat(std::span<const uint8_t> bytes);

}  // namespace feedline::image

#endif  // FEEDLINE_SRC_IMAGE_DECODE_INTERNAL_H_
