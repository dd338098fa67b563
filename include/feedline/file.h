// Random-access files: the seam between readers and where bytes live (a
// local file via pread, an HTTP(S) URL via range requests, or an S3 object,
// s3://bucket/key, via signed ranged GETs: object_store.h), in the manner
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
#include <vector>

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

// S3 and S3-compatible stores (docs/object_stores.md). Every field left
// empty is resolved as the AWS CLI resolves it: from AWS_* environment
// variables, then the shared ~/.aws/config and ~/.aws/credentials files.
struct FEEDLINE_EXPORT S3Options {
  std::string endpoint_url;  // "": AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's, AWS's
  std::string region;        // "": AWS_REGION, AWS_DEFAULT_REGION, the profile's, us-east-1
  std::string profile;       // "": AWS_PROFILE, else "default"
  // kAuto: path-style (endpoint/bucket/key) for custom endpoints, IP hosts
  // and bucket names that are not DNS labels; virtual-hosted otherwise.
  enum class Addressing { kAuto, kPath, kVirtual };
  Addressing addressing = Addressing::kAuto;
  bool anonymous = false;  // unsigned requests, for public buckets
  // A read of at least two parts is split into ranged GETs of part_bytes,
  // up to max_concurrency in flight; uploads above part_bytes go multipart.
  uint64_t part_bytes = 8u << 20;
  uint32_t max_concurrency = 8;
};

struct FEEDLINE_EXPORT HttpOptions {
  uint32_t connect_timeout_ms = 5000;
  // A transfer that moves less than 1 byte/s for this long is a stall.
  uint32_t stall_timeout_ms = 10000;
  uint32_t request_timeout_ms = 60000;
  uint32_t max_attempts = 4;         // per range request
  uint32_t initial_backoff_ms = 50;  // doubled after each failed attempt (S3: full jitter)
  S3Options s3;                      // for s3:// names
};

// Fetching remote samples ahead of the workers, in the loader's order
// (packed shards, object-store folders): bytes held and fetches in flight
// at most. The loader takes max_bytes out of its memory budget.
struct FEEDLINE_EXPORT ReadAheadOptions {
  uint64_t max_bytes = 0;  // 0: no read-ahead
  uint32_t threads = 8;    // fetches in flight at most
};

// True for http:// and https:// names.
FEEDLINE_EXPORT bool IsUrl(const std::string& name);
// True for s3:// names.
FEEDLINE_EXPORT bool IsS3Url(const std::string& name);
// Either: data that is not on a local file system (no page cache, no
// descriptor limit, read ahead by default).
FEEDLINE_EXPORT bool IsRemote(const std::string& name);

// A local path (pread), a URL (HTTP range requests; the size comes from a
// HEAD request and the server must honour Range), or an s3:// object (its
// size and ETag from HeadObject; every read If-Match that ETag, so an object
// replaced mid-epoch is DataLoss, never a mix of two versions).
FEEDLINE_EXPORT Result<std::unique_ptr<RandomAccessFile>> OpenFile(const std::string& name,
                                                                   const HttpOptions& http = {});

// Appends the whole of `name` to *out: a local file or URL through OpenFile
// (one size query, then one read), an s3:// object by one GET (If-Match
// `etag` when given, as a listing saw it). Over max_bytes is
// ResourceExhausted naming it, refused before the bytes are held.
FEEDLINE_EXPORT Status ReadWholeFile(const std::string& name, uint64_t max_bytes,
                                     std::vector<uint8_t>* out, const HttpOptions& http = {},
                                     const std::string& etag = "");

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
