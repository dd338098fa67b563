// The concat window's hot loop in wide SIMD (token_window_hwy.cc), written
// once with Google Highway and compiled for every x86 level from SSE4 to
// AVX-512 and for Arm; the best one for the running CPU is chosen at the
// first call. One pass over a segment of a window writes every field of it:
// the ids widened to int64 as input_ids, the same ids shifted by one as
// labels, and the positions and document id where asked for. Separate
// passes (widen, copy, iota, fill) cost 20-30% more per sequence on the
// development machine: each stream goes through the caches once here.
// tests/tokens/token_window_kernel_test.cc forces each target in turn and
// compares with the scalar reference on odd lengths.
#ifndef FEEDLINE_SRC_TOKENS_TOKEN_WINDOW_HWY_H_
#define FEEDLINE_SRC_TOKENS_TOKEN_WINDOW_HWY_H_

#include <cstdint>
#include <vector>

#include "feedline/tokens.h"

namespace feedline::tokens::detail {

// One segment [a, b) of a window whose ids (little-endian, `dtype`) start at
// `ids`: for a <= i < b, input_ids[i] = ids[i], labels[i] = ids[i + 1] (so
// ids holds b + 1 of them), and where not null position_ids[i] = i - a and
// document_ids[i] = document. Handles uint16, uint32 and int32 ids
// (WindowKernelHandles); false, with the outputs partly written, when an
// int32 id is negative: the caller's checked path names it.
bool WindowSegment(TokenDType dtype, const uint8_t* ids, uint64_t a, uint64_t b, int64_t* input_ids,
                   int64_t* labels, int64_t* position_ids, int64_t* document_ids, int64_t document);

// The dtypes WindowSegment reads: those of nearly every corpus (uint16 for
// GPT-2-sized vocabularies, uint32 or Megatron's int32 above 65,535 ids).
inline bool WindowKernelHandles(TokenDType dtype) {
  return dtype == TokenDType::kUInt16 || dtype == TokenDType::kUInt32 ||
         dtype == TokenDType::kInt32;
}

// The scalar reference WindowSegment is tested against (same contract).
bool WindowSegmentReference(TokenDType dtype, const uint8_t* ids, uint64_t a, uint64_t b,
                            int64_t* input_ids, int64_t* labels, int64_t* position_ids,
                            int64_t* document_ids, int64_t document);

// Per source of `corpus`: its MappedIds when WindowSegment reads its dtype,
// else null (the checked Read path), for the ops that use the pass.
std::vector<const uint8_t*> FusedSources(const TokenCorpus& corpus);

}  // namespace feedline::tokens::detail

#endif  // FEEDLINE_SRC_TOKENS_TOKEN_WINDOW_HWY_H_
