// Fingerprint: a 64-bit FNV-1a digest of typed values, for resume states that
// must be refused on another dataset or recipe (SampleOp::DataFingerprint).
// Not cryptographic: it catches mistakes, not adversaries.
//
// Thread safety: a value; not shared.
#ifndef FEEDLINE_SRC_CORE_DETAIL_FINGERPRINT_H_
#define FEEDLINE_SRC_CORE_DETAIL_FINGERPRINT_H_

#include <bit>
#include <cstdint>
#include <string_view>

namespace feedline::core::detail {

class Fingerprint {
 public:
  Fingerprint& Add(uint64_t v) {
    for (int i = 0; i < 8; ++i) Byte(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Fingerprint& Add(double v) { return Add(std::bit_cast<uint64_t>(v)); }
  // Length-prefixed, so ("ab", "c") and ("a", "bc") differ.
  Fingerprint& Add(std::string_view s) {
    Add(uint64_t{s.size()});
    for (char c : s) Byte(static_cast<uint8_t>(c));
    return *this;
  }
  // Never 0: 0 means "no fingerprint" in a resume state.
  uint64_t value() const { return h_ == 0 ? 1 : h_; }

 private:
  void Byte(uint8_t b) {
    h_ ^= b;
    h_ *= 0x100000001B3ull;
  }
  uint64_t h_ = 0xCBF29CE484222325ull;
};

}  // namespace feedline::core::detail

#endif  // FEEDLINE_SRC_CORE_DETAIL_FINGERPRINT_H_
