// CRC32C (Castagnoli): the checksum of shards and their index. Uses the
// SSE4.2 crc32 instruction when the CPU has it, a table otherwise; both give
// the same values (tested against RFC 3720's vectors).
#ifndef FEEDLINE_SRC_CORE_CRC32C_H_
#define FEEDLINE_SRC_CORE_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace feedline::core {

// Extends `crc` (the CRC32C of earlier bytes, 0 for none) with n bytes.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);
inline uint32_t Crc32c(const void* data, size_t n) { return Crc32cExtend(0, data, n); }

// The portable table version, for tests of the hardware one.
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n);

}  // namespace feedline::core

#endif  // FEEDLINE_SRC_CORE_CRC32C_H_
