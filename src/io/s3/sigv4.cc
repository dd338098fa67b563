#include "src/io/s3/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <ctime>

namespace feedline::io::s3 {
namespace {

std::string Hex(const unsigned char* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[p[i] >> 4];
    out[2 * i + 1] = kDigits[p[i] & 15];
  }
  return out;
}

std::string Hmac(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &n);
  return std::string(reinterpret_cast<const char*>(out), n);
}

std::string Lower(std::string s) {
  for (char& c : s) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return s;
}

// Header values are signed trimmed, with inner runs of spaces as one.
std::string Trim(std::string_view v) {
  std::string out;
  bool space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::vector<Header> SortedHeaders(const std::vector<Header>& headers) {
  std::vector<Header> h;
  h.reserve(headers.size());
  for (const Header& x : headers) h.emplace_back(Lower(x.first), Trim(x.second));
  std::stable_sort(h.begin(), h.end(),
                   [](const Header& a, const Header& b) { return a.first < b.first; });
  // Repeated names are signed once, their values joined by commas.
  std::vector<Header> out;
  for (Header& x : h) {
    if (!out.empty() && out.back().first == x.first) {
      out.back().second += "," + x.second;
    } else {
      out.push_back(std::move(x));
    }
  }
  return out;
}

std::string SignedHeaders(const std::vector<Header>& sorted) {
  std::string s;
  for (const Header& h : sorted) {
    if (!s.empty()) s += ';';
    s += h.first;
  }
  return s;
}

std::string Scope(const SigningKeys& k, const std::string& amz_date) {
  return amz_date.substr(0, 8) + "/" + k.region + "/" + k.service + "/aws4_request";
}

}  // namespace

std::string UriEncode(std::string_view s, bool keep_slash) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
      out += ch;
    } else {
      out += '%';
      out += kDigits[c >> 4];
      out += kDigits[c & 15];
    }
  }
  return out;
}

std::string HexSha256(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), md, &n, EVP_sha256(), nullptr);
  return Hex(md, n);
}

std::string AmzDate(int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

std::string CanonicalQuery(const std::vector<Header>& query) {
  std::vector<Header> q;
  q.reserve(query.size());
  for (const Header& x : query)
    q.emplace_back(UriEncode(x.first, false), UriEncode(x.second, false));
  std::sort(q.begin(), q.end());
  std::string s;
  for (const Header& x : q) {
    if (!s.empty()) s += '&';
    s += x.first + "=" + x.second;
  }
  return s;
}

std::string CanonicalRequest(const SigningRequest& r) {
  const std::vector<Header> headers = SortedHeaders(r.headers);
  std::string s =
      r.method + "\n" + (r.path.empty() ? "/" : r.path) + "\n" + CanonicalQuery(r.query) + "\n";
  for (const Header& h : headers) s += h.first + ":" + h.second + "\n";
  s += "\n" + SignedHeaders(headers) + "\n" + r.payload_sha256;
  return s;
}

std::string StringToSign(const SigningRequest& r, const SigningKeys& k,
                         const std::string& amz_date) {
  return "AWS4-HMAC-SHA256\n" + amz_date + "\n" + Scope(k, amz_date) + "\n" +
         HexSha256(CanonicalRequest(r));
}

std::string Signature(const SigningRequest& r, const SigningKeys& k, const std::string& amz_date) {
  const std::string date_key = Hmac("AWS4" + k.secret_key, amz_date.substr(0, 8));
  const std::string region_key = Hmac(date_key, k.region);
  const std::string service_key = Hmac(region_key, k.service);
  const std::string signing_key = Hmac(service_key, "aws4_request");
  const std::string sig = Hmac(signing_key, StringToSign(r, k, amz_date));
  return Hex(reinterpret_cast<const unsigned char*>(sig.data()), sig.size());
}

std::string AuthorizationHeader(const SigningRequest& r, const SigningKeys& k,
                                const std::string& amz_date) {
  return "AWS4-HMAC-SHA256 Credential=" + k.access_key + "/" + Scope(k, amz_date) +
         ", SignedHeaders=" + SignedHeaders(SortedHeaders(r.headers)) +
         ", Signature=" + Signature(r, k, amz_date);
}

}  // namespace feedline::io::s3
