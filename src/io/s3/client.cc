#include "src/io/s3/client.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "src/io/s3/xml.h"

namespace feedline::io::s3 {

// What one request sends and where its answer goes. Exactly one sink: a
// caller's buffer (`out`, ranged reads; `out_got` survives attempts, so a
// cut body resumes), a growing vector (`vec`, whole objects) or `text`.
struct Client::Request {
  std::string method = "GET";
  Location loc;
  std::vector<Header> query;
  std::vector<Header> headers;  // besides host, x-amz-*: range, if-match, content-type
  std::string_view body;
  bool head = false;
  char* out = nullptr;
  size_t out_capacity = 0;
  size_t out_got = 0;
  std::vector<uint8_t>* vec = nullptr;
  uint64_t vec_max = 0;  // bytes past vec_base at most
  size_t vec_base = 0;   // where the body starts in *vec (appending reads)
  std::string* text = nullptr;
  std::string what;               // "GET bytes=0-99", for messages
  std::function<void()> prepare;  // before each attempt (a resumed range)
};

struct Client::Response {
  long code = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string error_body;
  bool overflow = false;  // more body than the sink takes
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct CallbackState {
  Client::Request* req;
  Client::Response* resp;
  CURL* handle;
  uint64_t body_bytes = 0;
};

constexpr size_t kMaxErrorBody = 64u << 10;
constexpr size_t kMaxText = 64u << 20;

size_t OnBody(char* data, size_t size, size_t nmemb, void* user) {
  auto* st = static_cast<CallbackState*>(user);
  const size_t n = size * nmemb;
  long code = 0;
  curl_easy_getinfo(st->handle, CURLINFO_RESPONSE_CODE, &code);
  Client::Request& r = *st->req;
  if (code < 200 || code >= 300) {
    if (st->resp->error_body.size() < kMaxErrorBody) st->resp->error_body.append(data, n);
    return n;
  }
  st->body_bytes += n;
  if (r.out != nullptr) {
    if (r.out_got + n > r.out_capacity) {
      st->resp->overflow = true;
      return 0;
    }
    std::memcpy(r.out + r.out_got, data, n);
    r.out_got += n;
  } else if (r.vec != nullptr) {
    if (r.vec->size() - r.vec_base + n > r.vec_max) {
      st->resp->overflow = true;
      return 0;
    }
    r.vec->insert(r.vec->end(), reinterpret_cast<uint8_t*>(data),
                  reinterpret_cast<uint8_t*>(data) + n);
  } else if (r.text != nullptr) {
    if (r.text->size() + n > kMaxText) {
      st->resp->overflow = true;
      return 0;
    }
    r.text->append(data, n);
  }
  return n;
}

size_t OnHeader(char* data, size_t size, size_t nmemb, void* user) {
  auto* st = static_cast<CallbackState*>(user);
  const size_t n = size * nmemb;
  std::string line(data, n);
  if (line.rfind("HTTP/", 0) == 0) {
    st->resp->headers.clear();  // a new answer (after a redirect or 100 Continue)
    return n;
  }
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return n;
  std::string name = line.substr(0, colon);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string value = line.substr(colon + 1);
  const size_t b = value.find_first_not_of(" \t");
  const size_t e = value.find_last_not_of(" \t\r\n");
  value = b == std::string::npos ? "" : value.substr(b, e - b + 1);
  st->resp->headers[name] = value;
  return n;
}

struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Full jitter (AWS's "Exponential Backoff And Jitter"): a uniform delay in
// [0, min(cap, base * 2^attempt)), so clients throttled together do not
// come back together.
void Backoff(uint32_t base_ms, uint32_t attempt) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const uint64_t cap = 20000;
  const uint64_t ceiling =
      std::min<uint64_t>(cap, uint64_t{std::max(base_ms, 1u)} << std::min(attempt, 16u));
  std::uniform_int_distribution<uint64_t> d(ceiling / 4, ceiling);
  std::this_thread::sleep_for(std::chrono::milliseconds(d(rng)));
}

bool Retryable(long code, const std::string& s3_code) {
  if (code == 500 || code == 502 || code == 503 || code == 504 || code == 429) return true;
  return s3_code == "SlowDown" || s3_code == "RequestTimeout" || s3_code == "InternalError" ||
         s3_code == "ServiceUnavailable" || s3_code == "RequestTimeTooSkewed";
}

bool ExpiredCredentials(const std::string& s3_code) {
  return s3_code == "ExpiredToken" || s3_code == "ExpiredTokenException" ||
         s3_code == "TokenRefreshRequired" || s3_code == "RequestExpired";
}

StatusCode CodeFor(long http, const std::string& s3_code) {
  if (s3_code == "NoSuchKey" || s3_code == "NoSuchBucket" || s3_code == "NoSuchUpload" ||
      http == 404)
    return StatusCode::kNotFound;
  if (http == 403 || http == 401 || s3_code == "AccessDenied" || s3_code == "InvalidAccessKeyId" ||
      s3_code == "SignatureDoesNotMatch" || ExpiredCredentials(s3_code))
    return StatusCode::kPermissionDenied;
  if (http == 412) return StatusCode::kFailedPrecondition;
  if (http == 416) return StatusCode::kOutOfRange;
  if (http >= 500 || Retryable(http, s3_code)) return StatusCode::kUnavailable;
  return StatusCode::kInvalidArgument;
}

std::string HttpReason(long code) {
  switch (code) {
    case 301: return "Moved Permanently (the bucket is in another region: set AWS_REGION)";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 412: return "Precondition Failed";
    case 416: return "Range Not Satisfiable";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "";
  }
}

}  // namespace

Result<Location> ParseUrl(const std::string& url) {
  if (url.rfind("s3://", 0) != 0) return InvalidArgumentError("'" + url + "' is not an s3:// URL");
  const std::string rest = url.substr(5);
  const size_t slash = rest.find('/');
  Location loc;
  loc.bucket = rest.substr(0, slash);
  if (slash != std::string::npos) loc.key = rest.substr(slash + 1);
  if (loc.bucket.empty()) return InvalidArgumentError("'" + url + "' names no bucket");
  return loc;
}

ClientStats& ProcessStats() {
  static auto* stats = new ClientStats();  // never destroyed: clients outlive statics
  return *stats;
}

Client::Client(std::shared_ptr<const Config> config, HttpOptions http)
    : config_(std::move(config)), http_(std::move(http)), stats_(ProcessStats()) {
  GlobalInit();
}

Client::~Client() {
  for (void* h : pool_) curl_easy_cleanup(static_cast<CURL*>(h));
}

uint64_t Client::part_bytes() const {
  // S3 refuses multipart parts under 5 MiB (all but the last).
  return std::max<uint64_t>(http_.s3.part_bytes, 5u << 20);
}

void* Client::TakeHandle() const {
  {
    core::MutexLock l(&mu_);
    if (!pool_.empty()) {
      void* h = pool_.back();
      pool_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void Client::GiveHandle(void* h) const {
  core::MutexLock l(&mu_);
  pool_.push_back(h);
}

Status Client::PerformOnce(Request& req, Response* resp, bool* retryable) const {
  *retryable = false;
  *resp = Response();
  const Config& c = *config_;
  const bool path_style = c.PathStyle(req.loc.bucket);
  const std::string host = path_style ? c.host : req.loc.bucket + "." + c.host;
  std::string path = c.base_path;
  if (path_style) path += "/" + UriEncode(req.loc.bucket, false);
  if (!req.loc.key.empty() || !path_style) path += "/" + UriEncode(req.loc.key, true);
  const std::string query = CanonicalQuery(req.query);
  const std::string url = c.scheme + "://" + host + path + (query.empty() ? "" : "?" + query);

  SigningRequest sr;
  sr.method = req.head ? "HEAD" : req.method;
  sr.path = path;
  sr.query = req.query;
  sr.headers = req.headers;
  sr.headers.emplace_back("host", host);
  std::unique_ptr<curl_slist, SlistDeleter> list;
  auto add = [&](const std::string& h) {
    list.reset(curl_slist_append(list.release(), h.c_str()));
  };
  if (!c.anonymous) {
    FEEDLINE_ASSIGN_OR_RETURN(Credentials creds, c.credentials->Get());
    const std::string date = AmzDate(static_cast<int64_t>(std::time(nullptr)));
    sr.payload_sha256 = HexSha256(req.body);
    sr.headers.emplace_back("x-amz-date", date);
    sr.headers.emplace_back("x-amz-content-sha256", sr.payload_sha256);
    if (!creds.session_token.empty())
      sr.headers.emplace_back("x-amz-security-token", creds.session_token);
    SigningKeys keys{creds.access_key, creds.secret_key, c.region, "s3"};
    add("Authorization: " + AuthorizationHeader(sr, keys, date));
  }
  for (const Header& h : sr.headers) add(h.first + ": " + h.second);
  add("Expect:");  // no 100-continue round trip before a part's body
  if (!req.body.empty() || req.method == "PUT" || req.method == "POST") {
    bool typed = false;
    for (const Header& h : req.headers) typed |= h.first == "content-type";
    if (!typed) add("Content-Type: application/octet-stream");
  }

  auto* h = static_cast<CURL*>(TakeHandle());
  if (h == nullptr) return InternalError("curl_easy_init failed");
  curl_easy_reset(h);  // keeps the connection cache
  CallbackState cb{&req, resp, h};
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);  // a key's "../" is a name, not a step up
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(http_.connect_timeout_ms));
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(http_.request_timeout_ms));
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME,
                   static_cast<long>((http_.stall_timeout_ms + 999) / 1000));
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, list.get());
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &cb);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &cb);
  curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
  // 256 KiB receive buffer (curl's default is 16 KiB): a large body arrives
  // in a sixteenth of the callbacks.
  curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 256L << 10);
  if (req.head) {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (req.method != "GET") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    if (req.method != "DELETE") {
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, req.body.data());
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
    }
  }
  const int64_t now_in_flight = ++stats_.in_flight;
  int64_t peak = stats_.peak_in_flight.load();
  while (now_in_flight > peak &&
         !stats_.peak_in_flight.compare_exchange_weak(peak, now_in_flight)) {
  }
  const uint64_t t0 = NowNs();
  const CURLcode rc = curl_easy_perform(h);
  const uint64_t took = NowNs() - t0;
  stats_.busy_ns += took;
  --stats_.in_flight;
  ++stats_.requests;
  stats_.bytes += cb.body_bytes;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->code);
  if (req.method == "GET" && !req.head) {
    curl_off_t first = 0;
    curl_easy_getinfo(h, CURLINFO_STARTTRANSFER_TIME_T, &first);
    stats_.first_byte_ns += static_cast<uint64_t>(first) * 1000;
    ++stats_.gets;
    const uint64_t first_ns = static_cast<uint64_t>(first) * 1000;
    if (rc == CURLE_OK && cb.body_bytes >= (256u << 10) && took > first_ns) {
      stats_.large_bytes += cb.body_bytes;
      stats_.large_transfer_ns += took - first_ns;
      ++stats_.large_gets;
    }
  }
  GiveHandle(h);

  const std::string where = "'" + req.loc.Url() + "' " + req.what;
  if (resp->overflow) {
    return req.vec != nullptr
               ? ResourceExhaustedError(where + ": the object is larger than the " +
                                        std::to_string(req.vec_max) + "-byte limit")
               : DataLossError(where + ": the server sent more bytes than asked for");
  }
  if (rc != CURLE_OK) {
    *retryable = true;  // resets, refused connections, timeouts, bodies cut short
    return Status(
        rc == CURLE_OPERATION_TIMEDOUT ? StatusCode::kDeadlineExceeded : StatusCode::kUnavailable,
        where + ": " + curl_easy_strerror(rc));
  }
  if (resp->code >= 200 && resp->code < 300) return Status::OK();
  std::string s3_code, message;
  if (!resp->error_body.empty()) {
    Result<std::unique_ptr<XmlNode>> x = ParseXml(resp->error_body);
    if (x.ok() && (*x)->name == "Error") {
      s3_code = (*x)->ChildText("Code");
      message = (*x)->ChildText("Message");
    }
  }
  if (ExpiredCredentials(s3_code) && c.credentials) {
    c.credentials->Invalidate();
    *retryable = true;
  }
  *retryable |= Retryable(resp->code, s3_code);
  std::string what = where + ": HTTP " + std::to_string(resp->code);
  const std::string reason = HttpReason(resp->code);
  if (!s3_code.empty()) {
    what += " " + s3_code + (message.empty() ? "" : " (" + message + ")");
  } else if (!reason.empty()) {
    what += " " + reason;
  }
  const std::string request_id = resp->Header("x-amz-request-id");
  if (!request_id.empty()) what += " [request id " + request_id + "]";
  return Status(CodeFor(resp->code, s3_code), what);
}

