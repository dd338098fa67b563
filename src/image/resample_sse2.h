// The resampler's SSE2 kernels (resample_sse2.cc), called by Resample
// (resample.cc) where the compiler targets SSE2 (every x86-64): fixed point
// with the plans' 14-bit coefficients (AxisPlan::pairs), rounding half up
// and saturating to 0..255 after each pass, as Pillow does. Tests bound the
// difference from the scalar float reference (ResampleReference).
#ifndef FEEDLINE_SRC_IMAGE_RESAMPLE_SSE2_H_
#define FEEDLINE_SRC_IMAGE_RESAMPLE_SSE2_H_

#include <cstddef>
#include <cstdint>

#include "src/image/resample.h"

#if defined(__SSE2__)
#define FEEDLINE_RESAMPLE_SSE2 1
#else
#define FEEDLINE_RESAMPLE_SSE2 0
#endif

#if FEEDLINE_RESAMPLE_SSE2
namespace feedline::image {

// Horizontal pass of one source row: `cols` RGB pixels starting at source
// column col_begin, resampled by `h` into the 8-bit planes r, g, b (h.out_size
// each, mirrored when `flip`). `pair_scratch`: 16-byte aligned room for
// cols + 2 * h.taps + 2 vectors of 16 bytes, the tail past `cols` zeroed.
void HorizontalSse2(const uint8_t* row, size_t cols, const AxisPlan& h, int32_t col_begin, bool flip,
                    void* pair_scratch, uint8_t* r, uint8_t* g, uint8_t* b);

// Vertical pass of one output row: `count` rows of the 8-bit planes from
// `first` (channel 0; channel c is c * plane bytes further) weighted by
// pair_count int16 pairs (pair_weights, 4 copies each), rounded to 8 bits,
// widened to float in sums + c * sums_stride. Writes whole groups of 8 (the
// tail past `ow` is scratch) and reads up to 7 bytes past each plane row.
void VerticalSse2(const uint8_t* first, size_t plane, uint32_t ow, int32_t count, const int32_t* pair_weights,
                  uint32_t pair_count, float* sums, size_t sums_stride);

// out[x] = acc[x] * mul + add for the leading multiple of 4 of `n` values,
// with streaming (non-temporal) stores; returns how many it wrote: 0 when
// `out` is not 16-byte aligned. StreamFenceSse2 orders those stores before
// later ones.
size_t ScaleToFloatStreamSse2(const float* acc, uint32_t n, float mul, float add, float* out);
void StreamFenceSse2();

}  // namespace feedline::image
#endif  // FEEDLINE_RESAMPLE_SSE2

#endif  // FEEDLINE_SRC_IMAGE_RESAMPLE_SSE2_H_
