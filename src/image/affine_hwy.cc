// The affine warp's wide-SIMD kernel with Highway's dynamic dispatch
// (affine_hwy.h): a vector of output pixels of one row at a time, their
// grid coordinates computed as the scalar reference computes them, the
// source pixels fetched by gathers (one 32-bit gather per channel for
// NEAREST; per channel and row for BILINEAR, whose two columns x0 and
// x0 + 1 are the gathered word's two low bytes). This file is compiled once
// per target: foreach_target.h re-includes it.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/image/affine_hwy.cc"
#include "src/image/affine_hwy.h"

#include <algorithm>
#include <cstring>

#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "src/core/check.h"

HWY_BEFORE_NAMESPACE();
namespace feedline::image {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using DU8 = hn::Rebind<uint8_t, DI>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;

size_t WarpLanes() { return hn::Lanes(DF()); }

// clamp(nearbyint(v), 0, 255): v2's conversion of the float result.
HWY_INLINE VI ToByte(VF v) {
  const DI di;
  return hn::Min(hn::Max(hn::NearestInt(v), hn::Zero(di)), hn::Set(di, 255));
}

void InterleaveRgbx(const uint8_t* planes, size_t n, uint32_t* rgbx) {
  const hn::ScalableTag<uint8_t> d8;
  const size_t lanes = hn::Lanes(d8);
  const uint8_t *r = planes, *g = planes + n, *b = planes + 2 * n;
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreInterleaved4(hn::LoadU(d8, r + i), hn::LoadU(d8, g + i), hn::LoadU(d8, b + i),
                          hn::Zero(d8), d8, reinterpret_cast<uint8_t*>(rgbx + i));
  }
  for (; i < n; ++i) rgbx[i] = uint32_t{r[i]} | uint32_t{g[i]} << 8 | uint32_t{b[i]} << 16;
}

