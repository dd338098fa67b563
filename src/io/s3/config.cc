// Resolution order (the AWS CLI's and boto3's):
//   region:      S3Options.region, AWS_REGION, AWS_DEFAULT_REGION, the
//                profile's `region`, "us-east-1"
//   endpoint:    S3Options.endpoint_url, AWS_ENDPOINT_URL_S3,
//                AWS_ENDPOINT_URL, the profile's `s3.endpoint_url` or
//                `endpoint_url`, https://s3.<region>.amazonaws.com
//   addressing:  S3Options.addressing, the profile's `s3.addressing_style`
//   credentials: none when anonymous; AWS_ACCESS_KEY_ID +
//                AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN); the profile
//                (AWS_PROFILE, else "default") in AWS_SHARED_CREDENTIALS_FILE
//                (~/.aws/credentials), then in AWS_CONFIG_FILE (~/.aws/config,
//                "[profile NAME]"); the container endpoint
//                (AWS_CONTAINER_CREDENTIALS_FULL_URI / _RELATIVE_URI, with
//                AWS_CONTAINER_AUTHORIZATION_TOKEN[_FILE]); EC2 instance
//                metadata, IMDSv2 (AWS_EC2_METADATA_SERVICE_ENDPOINT,
//                off with AWS_EC2_METADATA_DISABLED=true).
#include "src/io/s3/config.h"