Status Client::Perform(Request& req, Response* resp) const {
  Status last;
  const uint32_t attempts = std::max(http_.max_attempts, 1u);
  for (uint32_t attempt = 1; attempt <= attempts; ++attempt) {
    if (req.prepare) req.prepare();
    bool retryable = false;
    last = PerformOnce(req, resp, &retryable);
    if (last.ok() || !retryable) return last;
    if (attempt < attempts) {
      ++stats_.retries;
      Backoff(http_.initial_backoff_ms, attempt - 1);
    }
  }
  return Status(last.code(),
                std::string(last.message()) + " (after " + std::to_string(attempts) + " attempts)");
}

Result<ObjectHead> Client::Head(const Location& loc) const {
  Request req;
  req.loc = loc;
  req.head = true;
  req.what = "HEAD";
  Response resp;
  Status st = Perform(req, &resp);
  if (!st.ok()) {
    // A HEAD answer has no body, so no S3 error code: ask for one byte to
    // learn it (NoSuchKey or NoSuchBucket, AccessDenied or
    // InvalidAccessKeyId), which the message then names.
    if (resp.code >= 400 && resp.code < 500) {
      Request probe;
      probe.loc = loc;
      probe.headers = {{"range", "bytes=0-0"}};
      probe.what = "HEAD";
      std::string ignored;
      probe.text = &ignored;
      Response presp;
      Status pst = Perform(probe, &presp);
      if (!pst.ok() && presp.code == resp.code) return pst;
    }
    return st;
  }
  ObjectHead head;
  const std::string len = resp.Header("content-length");
  if (len.empty()) return UnavailableError("'" + loc.Url() + "' HEAD: no Content-Length");
  head.size = std::stoull(len);
  head.etag = resp.Header("etag");
  return head;
}

