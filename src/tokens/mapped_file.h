// A read-only memory map of a whole file, for the token readers: windows are
// read at random offsets, whole, so the page cache serves them directly.
// Immutable after Open; safe for concurrent use.
#ifndef FEEDLINE_SRC_TOKENS_MAPPED_FILE_H_
#define FEEDLINE_SRC_TOKENS_MAPPED_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "feedline/status.h"

namespace feedline::tokens::detail {

class MappedFile {
 public:
  // NotFound for a missing file; InvalidArgument for something that is not a
  // regular file; Unavailable when open, stat or mmap fail (errno named).
  // A zero-byte file maps to no memory (data() null, size() 0).
  static Result<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, uint64_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_;
  uint64_t size_;
};

}  // namespace feedline::tokens::detail

#endif  // FEEDLINE_SRC_TOKENS_MAPPED_FILE_H_
