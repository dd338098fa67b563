// The local implementation of RandomAccessFile, and OpenFile's dispatch.
#include "feedline/file.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <system_error>

#include "feedline/object_store.h"
#include "src/core/mutex.h"

namespace feedline {

namespace io {
Result<std::unique_ptr<RandomAccessFile>> OpenHttpFile(const std::string& url,
                                                       const HttpOptions& options);
Result<std::unique_ptr<RandomAccessFile>> OpenS3File(const std::string& url,
                                                     const HttpOptions& options);
}  // namespace io

namespace {

class PosixFile final : public RandomAccessFile {
 public:
  PosixFile(std::string name, int fd, uint64_t size)
      : name_(std::move(name)), fd_(fd), size_(size) {}
  ~PosixFile() override { ::close(fd_); }
  PosixFile(const PosixFile&) = delete;
  PosixFile& operator=(const PosixFile&) = delete;

  Status Read(uint64_t offset, size_t n, void* out) const override {
    size_t done = 0;
    while (done < n) {
      const ssize_t got =
          ::pread(fd_, static_cast<char*>(out) + done, n - done, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        const int err = errno;  // before the message's allocations
        return UnavailableError("'" + name_ + "': read at offset " + std::to_string(offset + done) +
                                " failed: " + std::generic_category().message(err));
      }
      if (got == 0) {
        return DataLossError("'" + name_ + "': truncated: no data at offset " +
                             std::to_string(offset + done) + " (the file shrank?)");
      }
      done += static_cast<size_t>(got);
    }
    return Status::OK();
  }
  uint64_t size() const override { return size_; }
  const std::string& name() const override { return name_; }

 private:
  const std::string name_;
  const int fd_;
  const uint64_t size_;
};

}  // namespace

bool IsUrl(const std::string& name) {
  return name.rfind("http://", 0) == 0 || name.rfind("https://", 0) == 0;
}

bool IsS3Url(const std::string& name) { return name.rfind("s3://", 0) == 0; }

bool IsRemote(const std::string& name) { return IsUrl(name) || IsS3Url(name); }

std::string JoinName(const std::string& base, const std::string& leaf) {
  if (base.empty()) return leaf;
  return base.back() == '/' ? base + leaf : base + "/" + leaf;
}

namespace {

// Out of descriptors: raise the soft RLIMIT_NOFILE to the hard limit, as Go's
// runtime does at start-up. Datasets keep a bounded set of descriptors
// (src/io/file_cache.h, sized from the soft limit), but the rest of the
// process (sockets, pipes, the framework) may still meet the common soft
// limit of 1024 while the hard limit is usually far higher. True if the
// limit went up.
bool RaiseDescriptorLimit() {
  static core::Mutex mu;
  core::MutexLock l(&mu);
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= lim.rlim_max) return false;
  rlimit raised = lim;
  raised.rlim_cur = lim.rlim_max;
  return setrlimit(RLIMIT_NOFILE, &raised) == 0;
}

}  // namespace

namespace {

core::Mutex wrapper_mu;
FileWrapper& Wrapper() REQUIRES(wrapper_mu) {
  static FileWrapper* wrapper = new FileWrapper();  // never destroyed: files may open during exit
  return *wrapper;
}

Result<std::unique_ptr<RandomAccessFile>> OpenUnwrapped(const std::string& name,
                                                        const HttpOptions& http);

}  // namespace

FileWrapper SetFileWrapperForTesting(FileWrapper wrapper) {
  core::MutexLock l(&wrapper_mu);
  std::swap(Wrapper(), wrapper);
  return wrapper;
}

Result<std::unique_ptr<RandomAccessFile>> OpenFile(const std::string& name,
                                                   const HttpOptions& http) {
  FEEDLINE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, OpenUnwrapped(name, http));
  FileWrapper wrap;
  {
    core::MutexLock l(&wrapper_mu);
    wrap = Wrapper();
  }
  // Called without the lock: a wrapper may open files itself.
  return wrap ? wrap(std::move(file)) : std::move(file);
}

Status ReadWholeFile(const std::string& name, uint64_t max_bytes, std::vector<uint8_t>* out,
                     const HttpOptions& http, const std::string& etag) {
  if (IsS3Url(name)) return ReadObject(name, max_bytes, out, http, etag);
  FEEDLINE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, OpenFile(name, http));
  if (file->size() > max_bytes) {
    return ResourceExhaustedError("'" + name + "' is " + std::to_string(file->size()) +
                                  " bytes, over the " + std::to_string(max_bytes) + "-byte limit");
  }
  const size_t begin = out->size();
  out->resize(begin + file->size());
  Status st = file->Read(0, file->size(), out->data() + begin);
  if (!st.ok()) out->resize(begin);
  return st;
}

namespace {

Result<std::unique_ptr<RandomAccessFile>> OpenUnwrapped(const std::string& name,
                                                        const HttpOptions& http) {
  if (IsUrl(name)) return io::OpenHttpFile(name, http);
  if (IsS3Url(name)) return io::OpenS3File(name, http);
  // O_NONBLOCK: opening a fifo must not wait for a writer; it is refused below.
  constexpr int kFlags = O_RDONLY | O_CLOEXEC | O_NONBLOCK;
  int fd = ::open(name.c_str(), kFlags);
  if (fd < 0 && errno == EMFILE && RaiseDescriptorLimit()) fd = ::open(name.c_str(), kFlags);
  if (fd < 0) {
    const int err = errno;
    const std::string msg = "cannot open '" + name + "': " + std::generic_category().message(err);
    if (err == EMFILE || err == ENFILE) {
      rlimit lim{};
      getrlimit(RLIMIT_NOFILE, &lim);
      return ResourceExhaustedError(msg + " (RLIMIT_NOFILE is " + std::to_string(lim.rlim_cur) +
                                    ", hard limit " + std::to_string(lim.rlim_max) +
                                    "; shard and tar datasets keep at most about half of it open)");
    }
    return err == ENOENT ? NotFoundError(msg) : UnavailableError(msg);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return UnavailableError("cannot stat '" + name + "': " + std::generic_category().message(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char* what = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a fifo"
                                              : "a special file";
    return InvalidArgumentError("cannot open '" + name + "': " + what + ", not a regular file");
  }
  return std::unique_ptr<RandomAccessFile>(
      new PosixFile(name, fd, static_cast<uint64_t>(st.st_size)));
}

}  // namespace

}  // namespace feedline
