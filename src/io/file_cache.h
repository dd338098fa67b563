// FileCache: a bounded set of open local files, so a dataset of any number
// of shards or tars holds at most `capacity` idle descriptors (web-scale
// WebDataset sets have 10^5 tars; the usual soft RLIMIT_NOFILE is 1,024).
//
// Open() opens a file once (every error OpenFile gives, at once) and
// returns a RandomAccessFile that keeps only the name and the size. Each
// Read takes the open file from the cache, least-recently-used order,
// reopening it through OpenFile when it was closed to make room. A reopen
// that fails, or finds a different size, is the read's error, naming the
// file: never a silent short or stale read.
//
// The open files are shared_ptrs: a read in flight keeps its descriptor
// alive even if the cache drops it meanwhile, and a file dropped to make
// room is closed after the lock is released, so the process holds at most
// capacity + 2 x (concurrent readers) descriptors through a cache (each
// reader: the file it reads, and one it reopened or dropped and has not yet
// inserted or closed), and no descriptor is closed under a reader. pread has no file position, so
// one descriptor serves concurrent reads.
//
// URLs are not cached (an HTTP file holds no descriptor between requests):
// Open returns OpenFile's file for them.
//
// Thread safety: safe for concurrent use; so are the files it returns.
// Files may outlive the cache handle they came from (they share it).
#ifndef FEEDLINE_SRC_IO_FILE_CACHE_H_
#define FEEDLINE_SRC_IO_FILE_CACHE_H_

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

#include "feedline/file.h"
#include "feedline/status.h"
#include "src/core/mutex.h"

namespace feedline::io {

class FileCache : public std::enable_shared_from_this<FileCache> {
 public:
  // Idle descriptors kept at most; at least 1.
  static std::shared_ptr<FileCache> Create(size_t capacity);
  // The process-wide cache shard and tar datasets use, sized by
  // CapacityFor(the soft RLIMIT_NOFILE) when first used.
  static std::shared_ptr<FileCache> Default();
  // Half the soft limit, leaving at least 256 descriptors to the rest of
  // the process (sockets, pipes, torch, images read from folders), and at
  // least kMinCapacity; at most kMaxCapacity (an unlimited soft limit).
  static constexpr size_t kMinCapacity = 8;
  static constexpr size_t kMaxCapacity = 65536;
  static size_t CapacityFor(uint64_t soft_limit);

  // Opens `name` (a local path: cached; a URL: OpenFile's file as it is).
  // Errors are OpenFile's.
  Result<std::unique_ptr<RandomAccessFile>> Open(const std::string& name,
                                                 const HttpOptions& http = {});

  size_t capacity() const { return capacity_; }
  // Descriptors the cache holds now (not counting reads in flight on ones
  // it has dropped).
  size_t open_files() const EXCLUDES(mu_);
  // Reopens so far: files closed to make room and opened again on a read.
  uint64_t reopens() const EXCLUDES(mu_);

 private:
  class CachedFile;
  explicit FileCache(size_t capacity) : capacity_(capacity) {}

  // The open file for `id`, reopened if it was dropped; checks the size.
  Result<std::shared_ptr<const RandomAccessFile>> Acquire(uint64_t id, const std::string& name,
                                                          uint64_t size) EXCLUDES(mu_);
  // Makes `file` the most recent entry for `id` (keeping one that a racing
  // Acquire inserted first) and drops the least recent beyond capacity.
  std::shared_ptr<const RandomAccessFile> Insert(uint64_t id,
                                                 std::shared_ptr<const RandomAccessFile> file)
      EXCLUDES(mu_);
  // Drops the least recent entries until one more fits, before an open:
  // the new descriptor never takes the cache past capacity.
  void MakeRoom() EXCLUDES(mu_);
  // Drops every entry (reads in flight keep theirs open until they end);
  // true if any was dropped. Used on EMFILE.
  bool DropAll() EXCLUDES(mu_);
  void Forget(uint64_t id) EXCLUDES(mu_);
  Result<std::unique_ptr<RandomAccessFile>> OpenLocal(const std::string& name);

  struct Entry {
    std::shared_ptr<const RandomAccessFile> file;
    std::list<uint64_t>::iterator lru;  // position in lru_
  };

  // Constant after construction.
  const size_t capacity_;

  // Protected by mu_: the map and the recency list change together. Never
  // held across an open or a read (blocking I/O); closing a dropped file
  // happens after the lock is released too.
  mutable core::Mutex mu_;
  uint64_t next_id_ GUARDED_BY(mu_) = 0;
  uint64_t reopens_ GUARDED_BY(mu_) = 0;
  std::list<uint64_t> lru_ GUARDED_BY(mu_);  // most recent first
  std::unordered_map<uint64_t, Entry> entries_ GUARDED_BY(mu_);
};

}  // namespace feedline::io

#endif  // FEEDLINE_SRC_IO_FILE_CACHE_H_
