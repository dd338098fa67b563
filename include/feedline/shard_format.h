// Constants of the feedline shard format (docs/shard_format.md). Every
// change here changes kShardVersion and the spec in the same commit.
#ifndef FEEDLINE_SHARD_FORMAT_H_
#define FEEDLINE_SHARD_FORMAT_H_

#include <cstddef>
#include <cstdint>

namespace feedline::shard {

inline constexpr char kHeaderMagic[8] = {'F', 'L', 'S', 'H', 'A', 'R', 'D', '\0'};
inline constexpr char kFooterMagic[8] = {'F', 'L', 'S', 'H', 'E', 'N', 'D', '\0'};
inline constexpr char kRecordMagic[4] = {'F', 'L', 'R', 'C'};
// Version 1: one data blob per record. Version 2: named fields per record
// (samples with several fields, docs/fields.md). Readers read both; writers
// write 1 unless asked for 2.
inline constexpr uint32_t kShardVersion1 = 1;
inline constexpr uint32_t kShardVersion2 = 2;
inline constexpr uint32_t kShardVersion = kShardVersion1;  // what writers write by default
inline constexpr uint32_t kMaxShardVersion = kShardVersion2;

inline constexpr size_t kHeaderSize = 24;
inline constexpr size_t kRecordHeaderSize = 24;
// label, key length, metadata length, then data length (v1) or field count (v2)
inline constexpr size_t kPayloadFixedSize = 20;
inline constexpr size_t kFieldEntrySize = 8;  // v2: name length, data length
inline constexpr size_t kIndexEntrySize = 8;
inline constexpr size_t kFooterSize = 40;

// Limits a reader enforces (and a writer refuses to exceed).
inline constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 31;
inline constexpr uint32_t kMaxFieldNameBytes = 255;  // v2

// leveldb/TFRecord CRC masking: a CRC stored inside checksummed data does not
// weaken the outer checksum.
inline constexpr uint32_t kCrcMaskDelta = 0xA282EAD8u;
inline constexpr uint32_t MaskCrc(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + kCrcMaskDelta;
}
inline constexpr uint32_t UnmaskCrc(uint32_t masked) {
  const uint32_t rot = masked - kCrcMaskDelta;
  return (rot >> 17) | (rot << 15);
}

}  // namespace feedline::shard

#endif  // FEEDLINE_SHARD_FORMAT_H_
