// Wide-SIMD kernels of the colour ops that mix channels or neighbours
// (color_ops_hwy.cc), written once with Google Highway for every x86 level
// and Arm NEON and chosen at the first call, like the resampler's and the
// warp's. Each computes what the scalar reference in color_ops.cc computes,
// in the same float32 operations in the same order (both files are compiled
// without floating-point contraction), so every target writes the reference's
// bytes: tests/image/color_ops_test.cc forces each target in turn and
// compares them on odd sizes.
//
// The planes are 8-bit, already through any pending table (the caller
// flushes it first); r, g and b are distinct planes of n values.
#ifndef FEEDLINE_SRC_IMAGE_COLOR_OPS_HWY_H_
#define FEEDLINE_SRC_IMAGE_COLOR_OPS_HWY_H_

#include <cstddef>
#include <cstdint>

namespace feedline::image {

// adjust_saturation: each value blended with its pixel's grayscale,
// ratio * v + one_minus * gray in float32, clamped, truncated.
void SaturatePlanes(uint8_t* r, uint8_t* g, uint8_t* b, size_t n, float ratio, float one_minus);

// rgb_to_grayscale into all three planes (0.2989 r + 0.587 g + 0.114 b in
// float32, in that order, truncated).
void GrayscalePlanes(uint8_t* r, uint8_t* g, uint8_t* b, size_t n);

// The sum of the truncated grayscale values of n pixels (contrast's mean).
uint64_t GraySum(const uint8_t* r, const uint8_t* g, const uint8_t* b, size_t n);

// adjust_sharpness on one row that has a row above and below (w >= 3): out[x]
// blends cur[x] with the 3x3 smoothed value (weights 1, centre 5, over 13,
// rounded), the first and last columns with themselves. `out` is not `cur`.
void SharpenRow(const uint8_t* up, const uint8_t* cur, const uint8_t* down, uint32_t w, float ratio,
                float one_minus, uint8_t* out);

// adjust_hue by `shift` (in [-0.5, 0.5]): torchvision's _rgb2hsv, the
// shift modulo 1 and _hsv2rgb in float32, then * 255.999 truncated.
void HuePlanes(uint8_t* r, uint8_t* g, uint8_t* b, size_t n, float shift);

// gaussian_blur's passes (the float32 sums in the reference's tap order):
// out[x] = float(src[x]) for x < w;
void WidenRow(const uint8_t* src, uint32_t w, float* out);
// out[x] = sum over t < taps of k[t] * in[x + t], summed from t = 0 (in
// holds w + taps - 1 values);
void BlurRow(const float* in, const float* k, uint32_t taps, uint32_t w, float* out);
// out[x] = clamp(round-half-even(sum over t < taps of k[t] * rows[t][x]), 0, 255).
void BlurColumns(const float* const* rows, const float* k, uint32_t taps, uint32_t w, uint8_t* out);

// out[i] = float(p[i]) * mul + add: the float32 output conversion of one
// plane through an identity table.
void PlaneToFloat(const uint8_t* p, size_t n, float mul, float add, float* out);
// out[i] = table[p[i]] (256 entries): the float32 output conversion of one
// plane through a pending table, the table's values already converted.
void PlaneThroughTable(const uint8_t* p, size_t n, const float* table, float* out);
// p[i] = table[p[i]] (256 entries) in place: a pending table written into
// the pixels before an op that reads them.
void PlaneThroughByteTable(uint8_t* p, size_t n, const uint8_t* table);
// The smallest and largest of p[0..n) (255 and 0 when n is 0): autocontrast's
// bounds through an identity table.
void PlaneMinMax(const uint8_t* p, size_t n, uint8_t* lo, uint8_t* hi);

}  // namespace feedline::image

#endif  // FEEDLINE_SRC_IMAGE_COLOR_OPS_HWY_H_
