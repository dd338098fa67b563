// JPEG decoding through libjpeg-turbo: header first with limits, then only a
// region of the image, at a chosen DCT scale.
//
// libjpeg reports fatal errors by calling error_exit, which must not return;
// we longjmp out of it. The longjmp only ever crosses libjpeg's C frames and
// our own functions in jpeg_decoder.cc that hold nothing but trivially
// destructible locals, so no C++ destructor is skipped; errors become
// Status values and never exit the process.
//
// Thread safety: one JpegDecoder per thread (it is per-worker op state).
#ifndef FEEDLINE_SRC_IMAGE_JPEG_DECODER_H_
#define FEEDLINE_SRC_IMAGE_JPEG_DECODER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "feedline/image.h"
#include "feedline/status.h"
#include "src/image/jpeg_restart.h"

namespace feedline::image {

// RGB pixels of part of a (possibly scaled) image.
struct RgbRegion {
  uint32_t full_width = 0;  // the whole image at the decode scale
  uint32_t full_height = 0;
  uint32_t x = 0, y = 0;  // where the region starts in the scaled image
  uint32_t width = 0, height = 0;
  const uint8_t* pixels = nullptr;  // height rows of width * 3 bytes
};

class JpegDecoder {
 public:
  JpegDecoder();
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  // Parses the header and checks the limits. The bytes must stay valid until
  // Decode returns.
  Status ReadHeader(std::span<const uint8_t> bytes, const DecodeLimits& limits, ImageInfo* info);

  // Scaled size of the image after ReadHeader, for scale_num/8.
  void ScaledSize(int scale_num, uint32_t* width, uint32_t* height);

  // After ReadHeader: decodes columns [x0, x1) and rows [y0, y1) of the image
  // scaled by scale_num/8 (1..8). Columns may widen to iMCU boundaries.
  // `out->pixels` points into this decoder's scratch until the next call.
  // A file whose restart markers tile the MCU rows (jpeg_restart.h) is
  // decoded from a smaller JPEG of only the intervals around the region,
  // with the same pixels; if that fails for any reason the whole file is
  // decoded as without markers, so the result (pixels or error) is the
  // same either way.
  Status Decode(int scale_num, uint32_t x0, uint32_t y0, uint32_t x1, uint32_t y1, RgbRegion* out);

  // True if the last successful Decode read only restart intervals.
  bool last_decode_used_restarts() const { return last_used_restarts_; }

  // Bytes of pixel scratch held (libjpeg's own pools are per decode).
  uint64_t scratch_bytes() const {
    return pixels_.capacity() + cmyk_row_.capacity() + window_.capacity() +
           (layout_.begin.capacity() + layout_.end.capacity()) * sizeof(size_t);
  }
  // After ReadHeader: what Decode with these arguments allocates, at most:
  // our pixel rows and libjpeg's buffers, which for a progressive file hold
  // every DCT coefficient of the image. For charging it to a budget first.
  uint64_t DecodeScratchBytes(int scale_num, uint32_t x0, uint32_t y0, uint32_t x1, uint32_t y1);
  // Frees the scratch buffers.
  void TrimScratch();

 private:
  // The rows and columns of the image now open in libjpeg.
  Status DecodeOpen(int scale_num, uint32_t x0, uint32_t y0, uint32_t x1, uint32_t y1,
                    RgbRegion* out);
  // Decodes the region from the restart intervals around it; false (with
  // libjpeg reset to the whole file, `*reread_ok` saying if that worked)
  // if that path does not apply or fails.
  bool DecodeFromRestarts(int scale_num, uint32_t x0, uint32_t y0, uint32_t x1, uint32_t y1,
                          RgbRegion* out, bool* reread_ok);

  struct State;
  std::unique_ptr<State> state_;
  std::vector<uint8_t> pixels_;
  std::vector<uint8_t> cmyk_row_;
  std::span<const uint8_t> bytes_;  // the file of the last ReadHeader
  RestartLayout layout_;
  bool has_restarts_ = false;  // layout_ describes bytes_
  bool last_used_restarts_ = false;
  std::vector<uint8_t> window_;  // the JPEG of the intervals around a region
};

}  // namespace feedline::image

#endif  // FEEDLINE_SRC_IMAGE_JPEG_DECODER_H_
