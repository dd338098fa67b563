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
#include <cmath>

#include "hwy/cache_control.h"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "src/image/color_ops_pixel.h"

HWY_BEFORE_NAMESPACE();
namespace feedline::image {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using DU8 = hn::Rebind<uint8_t, DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;

// The tails shorter than a vector: the reference's own per-pixel code.
using detail::Blend;
using detail::Gray;
using detail::HuePixel;

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
    const auto gray = static_cast<float>(Gray(r[i], g[i], b[i]));
    r[i] = Blend(ratio, one_minus, r[i], gray);
    g[i] = Blend(ratio, one_minus, g[i], gray);
    b[i] = Blend(ratio, one_minus, b[i], gray);
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
  for (; i < n; ++i) r[i] = g[i] = b[i] = Gray(r[i], g[i], b[i]);
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
  for (; i < n; ++i) sum += Gray(r[i], g[i], b[i]);
  return sum;
}

void SharpenRow(const uint8_t* up, const uint8_t* cur, const uint8_t* down, uint32_t w, float ratio,
                float one_minus, uint8_t* out) {
  const DF df;
  const DI di;
  const size_t lanes = hn::Lanes(df);
  const VF vr = hn::Set(df, ratio), vo = hn::Set(df, one_minus);
  const VI thirteen = hn::Set(di, 13);
  out[0] = Blend(ratio, one_minus, cur[0], cur[0]);
  size_t x = 1;
  for (; x + lanes <= size_t{w} - 1; x += lanes) {
    const VI c = LoadBytes(cur + x);
    VI s = hn::Add(hn::Add(LoadBytes(up + x - 1), LoadBytes(up + x)), LoadBytes(up + x + 1));
    s = hn::Add(s, hn::Add(LoadBytes(cur + x - 1), LoadBytes(cur + x + 1)));
    s = hn::Add(
        s, hn::Add(hn::Add(LoadBytes(down + x - 1), LoadBytes(down + x)), LoadBytes(down + x + 1)));
    s = hn::Add(s, hn::Add(c, hn::ShiftLeft<2>(c)));  // the centre, weight 5
    // round(s / 13) by RoundedThirteenth's multiply and shift (no division).
    const VI q = hn::ShiftRight<detail::kThirteenthShift>(
        hn::Mul(hn::Add(hn::Add(s, s), thirteen),
                hn::Set(di, static_cast<int32_t>(detail::kThirteenthMul))));
    const VF d = hn::ConvertTo(df, q);
    StoreTruncated(Blend(vr, vo, hn::ConvertTo(df, c), d), out + x);
  }
  for (; x + 1 < w; ++x) {
    const uint32_t s = up[x - 1] + up[x] + up[x + 1] + cur[x - 1] + 5u * cur[x] + cur[x + 1] +
                       down[x - 1] + down[x] + down[x + 1];
    const uint32_t d = detail::RoundedThirteenth(s);
    out[x] = Blend(ratio, one_minus, cur[x], static_cast<float>(d));
  }
  out[w - 1] = Blend(ratio, one_minus, cur[w - 1], cur[w - 1]);
}

// x * 255.999 truncated to 8 bits (x in [0, 1]).
HWY_INLINE void StoreUnit(VF x, uint8_t* p) {
  const DF df;
  hn::StoreU(hn::DemoteTo(DU8(), hn::ConvertTo(DI(), hn::Mul(x, hn::Set(df, 255.999f)))), DU8(), p);
}

