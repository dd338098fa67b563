// Antialiased separable resampling with PIL's filters, fused with flip,
// normalisation, dtype conversion and layout.
//
// PlanAxis reproduces Pillow's precompute_coeffs (Resample.c): for output
// pixel i the filter is centred at in0 + (i + 0.5) * scale in source
// coordinates, its support is widened by the scale when downsampling (that
// is the antialiasing), taps are clipped to [0, in_size) and renormalised.
// Run does the horizontal pass first over only the rows the vertical pass
// needs, then the vertical pass, rounding to 8 bits in between as Pillow
// does, and writes each output value once, converted, to its final place.
//
// Kernels know no files and no formats. Thread safety: plans are values;
// Run uses caller-owned scratch.
#ifndef FEEDLINE_SRC_IMAGE_RESAMPLE_H_
#define FEEDLINE_SRC_IMAGE_RESAMPLE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "feedline/buffer.h"
#include "feedline/image.h"

namespace feedline::image {

struct AxisPlan {
  uint32_t out_size = 0;
  uint32_t taps = 0;           // weights per output (max over outputs)
  std::vector<int32_t> start;  // first source index per output
  std::vector<int32_t> count;  // source pixels used per output
  std::vector<float> weights;  // out_size * taps, zero-padded
  // The same weights in 14-bit fixed point, two int16 per int32 (taps 2j
  // and 2j+1, low half first): pair_count int32 per output, for multiply-add
  // instructions that take two taps at once (the kernels broadcast each).
  // pair_count covers the largest count (not taps), in whole pairs.
  uint32_t pair_count = 0;
  std::vector<int32_t> pairs;
  int32_t min_index = 0;  // smallest source index used
  int32_t max_index = 0;  // one past the largest
};

// Coefficients for mapping [in0, in0 + scale * out_size) of a source axis of
// in_size pixels onto out_size pixels.
void PlanAxis(Interpolation interpolation, uint32_t in_size, double in0, double scale,
              uint32_t out_size, AxisPlan* plan);

struct OutputFormat {
  DType dtype = DType::kFloat32;
  Layout layout = Layout::kCHW;
  // value = pixel * mul[c] + add[c] for float dtypes; uint8 stores the pixel.
  std::array<float, 3> mul = {1, 1, 1};
  std::array<float, 3> add = {0, 0, 0};
};

OutputFormat MakeOutputFormat(const ImageTransform& t);

// Source: RGB rows; pixel (x, y) of the planned source axes is at
// src + (y - src_row0) * stride + (x - src_col0) * 3. Rows [h.min.., ...]
// and columns the plans use must be present.
struct RgbSource {
  const uint8_t* pixels = nullptr;
  size_t stride = 0;
  int32_t col0 = 0;
  int32_t row0 = 0;
};

// The production kernel: both passes in fixed point with the wide-SIMD
// kernels (resample_hwy.h: Highway, dispatched at run time to AVX-512,
// AVX2, SSE4, SSSE3, NEON or a scalar fallback), rounding like Pillow.
// Each pass may round one 8-bit level differently from the reference
// (14-bit coefficients), rarely; tests bound the difference. The vertical
// pass writes each value once, converted (normalise, dtype, layout), to its
// final place; float32 CHW uses streaming stores.
void Resample(const RgbSource& src, const AxisPlan& horizontal, const AxisPlan& vertical, bool flip,
              const OutputFormat& format, std::vector<float>* scratch, void* out);
// The reference kernel, for tests: float taps (4-lane vectors, one RGB
// pixel each) and the same 8-bit rounding after each pass. Built twice, for
// AVX2+FMA and the baseline (GCC function multi-versioning).
void ResampleReference(const RgbSource& src, const AxisPlan& horizontal, const AxisPlan& vertical,
                       bool flip, const OutputFormat& format, std::vector<float>* scratch,
                       void* out);

}  // namespace feedline::image

#endif  // FEEDLINE_SRC_IMAGE_RESAMPLE_H_
