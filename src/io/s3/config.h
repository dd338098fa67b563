// Where an S3 request goes and who signs it, resolved as the AWS CLI and
// boto3 resolve them (docs/object_stores.md has the order of each):
// region, endpoint, addressing style, and credentials from the environment,
// the shared files (~/.aws/credentials, ~/.aws/config, AWS_PROFILE), the
// container credentials endpoint, or EC2's instance metadata (IMDSv2),
// refreshed before they expire.
//
// Thread safety: a Config is immutable once resolved; a
// CredentialProvider is safe for concurrent use.
#ifndef FEEDLINE_SRC_IO_S3_CONFIG_H_
#define FEEDLINE_SRC_IO_S3_CONFIG_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "feedline/file.h"
#include "feedline/status.h"
#include "src/core/mutex.h"

namespace feedline::io::s3 {

struct Credentials {
  std::string access_key, secret_key, session_token;
  int64_t expires_unix = 0;  // 0: never
  std::string source;        // "environment", "shared credentials file [default]", ...
};

// An INI file as the AWS files are: [section] headers, key = value lines,
// and one level of nesting ("s3 =" followed by indented key = value lines,
// stored as "s3.key"). Names are case-sensitive, keys lower-cased.
using IniSections = std::map<std::string, std::map<std::string, std::string>>;
IniSections ParseIni(const std::string& text);

// Fetches credentials once and again shortly before they expire.
class CredentialProvider {
 public:
  virtual ~CredentialProvider() = default;
  // Errors name every place that was looked at.
  virtual Result<Credentials> Get() = 0;
  // The server said the credentials expired: the next Get refreshes.
  virtual void Invalidate() = 0;
};

struct Config {
  std::string region;
  std::string scheme = "https";  // of the endpoint
  std::string host;              // host[:port] of the endpoint
  std::string base_path;         // a path in the endpoint URL, without a trailing '/'
  bool custom_endpoint = false;
  S3Options::Addressing addressing = S3Options::Addressing::kAuto;
  bool anonymous = false;
  std::string profile;
  std::shared_ptr<CredentialProvider> credentials;  // null when anonymous

  // Path-style for custom endpoints, IP hosts and bucket names that are not
  // DNS labels; virtual-hosted otherwise (AWS's default), unless forced.
  bool PathStyle(const std::string& bucket) const;
};

// Resolves options over the environment and the shared files.
Result<std::shared_ptr<const Config>> ResolveConfig(const S3Options& options);

// Parses an ISO 8601 UTC time ("2026-12-07T13:00:00Z"); -1 when malformed.
int64_t ParseIsoTime(const std::string& s);

}  // namespace feedline::io::s3

#endif  // FEEDLINE_SRC_IO_S3_CONFIG_H_