void HuePlanes(uint8_t* r8, uint8_t* g8, uint8_t* b8, size_t n, float shift) {
  const DF df;
  const DI di;
  const size_t lanes = hn::Lanes(df);
  const VF zero = hn::Zero(df), one = hn::Set(df, 1.0f), two = hn::Set(df, 2.0f);
  const VF four = hn::Set(df, 4.0f), six = hn::Set(df, 6.0f), k255 = hn::Set(df, 255.0f);
  const VF vshift = hn::Set(df, shift);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const VF r = hn::Div(LoadFloats(r8 + i), k255), g = hn::Div(LoadFloats(g8 + i), k255),
             b = hn::Div(LoadFloats(b8 + i), k255);
    const VF maxc = hn::Max(hn::Max(r, g), b), minc = hn::Min(hn::Min(r, g), b);
    const auto eqc = hn::Eq(maxc, minc);
    const VF cr = hn::Sub(maxc, minc);
    const VF s = hn::Div(cr, hn::IfThenElse(eqc, one, maxc));
    const VF crd = hn::IfThenElse(eqc, one, cr);
    const VF rc = hn::Div(hn::Sub(maxc, r), crd), gc = hn::Div(hn::Sub(maxc, g), crd),
             bc = hn::Div(hn::Sub(maxc, b), crd);
    const auto is_r = hn::Eq(maxc, r), is_g = hn::Eq(maxc, g);
    const VF hr = hn::IfThenElseZero(is_r, hn::Sub(bc, gc));
    const VF hg = hn::IfThenElseZero(hn::AndNot(is_r, is_g), hn::Sub(hn::Add(two, rc), bc));
    const VF hb = hn::IfThenZeroElse(hn::Or(is_r, is_g), hn::Sub(hn::Add(four, gc), rc));
    // fmod(x, 1) is x - trunc(x), exactly, for |x| < 2^23; the first x is
    // positive (floor = trunc).
    VF h = hn::Add(hn::Div(hn::Add(hn::Add(hr, hg), hb), six), one);
    h = hn::Sub(h, hn::Trunc(h));
    h = hn::Add(h, vshift);
    h = hn::Sub(h, hn::Trunc(h));
    h = hn::IfThenElse(hn::Lt(h, zero), hn::Add(h, one), h);
    const VF v = maxc;
    const VF h6 = hn::Mul(h, six);
    const VF i_f = hn::Floor(h6);
    const VF f = hn::Sub(h6, i_f);
    VI sector = hn::ConvertTo(di, i_f);  // 0..6 (h may round up to 1)
    sector = hn::IfThenZeroElse(hn::Eq(sector, hn::Set(di, 6)), sector);
    const VF p = hn::Min(hn::Max(hn::Mul(v, hn::Sub(one, s)), zero), one);
    const VF q = hn::Min(hn::Max(hn::Mul(v, hn::Sub(one, hn::Mul(s, f))), zero), one);
    const VF t = hn::Min(hn::Max(hn::Mul(v, hn::Sub(one, hn::Mul(s, hn::Sub(one, f)))), zero), one);
    const auto s0 = hn::RebindMask(df, hn::Eq(sector, hn::Zero(di)));
    const auto s1 = hn::RebindMask(df, hn::Eq(sector, hn::Set(di, 1)));
    const auto s2 = hn::RebindMask(df, hn::Eq(sector, hn::Set(di, 2)));
    const auto s3 = hn::RebindMask(df, hn::Eq(sector, hn::Set(di, 3)));
    const auto s4 = hn::RebindMask(df, hn::Eq(sector, hn::Set(di, 4)));
    // Sector:      0  1  2  3  4  5
    //   red:       v  q  p  p  t  v
    //   green:     t  v  v  q  p  p
    //   blue:      p  p  t  v  v  q
    const VF ro =
        hn::IfThenElse(s1, q, hn::IfThenElse(hn::Or(s2, s3), p, hn::IfThenElse(s4, t, v)));
    const VF go =
        hn::IfThenElse(s0, t, hn::IfThenElse(hn::Or(s1, s2), v, hn::IfThenElse(s3, q, p)));
    const VF bo = hn::IfThenElse(hn::Or(s0, s1), p,
                                 hn::IfThenElse(s2, t, hn::IfThenElse(hn::Or(s3, s4), v, q)));
    StoreUnit(ro, r8 + i);
    StoreUnit(go, g8 + i);
    StoreUnit(bo, b8 + i);
  }
  for (; i < n; ++i) HuePixel(shift, r8 + i, g8 + i, b8 + i);
}

void WidenRow(const uint8_t* src, uint32_t w, float* out) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  size_t x = 0;
  for (; x + lanes <= w; x += lanes) hn::StoreU(LoadFloats(src + x), df, out + x);
  for (; x < w; ++x) out[x] = static_cast<float>(src[x]);
}