Status Client::GetRange(const Location& loc, uint64_t offset, size_t n, void* out,
                        const std::string& etag, uint64_t size) const {
  if (n == 0) return Status::OK();
  Request req;
  req.loc = loc;
  req.out = static_cast<char*>(out);
  req.out_capacity = n;
  const std::string range =
      "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + n - 1);
  req.what = "GET " + range;
  uint64_t asked_from = offset;
  // Each attempt asks for what is still missing: a body cut short keeps the
  // bytes that arrived and resumes after them.
  req.prepare = [&] {
    asked_from = offset + req.out_got;
    req.headers = {
        {"range", "bytes=" + std::to_string(asked_from) + "-" + std::to_string(offset + n - 1)}};
    if (!etag.empty()) req.headers.emplace_back("if-match", etag);
  };
  Response resp;
  Status st = Perform(req, &resp);
  if (st.code() == StatusCode::kFailedPrecondition) {
    return DataLossError("'" + loc.Url() + "' changed since it was opened (its ETag is no longer " +
                         etag + "): " + std::string(st.message()));
  }
  FEEDLINE_RETURN_IF_ERROR(st);
  const std::string where = "'" + loc.Url() + "' " + req.what;
  if (resp.code == 200 && asked_from != 0) {
    return DataLossError(where + ": the server ignored the Range header");
  }
  if (resp.code == 206) {
    // "bytes START-END/TOTAL": another total is another object.
    const std::string cr = resp.Header("content-range");
    unsigned long long a = 0, b = 0, total = 0;
    if (std::sscanf(cr.c_str(), "bytes %llu-%llu/%llu", &a, &b, &total) != 3 || a != asked_from) {
      return DataLossError(where + ": unexpected Content-Range '" + cr + "'");
    }
    if (size != 0 && total != size) {
      return DataLossError("'" + loc.Url() + "' changed since it was opened: " +
                           std::to_string(total) + " bytes now, " + std::to_string(size) + " then");
    }
  }
  if (!etag.empty() && !resp.Header("etag").empty() && resp.Header("etag") != etag) {
    return DataLossError("'" + loc.Url() + "' changed since it was opened (ETag " +
                         resp.Header("etag") + ", was " + etag + ")");
  }
  if (req.out_got != n) {
    return DataLossError(where + ": got " + std::to_string(req.out_got) + " of " +
                         std::to_string(n) + " bytes");
  }
  return Status::OK();
}

