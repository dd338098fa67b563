// The S3 protocol over libcurl (docs/object_stores.md): signed requests
// (sigv4.h) to the endpoint a Config resolves, pooled connections, retries
// with exponential backoff and full jitter on throttling, 5xx answers and
// broken connections, ranged GETs that resume a body cut short from the byte
// where it stopped and refuse an object that changed (If-Match on the ETag
// seen at open), listing (ListObjectsV2, every page) and uploads (PutObject,
// multipart for large files). Errors name the s3:// URL, the request and
// S3's error code and message.
//
// Thread safety: a Client is safe for concurrent use.
#ifndef FEEDLINE_SRC_IO_S3_CLIENT_H_
#define FEEDLINE_SRC_IO_S3_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "feedline/file.h"
#include "feedline/object_store.h"
#include "feedline/status.h"
#include "src/core/mutex.h"
#include "src/io/s3/config.h"
#include "src/io/s3/sigv4.h"

namespace feedline::io::s3 {

struct Location {
  std::string bucket, key;
  std::string Url() const { return "s3://" + bucket + "/" + key; }
};
// "s3://bucket/key" -> {bucket, key}; InvalidArgument names the URL.
Result<Location> ParseUrl(const std::string& url);

struct ObjectHead {
  uint64_t size = 0;
  std::string etag;
};

// Counters over every request of a client (the doctor's storage view).
// Counters of requests, summed over every client of the process (what the
// doctor's storage view reads, GetObjectStoreStats).
struct ClientStats {
  std::atomic<uint64_t> requests{0}, retries{0}, bytes{0}, busy_ns{0};
  std::atomic<uint64_t> first_byte_ns{0};  // summed over GETs
  std::atomic<uint64_t> gets{0};
  // GETs of at least 256 KiB: their bytes and the time from first byte to
  // done (a connection's bandwidth, latency left out), for the part size.
  std::atomic<uint64_t> large_bytes{0}, large_transfer_ns{0}, large_gets{0};
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> peak_in_flight{0};
};

ClientStats& ProcessStats();

class Client {
 public:
  Client(std::shared_ptr<const Config> config, HttpOptions http);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  Result<ObjectHead> Head(const Location& loc) const;
  // Exactly n bytes at offset into out. etag: the object's at open (If-Match;
  // empty: any), size: its size then (a different total is a change).
  Status GetRange(const Location& loc, uint64_t offset, size_t n, void* out,
                  const std::string& etag, uint64_t size) const;
  // The whole object appended to *out, refused above max_bytes.
  Status GetObject(const Location& loc, uint64_t max_bytes, std::vector<uint8_t>* out,
                   const std::string& etag = "") const;
  // Every object whose key starts with prefix, in S3's order (UTF-8 bytes).
  Result<std::vector<ObjectInfo>> List(const std::string& bucket, const std::string& prefix) const;
  Status Put(const Location& loc, const std::string& data) const;
  // A local file: one PutObject up to the part size, multipart above it.
  Status Upload(const std::string& local_path, const Location& loc) const;
  Status Delete(const Location& loc) const;

  const Config& config() const { return *config_; }
  const HttpOptions& http() const { return http_; }
  ClientStats& stats() const { return stats_; }
  uint64_t part_bytes() const;

  struct Request;
  struct Response;

 private:
  // One request, retried; `judge` may turn a 2xx into an error.
  Status Perform(Request& req, Response* resp) const;
  Status PerformOnce(Request& req, Response* resp, bool* retryable) const;
  void* TakeHandle() const;
  void GiveHandle(void* h) const;

  const std::shared_ptr<const Config> config_;
  const HttpOptions http_;
  ClientStats& stats_;  // the process's (ProcessStats): one view of every client
  mutable core::Mutex mu_;
  mutable std::vector<void*> pool_ GUARDED_BY(mu_);  // idle CURL easy handles
};

// The process's client for these options (cached: connections are shared
// by every file opened with the same options).
Result<std::shared_ptr<const Client>> GetClient(const HttpOptions& http);

}  // namespace feedline::io::s3

#endif  // FEEDLINE_SRC_IO_S3_CLIENT_H_