// The sum over t < taps of k[t] * row(t)[x + lane], from t = 0: the
// reference's order; and the same for one x.
template <class RowOf>
HWY_INLINE VF SumTaps(const float* k, uint32_t taps, size_t x, RowOf row) {
  const DF df;
  VF acc = hn::Zero(df);
  for (uint32_t t = 0; t < taps; ++t) {
    acc = hn::Add(acc, hn::Mul(hn::Set(df, k[t]), hn::LoadU(df, row(t) + x)));
  }
  return acc;
}

template <class RowOf>
HWY_INLINE float SumTapsOne(const float* k, uint32_t taps, size_t x, RowOf row) {
  float acc = 0.0f;
  for (uint32_t t = 0; t < taps; ++t) acc += k[t] * row(t)[x];
  return acc;
}

void BlurRow(const float* in, const float* k, uint32_t taps, uint32_t w, float* out) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  const auto row = [in](uint32_t t) { return in + t; };
  size_t x = 0;
  for (; x + lanes <= w; x += lanes) hn::StoreU(SumTaps(k, taps, x, row), df, out + x);
  for (; x < w; ++x) out[x] = SumTapsOne(k, taps, x, row);
}

void BlurColumns(const float* const* rows, const float* k, uint32_t taps, uint32_t w,
                 uint8_t* out) {
  const DF df;
  const DI di;
  const size_t lanes = hn::Lanes(df);
  const auto row = [rows](uint32_t t) { return rows[t]; };
  size_t x = 0;
  for (; x + lanes <= w; x += lanes) {
    const VI v = hn::NearestInt(SumTaps(k, taps, x, row));
    hn::StoreU(hn::DemoteTo(DU8(), hn::Min(hn::Max(v, hn::Zero(di)), hn::Set(di, 255))), DU8(),
               out + x);
  }
  for (; x < w; ++x) {
    const float acc = SumTapsOne(k, taps, x, row);
    out[x] = static_cast<uint8_t>(std::clamp(std::nearbyint(acc), 0.0f, 255.0f));
  }
}

void PlaneThroughByteTable(uint8_t* p, size_t n, const uint8_t* table) {
#if HWY_TARGET == HWY_SCALAR
  // One-lane vectors hold no 16-byte table.
  for (size_t i = 0; i < n; ++i) p[i] = table[p[i]];
#else
  const hn::ScalableTag<uint8_t> d8;
  const size_t lanes = hn::Lanes(d8);
  // The 256 entries as 16 tables of 16 bytes, each broadcast to every
  // 128-bit block: a value v takes entry v & 15 of table v >> 4. Lanes whose
  // index has its top bit set read 0 (TableLookupBytesOr0), so each value
  // is looked up in its own table and the 16 results are ORed.
  decltype(hn::Zero(d8)) tables[16];
  for (size_t k = 0; k < 16; ++k) tables[k] = hn::LoadDup128(d8, table + 16 * k);
  const auto fifteen = hn::Set(d8, 15), top = hn::Set(d8, 0x80);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::LoadU(d8, p + i);
    auto out = hn::Zero(d8);
    for (size_t k = 0; k < 16; ++k) {
      const auto d = hn::Sub(v, hn::Set(d8, static_cast<uint8_t>(16 * k)));  // wraps below 16 k
      const auto index = hn::IfThenElse(hn::Gt(d, fifteen), top, d);
      out = hn::Or(out, hn::TableLookupBytesOr0(tables[k], index));
    }
    hn::StoreU(out, d8, p + i);
  }
  for (; i < n; ++i) p[i] = table[p[i]];
#endif
}

