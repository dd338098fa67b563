// RandomAccessFile over an S3 object, and the public object_store.h calls.
// Open costs one HeadObject (size and ETag); each Read is one ranged GET,
// If-Match the ETag, or for a read of at least two parts ranged GETs of a
// part each, up to S3Options::max_concurrency in flight; the part size
// follows the measured latency and bandwidth (PartBytes).
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>

#include "feedline/file.h"
#include "feedline/object_store.h"
#include "src/io/s3/client.h"

namespace feedline {
namespace io {
namespace {

// The part size for a large read, from what the process's requests have
// measured: a part should take several first-byte latencies to transfer on
// one connection (bytes/s per connection, from GETs of 256 KiB or more,
// times the mean first-byte latency, times 4), so the latency each part
// pays is a small share of it; between 1 MiB and 64 MiB, and the
// configured S3Options::part_bytes until 4 large GETs have been timed.
uint64_t PartBytes(uint64_t configured) {
  if (configured == 0) return 0;
  const s3::ClientStats& st = s3::ProcessStats();
  const uint64_t gets = st.gets, large = st.large_gets, transfer = st.large_transfer_ns;
  if (large < 4 || transfer == 0 || gets == 0) return configured;
  const double latency_s =
      static_cast<double>(st.first_byte_ns.load()) / 1e9 / static_cast<double>(gets);
  const double bytes_per_s =
      static_cast<double>(st.large_bytes.load()) / (static_cast<double>(transfer) / 1e9);
  const double want = bytes_per_s * latency_s * 4;
  return std::clamp<uint64_t>(static_cast<uint64_t>(want), uint64_t{1} << 20, uint64_t{64} << 20);
}

class S3File final : public RandomAccessFile {
 public:
  S3File(std::string url, s3::Location loc, std::shared_ptr<const s3::Client> client,
         s3::ObjectHead head)
      : url_(std::move(url)),
        loc_(std::move(loc)),
        client_(std::move(client)),
        head_(std::move(head)) {}

  Status Read(uint64_t offset, size_t n, void* out) const override {
    if (n == 0) return Status::OK();
    if (offset + n > head_.size) {
      return DataLossError("'" + url_ + "': read of " + std::to_string(n) + " bytes at offset " +
                           std::to_string(offset) + " is past its " + std::to_string(head_.size) +
                           " bytes");
    }
    const uint64_t part = PartBytes(client_->http().s3.part_bytes);
    const uint32_t conc = std::max(client_->http().s3.max_concurrency, 1u);
    if (part == 0 || n < 2 * part || conc == 1) {
      return client_->GetRange(loc_, offset, n, out, head_.etag, head_.size);
    }
    // Large reads: parts fetched concurrently, each on its own connection.
    const uint64_t parts = (n + part - 1) / part;
    std::atomic<uint64_t> next{0};
    std::vector<Status> errors(parts);
    auto worker = [&] {
      for (uint64_t i = next++; i < parts; i = next++) {
        const uint64_t begin = i * part;
        const size_t len = static_cast<size_t>(std::min<uint64_t>(part, n - begin));
        errors[i] = client_->GetRange(loc_, offset + begin, len, static_cast<char*>(out) + begin,
                                      head_.etag, head_.size);
        if (!errors[i].ok()) next = parts;  // stop the others early
      }
    };
    std::vector<std::thread> threads;
    const uint64_t k = std::min<uint64_t>(conc, parts);
    for (uint64_t t = 1; t < k; ++t) threads.emplace_back(worker);
    worker();
    for (std::thread& t : threads) t.join();
    for (const Status& st : errors) FEEDLINE_RETURN_IF_ERROR(st);
    return Status::OK();
  }
  uint64_t size() const override { return head_.size; }
  const std::string& name() const override { return url_; }

 private:
  const std::string url_;
  const s3::Location loc_;
  const std::shared_ptr<const s3::Client> client_;
  const s3::ObjectHead head_;
};

}  // namespace

Result<std::unique_ptr<RandomAccessFile>> OpenS3File(const std::string& url,
                                                     const HttpOptions& http) {
  FEEDLINE_ASSIGN_OR_RETURN(s3::Location loc, s3::ParseUrl(url));
  if (loc.key.empty() || loc.key.back() == '/')
    return InvalidArgumentError("'" + url + "' names a prefix, not an object");
  FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const s3::Client> client, s3::GetClient(http));
  FEEDLINE_ASSIGN_OR_RETURN(s3::ObjectHead head, client->Head(loc));
  return std::unique_ptr<RandomAccessFile>(
      new S3File(url, std::move(loc), std::move(client), std::move(head)));
}

}  // namespace io

Result<std::vector<ObjectInfo>> ListObjects(const std::string& prefix_url,
                                            const HttpOptions& http) {
  FEEDLINE_ASSIGN_OR_RETURN(io::s3::Location loc, io::s3::ParseUrl(prefix_url));
  FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const io::s3::Client> client, io::s3::GetClient(http));
  return client->List(loc.bucket, loc.key);
}

Status ReadObject(const std::string& url, uint64_t max_bytes, std::vector<uint8_t>* out,
                  const HttpOptions& http, const std::string& etag) {
  FEEDLINE_ASSIGN_OR_RETURN(io::s3::Location loc, io::s3::ParseUrl(url));
  FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const io::s3::Client> client, io::s3::GetClient(http));
  return client->GetObject(loc, max_bytes, out, etag);
}

Status UploadFile(const std::string& local_path, const std::string& url, const HttpOptions& http) {
  FEEDLINE_ASSIGN_OR_RETURN(io::s3::Location loc, io::s3::ParseUrl(url));
  if (loc.key.empty() || loc.key.back() == '/')
    return InvalidArgumentError("'" + url + "' names a prefix, not an object");
  FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const io::s3::Client> client, io::s3::GetClient(http));
  return client->Upload(local_path, loc);
}

ObjectStoreStats GetObjectStoreStats() {
  const io::s3::ClientStats& c = io::s3::ProcessStats();
  ObjectStoreStats s;
  s.requests = c.requests;
  s.retries = c.retries;
  s.gets = c.gets;
  s.bytes = c.bytes;
  s.first_byte_s = static_cast<double>(c.first_byte_ns.load()) / 1e9;
  s.busy_s = static_cast<double>(c.busy_ns.load()) / 1e9;
  s.in_flight = c.in_flight;
  s.peak_in_flight = c.peak_in_flight;
  return s;
}

Status DeleteObject(const std::string& url, const HttpOptions& http) {
  FEEDLINE_ASSIGN_OR_RETURN(io::s3::Location loc, io::s3::ParseUrl(url));
  if (loc.key.empty()) return InvalidArgumentError("'" + url + "' names a bucket, not an object");
  FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const io::s3::Client> client, io::s3::GetClient(http));
  return client->Delete(loc);
}

Status UploadDirectory(const std::string& local_dir, const std::string& prefix_url,
                       const std::string& last, const HttpOptions& http) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::string> files;
  for (fs::recursive_directory_iterator it(local_dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_regular_file(ec)) files.push_back(fs::relative(it->path(), local_dir, ec).string());
  }
  if (ec) return UnavailableError("cannot list '" + local_dir + "': " + ec.message());
  std::sort(files.begin(), files.end());
  std::stable_partition(files.begin(), files.end(),
                        [&](const std::string& f) { return f != last; });
  for (const std::string& f : files) {
    FEEDLINE_RETURN_IF_ERROR(
        UploadFile((fs::path(local_dir) / f).string(), JoinName(prefix_url, f), http));
  }
  return Status::OK();
}

}  // namespace feedline