Status Client::GetObject(const Location& loc, uint64_t max_bytes, std::vector<uint8_t>* out,
                         const std::string& etag) const {
  Request req;
  req.loc = loc;
  req.vec = out;
  req.vec_max = max_bytes;
  req.vec_base = out->size();
  req.what = "GET";
  req.prepare = [&] {
    out->resize(req.vec_base);
    req.headers.clear();
    if (!etag.empty()) req.headers.emplace_back("if-match", etag);
  };
  Response resp;
  Status st = Perform(req, &resp);
  if (st.code() == StatusCode::kFailedPrecondition) {
    return DataLossError("'" + loc.Url() + "' changed since it was listed (its ETag is no longer " +
                         etag + ")");
  }
  FEEDLINE_RETURN_IF_ERROR(st);
  const std::string len = resp.Header("content-length");
  if (!len.empty() && std::stoull(len) != out->size() - req.vec_base) {
    return DataLossError("'" + loc.Url() + "' GET: got " +
                         std::to_string(out->size() - req.vec_base) + " of " + len + " bytes");
  }
  return Status::OK();
}

Result<std::vector<ObjectInfo>> Client::List(const std::string& bucket,
                                             const std::string& prefix) const {
  std::vector<ObjectInfo> objects;
  std::string token;
  for (uint64_t page = 0;; ++page) {
    Request req;
    req.loc = {bucket, ""};
    req.query = {{"list-type", "2"}};
    if (!prefix.empty()) req.query.emplace_back("prefix", prefix);
    if (!token.empty()) req.query.emplace_back("continuation-token", token);
    req.what = "ListObjectsV2 (prefix '" + prefix + "', page " + std::to_string(page + 1) + ")";
    std::string body;
    req.text = &body;
    req.prepare = [&] { body.clear(); };
    Response resp;
    Status st = Perform(req, &resp);
    if (!st.ok()) {
      return Status(st.code(),
                    "listing 's3://" + bucket + "/" + prefix + "': " + std::string(st.message()));
    }
    FEEDLINE_ASSIGN_OR_RETURN(std::unique_ptr<XmlNode> root, ParseXml(body));
    if (root->name != "ListBucketResult") {
      return DataLossError("listing 's3://" + bucket + "/" + prefix + "': the answer is <" +
                           root->name + ">, not <ListBucketResult>");
    }
    for (const auto& c : root->children) {
      if (c->name != "Contents") continue;
      ObjectInfo o;
      o.key = c->ChildText("Key");
      const std::string size = c->ChildText("Size");
      o.size = size.empty() ? 0 : std::stoull(size);
      o.etag = c->ChildText("ETag");
      objects.push_back(std::move(o));
    }
    if (root->ChildText("IsTruncated") != "true") break;
    token = root->ChildText("NextContinuationToken");
    if (token.empty()) {
      return DataLossError("listing 's3://" + bucket + "/" + prefix +
                           "': a truncated page without NextContinuationToken");
    }
  }
  return objects;
}

