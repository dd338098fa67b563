// The colour and pixel ops' kernels (PixelStep in feedline/image.h) on a
// planar 8-bit RGB image, fused where the ops allow it.
//
// Every op that maps each channel value through a function of that value
// alone (brightness, contrast once its mean is known, invert, posterize,
// solarize, autocontrast and equalize once their histograms are known) is
// composed into one pending 256-entry table per channel instead of touching
// the pixels; the statistics those ops need are computed from the source
// histogram pushed through the pending table (autocontrast, equalize) or in
// one reading pass (contrast's grayscale mean). Ops that mix channels or
// neighbours (saturation, hue, grayscale, sharpness, blur) apply the pending
// table as they read (the SIMD kernels of color_ops_hwy.h write it into the
// pixels first). AugMix's blend (kMixBegin .. kMixEnd) folds the
// pending table into its float32 sum. The last table is applied by the output conversion
// (normalise, dtype, layout), so a chain of table ops costs one pass.
//
// The arithmetic follows torchvision's tensor path on uint8
// (functional_tensor.py): float32 blends truncated to 8 bits, grayscale
// 0.2989 R + 0.587 G + 0.114 B truncated, hue through float32 HSV and
// truncated, blur and sharpness rounded. docs/augmentations.md has the
// measured differences.
//
// Kernels allocate only in the caller's scratch and have no failure path;
// parameters are checked before (CheckPixelOps). Thread safety: none needed
// (no shared state).
#ifndef FEEDLINE_SRC_IMAGE_COLOR_OPS_H_
#define FEEDLINE_SRC_IMAGE_COLOR_OPS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "feedline/image.h"
#include "src/image/resample.h"

namespace feedline::image {

// Reused between samples (a worker's state). mix_*: AugMix's original and
// its float32 sum (16 bytes per pixel while a mix runs).
struct PixelScratch {
  std::vector<float> floats;
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> mix_original;
  std::vector<float> mix_sum;
  uint64_t capacity_bytes() const {
    return (floats.capacity() + mix_sum.capacity()) * sizeof(float) + bytes.capacity() +
           mix_original.capacity();
  }
};

// Applies `steps` to `chw` (3 planes of width * height) and writes the result
// converted to `format` (value * mul + add for float dtypes) into `out`, an
// image of width x height in format.layout. `chw` is clobbered.
// `reference`: the scalar kernels only, never the SIMD ones of
// color_ops_hwy.h (which write the same bytes; the tests compare them).
void ApplyStepsAndConvert(std::span<const PixelStep> steps, uint32_t width, uint32_t height,
                          uint8_t* chw, const OutputFormat& format, PixelScratch* scratch,
                          void* out, bool reference = false);

}  // namespace feedline::image

#endif  // FEEDLINE_SRC_IMAGE_COLOR_OPS_H_
