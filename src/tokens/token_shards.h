// The token-shard parser shared by the reader (OpenTokenShards) and its
// fuzzer: checks every header field, the padding, the document index and
// the block checksum table of one mapped shard (docs/token_shards.md).
#ifndef FEEDLINE_SRC_TOKENS_TOKEN_SHARDS_H_
#define FEEDLINE_SRC_TOKENS_TOKEN_SHARDS_H_

#include <cstdint>
#include <string>

#include "feedline/status.h"
#include "feedline/tokens.h"

namespace feedline::tokens::detail {

// Where the parts of a checked shard are, and what its header says.
struct TokenShardLayout {
  TokenDType dtype = TokenDType::kUInt16;
  uint64_t item = 2;  // bytes per id
  uint32_t block_log2 = 16;
  uint64_t num_tokens = 0;
  uint64_t num_documents = 0;
  uint64_t vocab_size = 0;
  uint32_t header_crc = 0;  // as stored (masked)
  uint64_t doc_index_at = 0;
  uint64_t block_crcs_at = 0;
  uint64_t num_blocks = 0;
};

// Checks the shard's `size` bytes at `data` (the whole file). DataLoss
// naming `path`, the field and its value for anything the spec refuses;
// never reads outside [data, data + size).
Result<TokenShardLayout> ParseTokenShard(const uint8_t* data, uint64_t size,
                                         const std::string& path);

}  // namespace feedline::tokens::detail

#endif  // FEEDLINE_SRC_TOKENS_TOKEN_SHARDS_H_