Status Client::Put(const Location& loc, const std::string& data) const {
  Request req;
  req.method = "PUT";
  req.loc = loc;
  req.body = data;
  req.what = "PutObject (" + std::to_string(data.size()) + " bytes)";
  std::string ignored;
  req.text = &ignored;
  Response resp;
  return Perform(req, &resp);
}

Status Client::Delete(const Location& loc) const {
  Request req;
  req.method = "DELETE";
  req.loc = loc;
  req.what = "DeleteObject";
  std::string ignored;
  req.text = &ignored;
  Response resp;
  return Perform(req, &resp);
}

Status Client::Upload(const std::string& local_path, const Location& loc) const {
  std::ifstream in(local_path, std::ios::binary | std::ios::ate);
  if (!in) return NotFoundError("cannot open '" + local_path + "' to upload it");
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  const uint64_t part = part_bytes();
  auto read_chunk = [&](uint64_t n, std::string* buf) -> Status {
    buf->resize(n);
    if (!in.read(buf->data(), static_cast<std::streamsize>(n)))
      return UnavailableError("cannot read '" + local_path + "' to upload it");
    return Status::OK();
  };
  std::string buf;
  if (size <= part) {
    FEEDLINE_RETURN_IF_ERROR(read_chunk(size, &buf));
    return Put(loc, buf);
  }
  // Multipart: create, upload the parts in order, complete; abort on failure.
  Request create;
  create.method = "POST";
  create.loc = loc;
  create.query = {{"uploads", ""}};
  create.what = "CreateMultipartUpload";
  std::string body;
  create.text = &body;
  create.prepare = [&] { body.clear(); };
  Response resp;
  FEEDLINE_RETURN_IF_ERROR(Perform(create, &resp));
  FEEDLINE_ASSIGN_OR_RETURN(std::unique_ptr<XmlNode> root, ParseXml(body));
  const std::string upload_id = root->ChildText("UploadId");
  if (upload_id.empty())
    return DataLossError("'" + loc.Url() + "' CreateMultipartUpload: no UploadId in the answer");
  auto abort = [&](Status st) {
    Request a;
    a.method = "DELETE";
    a.loc = loc;
    a.query = {{"uploadId", upload_id}};
    a.what = "AbortMultipartUpload";
    std::string ignored;
    a.text = &ignored;
    Response r;
    (void)Perform(a, &r);  // the upload's own error is the one to report
    return st;
  };
  std::vector<std::string> etags;
  for (uint64_t off = 0, number = 1; off < size; off += part, ++number) {
    Status st = read_chunk(std::min(part, size - off), &buf);
    if (!st.ok()) return abort(st);
    Request up;
    up.method = "PUT";
    up.loc = loc;
    up.query = {{"partNumber", std::to_string(number)}, {"uploadId", upload_id}};
    up.body = buf;
    up.what = "UploadPart " + std::to_string(number);
    std::string ignored;
    up.text = &ignored;
    Response r;
    st = Perform(up, &r);
    if (!st.ok()) return abort(st);
    if (r.Header("etag").empty())
      return abort(DataLossError("'" + loc.Url() + "' UploadPart " + std::to_string(number) +
                                 ": no ETag in the answer"));
    etags.push_back(r.Header("etag"));
  }
  std::string xml = "<CompleteMultipartUpload>";
  for (size_t i = 0; i < etags.size(); ++i) {
    xml += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" +
           XmlEscape(etags[i]) + "</ETag></Part>";
  }
  xml += "</CompleteMultipartUpload>";
  Request done;
  done.method = "POST";
  done.loc = loc;
  done.query = {{"uploadId", upload_id}};
  done.headers = {{"content-type", "application/xml"}};
  done.body = xml;
  done.what = "CompleteMultipartUpload";
  done.text = &body;
  done.prepare = [&] { body.clear(); };
  Status st = Perform(done, &resp);
  if (!st.ok()) return abort(st);
  // S3 may answer 200 with an <Error> body when completing fails late.
  Result<std::unique_ptr<XmlNode>> answer = ParseXml(body);
  if (answer.ok() && (*answer)->name == "Error") {
    return abort(UnavailableError("'" + loc.Url() +
                                  "' CompleteMultipartUpload: " + (*answer)->ChildText("Code") +
                                  " (" + (*answer)->ChildText("Message") + ")"));
  }
  return Status::OK();
}