void WarpPlanes(const uint8_t* src, uint32_t w, uint32_t h, const float* col_x, const float* row_y,
                const WarpGrid& g, bool nearest, const float* fill, const uint8_t outside[3],
                const uint32_t* rgbx, uint8_t* dst) {
  const DF df;
  const DI di;
  const DU8 du8;
  const size_t lanes = hn::Lanes(df);
  const size_t n = size_t{w} * h;
  // Gathers read 32-bit words at byte offsets from here (4 bytes before the
  // first plane: a BILINEAR pair at column -1 starts one byte early).
  // The planes are read unless NEAREST reads the RGBX copy.
  FEEDLINE_CHECK(src != nullptr || (nearest && rgbx != nullptr));
  const auto* base = src != nullptr ? reinterpret_cast<const int32_t*>(src - 4) : nullptr;
  const VF a0 = hn::Set(df, g.a0), b0 = hn::Set(df, g.b0);
  const VF hw = hn::Set(df, g.hw), hh = hn::Set(df, g.hh);
  const VF one = hn::Set(df, 1.0f), half = hn::Set(df, 0.5f), far = hn::Set(df, 1e9f);
  const VI iw = hn::Set(di, static_cast<int32_t>(w)), ih = hn::Set(di, static_cast<int32_t>(h));
  // x >= 0 as x > -1 (Highway 1.0 has no integer Ge).
  const VI zero = hn::Zero(di), minus1 = hn::Set(di, -1), byte = hn::Set(di, 0xFF);
  const VI wi = hn::Set(di, static_cast<int32_t>(w));
  VI out_value[3], plane_at[3];
  VF fill_v[3];
  for (int c = 0; c < 3; ++c) {
    out_value[c] = hn::Set(di, outside[c]);
    plane_at[c] = hn::Set(di, static_cast<int32_t>(4 + c * n));
    fill_v[c] = hn::Set(df, fill != nullptr ? fill[c] : 0.0f);
  }
  HWY_ALIGN uint8_t tail[3][64];
  for (uint32_t i = 0; i < h; ++i) {
    // The reference's x * a0 + y * a1 + a2, left to right.
    const VF ya1 = hn::Set(df, row_y[i] * g.a1), yb1 = hn::Set(df, row_y[i] * g.b1);
    const VF a2 = hn::Set(df, g.a2), b2 = hn::Set(df, g.b2);
    for (uint32_t j = 0; j < w; j += static_cast<uint32_t>(lanes)) {
      const VF x = hn::LoadU(df, col_x + j);
      const VF gx = hn::Add(hn::Add(hn::Mul(x, a0), ya1), a2);
      const VF gy = hn::Add(hn::Add(hn::Mul(x, b0), yb1), b2);
      VF ix = hn::Sub(hn::Mul(hn::Add(gx, one), hw), half);
      VF iy = hn::Sub(hn::Mul(hn::Add(gy, one), hh), half);
      // Far outside or not a number: the outside value, and no conversion
      // of the coordinate (zeroed in those lanes).
      const auto valid = hn::And(hn::Lt(hn::Abs(ix), far), hn::Lt(hn::Abs(iy), far));
      ix = hn::IfThenElseZero(valid, ix);
      iy = hn::IfThenElseZero(valid, iy);
      const auto valid_i = hn::RebindMask(di, valid);
      VI v[3];
      if (nearest) {
        const VI xn = hn::NearestInt(ix), yn = hn::NearestInt(iy);
        const auto in = hn::And(valid_i, hn::And(hn::And(hn::Gt(xn, minus1), hn::Lt(xn, iw)),
                                                 hn::And(hn::Gt(yn, minus1), hn::Lt(yn, ih))));
        const VI at = hn::IfThenElseZero(in, hn::Add(hn::Mul(yn, wi), xn));
        if (rgbx != nullptr) {
          const VI word = hn::GatherIndex(di, reinterpret_cast<const int32_t*>(rgbx), at);
          v[0] = hn::IfThenElse(in, hn::And(word, byte), out_value[0]);
          v[1] = hn::IfThenElse(in, hn::And(hn::ShiftRight<8>(word), byte), out_value[1]);
          v[2] = hn::IfThenElse(in, hn::ShiftRight<16>(word), out_value[2]);  // byte 3 is 0
        } else {
          for (int c = 0; c < 3; ++c) {
            const VI word = hn::GatherOffset(di, base, hn::Add(plane_at[c], at));
            v[c] = hn::IfThenElse(in, hn::And(word, byte), out_value[c]);
          }
        }
      } else {
        const VF fx = hn::Floor(ix), fy = hn::Floor(iy);
        const VF wx1 = hn::Sub(ix, fx), wx0 = hn::Sub(hn::Add(fx, one), ix);
        const VF wy1 = hn::Sub(iy, fy), wy0 = hn::Sub(hn::Add(fy, one), iy);
        const VF wt[4] = {hn::Mul(wx0, wy0), hn::Mul(wx1, wy0), hn::Mul(wx0, wy1),
                          hn::Mul(wx1, wy1)};  // nw, ne, sw, se
        const VI x0 = hn::ConvertTo(di, fx), y0 = hn::ConvertTo(di, fy);
        const VI x1 = hn::Add(x0, hn::Set(di, 1)), y1 = hn::Add(y0, hn::Set(di, 1));
        const auto in_x0 = hn::And(hn::Gt(x0, minus1), hn::Lt(x0, iw));
        const auto in_x1 = hn::And(hn::Gt(x1, minus1), hn::Lt(x1, iw));
        const auto in_y0 = hn::And(valid_i, hn::And(hn::Gt(y0, minus1), hn::Lt(y0, ih)));
        const auto in_y1 = hn::And(valid_i, hn::And(hn::Gt(y1, minus1), hn::Lt(y1, ih)));
        const hn::Mask<DI> in[4] = {hn::And(in_x0, in_y0), hn::And(in_x1, in_y0),
                                    hn::And(in_x0, in_y1), hn::And(in_x1, in_y1)};
        // Addresses stay inside the planes' padding: the pair's column in
        // [-1, w - 1], its rows in [0, h - 1] (masked corners read anything).
        const VI xa = hn::Min(hn::Max(x0, minus1), hn::Sub(iw, hn::Set(di, 1)));
        const VI ra = hn::Min(hn::Max(y0, zero), hn::Sub(ih, hn::Set(di, 1)));
        const VI rb = hn::Min(hn::Max(y1, zero), hn::Sub(ih, hn::Set(di, 1)));
        const VI at0 = hn::Add(hn::Mul(ra, wi), xa), at1 = hn::Add(hn::Mul(rb, wi), xa);
        VF mask = hn::Zero(df);
        for (int k = 0; k < 4; ++k) {
          mask = hn::Add(mask, hn::IfThenElseZero(hn::RebindMask(df, in[k]), wt[k]));
        }
        for (int c = 0; c < 3; ++c) {
          const VI top = hn::GatherOffset(di, base, hn::Add(plane_at[c], at0));
          const VI bottom = hn::GatherOffset(di, base, hn::Add(plane_at[c], at1));
          const VI corner[4] = {hn::And(top, byte), hn::And(hn::ShiftRight<8>(top), byte),
                                hn::And(bottom, byte), hn::And(hn::ShiftRight<8>(bottom), byte)};
          VF acc = hn::Zero(df);
          for (int k = 0; k < 4; ++k) {
            const VF term = hn::Mul(hn::ConvertTo(df, corner[k]), wt[k]);
            acc = hn::Add(acc, hn::IfThenElseZero(hn::RebindMask(df, in[k]), term));
          }
          if (fill != nullptr) acc = hn::Add(hn::Mul(hn::Sub(acc, fill_v[c]), mask), fill_v[c]);
          v[c] = hn::IfThenElse(valid_i, ToByte(acc), out_value[c]);
        }
      }
      const size_t valid_lanes = std::min<size_t>(lanes, w - j);
      for (int c = 0; c < 3; ++c) {
        uint8_t* out = dst + c * n + size_t{i} * w + j;
        const auto bytes = hn::DemoteTo(du8, v[c]);
        if (valid_lanes == lanes) {
          hn::StoreU(bytes, du8, out);
        } else {
          hn::Store(bytes, du8, tail[c]);
          std::memcpy(out, tail[c], valid_lanes);
        }
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace feedline::image
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace feedline::image {

HWY_EXPORT(WarpLanes);
HWY_EXPORT(WarpPlanes);
HWY_EXPORT(InterleaveRgbx);

size_t WarpLanes() { return HWY_DYNAMIC_DISPATCH(WarpLanes)(); }

void WarpPlanes(const uint8_t* src, uint32_t w, uint32_t h, const float* col_x, const float* row_y,
                const WarpGrid& g, bool nearest, const float* fill, const uint8_t outside[3],
                const uint32_t* rgbx, uint8_t* dst) {
  HWY_DYNAMIC_DISPATCH(WarpPlanes)(src, w, h, col_x, row_y, g, nearest, fill, outside, rgbx, dst);
}

void InterleaveRgbx(const uint8_t* planes, size_t n, uint32_t* rgbx) {
  HWY_DYNAMIC_DISPATCH(InterleaveRgbx)(planes, n, rgbx);
}

}  // namespace feedline::image
#endif  // HWY_ONCE
