// AWS Signature Version 4 for S3 requests (docs/object_stores.md): the
// canonical request, the string to sign, the signing key and the
// Authorization header, as AWS's "Authenticating Requests (AWS Signature
// Version 4)" defines them. Pure functions over strings (OpenSSL's SHA-256
// and HMAC underneath), tested against AWS's published S3 examples and
// against botocore's signer (tests/io/sigv4_test.cc,
// tests/python/test_object_store.py).
//
// Thread safety: free functions, safe for concurrent use.
#ifndef FEEDLINE_SRC_IO_S3_SIGV4_H_
#define FEEDLINE_SRC_IO_S3_SIGV4_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace feedline::io::s3 {

using Header = std::pair<std::string, std::string>;  // name, value

struct SigningRequest {
  std::string method;           // "GET", "PUT", ...
  std::string path;             // already URI-encoded (UriEncode(key, false))
  std::vector<Header> query;    // raw (not encoded) names and values
  std::vector<Header> headers;  // every header to sign, host included
  std::string payload_sha256;   // hex, or "UNSIGNED-PAYLOAD"
};

struct SigningKeys {
  std::string access_key, secret_key;
  std::string region = "us-east-1";
  std::string service = "s3";
};

// RFC 3986 percent-encoding of everything but A-Z a-z 0-9 - . _ ~ (and '/'
// when keep_slash: S3 object paths are encoded once, slashes kept).
std::string UriEncode(std::string_view s, bool keep_slash);

std::string HexSha256(std::string_view data);

// "20130524T000000Z" for a UNIX time.
std::string AmzDate(int64_t unix_seconds);

// The canonical query string: names and values encoded, sorted by name
// (then value).
std::string CanonicalQuery(const std::vector<Header>& query);

std::string CanonicalRequest(const SigningRequest& r);
// amz_date is the request's x-amz-date ("YYYYMMDDTHHMMSSZ").
std::string StringToSign(const SigningRequest& r, const SigningKeys& k,
                         const std::string& amz_date);
std::string Signature(const SigningRequest& r, const SigningKeys& k, const std::string& amz_date);
// "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...".
std::string AuthorizationHeader(const SigningRequest& r, const SigningKeys& k,
                                const std::string& amz_date);

}  // namespace feedline::io::s3

#endif  // FEEDLINE_SRC_IO_S3_SIGV4_H_
