// Built without Arrow C++ (cmake/FeedlineArrow.cmake found no pyarrow):
// Parquet and Arrow IPC sources are refused with how to get them.
#include "feedline/columnar.h"

namespace feedline {
namespace {

Status NoArrow(const std::string& what) {
  return UnimplementedError(
      "'" + what +
      "': this feedline was built without Apache Arrow, so it reads no Parquet or Arrow "
      "files; rebuild with a pyarrow installed (pip install pyarrow; cmake "
      "-DFEEDLINE_PYARROW_DIR=<its folder>, docs/columnar.md)");
}

}  // namespace

bool ColumnarSupported() { return false; }
std::string ColumnarLibraryVersion() { return ""; }

Result<std::vector<std::string>> ColumnarDataset::ListFiles(const std::string& path,
                                                            const HttpOptions&) {
  return NoArrow(path);
}

Result<std::shared_ptr<const ColumnarDataset>> ColumnarDataset::Open(
    const std::vector<std::string>& files, const ColumnarOptions&) {
  return NoArrow(files.empty() ? std::string() : files.front());
}

Result<std::shared_ptr<const ColumnarDataset>> ColumnarDataset::FromArrowStream(
    ArrowArrayStream*, const std::string& name, const ColumnarOptions&) {
  return NoArrow(name);
}

std::shared_ptr<const SampleOp> MakeColumnarReadOp(std::shared_ptr<const ColumnarDataset>) {
  return nullptr;
}

}  // namespace feedline
