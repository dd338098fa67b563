// RandomAccessFile over HTTP(S) with libcurl: the size from HEAD, reads as
// Range requests that must come back 206 with exactly the bytes asked for,
// bounded timeouts (connect, stall, whole request), and bounded retries with
// exponential backoff on transport errors and 5xx answers. Easy handles are
// pooled per file so connections are reused.
#include <curl/curl.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "feedline/file.h"
#include "src/core/mutex.h"

namespace feedline::io {
namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Sink {
  char* out = nullptr;
  size_t capacity = 0;
  size_t got = 0;
  bool overflow = false;
};

size_t WriteCallback(char* data, size_t size, size_t nmemb, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const size_t n = size * nmemb;
  if (sink->got + n > sink->capacity) {
    sink->overflow = true;
    return 0;  // aborts the transfer: more bytes than the range holds
  }
  std::memcpy(sink->out + sink->got, data, n);
  sink->got += n;
  return n;
}

class HttpFile final : public RandomAccessFile {
 public:
  HttpFile(std::string url, HttpOptions options)
      : url_(std::move(url)), options_(std::move(options)) {}
  ~HttpFile() override {
    for (CURL* h : pool_) curl_easy_cleanup(h);
  }

  Status Init() {
    CURL* h = Take();
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    Status st = Perform(h, "HEAD", [&](long code) -> Status {
      if (code != 200)
        return Status(code == 404 ? StatusCode::kNotFound : StatusCode::kUnavailable,
                      "HTTP " + std::to_string(code));
      curl_off_t length = -1;
      curl_easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
      if (length < 0) return UnavailableError("the server sent no Content-Length");
      size_ = static_cast<uint64_t>(length);
      return Status::OK();
    });
    curl_easy_setopt(h, CURLOPT_NOBODY, 0L);
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    Give(h);
    return st;
  }

  Status Read(uint64_t offset, size_t n, void* out) const override {
    if (n == 0) return Status::OK();
    if (offset + n > size_) {
      return DataLossError("'" + url_ + "': read of " + std::to_string(n) + " bytes at offset " +
                           std::to_string(offset) + " is past its " + std::to_string(size_) +
                           " bytes");
    }
    CURL* h = Take();
    const std::string range = std::to_string(offset) + "-" + std::to_string(offset + n - 1);
    Sink sink{static_cast<char*>(out), n, 0, false};
    curl_easy_setopt(h, CURLOPT_RANGE, range.c_str());
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, WriteCallback);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
    Status st = Perform(
        h, "GET bytes=" + range,
        [&](long code) -> Status {
          if (sink.overflow || code == 200) {
            return DataLossError("the server ignored the Range header or sent more than " +
                                 std::to_string(n) + " bytes");
          }
          if (code != 206)
            return Status(code >= 500 ? StatusCode::kUnavailable : StatusCode::kDataLoss,
                          "HTTP " + std::to_string(code));
          if (sink.got != n) {
            return DataLossError("got " + std::to_string(sink.got) + " of " + std::to_string(n) +
                                 " bytes");
          }
          return Status::OK();
        },
        [&] {
          sink.got = 0;
          sink.overflow = false;
        });
    curl_easy_setopt(h, CURLOPT_RANGE, nullptr);
    Give(h);
    return st;
  }

  uint64_t size() const override { return size_; }
  const std::string& name() const override { return url_; }

 private:
  CURL* Take() const {
    {
      core::MutexLock l(&mu_);
      if (!pool_.empty()) {
        CURL* h = pool_.back();
        pool_.pop_back();
        return h;
      }
    }
    CURL* h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url_.c_str());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM-based timeouts
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout_ms));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.request_timeout_ms));
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME,
                     static_cast<long>((options_.stall_timeout_ms + 999) / 1000));
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    return h;
  }
  void Give(CURL* h) const {
    core::MutexLock l(&mu_);
    pool_.push_back(h);
  }

  // Runs the request with retries: transport errors, 5xx and short bodies
  // are retried with exponential backoff; `check` judges each answer.
  template <typename Check, typename Reset = void (*)()>
  Status Perform(
      CURL* h, const std::string& what, Check check, Reset reset = [] {}) const {
    Status last;
    uint32_t backoff = options_.initial_backoff_ms;
    for (uint32_t attempt = 1; attempt <= options_.max_attempts; ++attempt) {
      reset();
      const CURLcode rc = curl_easy_perform(h);
      if (rc == CURLE_OK) {
        long code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        last = check(code);
        if (last.ok()) return last;
        // Client errors other than a short answer will not heal by retrying.
        if (last.code() == StatusCode::kNotFound || (code >= 400 && code < 500)) break;
      } else {
        const bool timeout = rc == CURLE_OPERATION_TIMEDOUT;
        last = Status(timeout ? StatusCode::kDeadlineExceeded : StatusCode::kUnavailable,
                      curl_easy_strerror(rc));
      }
      if (attempt < options_.max_attempts) {
        std::this_thread::sleep_for(std::chrono::milliseconds(backoff));
        backoff *= 2;
      }
    }
    return Status(last.code(), "'" + url_ + "' " + what + ": " + std::string(last.message()) +
                                   " (after " + std::to_string(options_.max_attempts) +
                                   " attempts)");
  }

  const std::string url_;
  const HttpOptions options_;
  uint64_t size_ = 0;
  // Idle handles, reused across reads (a handle keeps its connection).
  mutable core::Mutex mu_;
  mutable std::vector<CURL*> pool_ GUARDED_BY(mu_);
};

}  // namespace

Result<std::unique_ptr<RandomAccessFile>> OpenHttpFile(const std::string& url,
                                                       const HttpOptions& options) {
  GlobalInit();
  auto f = std::make_unique<HttpFile>(url, options);
  FEEDLINE_RETURN_IF_ERROR(f->Init());
  return std::unique_ptr<RandomAccessFile>(std::move(f));
}

}  // namespace feedline::io
