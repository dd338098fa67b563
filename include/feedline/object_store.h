// Object stores that speak the S3 protocol (AWS S3, MinIO, Ceph RGW, R2,
// GCS's XML API, moto): listing, whole-object reads and uploads, for the
// sources that take an s3:// prefix (an ImageFolder-shaped prefix, tars,
// packed shards, lists) and for `feedline pack --out s3://...`. Reading
// ranges of one object goes through OpenFile (file.h). Configuration,
// credentials and the fault handling are docs/object_stores.md's.
//
// Thread safety: every function is safe for concurrent use; requests with
// the same options share one pool of connections.
#ifndef FEEDLINE_OBJECT_STORE_H_
#define FEEDLINE_OBJECT_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "feedline/export.h"
#include "feedline/file.h"
#include "feedline/status.h"

namespace feedline {

struct FEEDLINE_EXPORT ObjectInfo {
  std::string key;  // the whole key, prefix included
  uint64_t size = 0;
  std::string etag;  // as S3 sends it, quotes included
};

// Every object under `prefix_url` ("s3://bucket/prefix", "s3://bucket/"),
// at any depth, in S3's order (keys by UTF-8 bytes), every ListObjectsV2
// page followed. Errors: NotFound (NoSuchBucket), PermissionDenied
// (AccessDenied, bad or expired credentials), Unavailable (after retries);
// each names the URL and S3's error code.
FEEDLINE_EXPORT Result<std::vector<ObjectInfo>> ListObjects(const std::string& prefix_url,
                                                            const HttpOptions& http = {});

// The whole object appended to *out (one GET); refused (ResourceExhausted)
// above max_bytes. A non-empty etag is required to match (a replaced object
// is DataLoss, "changed since it was listed").
FEEDLINE_EXPORT Status ReadObject(const std::string& url, uint64_t max_bytes,
                                  std::vector<uint8_t>* out, const HttpOptions& http = {},
                                  const std::string& etag = "");

// Uploads a local file to `url` (PutObject up to S3Options::part_bytes,
// multipart above it; a failed multipart upload is aborted, so no parts are
// left behind to pay for). The object appears whole or not at all.
FEEDLINE_EXPORT Status UploadFile(const std::string& local_path, const std::string& url,
                                  const HttpOptions& http = {});

// Deletes one object (DeleteObject; an absent key is not an error, as in S3).
FEEDLINE_EXPORT Status DeleteObject(const std::string& url, const HttpOptions& http = {});

// Uploads every file under a local directory to `prefix_url` + its relative
// path, with `last` (a relative path, e.g. "manifest.json") uploaded after
// all others, so a reader that finds it finds everything it names.
FEEDLINE_EXPORT Status UploadDirectory(const std::string& local_dir, const std::string& prefix_url,
                                       const std::string& last, const HttpOptions& http = {});

// The process's object-store requests so far, over every bucket and
// loader: what the doctor's storage view (docs/doctor.md) turns into
// latency, bytes/s per connection and concurrency in use. Counters only
// grow; take two snapshots and subtract.
struct FEEDLINE_EXPORT ObjectStoreStats {
  uint64_t requests = 0;       // every request sent (GET, HEAD, LIST, PUT, ...)
  uint64_t retries = 0;        // attempts after a failed one
  uint64_t gets = 0;           // GETs, ranged or whole
  uint64_t bytes = 0;          // response bytes received
  double first_byte_s = 0;     // summed over GETs: sent to first byte
  double busy_s = 0;           // summed over requests: sent to done
  int64_t in_flight = 0;       // now
  int64_t peak_in_flight = 0;  // since the process started
};
FEEDLINE_EXPORT ObjectStoreStats GetObjectStoreStats();

}  // namespace feedline

#endif  // FEEDLINE_OBJECT_STORE_H_