void PlaneMinMax(const uint8_t* p, size_t n, uint8_t* lo, uint8_t* hi) {
  const hn::ScalableTag<uint8_t> d8;
  const size_t lanes = hn::Lanes(d8);
  auto vlo = hn::Set(d8, 255), vhi = hn::Zero(d8);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::LoadU(d8, p + i);
    vlo = hn::Min(vlo, v);
    vhi = hn::Max(vhi, v);
  }
  HWY_ALIGN uint8_t l[hn::MaxLanes(d8)], h[hn::MaxLanes(d8)];
  hn::Store(vlo, d8, l);
  hn::Store(vhi, d8, h);
  uint8_t a = 255, b = 0;
  for (size_t k = 0; k < lanes; ++k) a = std::min(a, l[k]), b = std::max(b, h[k]);
  for (; i < n; ++i) a = std::min(a, p[i]), b = std::max(b, p[i]);
  *lo = a;
  *hi = b;
}

// Writes the vectors make(i) to out[i..] for every whole vector of n, with
// streaming stores where out is vector-aligned (a batch slot: a batch is far
// larger than the caches, so reading its lines in before overwriting them
// is wasted bandwidth, as in the resampler's output), then fences them.
// Returns the index of the first element left to the caller.
template <class Make>
HWY_INLINE size_t StreamPlane(size_t n, float* out, const Make& make) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  if (reinterpret_cast<uintptr_t>(out) % (lanes * sizeof(float)) == 0) {
    for (; i + lanes <= n; i += lanes) hn::Stream(make(i), df, out + i);
    hwy::FlushStream();
  } else {
    for (; i + lanes <= n; i += lanes) hn::StoreU(make(i), df, out + i);
  }
  return i;
}

void PlaneToFloat(const uint8_t* p, size_t n, float mul, float add, float* out) {
  const DF df;
  const VF vm = hn::Set(df, mul), va = hn::Set(df, add);
  size_t i =
      StreamPlane(n, out, [&](size_t at) { return hn::Add(hn::Mul(LoadFloats(p + at), vm), va); });
  for (; i < n; ++i) out[i] = static_cast<float>(p[i]) * mul + add;
}

void PlaneThroughTable(const uint8_t* p, size_t n, const float* table, float* out) {
  const DF df;
  size_t i =
      StreamPlane(n, out, [&](size_t at) { return hn::GatherIndex(df, table, LoadBytes(p + at)); });
  for (; i < n; ++i) out[i] = table[p[i]];
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
HWY_EXPORT(HuePlanes);
HWY_EXPORT(WidenRow);
HWY_EXPORT(BlurRow);
HWY_EXPORT(BlurColumns);
HWY_EXPORT(PlaneToFloat);
HWY_EXPORT(PlaneThroughTable);
HWY_EXPORT(PlaneMinMax);
HWY_EXPORT(PlaneThroughByteTable);

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

void HuePlanes(uint8_t* r, uint8_t* g, uint8_t* b, size_t n, float shift) {
  HWY_DYNAMIC_DISPATCH(HuePlanes)(r, g, b, n, shift);
}

void WidenRow(const uint8_t* src, uint32_t w, float* out) {
  HWY_DYNAMIC_DISPATCH(WidenRow)(src, w, out);
}

void BlurRow(const float* in, const float* k, uint32_t taps, uint32_t w, float* out) {
  HWY_DYNAMIC_DISPATCH(BlurRow)(in, k, taps, w, out);
}

void BlurColumns(const float* const* rows, const float* k, uint32_t taps, uint32_t w,
                 uint8_t* out) {
  HWY_DYNAMIC_DISPATCH(BlurColumns)(rows, k, taps, w, out);
}

void PlaneThroughByteTable(uint8_t* p, size_t n, const uint8_t* table) {
  HWY_DYNAMIC_DISPATCH(PlaneThroughByteTable)(p, n, table);
}

void PlaneMinMax(const uint8_t* p, size_t n, uint8_t* lo, uint8_t* hi) {
  HWY_DYNAMIC_DISPATCH(PlaneMinMax)(p, n, lo, hi);
}

void PlaneThroughTable(const uint8_t* p, size_t n, const float* table, float* out) {
  HWY_DYNAMIC_DISPATCH(PlaneThroughTable)(p, n, table, out);
}

void PlaneToFloat(const uint8_t* p, size_t n, float mul, float add, float* out) {
  HWY_DYNAMIC_DISPATCH(PlaneToFloat)(p, n, mul, add, out);
}

}  // namespace feedline::image
#endif  // HWY_ONCE
