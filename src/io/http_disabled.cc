// OpenHttpFile for builds without libcurl (FEEDLINE_WITH_HTTP=OFF, e.g. a
// machine where only the image and shard dependencies can be carried): every
// URL is refused, naming it and the build option, instead of failing later.
#include <memory>
#include <string>

#include "feedline/file.h"

namespace feedline::io {

Result<std::unique_ptr<RandomAccessFile>> OpenHttpFile(const std::string& url,
                                                       const HttpOptions& /*options*/) {
  return UnimplementedError(
      "cannot read '" + url +
      "': this feedline was built without HTTP support (FEEDLINE_WITH_HTTP=OFF); "
      "rebuild with libcurl, or copy the dataset to local disk");
}

}  // namespace feedline::io
