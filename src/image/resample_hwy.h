// The resampler's wide-SIMD kernels (resample_hwy.cc), written once with
// Google Highway and compiled for every x86 level from SSE4 to AVX-512 and
// for Arm NEON; the best one for the running CPU is chosen at the first call
// (Highway's dynamic dispatch). Fixed point with the plans' 14-bit
// coefficients, rounding half up and saturating to 0..255 as Pillow does, so
// each output value equals the SSE2 kernel's. Tested against the scalar
// reference (ResampleReference) on odd sizes for every output format.
#ifndef FEEDLINE_SRC_IMAGE_RESAMPLE_HWY_H_
#define FEEDLINE_SRC_IMAGE_RESAMPLE_HWY_H_

#include <cstddef>
#include <cstdint>

#include "src/image/resample.h"

namespace feedline::image {

// The vertical pass of output row `y` fused with the output conversion:
// for each channel c, the `count` rows of 8-bit plane c starting at
// first + c * plane (rows `ow` bytes apart), weighted by `pair_count` int32
// pairs of 14-bit weights (AxisPlan::pairs, the first of each 4 copies),
// rounded to 8 bits, then value * format.mul[c] + format.add[c] in
// format.dtype written to row y of `out` (an ow x oh image in
// format.layout). Reads up to 63 bytes past the end of each plane row.
void VerticalConvertRow(const uint8_t* first, size_t plane, uint32_t ow, uint32_t oh, uint32_t y, int32_t count,
                        const int32_t* pair_weights, uint32_t pair_count, const OutputFormat& format, void* out);

// Orders the streaming stores VerticalConvertRow may use before later
// stores (call once after the last row).
void FlushStreamingStores();

// The instruction set the dispatcher chose here ("AVX3", "AVX2", "SSE4",
// "NEON", "EMU128", ...), for benchmarks and logs.
const char* ResampleTargetName();

}  // namespace feedline::image

#endif  // FEEDLINE_SRC_IMAGE_RESAMPLE_HWY_H_
