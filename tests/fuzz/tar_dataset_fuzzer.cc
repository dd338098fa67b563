// Fuzzes the WebDataset tar indexer (src/io/tar_dataset.cc) over arbitrary
// archive bytes: header checksums, octal and base-256 sizes, ustar
// prefixes, GNU long names, PAX path records, key grouping and .cls labels,
// then reads every sample. Never crashes, never reads out of bounds, never
// indexes a sample past the end of the file. The bytes live in a memfd,
// opened by name through /proc like any tar.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "feedline/webdataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("feedline_tar_fuzz", MFD_CLOEXEC);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ftruncate(fd, 0) != 0) return 0;
  for (size_t done = 0; done < size;) {
    const ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) return 0;
    done += static_cast<size_t>(n);
  }
  auto ds = feedline::TarDataset::Open({path});
  if (!ds.ok()) {
    if (ds.status().message().empty()) __builtin_trap();  // errors always say why
    return 0;
  }
  std::vector<uint8_t> bytes;
  for (uint64_t i = 0; i < (*ds)->num_samples(); ++i) {
    const feedline::TarSample& s = (*ds)->sample(i);
    if (s.offset > size || s.size > size - s.offset || s.key.empty()) __builtin_trap();
    if (!(*ds)->Read(i, &bytes).ok() || bytes.size() != s.size) __builtin_trap();
  }
  return 0;
}
