// Lossless JPEG transcoding for `feedline pack`: the DCT coefficients are
// read and written back untouched, only the entropy coding changes (restart
// markers added, Huffman tables optimised). Decoding the result gives the
// same pixels as decoding the input. docs/restart_intervals.md.
//
// Free functions; safe for concurrent use (each call has its own codec).
#ifndef FEEDLINE_SRC_IMAGE_JPEG_TRANSCODE_H_
#define FEEDLINE_SRC_IMAGE_JPEG_TRANSCODE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "feedline/status.h"

namespace feedline::image {

// Rewrites `jpeg` with a restart marker every `interval_mcus` MCUs, snapped
// per image so that the intervals tile the MCU rows (what the crop decoder
// needs, src/image/jpeg_restart.h): an interval of at least one row becomes
// the largest whole number of rows it holds, a shorter one the largest
// divisor of the row's MCU count not above it. 0 removes restart markers.
// The output is a sequential (baseline) JPEG with optimised Huffman tables;
// every marker segment of the input (EXIF, ICC, comments) is kept.
// Errors: Unimplemented for what it does not transcode (not a JPEG,
// CMYK/YCCK or RGB colour, arithmetic coding, lossless or 12-bit); DataLoss
// for a corrupt file (libjpeg warnings are fatal: a truncated input is
// never turned into a valid-looking one). `out` is written only on success.
Status TranscodeJpegWithRestarts(std::span<const uint8_t> jpeg, uint32_t interval_mcus,
                                 std::vector<uint8_t>* out);

// The interval TranscodeJpegWithRestarts uses for an image `mcus_x` MCUs
// wide when asked for `interval_mcus`.
uint32_t SnapRestartInterval(uint32_t interval_mcus, uint32_t mcus_x);

}  // namespace feedline::image

#endif  // FEEDLINE_SRC_IMAGE_JPEG_TRANSCODE_H_
