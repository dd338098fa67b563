// The resampler's wide-SIMD kernels (resample_hwy.cc), written once with
// Google Highway and compiled for every x86 level from SSE4 to AVX-512 and
// for Arm NEON; the best one for the running CPU is chosen at the first call
// (Highway's dynamic dispatch). Fixed point with the plans' 14-bit
// coefficients, rounding half up and saturating to 0..255 as Pillow does:
// every target gives the same bytes (tests/image/resample_test.cc forces
// each in turn and compares them, and bounds them against the scalar float
// reference, ResampleReference, on odd sizes for every output format).
#ifndef FEEDLINE_SRC_IMAGE_RESAMPLE_HWY_H_
#define FEEDLINE_SRC_IMAGE_RESAMPLE_HWY_H_

#include <cstddef>
#include <cstdint>

#include "src/image/resample.h"

namespace feedline::image {

// The vertical pass of output row `y` fused with the output conversion:
// for each channel c, the `count` rows of 8-bit plane c starting at
// first + c * plane (rows `ow` bytes apart), weighted by `pair_count` int32
// pairs of 14-bit weights (output y's AxisPlan::pairs),
// rounded to 8 bits, then value * format.mul[c] + format.add[c] in
// format.dtype written to row y of `out` (an ow x oh image in
// format.layout). Reads up to 63 bytes past the end of each plane row.
void VerticalConvertRow(const uint8_t* first, size_t plane, uint32_t ow, uint32_t oh, uint32_t y,
                        int32_t count, const int32_t* pair_weights, uint32_t pair_count,
                        const OutputFormat& format, void* out);

// The horizontal pass: `rows` (1..HorizontalRowsPerCall()) consecutive
// source rows, row i at row0 + i * stride, `cols` RGB pixels each from
// source column col_begin, resampled by `h` into the 8-bit planes (row i of
// a plane at plane + i * plane_stride, h.out_size bytes, mirrored when
// `flip`). `pair_scratch`: 16-byte aligned, HorizontalRowsPerCall() *
// (cols + 2 * h.pair_count + 1) * 16 bytes; 64-byte aligned is faster (the
// AVX-512 stores of its pair vectors then never split a cache line). Query HorizontalRowsPerCall
// right before: it follows the dispatched target.
size_t HorizontalRowsPerCall();
void HorizontalRows(const uint8_t* row0, size_t stride, size_t rows, size_t cols, const AxisPlan& h,
                    int32_t col_begin, bool flip, void* pair_scratch, uint8_t* r_plane,
                    uint8_t* g_plane, uint8_t* b_plane, size_t plane_stride);

// Orders the streaming stores VerticalConvertRow may use before later
// stores (call once after the last row).
void FlushStreamingStores();

// The instruction set the dispatcher chose here ("AVX3", "AVX2", "SSE4",
// "NEON", "EMU128", ...), for benchmarks and logs.
const char* ResampleTargetName();

}  // namespace feedline::image

#endif  // FEEDLINE_SRC_IMAGE_RESAMPLE_HWY_H_
