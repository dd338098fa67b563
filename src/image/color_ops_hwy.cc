// The colour ops' wide-SIMD kernels (color_ops_hwy.h) with Highway's dynamic
// dispatch: one vector of float32 lanes of pixels at a time, each value
// widened from 8 bits, blended or weighted in the reference's float32
// operations (no fused multiply-add: this file is compiled with
// -ffp-contract=off, like color_ops.cc), clamped and truncated back. This
// file is compiled once per target: foreach_target.h re-includes it.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/image/color_ops_hwy.cc"
#include "src/image/color_ops_hwy.h"

#include <algorithm>

#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace feedline::image {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using DU8 = hn::Rebind<uint8_t, DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;

// The scalar helpers below are the reference's (color_ops.cc), for the
// tails shorter than a vector.
inline uint8_t BlendOne(float ratio, float one_minus, float a, float b) {
  const float v = ratio * a + one_minus * b;
  return static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f));
}

inline uint8_t GrayOne(uint8_t r, uint8_t g, uint8_t b) {
  const float a = 0.2989f * static_cast<float>(r);
  const float c = 0.587f * static_cast<float>(g);
  const float d = 0.114f * static_cast<float>(b);
  return static_cast<uint8_t>(std::clamp((a + c) + d, 0.0f, 255.0f));
}

HWY_INLINE VI LoadBytes(const uint8_t* p) { return hn::PromoteTo(DI(), hn::LoadU(DU8(), p)); }

HWY_INLINE VF LoadFloats(const uint8_t* p) { return hn::ConvertTo(DF(), LoadBytes(p)); }

// clamp(v, 0, 255) truncated to 8 bits, as static_cast<uint8_t>(clamp(v)).
HWY_INLINE void StoreTruncated(VF v, uint8_t* p) {
  const DF df;
  v = hn::Min(hn::Max(v, hn::Zero(df)), hn::Set(df, 255.0f));
  hn::StoreU(hn::DemoteTo(DU8(), hn::ConvertTo(DI(), v)), DU8(), p);
}

HWY_INLINE VF Blend(VF ratio, VF one_minus, VF a, VF b) {
  return hn::Add(hn::Mul(ratio, a), hn::Mul(one_minus, b));
}

// The truncated grayscale of a vector of pixels, as floats.
HWY_INLINE VF Gray(VF r, VF g, VF b) {
  const DF df;
  const VF a = hn::Mul(hn::Set(df, 0.2989f), r);
  const VF c = hn::Mul(hn::Set(df, 0.587f), g);
  const VF d = hn::Mul(hn::Set(df, 0.114f), b);
  const VF v = hn::Min(hn::Max(hn::Add(hn::Add(a, c), d), hn::Zero(df)), hn::Set(df, 255.0f));
  return hn::ConvertTo(df, hn::ConvertTo(DI(), v));
}

void SaturatePlanes(uint8_t* r, uint8_t* g, uint8_t* b, size_t n, float ratio, float one_minus) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  const VF vr = hn::Set(df, ratio), vo = hn::Set(df, one_minus);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const VF fr = LoadFloats(r + i), fg = LoadFloats(g + i), fb = LoadFloats(b + i);
    const VF gray = Gray(fr, fg, fb);
    StoreTruncated(Blend(vr, vo, fr, gray), r + i);
    StoreTruncated(Blend(vr, vo, fg, gray), g + i);
    StoreTruncated(Blend(vr, vo, fb, gray), b + i);
  }
  for (; i < n; ++i) {
    const auto gray = static_cast<float>(GrayOne(r[i], g[i], b[i]));
    r[i] = BlendOne(ratio, one_minus, r[i], gray);
    g[i] = BlendOne(ratio, one_minus, g[i], gray);
    b[i] = BlendOne(ratio, one_minus, b[i], gray);
  }
}

void GrayscalePlanes(uint8_t* r, uint8_t* g, uint8_t* b, size_t n) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const VF gray = Gray(LoadFloats(r + i), LoadFloats(g + i), LoadFloats(b + i));
    StoreTruncated(gray, r + i);
    StoreTruncated(gray, g + i);
    StoreTruncated(gray, b + i);
  }
  for (; i < n; ++i) r[i] = g[i] = b[i] = GrayOne(r[i], g[i], b[i]);
}

uint64_t GraySum(const uint8_t* r, const uint8_t* g, const uint8_t* b, size_t n) {
  const DF df;
  const DI di;
  const size_t lanes = hn::Lanes(df);
  uint64_t sum = 0;
  size_t i = 0;
  // int32 lanes summed into 64 bits every 2^20 vectors: a lane holds at most
  // 255 * 2^20 < 2^31.
  constexpr size_t kBlock = size_t{1} << 20;
  while (i + lanes <= n) {
    VI acc = hn::Zero(di);
    for (size_t k = 0; k < kBlock && i + lanes <= n; ++k, i += lanes) {
      acc = hn::Add(
          acc, hn::ConvertTo(di, Gray(LoadFloats(r + i), LoadFloats(g + i), LoadFloats(b + i))));
    }
    sum += static_cast<uint64_t>(hn::GetLane(hn::SumOfLanes(di, acc)));
  }
  for (; i < n; ++i) sum += GrayOne(r[i], g[i], b[i]);
  return sum;
}

