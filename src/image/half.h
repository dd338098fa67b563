// Float to IEEE binary16 and to bfloat16, round to nearest even, NaN kept
// a (quiet) NaN, overflow to infinity: the output conversions of the image
// op (resample.cc), inline so that its per-pixel loops keep them in line;
// and back (the ops after normalisation, augment_ops.cc). Scalar; one value
// at a time.
#ifndef FEEDLINE_SRC_IMAGE_HALF_H_
#define FEEDLINE_SRC_IMAGE_HALF_H_

#include <cstdint>
#include <cstring>

namespace feedline::image {

inline uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u)
    return static_cast<uint16_t>(sign | (abs > 0x7F800000u ? 0x7E00u : 0x7C00u));
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // overflow -> inf
  if (abs < 0x38800000u) {                                      // a subnormal half, or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest
    // In units of the smallest subnormal (2^-24): mantissa * 2^(exponent - 126).
    const uint32_t shift = 126 - (abs >> 23);  // 14..24
    const uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
    uint32_t result = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (result & 1))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  uint32_t h = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

inline uint16_t FloatToBFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  x += 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

// And back: exact (every half and bfloat16 is a float).
inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu, bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    exp = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3FFu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline float BFloat16ToFloat(uint16_t b) {
  const uint32_t bits = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace feedline::image

#endif  // FEEDLINE_SRC_IMAGE_HALF_H_
