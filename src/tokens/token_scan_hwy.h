// Finding one id (a flat file's eos) in a run of token ids, in wide SIMD
// (token_scan_hwy.cc, Google Highway, dispatched at the first call like the
// window pass of token_window_hwy.h). A concat window of a flat file with
// an eos learns its document starts by this scan before its fused pass;
// done a token at a time it cost as much as that pass. The ids are compared
// as bit patterns of their width, so one kernel per width serves signed and
// unsigned dtypes alike; the caller keeps `value` inside the dtype.
// tests/tokens/token_scan_test.cc forces each target and compares with
// the scalar reference on odd bounds.
#ifndef FEEDLINE_SRC_TOKENS_TOKEN_SCAN_HWY_H_
#define FEEDLINE_SRC_TOKENS_TOKEN_SCAN_HWY_H_

#include <cstdint>
#include <vector>

#include "feedline/tokens.h"

namespace feedline::tokens::detail {

// Appends t + offset to `out`, in increasing order, for each token t in
// [first, last) of `ids` (little-endian, `dtype`) equal to `value`.
void FindToken(TokenDType dtype, const uint8_t* ids, uint64_t first, uint64_t last, int64_t value,
               uint64_t offset, std::vector<uint64_t>* out);

// How many tokens of [first, last) equal `value`.
uint64_t CountToken(TokenDType dtype, const uint8_t* ids, uint64_t first, uint64_t last,
                    int64_t value);

// The scalar reference both are tested against (same contract).
void FindTokenReference(TokenDType dtype, const uint8_t* ids, uint64_t first, uint64_t last,
                        int64_t value, uint64_t offset, std::vector<uint64_t>* out);

}  // namespace feedline::tokens::detail

#endif  // FEEDLINE_SRC_TOKENS_TOKEN_SCAN_HWY_H_
