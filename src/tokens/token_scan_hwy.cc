// The id scan of token_scan_hwy.h with Highway's dynamic dispatch: this
// file is compiled once per target (foreach_target.h re-includes it with
// HWY_NAMESPACE set to each instruction set).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/tokens/token_scan_hwy.cc"
#include "src/tokens/token_scan_hwy.h"

#include <cstring>

#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace feedline::tokens::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <typename U>
HWY_INLINE U LoadId(const uint8_t* p) {
  U v;
  std::memcpy(&v, p, sizeof(U));
  return v;
}

// Calls hit(t) for each t in [first, last) with ids[t] == value. Four
// vectors are compared per test of the mask: an eos is rare (one per
// document), so almost every block is skipped with one branch.
template <typename U, typename Hit>
HWY_INLINE void Scan(const uint8_t* ids, uint64_t first, uint64_t last, U value, Hit&& hit) {
  const hn::ScalableTag<U> d;
  const size_t n = hn::Lanes(d);
  const auto e = hn::Set(d, value);
  const U* p = reinterpret_cast<const U*>(ids);  // LoadU: no alignment needed
  uint64_t t = first;
  for (; t + 4 * n <= last; t += 4 * n) {
    const auto m01 = hn::Or(hn::Eq(hn::LoadU(d, p + t), e), hn::Eq(hn::LoadU(d, p + t + n), e));
    const auto m23 =
        hn::Or(hn::Eq(hn::LoadU(d, p + t + 2 * n), e), hn::Eq(hn::LoadU(d, p + t + 3 * n), e));
    if (HWY_LIKELY(hn::AllFalse(d, hn::Or(m01, m23)))) continue;
    // A block with an eos: its lanes' bits, one vector at a time, each set
    // bit a hit (no scalar pass over the block's 4 * n ids).
    for (uint64_t v = 0; v < 4; ++v) {
      const uint64_t at = t + v * n;
      uint8_t bits[(HWY_MAX_BYTES / sizeof(U) + 7) / 8 + 8] = {};
      hn::StoreMaskBits(d, hn::Eq(hn::LoadU(d, p + at), e), bits);
      for (size_t byte = 0; byte * 8 < n; ++byte) {
        for (unsigned b = bits[byte]; b != 0; b &= b - 1) {
          hit(at + byte * 8 + static_cast<uint64_t>(__builtin_ctz(b)));
        }
      }
    }
  }
  for (; t < last; ++t) {
    if (LoadId<U>(ids + t * sizeof(U)) == value) hit(t);
  }
}

template <typename U>
void FindWidth(const uint8_t* ids, uint64_t first, uint64_t last, int64_t value, uint64_t offset,
               std::vector<uint64_t>* out) {
  Scan<U>(ids, first, last, static_cast<U>(value),
          [out, offset](uint64_t t) { out->push_back(t + offset); });
}

template <typename U>
uint64_t CountWidth(const uint8_t* ids, uint64_t first, uint64_t last, int64_t value) {
  uint64_t count = 0;
  Scan<U>(ids, first, last, static_cast<U>(value), [&count](uint64_t) { ++count; });
  return count;
}

void FindTokenImpl(TokenDType dtype, const uint8_t* ids, uint64_t first, uint64_t last,
                   int64_t value, uint64_t offset, std::vector<uint64_t>* out) {
  if (first >= last) return;
  switch (TokenDTypeSize(dtype)) {
    case 1: return FindWidth<uint8_t>(ids, first, last, value, offset, out);
    case 2: return FindWidth<uint16_t>(ids, first, last, value, offset, out);
    case 4: return FindWidth<uint32_t>(ids, first, last, value, offset, out);
    default: return FindWidth<uint64_t>(ids, first, last, value, offset, out);
  }
}

uint64_t CountTokenImpl(TokenDType dtype, const uint8_t* ids, uint64_t first, uint64_t last,
                        int64_t value) {
  if (first >= last) return 0;
  switch (TokenDTypeSize(dtype)) {
    case 1: return CountWidth<uint8_t>(ids, first, last, value);
    case 2: return CountWidth<uint16_t>(ids, first, last, value);
    case 4: return CountWidth<uint32_t>(ids, first, last, value);
    default: return CountWidth<uint64_t>(ids, first, last, value);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace feedline::tokens::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace feedline::tokens::detail {

HWY_EXPORT(FindTokenImpl);
HWY_EXPORT(CountTokenImpl);

void FindToken(TokenDType dtype, const uint8_t* ids, uint64_t first, uint64_t last, int64_t value,
               uint64_t offset, std::vector<uint64_t>* out) {
  HWY_DYNAMIC_DISPATCH(FindTokenImpl)(dtype, ids, first, last, value, offset, out);
}

uint64_t CountToken(TokenDType dtype, const uint8_t* ids, uint64_t first, uint64_t last,
                    int64_t value) {
  return HWY_DYNAMIC_DISPATCH(CountTokenImpl)(dtype, ids, first, last, value);
}

void FindTokenReference(TokenDType dtype, const uint8_t* ids, uint64_t first, uint64_t last,
                        int64_t value, uint64_t offset, std::vector<uint64_t>* out) {
  const size_t size = TokenDTypeSize(dtype);
  // The low `size` bytes of value, little-endian, as the file holds them.
  uint8_t want[8];
  for (size_t k = 0; k < 8; ++k)
    want[k] = static_cast<uint8_t>(static_cast<uint64_t>(value) >> (8 * k));
  for (uint64_t t = first; t < last; ++t) {
    if (std::memcmp(ids + t * size, want, size) == 0) out->push_back(t + offset);
  }
}

}  // namespace feedline::tokens::detail
#endif  // HWY_ONCE
