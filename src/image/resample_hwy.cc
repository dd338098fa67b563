// Wide-SIMD resampler kernels with Highway's dynamic dispatch
// (resample_hwy.h). This file is compiled once per target: foreach_target.h
// re-includes it with HWY_NAMESPACE set to each instruction set.
// AVX3_DL too (Ice Lake and later): its VNNI multiply-accumulate is one
// instruction where AVX3 needs a madd and an add.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/image/resample_hwy.cc"
#include "src/image/resample_hwy.h"

#include <algorithm>
#include <cstring>

#include "hwy/cache_control.h"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace feedline::image {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D32 = hn::ScalableTag<int32_t>;
using DF = hn::Rebind<float, D32>;
using DU8 = hn::Rebind<uint8_t, D32>;
using DU16 = hn::Rebind<uint16_t, D32>;
using DU32 = hn::Rebind<uint32_t, D32>;
using D16 = hn::Repartition<int16_t, D32>;
using V32 = hn::Vec<D32>;

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_SSE4
// acc + the sums of adjacent int16 products of a and b (pmaddwd, then add):
// on AVX3_DL one VNNI instruction (vpdpwssd; Highway 1.0 compiles that
// target without avx512vnni, hence the asm).
HWY_INLINE V32 DotAccumulate(hn::Vec<hn::Repartition<int16_t, D32>> a,
                             hn::Vec<hn::Repartition<int16_t, D32>> b, V32 acc) {
#if HWY_TARGET == HWY_AVX3_DL
  __m512i r = acc.raw;
  asm("vpdpwssd %2, %1, %0" : "+v"(r) : "v"(a.raw), "v"(b.raw));
  return V32{r};
#else
  V32 unused = hn::Zero(D32());  // x86 madd needs no second accumulator
  return hn::ReorderWidenMulAccumulate(D32(), a, b, acc, unused);
#endif
}
#endif

// One vector of output pixels x.. of a channel: the vertical sum of `count`
// rows, rounded and shifted (int32 lanes; not yet clamped to 0..255: the
// uint8 output's DemoteTo saturates, the float outputs clamp).
HWY_INLINE V32 VerticalSum(const uint8_t* base, uint32_t ow, int32_t count,
                           const int32_t* pair_weights, uint32_t pair_count) {
  const D32 d32;
  const DU8 du8;
  V32 sum0 = hn::Set(d32, 1 << 13), sum1 = hn::Zero(d32);
  for (uint32_t j = 0; j < pair_count; ++j) {
    const int32_t ka = static_cast<int32_t>(2 * j), kb = ka + 1;
    if (ka >= count) break;
    const uint8_t* ra = base + static_cast<size_t>(ka) * ow;
    const uint8_t* rb = kb < count ? ra + ow : ra;  // a missing second tap has weight 0
    // Each int32 lane holds the pair (row a, row b) of one pixel as two
    // int16: the lanes stay in pixel order on every target.
    const V32 a = hn::PromoteTo(d32, hn::LoadU(du8, ra));
    const V32 b = hn::PromoteTo(d32, hn::LoadU(du8, rb));
#if HWY_TARGET == HWY_SCALAR
    // One lane: no int16 pairs to multiply-add; the same sums in int32.
    const int32_t w = pair_weights[j];
    const auto wa = hn::Set(d32, static_cast<int16_t>(w & 0xFFFF)), wb = hn::Set(d32, w >> 16);
    sum0 = hn::Add(sum0, hn::Add(hn::Mul(a, wa), hn::Mul(b, wb)));
#else
    const D16 d16;
    const auto ab = hn::BitCast(d16, hn::Or(a, hn::ShiftLeft<16>(b)));
    const auto w = hn::BitCast(d16, hn::Set(d32, pair_weights[j]));
    sum0 = hn::ReorderWidenMulAccumulate(d32, ab, w, sum0, sum1);
#endif
  }
#if HWY_TARGET == HWY_SCALAR
  const V32 v = hn::ShiftRight<14>(hn::Add(sum0, sum1));
#else
  const V32 v = hn::ShiftRight<14>(hn::RearrangeToOddPlusEven(sum0, sum1));
#endif
  return v;  // the demotions to 8 bits saturate: no clamp here
}

