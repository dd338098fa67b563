// Widening token ids from their on-disk dtype to int64, shared by the
// readers. Little-endian files on a little-endian host: a load per token.
#ifndef FEEDLINE_SRC_TOKENS_TOKEN_CODEC_H_
#define FEEDLINE_SRC_TOKENS_TOKEN_CODEC_H_

#include <bit>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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

// What a flat (nanoGPT) file reader checks and how it names the file, for
// the local reader (token_source.cc) and the remote one (pipelines/
// remote_tokens.cc) alike. The options: eos_token a token id that fits
// the dtype (InvalidArgument).
Status CheckFlatOptions(const std::string& path, const TokenSourceOptions& options);
// Its size: a non-zero multiple of the dtype (DataLoss / InvalidArgument).
Status CheckFlatSize(const std::string& path, uint64_t size, TokenDType dtype);
// The byte ranges (offset, length) the sampled digest covers, in order:
// 16 slices of 4 KiB spread over the file, first and last included, or the
// whole of a small file. The digest is the CRC32C over them.
std::vector<std::pair<uint64_t, uint64_t>> FlatDigestRanges(uint64_t size);
// The fingerprint of a flat file: its base name, dtype, token count, eos
// and digest (so a copy elsewhere, local or remote, fingerprints alike).
uint64_t FlatFingerprint(const std::string& path, TokenDType dtype, uint64_t num_tokens,
                         std::optional<int64_t> eos, uint32_t digest);

}  // namespace feedline::tokens::detail

#endif  // FEEDLINE_SRC_TOKENS_TOKEN_CODEC_H_
