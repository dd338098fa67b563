// The concat window's fused pass with Highway's dynamic dispatch
// (token_window_hwy.h). This file is compiled once per target:
// foreach_target.h re-includes it with HWY_NAMESPACE set to each
// instruction set.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/tokens/token_window_hwy.cc"
#include "src/tokens/token_window_hwy.h"

#include <cstring>
#include <type_traits>

#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace feedline::tokens::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D64 = hn::ScalableTag<int64_t>;

// N ids of T (N = int64 lanes) widened to int64 lanes.
template <typename T>
HWY_INLINE hn::Vec<D64> LoadWide(const T* p) {
  const D64 d64;
  const hn::Rebind<T, D64> dt;
  const auto v = hn::LoadU(dt, p);
  if constexpr (std::is_same_v<T, uint16_t>) {
    const hn::Rebind<uint32_t, D64> du32;
    const hn::Rebind<uint64_t, D64> du64;
    return hn::BitCast(d64, hn::PromoteTo(du64, hn::PromoteTo(du32, v)));
  } else if constexpr (std::is_same_v<T, uint32_t>) {
    const hn::Rebind<uint64_t, D64> du64;
    return hn::BitCast(d64, hn::PromoteTo(du64, v));
  } else {
    return hn::PromoteTo(d64, v);  // int32: sign-extended; negatives are caught by the caller
  }
}

