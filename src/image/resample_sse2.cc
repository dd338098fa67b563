// The SSE2 kernels of the resampler (resample_sse2.h): fixed point, 14-bit
// coefficients, as Pillow's own. One instruction set per file; the scalar
// reference they are tested against is in resample.cc.
#include "src/image/resample_sse2.h"

#if FEEDLINE_RESAMPLE_SSE2

#include <emmintrin.h>

#include <cstring>

namespace feedline::image {
namespace {

// Fixed-point horizontal pass: each source pixel pair (k, k+1) is held as
// int16 lanes (R_k, R_k+1, G_k, G_k+1, B_k, B_k+1, -, -), so one
// _mm_madd_epi16 applies two taps to all three channels. Rounds half up and
// saturates to [0, 255] as Pillow does.
template <int kPairs>
void HorizontalSse2Pixels(const __m128i* pairs, const AxisPlan& h, int32_t col_begin, bool flip,
                          uint8_t* r, uint8_t* g, uint8_t* b) {
  const uint32_t ow = h.out_size, pc = h.pair_count;
  for (uint32_t x = 0; x < ow; ++x) {
    const __m128i* p = pairs + (h.start[x] - col_begin);
    const int32_t* w = &h.pairs[size_t{x} * pc * 4];
    __m128i acc = _mm_set1_epi32(1 << 13);
    const size_t n = kPairs > 0 ? static_cast<size_t>(kPairs) : pc;
    for (size_t j = 0; j < n; ++j) {
      const __m128i wj = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 4 * j));
      acc = _mm_add_epi32(acc, _mm_madd_epi16(p[2 * j], wj));
    }
    acc = _mm_srai_epi32(acc, 14);
    acc = _mm_packs_epi32(acc, acc);
    acc = _mm_packus_epi16(acc, acc);
    const auto v = static_cast<uint32_t>(_mm_cvtsi128_si32(acc));
    const uint32_t ox = flip ? ow - 1 - x : x;
    r[ox] = static_cast<uint8_t>(v);
    g[ox] = static_cast<uint8_t>(v >> 8);
    b[ox] = static_cast<uint8_t>(v >> 16);
  }
}

}  // namespace

void HorizontalSse2(const uint8_t* row, size_t cols, const AxisPlan& h, int32_t col_begin, bool flip,
                    void* pair_scratch, uint8_t* r, uint8_t* g, uint8_t* b) {
  auto* pairs = static_cast<__m128i*>(pair_scratch);
  const __m128i zero = _mm_setzero_si128();
  auto load = [&](size_t k) -> __m128i {
    int32_t v = 0;
    if (k + 1 < cols) {
      std::memcpy(&v, row + 3 * k, 4);  // RGB + the next pixel's R, ignored
    } else if (k < cols) {
      v = row[3 * k] | row[3 * k + 1] << 8 | row[3 * k + 2] << 16;  // last pixel: no over-read
    }
    return _mm_cvtsi32_si128(v);
  };
  // Pairs up to the furthest tap any output reads (zero pixels past the row).
  const size_t n = cols + 2 * size_t{h.pair_count};
  __m128i cur = load(0);
  for (size_t k = 0; k < n; ++k) {
    const __m128i next = load(k + 1);
    pairs[k] = _mm_unpacklo_epi8(_mm_unpacklo_epi8(cur, next), zero);
    cur = next;
  }
  switch (h.pair_count) {
    case 2: HorizontalSse2Pixels<2>(pairs, h, col_begin, flip, r, g, b); break;
    case 3: HorizontalSse2Pixels<3>(pairs, h, col_begin, flip, r, g, b); break;
    case 4: HorizontalSse2Pixels<4>(pairs, h, col_begin, flip, r, g, b); break;
    default: HorizontalSse2Pixels<0>(pairs, h, col_begin, flip, r, g, b); break;
  }
}

// Vertical pass of one output row, fixed point like the horizontal one and
// like Pillow's: for 8 pixels at a time, two source rows are interleaved as
// int16 pairs and multiplied by a pair of 14-bit weights in one madd; the
// sum is rounded, shifted and clamped to 0..255 (the 8-bit value Pillow
// would store), then widened to float for the output conversion. `first`
// is the first source row of channel 0; channel c is `plane` bytes further.
// Writes sums_stride floats per channel (the tail past ow is scratch).
void VerticalSse2(const uint8_t* first, size_t plane, uint32_t ow, int32_t count, const int32_t* pair_weights,
                  uint32_t pair_count, float* sums, size_t sums_stride) {
  const __m128i zero = _mm_setzero_si128();
  const __m128i round = _mm_set1_epi32(1 << 13);
  for (int c = 0; c < 3; ++c) {
    const uint8_t* base = first + c * plane;
    float* out = sums + c * sums_stride;
    for (uint32_t x = 0; x < ow; x += 8) {
      __m128i lo = round, hi = round;
      for (uint32_t j = 0; j < pair_count; ++j) {
        const int32_t ka = static_cast<int32_t>(2 * j), kb = ka + 1;
        if (ka >= count) break;
        const uint8_t* ra = base + static_cast<size_t>(ka) * ow + x;
        // A missing second tap has weight 0: read the first row again.
        const uint8_t* rb = kb < count ? ra + ow : ra;
        const __m128i a = _mm_unpacklo_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(ra)), zero);
        const __m128i b = _mm_unpacklo_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(rb)), zero);
        const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(pair_weights + size_t{j} * 4));
        lo = _mm_add_epi32(lo, _mm_madd_epi16(_mm_unpacklo_epi16(a, b), w));
        hi = _mm_add_epi32(hi, _mm_madd_epi16(_mm_unpackhi_epi16(a, b), w));
      }
      // >> 14, then saturate to 0..255 through the packs.
      const __m128i v16 = _mm_packs_epi32(_mm_srai_epi32(lo, 14), _mm_srai_epi32(hi, 14));
      const __m128i v8 = _mm_packus_epi16(v16, zero);
      const __m128i w16 = _mm_unpacklo_epi8(v8, zero);
      _mm_storeu_ps(out + x, _mm_cvtepi32_ps(_mm_unpacklo_epi16(w16, zero)));
      _mm_storeu_ps(out + x + 4, _mm_cvtepi32_ps(_mm_unpackhi_epi16(w16, zero)));
    }
  }
}

size_t ScaleToFloatStreamSse2(const float* acc, uint32_t n, float mul, float add, float* out) {
  if (reinterpret_cast<uintptr_t>(out) % 16 != 0) return 0;
  const __m128 m = _mm_set1_ps(mul), a = _mm_set1_ps(add);
  uint32_t x = 0;
  for (; x + 4 <= n; x += 4) _mm_stream_ps(out + x, _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(acc + x), m), a));
  return x;
}

void StreamFenceSse2() { _mm_sfence(); }

}  // namespace feedline::image

#endif  // FEEDLINE_RESAMPLE_SSE2
