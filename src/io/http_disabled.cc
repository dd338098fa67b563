// OpenHttpFile for builds without libcurl (FEEDLINE_WITH_HTTP=OFF, e.g. a
// machine where only the image and shard dependencies can be carried): every
// URL is refused, naming it and the build option, instead of failing later.
#include <memory>
#include <string>

#include "feedline/file.h"
#include "feedline/object_store.h"

namespace feedline::io {

Result<std::unique_ptr<RandomAccessFile>> OpenHttpFile(const std::string& url,
                                                       const HttpOptions& /*options*/) {
  return UnimplementedError(
      "cannot read '" + url +
      "': this feedline was built without HTTP support (FEEDLINE_WITH_HTTP=OFF); "
      "rebuild with libcurl, or copy the dataset to local disk");
}

}  // namespace feedline::io

namespace feedline {
namespace {
Status NoS3(const std::string& url) {
  return UnimplementedError("cannot reach '" + url +
                            "': this feedline was built without HTTP support "
                            "(FEEDLINE_WITH_HTTP=OFF), which S3 needs too");
}
}  // namespace

namespace io {
Result<std::unique_ptr<RandomAccessFile>> OpenS3File(const std::string& url,
                                                     const HttpOptions& /*options*/) {
  return NoS3(url);
}
}  // namespace io

Result<std::vector<ObjectInfo>> ListObjects(const std::string& prefix_url, const HttpOptions&) {
  return NoS3(prefix_url);
}
Status ReadObject(const std::string& url, uint64_t, std::vector<uint8_t>*, const HttpOptions&,
                  const std::string&) {
  return NoS3(url);
}
Status UploadFile(const std::string&, const std::string& url, const HttpOptions&) {
  return NoS3(url);
}
Status DeleteObject(const std::string& url, const HttpOptions&) { return NoS3(url); }
ObjectStoreStats GetObjectStoreStats() { return {}; }
Status UploadDirectory(const std::string&, const std::string& prefix_url, const std::string&,
                       const HttpOptions&) {
  return NoS3(prefix_url);
}
}  // namespace feedline