namespace {

// The environment a Config is resolved from: a client is reused only while
// it is unchanged (a test, or a job, may switch profiles or endpoints).
std::string EnvKey() {
  std::string k;
  for (const char* name :
       {"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION",
        "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_EC2_METADATA_DISABLED",
        "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "HOME"}) {
    const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): as config.cc
    (k += '\n') += v != nullptr ? v : "\x01";
  }
  return k;
}

}  // namespace

Result<std::shared_ptr<const Client>> GetClient(const HttpOptions& http) {
  const S3Options& o = http.s3;
  const std::string key =
      o.endpoint_url + "\n" + o.region + "\n" + o.profile + "\n" +
      std::to_string(static_cast<int>(o.addressing)) + "\n" + std::to_string(o.anonymous) + "\n" +
      std::to_string(o.part_bytes) + "\n" + std::to_string(o.max_concurrency) + "\n" +
      std::to_string(http.connect_timeout_ms) + "\n" + std::to_string(http.stall_timeout_ms) +
      "\n" + std::to_string(http.request_timeout_ms) + "\n" + std::to_string(http.max_attempts) +
      "\n" + std::to_string(http.initial_backoff_ms) + EnvKey();
  static core::Mutex mu;
  // Never destroyed: files may be read while the process exits.
  static auto* clients = new std::map<std::string, std::shared_ptr<const Client>>();
  core::MutexLock l(&mu);
  auto it = clients->find(key);
  if (it != clients->end()) return it->second;
  FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const Config> config, ResolveConfig(o));
  auto client = std::make_shared<const Client>(std::move(config), http);
  (*clients)[key] = client;
  return std::shared_ptr<const Client>(client);
}

}  // namespace feedline::io::s3
