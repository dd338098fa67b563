// Random-access files: the seam between readers and where bytes live (a
// local file via pread, or an HTTP(S) URL via range requests), in the manner
// of leveldb's Env. Also where tests inject faults: SetFileWrapperForTesting
// passes every file OpenFile opens through a test's wrapper (tests/io/
// fault_file.h injects EIO, short reads and latency that way).
//
// Thread safety: Read and size are safe for concurrent use; so are OpenFile
// and SetFileWrapperForTesting.
#ifndef FEEDLINE_FILE_H_
#define FEEDLINE_FILE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "feedline/export.h"
#include "feedline/status.h"

namespace feedline {

class FEEDLINE_EXPORT RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Reads exactly n bytes at offset. A short read is DataLoss naming the
  // file and offset; transport failures are Unavailable (after retries) or
  // DeadlineExceeded.
  virtual Status Read(uint64_t offset, size_t n, void* out) const = 0;
  virtual uint64_t size() const = 0;
  virtual const std::string& name() const = 0;
};

struct FEEDLINE_EXPORT HttpOptions {
  uint32_t connect_timeout_ms = 5000;
  // A transfer that moves less than 1 byte/s for this long is a stall.
  uint32_t stall_timeout_ms = 10000;
  uint32_t request_timeout_ms = 60000;
  uint32_t max_attempts = 4;         // per range request
  uint32_t initial_backoff_ms = 50;  // doubled after each failed attempt
};

// True for http:// and https:// names.
FEEDLINE_EXPORT bool IsUrl(const std::string& name);

// A local path (pread) or a URL (HTTP range requests; the size comes from a
// HEAD request and the server must honour Range).
FEEDLINE_EXPORT Result<std::unique_ptr<RandomAccessFile>> OpenFile(const std::string& name,
                                                                   const HttpOptions& http = {});

// Test seam (leveldb's Env in spirit): while a wrapper is installed, every
// file OpenFile opens successfully, local or remote, is handed to it and
// the file it returns is what the caller gets; readers (shards, tars,
// manifests) cannot tell. Files opened before the call keep what they were.
// An empty wrapper removes it. Returns the previous one, so a test can
// restore it. For tests only: production code never installs one.
using FileWrapper =
    std::function<std::unique_ptr<RandomAccessFile>(std::unique_ptr<RandomAccessFile>)>;
FEEDLINE_EXPORT FileWrapper SetFileWrapperForTesting(FileWrapper wrapper);

// `base` joined with `leaf` for paths and URLs alike.
FEEDLINE_EXPORT std::string JoinName(const std::string& base, const std::string& leaf);

}  // namespace feedline

#endif  // FEEDLINE_FILE_H_
