#include "src/tokens/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace feedline::tokens::detail {
namespace {

Status ErrnoError(const std::string& what, const std::string& path, int err) {
  std::string msg = "token file '" + path + "': " + what + ": " +
                    std::error_code(err, std::generic_category()).message();
  if (err == ENOENT) return NotFoundError(msg);
  return UnavailableError(msg);
}

}  // namespace

Result<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoError("cannot stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgumentError("token file '" + path + "' is not a regular file");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return ErrnoError("cannot mmap " + std::to_string(size) + " bytes", path, err);
    }
    data = static_cast<const uint8_t*>(p);
  }
  // The mapping keeps the file's pages; the descriptor is not needed.
  ::close(fd);
  return std::unique_ptr<MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace feedline::tokens::detail
