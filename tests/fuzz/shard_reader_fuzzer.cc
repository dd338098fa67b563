// Fuzzes ShardReader over arbitrary file contents: open (header, footer,
// index checks) and reading every record. Never crashes, never reads out of
// bounds, never allocates more than the file holds.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "feedline/shard.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // In memory (a memfd opened by name through /proc): a file on disk per
  // run made this harness ~80x slower (360 runs/s against 29000).
  static const int fd = memfd_create("feedline_shard_fuzz", MFD_CLOEXEC);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ftruncate(fd, 0) != 0) return 0;
  for (size_t done = 0; done < size;) {
    const ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) return 0;
    done += static_cast<size_t>(n);
  }
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
