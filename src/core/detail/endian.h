// Little-endian fixed-width encoding for on-disk and on-wire bytes, whatever
// the host's byte order.
#ifndef FEEDLINE_SRC_CORE_DETAIL_ENDIAN_H_
#define FEEDLINE_SRC_CORE_DETAIL_ENDIAN_H_

#include <cstdint>
#include <string>

namespace feedline::core::detail {

inline void PutFixed16(std::string* dst, uint16_t v) {
  for (int i = 0; i < 2; ++i) dst->push_back(static_cast<char>(v >> (8 * i)));
}
inline void PutFixed64(std::string* dst, uint64_t v) {
  for (int i = 0; i < 8; ++i) dst->push_back(static_cast<char>(v >> (8 * i)));
}
inline uint16_t DecodeFixed16(const char* p) {
  return static_cast<uint16_t>(static_cast<uint8_t>(p[0]) | static_cast<uint8_t>(p[1]) << 8);
}
inline uint64_t DecodeFixed64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// FNV-1a, 64-bit: guards small state blobs against truncation and bit rot
// (not an adversarial MAC).
inline uint64_t Fnv1a64(const char* p, size_t n) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<uint8_t>(p[i]);
    h *= 0x100000001B3ull;
  }
  return h;
}

}  // namespace feedline::core::detail

#endif  // FEEDLINE_SRC_CORE_DETAIL_ENDIAN_H_