// bfloat16 bits of f, round to nearest even (NaN stays NaN).
HWY_INLINE hn::Vec<DU16> ToBFloat16(hn::Vec<DF> f) {
  const DU32 du32;
  const DU16 du16;
  const auto bits = hn::BitCast(du32, f);
  const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du32, 1));
  const auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(bits, hn::Set(du32, 0x7FFF)), lsb));
  const auto nan =
      hn::Gt(hn::BitCast(hn::Rebind<int32_t, DU32>(), hn::And(bits, hn::Set(du32, 0x7FFFFFFFu))),
             hn::Set(hn::Rebind<int32_t, DU32>(), 0x7F800000));
  const auto quiet = hn::Or(hn::ShiftRight<16>(bits), hn::Set(du32, 0x40));
  const auto r = hn::IfThenElse(hn::RebindMask(du32, nan), quiet, rounded);
  return hn::DemoteTo(du16, hn::BitCast(hn::Rebind<int32_t, DU32>(), r));
}

// IEEE half bits of f, round to nearest even, by integer arithmetic (the
// same on every target; values here are finite).
HWY_INLINE hn::Vec<DU16> ToHalf(hn::Vec<DF> f) {
  const D32 d32;
  const DU16 du16;
  const V32 x = hn::BitCast(d32, f);
  const V32 sign = hn::And(hn::ShiftRight<16>(x), hn::Set(d32, 0x8000));
  const V32 abs = hn::And(x, hn::Set(d32, 0x7FFFFFFF));
  // Normal halves: rebias the exponent, round the 13 dropped bits.
  const V32 h = hn::ShiftRight<13>(hn::Sub(abs, hn::Set(d32, 0x38000000)));
  const V32 rem = hn::And(abs, hn::Set(d32, 0x1FFF));
  const auto up = hn::Or(hn::Gt(rem, hn::Set(d32, 0x1000)),
                         hn::And(hn::Eq(rem, hn::Set(d32, 0x1000)),
                                 hn::Eq(hn::And(h, hn::Set(d32, 1)), hn::Set(d32, 1))));
  V32 normal = hn::IfThenElse(up, hn::Add(h, hn::Set(d32, 1)), h);
  // Overflow (and inf/NaN, not produced here) -> inf.
  normal = hn::IfThenElse(hn::Gt(abs, hn::Set(d32, 0x477FEFFF)), hn::Set(d32, 0x7C00), normal);
  // Subnormal halves and zero: abs * 2^24 rounded to nearest even (capped at
  // 4096 first: lanes that are not subnormal must not overflow the int
  // conversion, which is undefined on the emulated targets), done in
  // float (exact: the product needs at most 24 significant bits before the
  // rounding, which the conversion does to even).
  const hn::Vec<DF> af = hn::BitCast(DF(), abs);
  const V32 sub =
      hn::NearestInt(hn::Min(hn::Mul(af, hn::Set(DF(), 16777216.0f)), hn::Set(DF(), 4096.0f)));
  const V32 r = hn::IfThenElse(hn::Lt(abs, hn::Set(d32, 0x38800000)), sub, normal);
  return hn::DemoteTo(du16, hn::Or(sign, r));
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_SSE4
using D8 = hn::Repartition<uint8_t, D32>;

// Per 128-bit block: the 8 int16 of a, then the 8 of b, each saturated to
// 0..255 (x86's packus; Highway 1.0 has no two-input demotion to 8 bits).
HWY_INLINE hn::Vec<D8> PackU8(hn::Vec<D16> a, hn::Vec<D16> b) {
#if HWY_TARGET == HWY_SSE4
  return hn::Vec<D8>{_mm_packus_epi16(a.raw, b.raw)};
#elif HWY_TARGET == HWY_AVX2
  return hn::Vec<D8>{_mm256_packus_epi16(a.raw, b.raw)};
#else
  return hn::Vec<D8>{_mm512_packus_epi16(a.raw, b.raw)};
#endif
}

// x86: the vertical sums of one byte vector of output pixels x.. of a
// channel (4 int32 vectors' worth), rounded, shifted and saturated to
// 0..255, in pixel order. The bytes of rows a and b interleave within each
// 128-bit block, and interleaving those with zero bytes makes the int16
// pairs (a_i, b_i) that one madd weights: accumulator q holds pixels
// 16 L + 4 q .. + 3 of block L. The saturating packs (i32 -> i16 -> u8, also
// per block) then put every pixel back in its place: no permute.
HWY_INLINE hn::Vec<D8> VerticalBytes(const uint8_t* base, uint32_t ow, int32_t count,
                                     const int32_t* pair_weights, uint32_t pair_count) {
  const D32 d32;
  const D16 d16;
  const D8 d8;
  const auto zero = hn::Zero(d8);
  V32 s[4];
  for (auto& v : s) v = hn::Set(d32, 1 << 13);
  for (uint32_t j = 0; j < pair_count; ++j) {
    const int32_t ka = static_cast<int32_t>(2 * j);
    if (ka >= count) break;
    const uint8_t* ra = base + static_cast<size_t>(ka) * ow;
    const uint8_t* rb = ka + 1 < count ? ra + ow : ra;  // a missing second tap has weight 0
    const auto a = hn::LoadU(d8, ra), b = hn::LoadU(d8, rb);
    const auto lo = hn::InterleaveLower(d8, a, b), hi = hn::InterleaveUpper(d8, a, b);
    const auto w = hn::BitCast(d16, hn::Set(d32, pair_weights[j]));
    s[0] = DotAccumulate(hn::BitCast(d16, hn::InterleaveLower(d8, lo, zero)), w, s[0]);
    s[1] = DotAccumulate(hn::BitCast(d16, hn::InterleaveUpper(d8, lo, zero)), w, s[1]);
    s[2] = DotAccumulate(hn::BitCast(d16, hn::InterleaveLower(d8, hi, zero)), w, s[2]);
    s[3] = DotAccumulate(hn::BitCast(d16, hn::InterleaveUpper(d8, hi, zero)), w, s[3]);
  }
  const auto p01 = hn::ReorderDemote2To(d16, hn::ShiftRight<14>(s[0]), hn::ShiftRight<14>(s[1]));
  const auto p23 = hn::ReorderDemote2To(d16, hn::ShiftRight<14>(s[2]), hn::ShiftRight<14>(s[3]));
  return PackU8(p01, p23);
}

// The 128-bit blocks of a byte vector, in order (1 to 4 of them).
HWY_INLINE void Blocks(hn::Vec<D8> v, hn::Vec128<uint8_t>* block) {
#if HWY_TARGET == HWY_SSE4
  block[0] = v;
#elif HWY_TARGET == HWY_AVX2
  const hn::Full128<uint8_t> d128;
  block[0] = hn::LowerHalf(d128, v);
  block[1] = hn::UpperHalf(d128, v);
#else
  const hn::Full128<uint8_t> d128;
  const hn::Half<D8> dh;
  const auto lo = hn::LowerHalf(dh, v), hi = hn::UpperHalf(dh, v);
  block[0] = hn::LowerHalf(d128, lo);
  block[1] = hn::UpperHalf(d128, lo);
  block[2] = hn::LowerHalf(d128, hi);
  block[3] = hn::UpperHalf(d128, hi);
#endif
}

// Quarter q (Lanes(D32) pixels) of a byte vector, widened to int32.
HWY_INLINE V32 Quarter(hn::Vec<D8> bytes, int q) {
  const hn::Half<D8> dh;
  const hn::Half<hn::Half<D8>> dq;
  const auto half = q < 2 ? hn::LowerHalf(dh, bytes) : hn::UpperHalf(dh, bytes);
  const auto quarter = (q & 1) == 0 ? hn::LowerHalf(dq, half) : hn::UpperHalf(dq, half);
  return hn::BitCast(D32(), hn::PromoteTo(DU32(), quarter));
}
#endif  // x86

// The conversion and store of one vector of output pixels x .. x + valid - 1
// of row y, v[c] the rounded sums of channel c (int32; kClamped: already in
// 0..255).
template <bool kClamped>
HWY_INLINE void ConvertStore(const V32* v, uint32_t x, size_t valid, uint32_t ow, uint32_t oh,
                             uint32_t y, const OutputFormat& format, void* out) {
  const D32 d32;
  const DF df;
  const DU8 du8;
  const DU16 du16;
  const size_t n = hn::Lanes(d32);
  const bool chw = format.layout == Layout::kCHW;
  const size_t out_plane = size_t{ow} * oh;
  // Staging for a row's last, partial vector.
  HWY_ALIGN float tail_f[3][64];
  HWY_ALIGN uint16_t tail_u16[3][64];
  HWY_ALIGN uint8_t tail_u8[3][64];
  hn::Vec<DF> f[3];
  if (format.dtype != DType::kUInt8) {
    for (int c = 0; c < 3; ++c) {
      const V32 clamped =
          kClamped ? v[c] : hn::Min(hn::Max(v[c], hn::Zero(d32)), hn::Set(d32, 255));
      f[c] = hn::MulAdd(hn::ConvertTo(df, clamped), hn::Set(df, format.mul[c]),
                        hn::Set(df, format.add[c]));
    }
  }
  switch (format.dtype) {
    case DType::kUInt8: {
      hn::Vec<DU8> b[3];
      for (int c = 0; c < 3; ++c) b[c] = hn::DemoteTo(du8, v[c]);
      uint8_t* o = static_cast<uint8_t*>(out);
      if (chw) {
        for (int c = 0; c < 3; ++c) {
          uint8_t* dst = o + c * out_plane + size_t{y} * ow + x;
          if (valid == n) {
            hn::StoreU(b[c], du8, dst);
          } else {
            hn::Store(b[c], du8, tail_u8[c]);
            std::memcpy(dst, tail_u8[c], valid);
          }
        }
      } else {
        uint8_t* dst = o + (size_t{y} * ow + x) * 3;
        if (valid == n) {
          hn::StoreInterleaved3(b[0], b[1], b[2], du8, dst);
        } else {
          for (int c = 0; c < 3; ++c) hn::Store(b[c], du8, tail_u8[c]);
          for (size_t i = 0; i < valid; ++i) {
            for (int c = 0; c < 3; ++c) dst[i * 3 + c] = tail_u8[c][i];
          }
        }
      }
      break;
    }
    case DType::kFloat32: {
      float* o = static_cast<float*>(out);
      if (chw) {
        for (int c = 0; c < 3; ++c) {
          float* dst = o + c * out_plane + size_t{y} * ow + x;
          if (valid != n) {
            hn::Store(f[c], df, tail_f[c]);
            std::memcpy(dst, tail_f[c], valid * sizeof(float));
          } else if (reinterpret_cast<uintptr_t>(dst) % (n * sizeof(float)) == 0) {
            // Streaming stores: a batch is far larger than the caches, so
            // reading its lines in before overwriting them is wasted
            // bandwidth. Fenced by FlushStreamingStores.
            hn::Stream(f[c], df, dst);
          } else {
            hn::StoreU(f[c], df, dst);
          }
        }
      } else {
        float* dst = o + (size_t{y} * ow + x) * 3;
        if (valid == n) {
          hn::StoreInterleaved3(f[0], f[1], f[2], df, dst);
        } else {
          for (int c = 0; c < 3; ++c) hn::Store(f[c], df, tail_f[c]);
          for (size_t i = 0; i < valid; ++i) {
            for (int c = 0; c < 3; ++c) dst[i * 3 + c] = tail_f[c][i];
          }
        }
      }
      break;
    }
    case DType::kFloat16:
    case DType::kBFloat16: {
      hn::Vec<DU16> h[3];
      for (int c = 0; c < 3; ++c)
        h[c] = format.dtype == DType::kFloat16 ? ToHalf(f[c]) : ToBFloat16(f[c]);
      uint16_t* o = static_cast<uint16_t*>(out);
      if (chw) {
        for (int c = 0; c < 3; ++c) {
          uint16_t* dst = o + c * out_plane + size_t{y} * ow + x;
          if (valid == n) {
            hn::StoreU(h[c], du16, dst);
          } else {
            hn::Store(h[c], du16, tail_u16[c]);
            std::memcpy(dst, tail_u16[c], valid * sizeof(uint16_t));
          }
        }
      } else {
        uint16_t* dst = o + (size_t{y} * ow + x) * 3;
        if (valid == n) {
          hn::StoreInterleaved3(h[0], h[1], h[2], du16, dst);
        } else {
          for (int c = 0; c < 3; ++c) hn::Store(h[c], du16, tail_u16[c]);
          for (size_t i = 0; i < valid; ++i) {
            for (int c = 0; c < 3; ++c) dst[i * 3 + c] = tail_u16[c][i];
          }
        }
      }
      break;
    }
    default: return;  // rejected when the op is made
  }
}

void VerticalConvertRow(const uint8_t* first, size_t plane, uint32_t ow, uint32_t oh, uint32_t y,
                        int32_t count, const int32_t* pair_weights, uint32_t pair_count,
                        const OutputFormat& format, void* out) {
  const size_t n = hn::Lanes(D32());
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_SSE4
  // Four int32 vectors of pixels per step, summed as one byte vector per
  // channel (VerticalBytes).
  const D8 d8;
  const size_t step = hn::Lanes(d8);
  for (uint32_t x = 0; x < ow; x += static_cast<uint32_t>(step)) {
    hn::Vec<D8> bytes[3];
    for (int c = 0; c < 3; ++c)
      bytes[c] = VerticalBytes(first + c * plane + x, ow, count, pair_weights, pair_count);
    const size_t valid = std::min<size_t>(step, ow - x);
    if (format.dtype == DType::kUInt8 && valid == step) {  // the bytes are the output
      auto* o = static_cast<uint8_t*>(out);
      const size_t at = size_t{y} * ow + x;
      if (format.layout == Layout::kCHW) {
        for (int c = 0; c < 3; ++c) hn::StoreU(bytes[c], d8, o + c * size_t{ow} * oh + at);
      } else {
        hn::StoreInterleaved3(bytes[0], bytes[1], bytes[2], d8, o + 3 * at);
      }
      continue;
    }
    for (int q = 0; q < 4 && q * n < valid; ++q) {
      const V32 v[3] = {Quarter(bytes[0], q), Quarter(bytes[1], q), Quarter(bytes[2], q)};
      ConvertStore<true>(v, x + static_cast<uint32_t>(q * n), std::min(n, valid - q * n), ow, oh, y,
                         format, out);
    }
  }
#else
  for (uint32_t x = 0; x < ow; x += static_cast<uint32_t>(n)) {
    V32 v[3];
    for (int c = 0; c < 3; ++c)
      v[c] = VerticalSum(first + c * plane + x, ow, count, pair_weights, pair_count);
    ConvertStore<false>(v, x, std::min<size_t>(n, ow - x), ow, oh, y, format, out);
  }
#endif
}

// Rows of the horizontal pass one call handles: one per 128-bit block of an
// int32 vector (4 with AVX-512, 2 with AVX2, 1 with SSE4 and NEON).
size_t HorizontalRowsPerCall() {
#if HWY_TARGET == HWY_SCALAR
  return 1;
#else
  return hn::Lanes(D32()) / 4;
#endif
}

#if HWY_TARGET != HWY_SCALAR
// The pair vector of source pixels (k, k + 1) of one row: int16 lanes
// (R_k, R_k+1, G_k, G_k+1, B_k, B_k+1, -, -), zero past the row.
HWY_INLINE int32_t PixelBits(const uint8_t* row, size_t cols, size_t k) {
  int32_t v = 0;
  if (k + 1 < cols) {
    std::memcpy(&v, row + 3 * k, 4);  // RGB + the next pixel's R, ignored
  } else if (k < cols) {
    v = row[3 * k] | row[3 * k + 1] << 8 | row[3 * k + 2] << 16;  // last pixel: no over-read
  }
  return v;
}
#endif

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_SSE4
// The 16 bytes at row_of[i] + offset for each row i of a horizontal group,
// row i in 128-bit block i.
HWY_INLINE hn::Vec<D8> LoadRowBlocks(const uint8_t* const* row_of, size_t offset) {
  const hn::Full128<uint8_t> d1;
#if HWY_TARGET == HWY_SSE4
  return hn::LoadU(d1, row_of[0] + offset);
#else
  const hn::Full256<uint8_t> d2;
  const auto low =
      hn::Combine(d2, hn::LoadU(d1, row_of[1] + offset), hn::LoadU(d1, row_of[0] + offset));
#if HWY_TARGET == HWY_AVX2
  return low;
#else
  const auto high =
      hn::Combine(d2, hn::LoadU(d1, row_of[3] + offset), hn::LoadU(d1, row_of[2] + offset));
  return hn::Combine(D8(), high, low);
#endif
#endif
}

#endif  // x86

void HorizontalRows(const uint8_t* row0, size_t stride, size_t rows, size_t cols, const AxisPlan& h,
                    int32_t col_begin, bool flip, void* pair_scratch, uint8_t* r_plane,
                    uint8_t* g_plane, uint8_t* b_plane, size_t plane_stride) {
  const uint32_t ow = h.out_size, pc = h.pair_count;
#if HWY_TARGET == HWY_SCALAR
  (void)pair_scratch;
  // One lane: the same fixed-point sums, pixel by pixel.
  for (size_t i = 0; i < rows; ++i) {
    const uint8_t* row = row0 + i * stride;
    for (uint32_t x = 0; x < ow; ++x) {
      int32_t acc[3] = {1 << 13, 1 << 13, 1 << 13};
      for (uint32_t j = 0; j < pc; ++j) {
        const int32_t w = h.pairs[size_t{x} * pc + j];
        const int32_t w0 = static_cast<int16_t>(w & 0xFFFF), w1 = w >> 16;
        const size_t k = static_cast<size_t>(h.start[x] - col_begin) + 2 * j;
        for (int c = 0; c < 3; ++c) {
          const int32_t p0 = k < cols ? row[3 * k + c] : 0,
                        p1 = k + 1 < cols ? row[3 * k + 3 + c] : 0;
          acc[c] += p0 * w0 + p1 * w1;
        }
      }
      const uint32_t ox = flip ? ow - 1 - x : x;
      uint8_t* planes[3] = {r_plane, g_plane, b_plane};
      for (int c = 0; c < 3; ++c) {
        planes[c][i * plane_stride + ox] =
            static_cast<uint8_t>(std::min(255, std::max(0, acc[c] >> 14)));
      }
    }
  }
#else
  const D32 d32;
  const D16 d16;
  const DU8 du8;
  const hn::Full128<uint8_t> d8x16;
  const hn::Full128<int32_t> d32x4;
  const hn::Full64<uint8_t> d8x8;
  const hn::Full128<int16_t> d16x8;
  const size_t group = hn::Lanes(d32) / 4;  // rows per vector, one per block
  // Pair vectors, block-interleaved: entry k * group + i is pair k of row i,
  // so one full-vector load takes pair k of every row of the group.
  auto* pairs = static_cast<int16_t*>(pair_scratch);
  const size_t n = cols + 2 * size_t{pc};
  // Byte shuffles that make the pair vectors of pixels k0 .. k0 + 3 out of
  // the 16 bytes from pixel k0 (0x80: a zero byte, the int16 high halves).
  alignas(16) static constexpr uint8_t kPairShuffle[4][16] = {
      {0, 0x80, 3, 0x80, 1, 0x80, 4, 0x80, 2, 0x80, 5, 0x80, 0x80, 0x80, 0x80, 0x80},
      {3, 0x80, 6, 0x80, 4, 0x80, 7, 0x80, 5, 0x80, 8, 0x80, 0x80, 0x80, 0x80, 0x80},
      {6, 0x80, 9, 0x80, 7, 0x80, 10, 0x80, 8, 0x80, 11, 0x80, 0x80, 0x80, 0x80, 0x80},
      {9, 0x80, 12, 0x80, 10, 0x80, 13, 0x80, 11, 0x80, 14, 0x80, 0x80, 0x80, 0x80, 0x80}};
  // Four pairs per 16-byte load while the load stays inside the row (the
  // pair of pixel k reads pixel k + 1: up to pixel k0 + 4, byte 14).
  size_t k_split = 0;
  while (3 * k_split + 16 <= 3 * cols) k_split += 4;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_SSE4
  // x86: the 16 bytes of every row of the group in one vector (row i in
  // block i), so that each byte shuffle and each store makes pair k of all
  // the rows at once (the shuffles work within 128-bit blocks). Unaligned
  // stores: the scratch may be only 16-byte aligned (ResampleImpl aligns it
  // to 64).
  {
    const uint8_t* row_of[4];  // group <= 4 on x86
    for (size_t i = 0; i < group; ++i)
      row_of[i] = row0 + std::min(i, rows - 1) * stride;  // missing rows repeat the last
    const D8 d8;
    const auto sh0 = hn::LoadDup128(d8, kPairShuffle[0]), sh1 = hn::LoadDup128(d8, kPairShuffle[1]);
    const auto sh2 = hn::LoadDup128(d8, kPairShuffle[2]), sh3 = hn::LoadDup128(d8, kPairShuffle[3]);
    const size_t step = group * 8;
    for (size_t k = 0; k < k_split; k += 4) {
      const auto bytes = LoadRowBlocks(row_of, 3 * k);
      int16_t* dst = pairs + k * step;
      hn::StoreU(hn::BitCast(d16, hn::TableLookupBytesOr0(bytes, sh0)), d16, dst);
      hn::StoreU(hn::BitCast(d16, hn::TableLookupBytesOr0(bytes, sh1)), d16, dst + step);
      hn::StoreU(hn::BitCast(d16, hn::TableLookupBytesOr0(bytes, sh2)), d16, dst + 2 * step);
      hn::StoreU(hn::BitCast(d16, hn::TableLookupBytesOr0(bytes, sh3)), d16, dst + 3 * step);
    }
  }
#endif
  for (size_t i = 0; i < group; ++i) {
    const uint8_t* row =
        row0 + std::min(i, rows - 1) * stride;  // missing rows repeat the last (not stored)
    size_t k = 0;
#if !(HWY_ARCH_X86 && HWY_TARGET <= HWY_SSE4)
    const auto shuffle0 = hn::Load(d8x16, kPairShuffle[0]),
               shuffle1 = hn::Load(d8x16, kPairShuffle[1]);
    const auto shuffle2 = hn::Load(d8x16, kPairShuffle[2]),
               shuffle3 = hn::Load(d8x16, kPairShuffle[3]);
    for (; k < k_split; k += 4) {
      const auto bytes = hn::LoadU(d8x16, row + 3 * k);
      int16_t* dst = pairs + k * group * 8 + i * 8;
      const size_t step = group * 8;
      hn::Store(hn::BitCast(d16x8, hn::TableLookupBytesOr0(bytes, shuffle0)), d16x8, dst);
      hn::Store(hn::BitCast(d16x8, hn::TableLookupBytesOr0(bytes, shuffle1)), d16x8, dst + step);
      hn::Store(hn::BitCast(d16x8, hn::TableLookupBytesOr0(bytes, shuffle2)), d16x8,
                dst + 2 * step);
      hn::Store(hn::BitCast(d16x8, hn::TableLookupBytesOr0(bytes, shuffle3)), d16x8,
                dst + 3 * step);
    }
#else
    k = k_split;
#endif
    auto cur = hn::BitCast(d8x16, hn::Set(d32x4, PixelBits(row, cols, k)));
    for (; k < n; ++k) {
      const auto next = hn::BitCast(d8x16, hn::Set(d32x4, PixelBits(row, cols, k + 1)));
      const auto mixed = hn::InterleaveLower(d8x16, cur, next);  // R R' G G' B B' X X' ...
      hn::Store(hn::PromoteTo(d16x8, hn::LowerHalf(d8x8, mixed)), d16x8,
                pairs + (k * group + i) * 8);
      cur = next;
    }
  }
  // The 8-bit sums of output x for every row of the group: 4 bytes per row
  // (R, G, B, -).
  // (int32 lanes R, G, B, - per row, rounded and shifted, not yet clamped).
  const auto wide_sums_of = [&](uint32_t x) {
    const int16_t* p = pairs + static_cast<size_t>(h.start[x] - col_begin) * group * 8;
    const int32_t* w = &h.pairs[size_t{x} * pc];
    V32 sum0 = hn::Set(d32, 1 << 13), sum1 = hn::Zero(d32);
    for (uint32_t j = 0; j < pc; ++j) {
      const auto pj = hn::LoadU(d16, p + size_t{2} * j * group * 8);
      const auto wj = hn::BitCast(d16, hn::Set(d32, w[j]));
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_SSE4
      sum0 = DotAccumulate(pj, wj, sum0);
#else
      sum0 = hn::ReorderWidenMulAccumulate(d32, pj, wj, sum0, sum1);
#endif
    }
    return hn::ShiftRight<14>(hn::RearrangeToOddPlusEven(sum0, sum1));
  };
  // DemoteTo saturates to 0..255 (Pillow's clip).
  const auto sums_of = [&](uint32_t x) { return hn::DemoteTo(du8, wide_sums_of(x)); };
  HWY_ALIGN uint8_t out[4][64] = {};
  uint32_t x = 0;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_SSE4
  {
    // Eight outputs at a time, transposed in registers. Per 128-bit block
    // (one row), the saturating packs of outputs q = 0..3 give the bytes
    // (q, channel); a byte shuffle makes them (channel, q), mirrored when
    // `flip`, and the 32-bit interleave of two such sets gives 8 R, 8 G and
    // 8 B bytes: three 8-byte stores per row.
    const D8 d8;
    alignas(16) static constexpr uint8_t kByChannel[2][16] = {
        {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15},
        {12, 8, 4, 0, 13, 9, 5, 1, 14, 10, 6, 2, 15, 11, 7, 3}};
    const auto by_channel = hn::LoadDup128(d8, kByChannel[flip ? 1 : 0]);
    const auto four = [&](uint32_t x0) {
      const auto p01 = hn::ReorderDemote2To(d16, wide_sums_of(x0), wide_sums_of(x0 + 1));
      const auto p23 = hn::ReorderDemote2To(d16, wide_sums_of(x0 + 2), wide_sums_of(x0 + 3));
      return hn::TableLookupBytes(PackU8(p01, p23), by_channel);
    };
    const hn::Repartition<uint32_t, D8> du32;
    const hn::Full64<uint8_t> d8x8;
    for (; x + 8 <= ow; x += 8) {
      const auto a = hn::BitCast(du32, four(x)), b = hn::BitCast(du32, four(x + 4));
      // Mirrored, the second four come first.
      const auto lo = flip ? b : a, hi = flip ? a : b;
      hn::Vec128<uint8_t> rg[4], bx[4];  // per row: 8 R, 8 G | 8 B, 8 unused
      Blocks(hn::BitCast(d8, hn::InterleaveLower(du32, lo, hi)), rg);
      Blocks(hn::BitCast(d8, hn::InterleaveUpper(du32, lo, hi)), bx);
      // Stored straight from the registers: a stack copy read back 8 bytes
      // at a time stalled store-to-load forwarding.
      const uint32_t ox = flip ? ow - 8 - x : x;
      for (size_t i = 0; i < rows; ++i) {
        hn::StoreU(hn::LowerHalf(d8x8, rg[i]), d8x8, r_plane + i * plane_stride + ox);
        hn::StoreU(hn::UpperHalf(d8x8, rg[i]), d8x8, g_plane + i * plane_stride + ox);
        hn::StoreU(hn::LowerHalf(d8x8, bx[i]), d8x8, b_plane + i * plane_stride + ox);
      }
    }
  }
#endif
  if (group <= 4) {
    // Four outputs at a time, transposed so that each row's R, G and B of
    // the four land in one 32-bit store each (instead of twelve byte
    // stores per row): bytes (x, row, channel) -> (row, channel, x).
    const hn::Full128<uint16_t> du16x8;
    for (; x + 4 <= ow; x += 4) {
      for (uint32_t q = 0; q < 4; ++q) hn::Store(sums_of(x + q), du8, out[q]);
      // Mirrored outputs are stored right to left: reverse the four.
      const uint32_t a = flip ? 3 : 0, b = flip ? 2 : 1, c = flip ? 1 : 2, d = flip ? 0 : 3;
      const auto v0 = hn::Load(d8x16, out[a]), v1 = hn::Load(d8x16, out[b]);
      const auto v2 = hn::Load(d8x16, out[c]), v3 = hn::Load(d8x16, out[d]);
      const auto t0 = hn::BitCast(du16x8, hn::InterleaveLower(d8x16, v0, v1));
      const auto t1 = hn::BitCast(du16x8, hn::InterleaveUpper(d8x16, v0, v1));
      const auto t2 = hn::BitCast(du16x8, hn::InterleaveLower(d8x16, v2, v3));
      const auto t3 = hn::BitCast(du16x8, hn::InterleaveUpper(d8x16, v2, v3));
      HWY_ALIGN uint8_t rows_rgb[4][16];
      hn::Store(hn::BitCast(d8x16, hn::InterleaveLower(du16x8, t0, t2)), d8x16, rows_rgb[0]);
      hn::Store(hn::BitCast(d8x16, hn::InterleaveUpper(du16x8, t0, t2)), d8x16, rows_rgb[1]);
      hn::Store(hn::BitCast(d8x16, hn::InterleaveLower(du16x8, t1, t3)), d8x16, rows_rgb[2]);
      hn::Store(hn::BitCast(d8x16, hn::InterleaveUpper(du16x8, t1, t3)), d8x16, rows_rgb[3]);
      const uint32_t ox = flip ? ow - 4 - x : x;
      for (size_t i = 0; i < rows; ++i) {
        std::memcpy(r_plane + i * plane_stride + ox, rows_rgb[i], 4);
        std::memcpy(g_plane + i * plane_stride + ox, rows_rgb[i] + 4, 4);
        std::memcpy(b_plane + i * plane_stride + ox, rows_rgb[i] + 8, 4);
      }
    }
  }
  for (; x < ow; ++x) {
    hn::Store(sums_of(x), du8, out[0]);
    const uint32_t ox = flip ? ow - 1 - x : x;
    for (size_t i = 0; i < rows; ++i) {
      r_plane[i * plane_stride + ox] = out[0][4 * i];
      g_plane[i * plane_stride + ox] = out[0][4 * i + 1];
      b_plane[i * plane_stride + ox] = out[0][4 * i + 2];
    }
  }
#endif
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace feedline::image
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace feedline::image {

HWY_EXPORT(VerticalConvertRow);
HWY_EXPORT(HorizontalRowsPerCall);
HWY_EXPORT(HorizontalRows);
HWY_EXPORT(TargetName);

size_t HorizontalRowsPerCall() { return HWY_DYNAMIC_DISPATCH(HorizontalRowsPerCall)(); }

void HorizontalRows(const uint8_t* row0, size_t stride, size_t rows, size_t cols, const AxisPlan& h,
                    int32_t col_begin, bool flip, void* pair_scratch, uint8_t* r_plane,
                    uint8_t* g_plane, uint8_t* b_plane, size_t plane_stride) {
  HWY_DYNAMIC_DISPATCH(HorizontalRows)
  (row0, stride, rows, cols, h, col_begin, flip, pair_scratch, r_plane, g_plane, b_plane,
   plane_stride);
}

void VerticalConvertRow(const uint8_t* first, size_t plane, uint32_t ow, uint32_t oh, uint32_t y,
                        int32_t count, const int32_t* pair_weights, uint32_t pair_count,
                        const OutputFormat& format, void* out) {
  HWY_DYNAMIC_DISPATCH(VerticalConvertRow)
  (first, plane, ow, oh, y, count, pair_weights, pair_count, format, out);
}

void FlushStreamingStores() { hwy::FlushStream(); }

const char* ResampleTargetName() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

}  // namespace feedline::image
#endif  // HWY_ONCE
