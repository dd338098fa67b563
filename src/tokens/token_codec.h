// Widening token ids from their on-disk dtype to int64, shared by the
// readers. Little-endian files on a little-endian host: a load per token.
#ifndef FEEDLINE_SRC_TOKENS_TOKEN_CODEC_H_
#define FEEDLINE_SRC_TOKENS_TOKEN_CODEC_H_

#include <bit>
#include <cstdint>
#include <string>

#include "feedline/status.h"
#include "feedline/tokens.h"

namespace feedline::tokens::detail {

static_assert(std::endian::native == std::endian::little,
              "the token readers load little-endian ids directly");

// Widens n ids of `dtype` at `p` into out. A negative id (signed dtypes)
// is DataLoss naming `path` and its token offset (first_token + index).
Status WidenTokens(TokenDType dtype, const uint8_t* p, uint64_t n, int64_t* out,
                   const std::string& path, uint64_t first_token);

// The id at token offset t of a mapped file (no range check).
int64_t LoadToken(TokenDType dtype, const uint8_t* base, uint64_t t);

}  // namespace feedline::tokens::detail

#endif  // FEEDLINE_SRC_TOKENS_TOKEN_CODEC_H_
