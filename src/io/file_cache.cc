#include "src/io/file_cache.h"

#include <sys/resource.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace feedline::io {

// What a dataset holds for one file: its name and size, learnt at Open; the
// descriptor lives in the cache.
class FileCache::CachedFile final : public RandomAccessFile {
 public:
  CachedFile(std::shared_ptr<FileCache> cache, uint64_t id, std::string name, uint64_t size)
      : cache_(std::move(cache)), id_(id), name_(std::move(name)), size_(size) {}
  ~CachedFile() override { cache_->Forget(id_); }
  CachedFile(const CachedFile&) = delete;
  CachedFile& operator=(const CachedFile&) = delete;

  Status Read(uint64_t offset, size_t n, void* out) const override {
    FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const RandomAccessFile> file,
                              cache_->Acquire(id_, name_, size_));
    return file->Read(offset, n, out);
  }
  uint64_t size() const override { return size_; }
  const std::string& name() const override { return name_; }

 private:
  const std::shared_ptr<FileCache> cache_;
  const uint64_t id_;
  const std::string name_;
  const uint64_t size_;
};

std::shared_ptr<FileCache> FileCache::Create(size_t capacity) {
  return std::shared_ptr<FileCache>(new FileCache(std::max<size_t>(capacity, 1)));
}

size_t FileCache::CapacityFor(uint64_t soft_limit) {
  if (soft_limit == RLIM_INFINITY) return kMaxCapacity;
  constexpr uint64_t kLeftToOthers = 256;
  const uint64_t half = soft_limit / 2;
  const uint64_t rest = soft_limit > kLeftToOthers ? soft_limit - kLeftToOthers : 0;
  return static_cast<size_t>(
      std::clamp<uint64_t>(std::min(half, rest), kMinCapacity, kMaxCapacity));
}

std::shared_ptr<FileCache> FileCache::Default() {
  // Sized once, from the limit when a dataset is first opened. Never
  // destroyed: files may be read during exit.
  static std::shared_ptr<FileCache>* cache = [] {
    rlimit lim{};
    const uint64_t soft = getrlimit(RLIMIT_NOFILE, &lim) == 0 ? lim.rlim_cur : 1024;
    return new std::shared_ptr<FileCache>(Create(CapacityFor(soft)));
  }();
  return *cache;
}

Result<std::unique_ptr<RandomAccessFile>> FileCache::OpenLocal(const std::string& name) {
  Result<std::unique_ptr<RandomAccessFile>> file = OpenFile(name);
  // Out of descriptors even after OpenFile raised the soft limit: give
  // back the idle ones this cache holds and try once more.
  if (!file.ok() && file.status().code() == StatusCode::kResourceExhausted && DropAll())
    file = OpenFile(name);
  return file;
}

Result<std::unique_ptr<RandomAccessFile>> FileCache::Open(const std::string& name,
                                                          const HttpOptions& http) {
  if (IsRemote(name)) return OpenFile(name, http);
  MakeRoom();
  FEEDLINE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, OpenLocal(name));
  const uint64_t size = file->size();
  uint64_t id = 0;
  {
    core::MutexLock l(&mu_);
    id = next_id_++;
  }
  Insert(id, std::shared_ptr<const RandomAccessFile>(std::move(file)));
  return std::unique_ptr<RandomAccessFile>(new CachedFile(shared_from_this(), id, name, size));
}

Result<std::shared_ptr<const RandomAccessFile>> FileCache::Acquire(uint64_t id,
                                                                   const std::string& name,
                                                                   uint64_t size) {
  {
    core::MutexLock l(&mu_);
    const auto it = entries_.find(id);
    if (it != entries_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return it->second.file;
    }
    ++reopens_;
  }
  MakeRoom();
  // Reopened without the lock: an open is blocking I/O (a round trip on a
  // network file system). Two readers of the same closed file may both
  // reopen it; Insert keeps one.
  Result<std::unique_ptr<RandomAccessFile>> file = OpenLocal(name);
  if (!file.ok()) {
    return file.status().WithContext("reopening '" + name + "' (closed to bound the open files)");
  }
  if ((*file)->size() != size) {
    return DataLossError("'" + name + "' changed size since the dataset was opened (" +
                         std::to_string(size) + " bytes then, " + std::to_string((*file)->size()) +
                         " now)");
  }
  return Insert(id, std::shared_ptr<const RandomAccessFile>(std::move(file).value()));
}

std::shared_ptr<const RandomAccessFile> FileCache::Insert(
    uint64_t id, std::shared_ptr<const RandomAccessFile> file) {
  std::vector<std::shared_ptr<const RandomAccessFile>>
      dropped;  // closed after the lock is released
  std::shared_ptr<const RandomAccessFile> out;
  {
    core::MutexLock l(&mu_);
    const auto it = entries_.find(id);
    if (it != entries_.end()) {  // a racing reopen got there first
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      dropped.push_back(std::move(file));
      out = it->second.file;
    } else {
      lru_.push_front(id);
      out = file;
      entries_.emplace(id, Entry{std::move(file), lru_.begin()});
    }
    while (entries_.size() > capacity_) {
      const auto victim = entries_.find(lru_.back());
      dropped.push_back(std::move(victim->second.file));
      entries_.erase(victim);
      lru_.pop_back();
    }
  }
  return out;
}

void FileCache::MakeRoom() {
  std::vector<std::shared_ptr<const RandomAccessFile>>
      dropped;  // closed after the lock is released
  core::MutexLock l(&mu_);
  while (!entries_.empty() && entries_.size() >= capacity_) {
    const auto victim = entries_.find(lru_.back());
    dropped.push_back(std::move(victim->second.file));
    entries_.erase(victim);
    lru_.pop_back();
  }
}

bool FileCache::DropAll() {
  std::unordered_map<uint64_t, Entry> dropped;
  {
    core::MutexLock l(&mu_);
    dropped.swap(entries_);
    lru_.clear();
  }
  return !dropped.empty();
}

void FileCache::Forget(uint64_t id) {
  std::shared_ptr<const RandomAccessFile> dropped;
  core::MutexLock l(&mu_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return;
  dropped = std::move(it->second.file);
  lru_.erase(it->second.lru);
  entries_.erase(it);
}  // `l` is released before `dropped` closes the file (reverse declaration order)

size_t FileCache::open_files() const {
  core::MutexLock l(&mu_);
  return entries_.size();
}

uint64_t FileCache::reopens() const {
  core::MutexLock l(&mu_);
  return reopens_;
}

}  // namespace feedline::io
