// Fuzzes ShardReader over arbitrary file contents: open (header, footer,
// index checks) and reading every record. Never crashes, never reads out of
// bounds, never allocates more than the file holds.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "feedline/shard.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/feedline_shard_fuzz_" + std::to_string(::getpid()) + ".fls";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  auto reader = feedline::ShardReader::Open(path);
  if (!reader.ok()) return 0;
  std::vector<uint8_t> scratch;
  for (uint64_t i = 0; i < (*reader)->num_records(); ++i) {
    feedline::ShardRecord rec;
    if ((*reader)->Read(i, &scratch, &rec).ok()) {
      if (rec.data.size() > size || rec.key.size() > size) __builtin_trap();
    }
    if (scratch.size() > size) __builtin_trap();  // never more than the file holds
  }
  return 0;
}