void SharpenRow(const uint8_t* up, const uint8_t* cur, const uint8_t* down, uint32_t w, float ratio,
                float one_minus, uint8_t* out) {
  const DF df;
  const DI di;
  const size_t lanes = hn::Lanes(df);
  const VF vr = hn::Set(df, ratio), vo = hn::Set(df, one_minus);
  const VI thirteen = hn::Set(di, 13);
  const VF twenty_six = hn::Set(df, 26.0f);
  out[0] = BlendOne(ratio, one_minus, cur[0], cur[0]);
  size_t x = 1;
  for (; x + lanes <= size_t{w} - 1; x += lanes) {
    const VI c = LoadBytes(cur + x);
    VI s = hn::Add(hn::Add(LoadBytes(up + x - 1), LoadBytes(up + x)), LoadBytes(up + x + 1));
    s = hn::Add(s, hn::Add(LoadBytes(cur + x - 1), LoadBytes(cur + x + 1)));
    s = hn::Add(
        s, hn::Add(hn::Add(LoadBytes(down + x - 1), LoadBytes(down + x)), LoadBytes(down + x + 1)));
    s = hn::Add(s, hn::Add(c, hn::ShiftLeft<2>(c)));  // the centre, weight 5
    // round(s / 13) = (2 s + 13) / 26 in integers; s <= 13 * 255, so the
    // float32 quotient is exact enough that its truncation is the same
    // (tests/image/color_ops_test.cc checks every s).
    const VF q = hn::Div(hn::ConvertTo(df, hn::Add(hn::Add(s, s), thirteen)), twenty_six);
    const VF d = hn::ConvertTo(df, hn::ConvertTo(di, q));
    StoreTruncated(Blend(vr, vo, hn::ConvertTo(df, c), d), out + x);
  }
  for (; x + 1 < w; ++x) {
    const uint32_t s = up[x - 1] + up[x] + up[x + 1] + cur[x - 1] + 5u * cur[x] + cur[x + 1] +
                       down[x - 1] + down[x] + down[x + 1];
    const uint32_t d = (2 * s + 13) / 26;  // round(s / 13), in integers
    out[x] = BlendOne(ratio, one_minus, cur[x], static_cast<float>(d));
  }
  out[w - 1] = BlendOne(ratio, one_minus, cur[w - 1], cur[w - 1]);
}

void PlaneToFloat(const uint8_t* p, size_t n, float mul, float add, float* out) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  const VF vm = hn::Set(df, mul), va = hn::Set(df, add);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes)
    hn::StoreU(hn::Add(hn::Mul(LoadFloats(p + i), vm), va), df, out + i);
  for (; i < n; ++i) out[i] = static_cast<float>(p[i]) * mul + add;
}

}  // namespace HWY_NAMESPACE
}  // namespace feedline::image
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace feedline::image {

HWY_EXPORT(SaturatePlanes);
HWY_EXPORT(GrayscalePlanes);
HWY_EXPORT(GraySum);
HWY_EXPORT(SharpenRow);
HWY_EXPORT(PlaneToFloat);

void SaturatePlanes(uint8_t* r, uint8_t* g, uint8_t* b, size_t n, float ratio, float one_minus) {
  HWY_DYNAMIC_DISPATCH(SaturatePlanes)(r, g, b, n, ratio, one_minus);
}

void GrayscalePlanes(uint8_t* r, uint8_t* g, uint8_t* b, size_t n) {
  HWY_DYNAMIC_DISPATCH(GrayscalePlanes)(r, g, b, n);
}

uint64_t GraySum(const uint8_t* r, const uint8_t* g, const uint8_t* b, size_t n) {
  return HWY_DYNAMIC_DISPATCH(GraySum)(r, g, b, n);
}

void SharpenRow(const uint8_t* up, const uint8_t* cur, const uint8_t* down, uint32_t w, float ratio,
                float one_minus, uint8_t* out) {
  HWY_DYNAMIC_DISPATCH(SharpenRow)(up, cur, down, w, ratio, one_minus, out);
}

void PlaneToFloat(const uint8_t* p, size_t n, float mul, float add, float* out) {
  HWY_DYNAMIC_DISPATCH(PlaneToFloat)(p, n, mul, add, out);
}

}  // namespace feedline::image
#endif  // HWY_ONCE
