// RandomCrop's and Pad's geometry on 8-bit pixels (CropMode::kRandomCrop):
// no resampling, so each output pixel is one source pixel or the fill.
// The plan maps every output row and column to a source row and column
// (padding folded by torchvision's padding_mode, the flip included), then
// one gather writes the planes. Planning allocates only the two maps; the
// gather has no failure path. Thread safety: none needed (no shared state).
#ifndef FEEDLINE_SRC_IMAGE_PAD_CROP_H_
#define FEEDLINE_SRC_IMAGE_PAD_CROP_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "feedline/image.h"
#include "feedline/status.h"
#include "src/core/detail/fingerprint.h"

namespace feedline::image {

// A map entry for a pixel that takes the constant fill.
inline constexpr int32_t kPadFill = -1;
// The largest padding per side feedline accepts (torchvision has none; the
// padded image must stay addressable and its maps small).
inline constexpr uint32_t kMaxPadding = 65535;

// The source index of position `p` of a padded axis whose image has
// `length` pixels after `before` padding pixels: p - before inside the
// image; outside it kPadFill (kConstant), the nearest end (kEdge), or the
// mirror image (kReflect, kSymmetric; periodic past one mirror, which
// PlanPadCrop never asks for: it refuses such padding as torchvision does).
int32_t PaddedIndex(int64_t p, uint32_t before, uint32_t length, PaddingMode mode);

struct PadCropPlan {
  std::vector<int32_t> rows, cols;  // per output row / column: source index or kPadFill
  // The source rectangle the maps read, [x0, x1) x [y0, y1); empty (x0 ==
  // x1) when every output pixel is fill.
  uint32_t x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

// The maps for crop `box` (ChooseCrop's, or a caller's) of a width x height
// image into t.width x t.height. InvalidArgument, as torchvision's errors,
// when the output is larger than the padded image, or a mirroring padding
// is wider than the image (reflect: padding >= the axis; symmetric: >).
Status PlanPadCrop(const ImageTransform& t, const CropBox& box, uint32_t width, uint32_t height,
                   PadCropPlan* plan);

// Writes the 3 planes of cols.size() x rows.size() bytes (CHW) into `chw`.
// Source pixel (x, y), channel c, is at src + (y - src_y) * row_stride +
// (x - src_x) * pixel_stride + c * channel_stride, for every (x, y) the
// plan reads.
void GatherPadCrop(const PadCropPlan& plan, const uint8_t* src, uint32_t src_x, uint32_t src_y,
                   size_t pixel_stride, size_t row_stride, size_t channel_stride,
                   const std::array<uint8_t, 3>& fill, uint8_t* chw);

// Adds kRandomCrop's padding parameters to a transform's fingerprint; adds
// nothing for the other modes, so their fingerprints (and saved states)
// stay as they were.
void AddPaddingFingerprint(const ImageTransform& t, core::detail::Fingerprint& fp);

}  // namespace feedline::image

#endif  // FEEDLINE_SRC_IMAGE_PAD_CROP_H_
