// The colour ops' per-pixel arithmetic, torchvision's tensor path on
// uint8 in float32: the scalar reference (color_ops.cc) and the SIMD
// kernels' tails (color_ops_hwy.cc) both call these, so the two cannot
// drift apart. Both files are compiled without floating-point contraction
// (src/CMakeLists.txt), and so must any other that includes this.
#ifndef FEEDLINE_SRC_IMAGE_COLOR_OPS_PIXEL_H_
#define FEEDLINE_SRC_IMAGE_COLOR_OPS_PIXEL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace feedline::image::detail {

// torchvision's _blend on uint8: (ratio * a + (1 - ratio) * b) in float32,
// clamped to [0, 255], truncated.
// Sharpness's rounded mean of a 3x3 window sum s (<= 13 * 255):
// round(s / 13) = (2 s + 13) / 26 (never a tie: 13 is odd), as a multiply
// and a shift, exact for every such s (tests/image/color_ops_test.cc checks
// each), for SIMD kernels without an integer division.
inline constexpr uint32_t kThirteenthMul = 10083, kThirteenthShift = 18;
inline constexpr uint32_t RoundedThirteenth(uint32_t s) {
  return ((2 * s + 13) * kThirteenthMul) >> kThirteenthShift;
}

inline uint8_t Blend(float ratio, float one_minus, float a, float b) {
  const float v = ratio * a + one_minus * b;
  return static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f));
}

// rgb_to_grayscale on uint8: 0.2989 r + 0.587 g + 0.114 b in float32 (in
// that order), truncated.
inline uint8_t Gray(uint8_t r, uint8_t g, uint8_t b) {
  const float a = 0.2989f * static_cast<float>(r);
  const float c = 0.587f * static_cast<float>(g);
  const float d = 0.114f * static_cast<float>(b);
  return static_cast<uint8_t>(std::clamp((a + c) + d, 0.0f, 255.0f));
}

// adjust_hue on one pixel: torchvision's _rgb2hsv, the shift modulo 1, and
// _hsv2rgb, all in float32, then * 255.999 truncated (v2's conversion).
inline void HuePixel(float shift, uint8_t* r8, uint8_t* g8, uint8_t* b8) {
  const float r = static_cast<float>(*r8) / 255.0f, g = static_cast<float>(*g8) / 255.0f,
              b = static_cast<float>(*b8) / 255.0f;
  const float maxc = std::max({r, g, b}), minc = std::min({r, g, b});
  const bool eqc = maxc == minc;
  const float cr = maxc - minc;
  const float s = cr / (eqc ? 1.0f : maxc);
  const float crd = eqc ? 1.0f : cr;
  const float rc = (maxc - r) / crd, gc = (maxc - g) / crd, bc = (maxc - b) / crd;
  const float hr = maxc == r ? bc - gc : 0.0f;
  const float hg = (maxc == g && maxc != r) ? (2.0f + rc) - bc : 0.0f;
  const float hb = (maxc != g && maxc != r) ? (4.0f + gc) - rc : 0.0f;
  float h = std::fmod((hr + hg + hb) / 6.0f + 1.0f, 1.0f);
  // torch.remainder(h + shift, 1.0): fmod, moved to the divisor's sign.
  h = std::fmod(h + shift, 1.0f);
  if (h < 0) h += 1.0f;
  const float v = maxc;
  const float i_f = std::floor(h * 6.0f);
  const float f = h * 6.0f - i_f;
  int i = static_cast<int>(i_f) % 6;
  if (i < 0) i += 6;
  const float p = std::clamp(v * (1.0f - s), 0.0f, 1.0f);
  const float q = std::clamp(v * (1.0f - s * f), 0.0f, 1.0f);
  const float t = std::clamp(v * (1.0f - s * (1.0f - f)), 0.0f, 1.0f);
  float ro, go, bo;
  switch (i) {
    case 0: ro = v, go = t, bo = p; break;
    case 1: ro = q, go = v, bo = p; break;
    case 2: ro = p, go = v, bo = t; break;
    case 3: ro = p, go = q, bo = v; break;
    case 4: ro = t, go = p, bo = v; break;
    default: ro = v, go = p, bo = q; break;
  }
  // Back to uint8 as torchvision v2 converts (to_dtype(scale=True), and
  // convert_image_dtype since 0.15): * (255 + 1 - 1e-3), truncated. 0.14's
  // tensor path multiplied by 255 (one level lower on some pixels).
  constexpr float kToUint8 = 255.999f;
  *r8 = static_cast<uint8_t>(ro * kToUint8);
  *g8 = static_cast<uint8_t>(go * kToUint8);
  *b8 = static_cast<uint8_t>(bo * kToUint8);
}

}  // namespace feedline::image::detail

#endif  // FEEDLINE_SRC_IMAGE_COLOR_OPS_PIXEL_H_
