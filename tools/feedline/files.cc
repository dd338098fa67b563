#include "tools/feedline/files.h"

#include <cerrno>
#include <system_error>

#include "feedline/file.h"

namespace feedline::cli {
namespace {

namespace fs = std::filesystem;

std::string TypeName(fs::file_type t) {
  switch (t) {
    case fs::file_type::regular: return "a regular file";
    case fs::file_type::directory: return "a directory";
    case fs::file_type::symlink: return "a symlink";
    case fs::file_type::block: return "a block device";
    case fs::file_type::character: return "a character device";
    case fs::file_type::fifo: return "a fifo";
    case fs::file_type::socket: return "a socket";
    default: return "not a regular file";
  }
}

Status Require(const fs::path& path, fs::file_type want) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec) {
    if (ec.value() == ELOOP)
      return InvalidArgumentError("'" + path.string() + "' is a symlink loop");
    if (ec == std::errc::no_such_file_or_directory)
      return NotFoundError("'" + path.string() + "' does not exist");
    return UnavailableError("cannot stat '" + path.string() + "': " + ec.message());
  }
  if (st.type() == want) return Status::OK();
  if (st.type() == fs::file_type::not_found)
    return NotFoundError("'" + path.string() + "' does not exist");
  return InvalidArgumentError("'" + path.string() + "' is " + TypeName(st.type()) + ", not " +
                              TypeName(want));
}

}  // namespace

Status RequireRegularFile(const fs::path& path) { return Require(path, fs::file_type::regular); }

Result<std::vector<uint8_t>> ReadRegularFile(const std::string& path) {
  FEEDLINE_RETURN_IF_ERROR(RequireRegularFile(path));
  FEEDLINE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, OpenFile(path));
  std::vector<uint8_t> out(file->size());
  FEEDLINE_RETURN_IF_ERROR(file->Read(0, out.size(), out.data()));
  return out;
}

Result<std::vector<fs::path>> ListDirectory(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    out.push_back(it->path());
  if (ec) return UnavailableError("cannot list '" + dir.string() + "': " + ec.message());
  return out;
}

}  // namespace feedline::cli
