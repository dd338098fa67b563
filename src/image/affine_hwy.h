// The affine warp's wide-SIMD kernel (affine_hwy.cc), written once with
// Google Highway for every x86 level and Arm NEON, chosen at the first call
// like the resampler's. It computes what the scalar reference in affine.cc
// computes, in the same float32 operations in the same order (both files
// are compiled without floating-point contraction), so every target writes
// the same bytes as the reference: tests/image/affine_test.cc forces each
// target in turn and compares them on odd sizes.
#ifndef FEEDLINE_SRC_IMAGE_AFFINE_HWY_H_
#define FEEDLINE_SRC_IMAGE_AFFINE_HWY_H_

#include <cstddef>
#include <cstdint>

namespace feedline::image {

// The sampling grid of one warp: output pixel (j, i) samples the source at
//   gx = x_j * a0 + y_i * a1 + a2,  gy = x_j * b0 + y_i * b1 + b2,
//   ix = (gx + 1) * hw - 0.5,       iy = (gy + 1) * hh - 0.5,
// (x_j, y_i: the centred output pixel centres, col_x / row_y), as torch's
// _affine_grid and grid_sample (align_corners=False) do in float32.
struct WarpGrid {
  float a0, a1, a2, b0, b1, b2;
  float hw, hh;  // w / 2, h / 2
};

// Lanes of one vector of the dispatched target: `col_x` must hold
// w + WarpLanes() floats (the extra ones any finite value).
size_t WarpLanes();

// Warps the planar 8-bit RGB image `src` (w x h, plane c at src + c * w * h,
// readable from 4 bytes before src to 4 bytes past its end) into `dst`
// (the same layout, not overlapping). NEAREST when `nearest`, else BILINEAR;
// a sample outside the image is `outside[c]` (NEAREST, and BILINEAR
// without fill: 0); with `fill`, BILINEAR blends the fill by the share of
// the sample outside, as the tensor path's mask does. w * h < 2^31 / 3.
// NEAREST reads the image from `rgbx` instead when it is not null (one
// gather per vector of pixels instead of three); `src` is then unused.
void WarpPlanes(const uint8_t* src, uint32_t w, uint32_t h, const float* col_x, const float* row_y,
                const WarpGrid& g, bool nearest, const float* fill, const uint8_t outside[3],
                const uint32_t* rgbx, uint8_t* dst);

// rgbx[i] = r[i] | g[i] << 8 | b[i] << 16 for the planes r = planes,
// g = planes + n, b = planes + 2 n (i < n).
void InterleaveRgbx(const uint8_t* planes, size_t n, uint32_t* rgbx);

}  // namespace feedline::image

#endif  // FEEDLINE_SRC_IMAGE_AFFINE_HWY_H_