#include <curl/curl.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace feedline::io::s3 {
namespace {

std::string Env(const char* name) {
  const char* v =
      std::getenv(name);  // NOLINT(concurrency-mt-unsafe): feedline never sets the environment
  return v != nullptr ? std::string(v) : std::string();
}

std::string Strip(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::string Lower(std::string s) {
  for (char& c : s) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return s;
}

std::string Home() {
  const std::string h = Env("HOME");
  return h.empty() ? "/root" : h;
}

bool ReadText(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

IniSections LoadIni(const std::string& path) {
  std::string text;
  if (!ReadText(path, &text)) return {};
  return ParseIni(text);
}

std::string CredentialsFile() {
  const std::string f = Env("AWS_SHARED_CREDENTIALS_FILE");
  return f.empty() ? Home() + "/.aws/credentials" : f;
}
std::string ConfigFile() {
  const std::string f = Env("AWS_CONFIG_FILE");
  return f.empty() ? Home() + "/.aws/config" : f;
}

// The profile's section of ~/.aws/config: "[default]" or "[profile NAME]".
std::map<std::string, std::string> ConfigProfile(const IniSections& ini, const std::string& name) {
  auto it = ini.find(name == "default" ? "default" : "profile " + name);
  if (it == ini.end() && name == "default") it = ini.find("profile default");
  return it == ini.end() ? std::map<std::string, std::string>{} : it->second;
}

std::string Value(const std::map<std::string, std::string>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? std::string() : it->second;
}

// --- small HTTP calls for the credential endpoints (not S3: unsigned) ---

size_t AppendBody(char* data, size_t size, size_t nmemb, void* user) {
  auto* s = static_cast<std::string*>(user);
  if (s->size() + size * nmemb > (1u << 20)) return 0;  // a credentials answer is tiny
  s->append(data, size * nmemb);
  return size * nmemb;
}

struct CurlDeleter {
  void operator()(CURL* h) const { curl_easy_cleanup(h); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

// One request with short timeouts: these endpoints answer in milliseconds
// or are not there at all (off EC2, 169.254.169.254 does not answer).
Status SimpleRequest(const std::string& method, const std::string& url,
                     const std::vector<std::string>& headers, std::string* body, long* code) {
  std::unique_ptr<CURL, CurlDeleter> h(curl_easy_init());
  if (!h) return InternalError("curl_easy_init failed");
  std::unique_ptr<curl_slist, SlistDeleter> list;
  for (const std::string& x : headers) list.reset(curl_slist_append(list.release(), x.c_str()));
  curl_easy_setopt(h.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(h.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h.get(), CURLOPT_CONNECTTIMEOUT_MS, 1000L);
  curl_easy_setopt(h.get(), CURLOPT_TIMEOUT_MS, 2000L);
  curl_easy_setopt(h.get(), CURLOPT_CUSTOMREQUEST, method.c_str());
  if (method == "PUT") {
    curl_easy_setopt(h.get(), CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(h.get(), CURLOPT_POSTFIELDSIZE, 0L);
  }
  curl_easy_setopt(h.get(), CURLOPT_HTTPHEADER, list.get());
  curl_easy_setopt(h.get(), CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(h.get(), CURLOPT_WRITEDATA, body);
  const CURLcode rc = curl_easy_perform(h.get());
  if (rc != CURLE_OK) return UnavailableError(url + ": " + curl_easy_strerror(rc));
  curl_easy_getinfo(h.get(), CURLINFO_RESPONSE_CODE, code);
  return Status::OK();
}

// {"AccessKeyId", "SecretAccessKey", "Token", "Expiration"}: the answer of
// both the container endpoint and IMDS.
Result<Credentials> ParseCredentialJson(const std::string& body, const std::string& source) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("AccessKeyId") || !j.contains("SecretAccessKey") ||
      !j["AccessKeyId"].is_string() || !j["SecretAccessKey"].is_string()) {
    return UnavailableError(source + " answered without AccessKeyId and SecretAccessKey");
  }
  Credentials c;
  c.access_key = j["AccessKeyId"].get<std::string>();
  c.secret_key = j["SecretAccessKey"].get<std::string>();
  if (j.contains("Token") && j["Token"].is_string())
    c.session_token = j["Token"].get<std::string>();
  if (j.contains("Expiration") && j["Expiration"].is_string()) {
    c.expires_unix = ParseIsoTime(j["Expiration"].get<std::string>());
    if (c.expires_unix < 0)
      return UnavailableError(source + " sent an unreadable Expiration '" +
                              j["Expiration"].get<std::string>() + "'");
  }
  c.source = source;
  return c;
}

Result<Credentials> FromContainer(std::string* tried) {
  std::string url = Env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  const std::string rel = Env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  if (url.empty() && !rel.empty()) url = "http://169.254.170.2" + rel;
  if (url.empty()) return NotFoundError("");
  std::vector<std::string> headers;
  std::string token = Env("AWS_CONTAINER_AUTHORIZATION_TOKEN");
  const std::string token_file = Env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  if (!token_file.empty() && !ReadText(token_file, &token))
    return UnavailableError("cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE '" + token_file +
                            "'");
  if (!token.empty()) headers.push_back("Authorization: " + Strip(token));
  std::string body;
  long code = 0;
  Status st = SimpleRequest("GET", url, headers, &body, &code);
  if (st.ok() && code != 200) st = UnavailableError(url + ": HTTP " + std::to_string(code));
  *tried += ", the container endpoint " + url;
  if (!st.ok()) return st;
  return ParseCredentialJson(body, "the container credentials endpoint " + url);
}

Result<Credentials> FromImds(std::string* tried) {
  if (Lower(Env("AWS_EC2_METADATA_DISABLED")) == "true") return NotFoundError("");
  std::string base = Env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  if (base.empty()) base = "http://169.254.169.254";
  while (!base.empty() && base.back() == '/') base.pop_back();
  *tried += ", EC2 instance metadata at " + base;
  std::string token;
  long code = 0;
  FEEDLINE_RETURN_IF_ERROR(SimpleRequest("PUT", base + "/latest/api/token",
                                         {"X-aws-ec2-metadata-token-ttl-seconds: 21600"}, &token,
                                         &code));
  if (code != 200) return UnavailableError("IMDSv2 token request: HTTP " + std::to_string(code));
  const std::vector<std::string> auth = {"X-aws-ec2-metadata-token: " + token};
  const std::string creds_url = base + "/latest/meta-data/iam/security-credentials/";
  std::string role;
  FEEDLINE_RETURN_IF_ERROR(SimpleRequest("GET", creds_url, auth, &role, &code));
  if (code != 200)
    return UnavailableError(creds_url + ": HTTP " + std::to_string(code) +
                            " (no IAM role attached to the instance?)");
  role = Strip(role.substr(0, role.find('\n')));
  std::string body;
  FEEDLINE_RETURN_IF_ERROR(SimpleRequest("GET", creds_url + role, auth, &body, &code));
  if (code != 200) return UnavailableError(creds_url + role + ": HTTP " + std::to_string(code));
  return ParseCredentialJson(body, "EC2 instance metadata (role " + role + ")");
}

class ChainProvider final : public CredentialProvider {
 public:
  explicit ChainProvider(std::string profile) : profile_(std::move(profile)) {}

  Result<Credentials> Get() override {
    core::MutexLock l(&mu_);
    const int64_t now = std::time(nullptr);
    // Refreshed 5 minutes before expiry, as the SDKs do, so a request signed
    // now is not refused on arrival.
    if (have_ && (cached_.expires_unix == 0 || now < cached_.expires_unix - 300)) return cached_;
    Result<Credentials> c = Resolve();
    if (!c.ok()) {
      // Still valid (inside the refresh window): keep using them.
      if (have_ && (cached_.expires_unix == 0 || now < cached_.expires_unix)) return cached_;
      return c.status();
    }
    cached_ = *c;
    have_ = true;
    return cached_;
  }
  void Invalidate() override {
    core::MutexLock l(&mu_);
    have_ = false;
  }

 private:
  Result<Credentials> Resolve() const {
    Credentials c;
    c.access_key = Env("AWS_ACCESS_KEY_ID");
    c.secret_key = Env("AWS_SECRET_ACCESS_KEY");
    if (!c.access_key.empty() && !c.secret_key.empty()) {
      c.session_token = Env("AWS_SESSION_TOKEN");
      c.source = "environment";
      return c;
    }
    std::string tried = "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY";
    const std::string cred_file = CredentialsFile();
    const IniSections creds = LoadIni(cred_file);
    tried += ", " + cred_file + " [" + profile_ + "]";
    if (auto it = creds.find(profile_); it != creds.end()) {
      c.access_key = Value(it->second, "aws_access_key_id");
      c.secret_key = Value(it->second, "aws_secret_access_key");
      c.session_token = Value(it->second, "aws_session_token");
      if (!c.access_key.empty() && !c.secret_key.empty()) {
        c.source = cred_file + " [" + profile_ + "]";
        return c;
      }
    }
    const std::string config_file = ConfigFile();
    const auto prof = ConfigProfile(LoadIni(config_file), profile_);
    tried += ", " + config_file + " (profile " + profile_ + ")";
    c.access_key = Value(prof, "aws_access_key_id");
    c.secret_key = Value(prof, "aws_secret_access_key");
    c.session_token = Value(prof, "aws_session_token");
    if (!c.access_key.empty() && !c.secret_key.empty()) {
      c.source = config_file + " (profile " + profile_ + ")";
      return c;
    }
    std::string errors;
    for (auto* source : {&FromContainer, &FromImds}) {
      Result<Credentials> r = source(&tried);
      if (r.ok()) return r;
      if (!r.status().message().empty()) errors += "; " + std::string(r.status().message());
    }
    return Status(StatusCode::kPermissionDenied,
                  "no AWS credentials found (looked at " + tried + errors +
                      "); set them, or pass anonymous=True for a public bucket");
  }

  const std::string profile_;
  core::Mutex mu_;
  bool have_ GUARDED_BY(mu_) = false;
  Credentials cached_ GUARDED_BY(mu_);
};

bool IsDnsBucket(const std::string& b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (char c : b) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return b.front() != '-' && b.back() != '-';
}

bool IsIpHost(const std::string& host) {
  if (!host.empty() && host.front() == '[') return true;  // IPv6
  const std::string h = host.substr(0, host.find(':'));
  if (h == "localhost") return true;
  for (char c : h) {
    if (!((c >= '0' && c <= '9') || c == '.')) return false;
  }
  return !h.empty();
}

}  // namespace

IniSections ParseIni(const std::string& text) {
  IniSections out;
  std::string section, parent;
  std::istringstream in(text);
  std::string raw;
  while (std::getline(in, raw)) {
    const bool indented = !raw.empty() && (raw[0] == ' ' || raw[0] == '\t');
    const std::string line = Strip(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = Strip(line.substr(1, line.size() - 2));
      parent.clear();
      out[section];
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos || section.empty()) continue;
    const std::string key = Lower(Strip(line.substr(0, eq)));
    const std::string value = Strip(line.substr(eq + 1));
    if (indented && !parent.empty()) {
      out[section][parent + "." + key] = value;
      continue;
    }
    parent = value.empty() ? key : "";  // "s3 =" opens a nested block
    if (!value.empty()) out[section][key] = value;
  }
  return out;
}

int64_t ParseIsoTime(const std::string& s) {
  std::tm tm{};
  int frac_end = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &frac_end) != 6) {
    return -1;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(timegm(&tm));
}

bool Config::PathStyle(const std::string& bucket) const {
  switch (addressing) {
    case S3Options::Addressing::kPath: return true;
    case S3Options::Addressing::kVirtual: return false;
    case S3Options::Addressing::kAuto: break;
  }
  return custom_endpoint || IsIpHost(host) || !IsDnsBucket(bucket);
}

Result<std::shared_ptr<const Config>> ResolveConfig(const S3Options& options) {
  auto c = std::make_shared<Config>();
  c->profile = !options.profile.empty() ? options.profile : Env("AWS_PROFILE");
  if (c->profile.empty()) c->profile = Env("AWS_DEFAULT_PROFILE");
  if (c->profile.empty()) c->profile = "default";
  const std::string config_file = ConfigFile();
  const auto prof = ConfigProfile(LoadIni(config_file), c->profile);

  c->region = options.region;
  for (const char* name : {"AWS_REGION", "AWS_DEFAULT_REGION"}) {
    if (c->region.empty()) c->region = Env(name);
  }
  if (c->region.empty()) c->region = Value(prof, "region");
  if (c->region.empty()) c->region = "us-east-1";

  std::string endpoint = options.endpoint_url;
  if (endpoint.empty() && Lower(Env("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")) != "true") {
    endpoint = Env("AWS_ENDPOINT_URL_S3");
    if (endpoint.empty()) endpoint = Env("AWS_ENDPOINT_URL");
    if (endpoint.empty()) endpoint = Value(prof, "s3.endpoint_url");
    if (endpoint.empty()) endpoint = Value(prof, "endpoint_url");
  }
  c->custom_endpoint = !endpoint.empty();
  if (endpoint.empty()) endpoint = "https://s3." + c->region + ".amazonaws.com";
  const size_t scheme_end = endpoint.find("://");
  if (scheme_end == std::string::npos || (endpoint.compare(0, scheme_end, "http") != 0 &&
                                          endpoint.compare(0, scheme_end, "https") != 0)) {
    return InvalidArgumentError("S3 endpoint '" + endpoint + "' is not an http:// or https:// URL");
  }
  c->scheme = endpoint.substr(0, scheme_end);
  std::string rest = endpoint.substr(scheme_end + 3);
  const size_t slash = rest.find('/');
  c->host = rest.substr(0, slash);
  if (slash != std::string::npos) {
    c->base_path = rest.substr(slash);
    while (!c->base_path.empty() && c->base_path.back() == '/') c->base_path.pop_back();
  }
  if (c->host.empty()) return InvalidArgumentError("S3 endpoint '" + endpoint + "' has no host");

  c->addressing = options.addressing;
  if (c->addressing == S3Options::Addressing::kAuto) {
    const std::string style = Lower(Value(prof, "s3.addressing_style"));
    if (style == "path") c->addressing = S3Options::Addressing::kPath;
    if (style == "virtual") c->addressing = S3Options::Addressing::kVirtual;
  }
  c->anonymous = options.anonymous;
  if (!c->anonymous) c->credentials = std::make_shared<ChainProvider>(c->profile);
  return std::shared_ptr<const Config>(std::move(c));
}

}  // namespace feedline::io::s3