template <typename T>
HWY_INLINE T LoadId(const T* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Token i of a segment starting at a, every field; false for a negative id.
template <typename T>
HWY_INLINE bool Single(const T* ids, uint64_t i, uint64_t a, int64_t* HWY_RESTRICT input_ids,
                       int64_t* HWY_RESTRICT labels, int64_t* HWY_RESTRICT position_ids,
                       int64_t* HWY_RESTRICT document_ids, int64_t document) {
  const auto in = static_cast<int64_t>(LoadId(ids + i));
  const auto next = static_cast<int64_t>(LoadId(ids + i + 1));
  input_ids[i] = in;
  labels[i] = next;
  if (position_ids != nullptr) position_ids[i] = static_cast<int64_t>(i - a);
  if (document_ids != nullptr) document_ids[i] = document;
  return in >= 0 && next >= 0;
}

template <typename T>
bool Segment(const T* ids, uint64_t a, uint64_t b, int64_t* HWY_RESTRICT input_ids,
             int64_t* HWY_RESTRICT labels, int64_t* HWY_RESTRICT position_ids,
             int64_t* HWY_RESTRICT document_ids, int64_t document) {
  const D64 d64;
  const size_t n = hn::Lanes(d64);
  const auto step = hn::Set(d64, static_cast<int64_t>(n));
  const auto doc = hn::Set(d64, document);
  auto pos = hn::Iota(d64, 0);
  auto sign = hn::Zero(d64);  // the or of every int32 id: negative iff one is
  constexpr bool kSigned = std::is_signed_v<T>;
  uint64_t i = a;
  // A segment starts anywhere in the row (a document start): single ids
  // first, up to the next vector boundary of the outputs, so that no
  // vector store straddles two cache lines (with 64-byte vectors every
  // unaligned store would).
  const uintptr_t vector_bytes = n * sizeof(int64_t);
  bool ok = true;
  for (; i < b && reinterpret_cast<uintptr_t>(input_ids + i) % vector_bytes != 0; ++i) {
    ok = Single(ids, i, a, input_ids, labels, position_ids, document_ids, document) && ok;
  }
  pos = hn::Add(pos, hn::Set(d64, static_cast<int64_t>(i - a)));
  // One loop per set of outputs: the branches stay out of the vector loop.
  if (position_ids != nullptr && document_ids != nullptr) {
    for (; i + n <= b; i += n) {
      const auto in = LoadWide(ids + i), next = LoadWide(ids + i + 1);
      if constexpr (kSigned) sign = hn::Or(sign, hn::Or(in, next));
      hn::StoreU(in, d64, input_ids + i);
      hn::StoreU(next, d64, labels + i);
      hn::StoreU(pos, d64, position_ids + i);
      hn::StoreU(doc, d64, document_ids + i);
      pos = hn::Add(pos, step);
    }
  } else if (position_ids != nullptr || document_ids != nullptr) {
    int64_t* one = position_ids != nullptr ? position_ids : document_ids;
    const bool positions = position_ids != nullptr;
    for (; i + n <= b; i += n) {
      const auto in = LoadWide(ids + i), next = LoadWide(ids + i + 1);
      if constexpr (kSigned) sign = hn::Or(sign, hn::Or(in, next));
      hn::StoreU(in, d64, input_ids + i);
      hn::StoreU(next, d64, labels + i);
      hn::StoreU(positions ? pos : doc, d64, one + i);
      pos = hn::Add(pos, step);
    }
  } else {
    for (; i + n <= b; i += n) {
      const auto in = LoadWide(ids + i), next = LoadWide(ids + i + 1);
      if constexpr (kSigned) sign = hn::Or(sign, hn::Or(in, next));
      hn::StoreU(in, d64, input_ids + i);
      hn::StoreU(next, d64, labels + i);
    }
  }
  ok = ok && hn::AllFalse(d64, hn::Lt(sign, hn::Zero(d64)));
  for (; i < b; ++i) {  // the tail, fewer than one vector
    ok = Single(ids, i, a, input_ids, labels, position_ids, document_ids, document) && ok;
  }
  return ok;
}

bool WindowSegmentImpl(TokenDType dtype, const uint8_t* ids, uint64_t a, uint64_t b,
                       int64_t* input_ids, int64_t* labels, int64_t* position_ids,
                       int64_t* document_ids, int64_t document) {
  if (a >= b) return true;
  switch (dtype) {
    case TokenDType::kUInt16:
      return Segment(reinterpret_cast<const uint16_t*>(ids), a, b, input_ids, labels, position_ids,
                     document_ids, document);
    case TokenDType::kUInt32:
      return Segment(reinterpret_cast<const uint32_t*>(ids), a, b, input_ids, labels, position_ids,
                     document_ids, document);
    case TokenDType::kInt32:
      return Segment(reinterpret_cast<const int32_t*>(ids), a, b, input_ids, labels, position_ids,
                     document_ids, document);
    default: return false;  // not handled here (WindowKernelHandles)
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace feedline::tokens::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace feedline::tokens::detail {

HWY_EXPORT(WindowSegmentImpl);

bool WindowSegment(TokenDType dtype, const uint8_t* ids, uint64_t a, uint64_t b, int64_t* input_ids,
                   int64_t* labels, int64_t* position_ids, int64_t* document_ids,
                   int64_t document) {
  return HWY_DYNAMIC_DISPATCH(WindowSegmentImpl)(dtype, ids, a, b, input_ids, labels, position_ids,
                                                 document_ids, document);
}

namespace {

template <typename T>
bool ReferenceSegment(const uint8_t* ids, uint64_t a, uint64_t b, int64_t* input_ids,
                      int64_t* labels, int64_t* position_ids, int64_t* document_ids,
                      int64_t document) {
  bool ok = true;
  for (uint64_t i = a; i < b; ++i) {
    T in, next;
    std::memcpy(&in, ids + i * sizeof(T), sizeof(T));
    std::memcpy(&next, ids + (i + 1) * sizeof(T), sizeof(T));
    if constexpr (std::is_signed_v<T>) ok = ok && in >= 0 && next >= 0;
    input_ids[i] = static_cast<int64_t>(in);
    labels[i] = static_cast<int64_t>(next);
    if (position_ids != nullptr) position_ids[i] = static_cast<int64_t>(i - a);
    if (document_ids != nullptr) document_ids[i] = document;
  }
  return ok;
}

}  // namespace

bool WindowSegmentReference(TokenDType dtype, const uint8_t* ids, uint64_t a, uint64_t b,
                            int64_t* input_ids, int64_t* labels, int64_t* position_ids,
                            int64_t* document_ids, int64_t document) {
  switch (dtype) {
    case TokenDType::kUInt16:
      return ReferenceSegment<uint16_t>(ids, a, b, input_ids, labels, position_ids, document_ids,
                                        document);
    case TokenDType::kUInt32:
      return ReferenceSegment<uint32_t>(ids, a, b, input_ids, labels, position_ids, document_ids,
                                        document);
    case TokenDType::kInt32:
      return ReferenceSegment<int32_t>(ids, a, b, input_ids, labels, position_ids, document_ids,
                                       document);
    default: return false;
  }
}

std::vector<const uint8_t*> FusedSources(const TokenCorpus& corpus) {
  std::vector<const uint8_t*> out;
  for (size_t i = 0; i < corpus.num_sources(); ++i) {
    const TokenSource& source = corpus.source(i);
    out.push_back(WindowKernelHandles(source.dtype()) ? source.MappedIds() : nullptr);
  }
  return out;
}

}  // namespace feedline::tokens::detail
#endif  // HWY_ONCE
