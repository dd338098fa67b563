// The constants of the feedline token-shard format (docs/token_shards.md),
// in one place for its writer and reader. Any change here changes
// kTokenShardVersion and the spec in the same commit.
#ifndef FEEDLINE_SRC_TOKENS_TOKEN_SHARD_FORMAT_H_
#define FEEDLINE_SRC_TOKENS_TOKEN_SHARD_FORMAT_H_

#include <cstdint>

namespace feedline::tokens::detail {

// Shard header, 64 bytes at offset 0 (all integers little-endian).
inline constexpr char kTokenShardMagic[8] = {'F', 'L', 'T', 'O', 'K', 'N', 'S', '\0'};
inline constexpr uint32_t kTokenShardVersion = 1;
inline constexpr uint64_t kTokenShardHeaderSize = 64;
// Field offsets in the header.
inline constexpr uint64_t kVersionAt = 8;
inline constexpr uint64_t kFlagsAt = 12;
inline constexpr uint64_t kDTypeAt = 16;         // u32: the id width in bytes, 2 or 4
inline constexpr uint64_t kBlockLog2At = 20;     // u32: tokens per checksum block = 2^this
inline constexpr uint64_t kTokenCountAt = 24;    // u64: N
inline constexpr uint64_t kDocCountAt = 32;      // u64: D
inline constexpr uint64_t kVocabSizeAt = 40;     // u64: V, every id < V
inline constexpr uint64_t kDocIndexCrcAt = 48;   // u32: masked CRC32C of the document index
inline constexpr uint64_t kBlockCrcsCrcAt = 52;  // u32: masked CRC32C of the block checksums
inline constexpr uint64_t kReservedAt = 56;      // u32: 0
inline constexpr uint64_t kHeaderCrcAt = 60;     // u32: masked CRC32C of bytes [0, 60)

// Checksum blocks: 2^10 to 2^24 tokens; the writer uses 2^16.
inline constexpr uint32_t kMinBlockLog2 = 10;
inline constexpr uint32_t kMaxBlockLog2 = 24;
inline constexpr uint32_t kDefaultBlockLog2 = 16;

// The dataset's manifest: `manifest.json` in the dataset directory.
inline constexpr char kTokenManifestName[] = "manifest.json";
inline constexpr char kTokenManifestFormat[] = "feedline-tokens";
inline constexpr int kTokenManifestVersion = 1;

// The padding after the token array: to the next multiple of 8 bytes.
inline constexpr uint64_t TokenPadding(uint64_t token_bytes) {
  return (8 - (kTokenShardHeaderSize + token_bytes) % 8) % 8;
}

// leveldb / TFRecord masking (docs/shard_format.md, "Checksums").
inline constexpr uint32_t MaskTokenCrc(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

}  // namespace feedline::tokens::detail

#endif  // FEEDLINE_SRC_TOKENS_TOKEN_SHARD_FORMAT_H_
