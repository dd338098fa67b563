// Writing and reading feedline shards (docs/shard_format.md).
//
// ShardWriter appends records to `<path>.partial`, and Finish() writes the
// index and footer, fsyncs, renames to `<path>` and fsyncs the directory: a
// crash or a full disk never leaves a file at `<path>` that looks complete.
// ShardReader verifies header, footer and index at Open, and each record's
// header and checksum on Read; every error names the shard, the record
// number, the byte offset and the reason.
//
// Thread safety: a ShardWriter needs external synchronisation. A
// ShardReader is immutable after Open; Read is const and safe for
// concurrent use (pread, no shared file position).
#ifndef FEEDLINE_SHARD_H_
#define FEEDLINE_SHARD_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "feedline/export.h"
#include "feedline/file.h"
#include "feedline/shard_format.h"
#include "feedline/status.h"

namespace feedline {

// A named field of a version-2 record ("jpg", "txt", "json", ...).
struct FEEDLINE_EXPORT ShardField {
  std::string_view name;  // 1 to 255 bytes
  std::span<const uint8_t> data;
};

// One record's fields, as written or as read (views into caller storage).
struct FEEDLINE_EXPORT ShardRecord {
  int64_t label = -1;
  std::string_view key;
  std::string_view metadata;  // a JSON object or empty
  // Version 1: the record's bytes. Version 2, as read: the first field's
  // bytes (empty without fields); written: must be empty.
  std::span<const uint8_t> data;
  // Version 2: the record's named fields, in order (names unique). Empty
  // for version 1.
  std::vector<ShardField> fields;
};

class FEEDLINE_EXPORT ShardWriter {
 public:
  // Creates `<path>.partial` (truncating a leftover one) for a shard of
  // format `version` (shard::kShardVersion1 or 2). Errors name the file.
  static Result<std::unique_ptr<ShardWriter>> Create(const std::string& path,
                                                     uint32_t version = shard::kShardVersion1);
  // Removes the partial file unless Finish() succeeded.
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Appends a record. Errors: InvalidArgument for a record over the format's
  // limits, a version-1 record with fields, a version-2 record with data
  // (its bytes go in fields) or with a field name empty, over 255 bytes or
  // repeated; Unavailable/ResourceExhausted for write failures (ENOSPC names
  // the file and says the disk is full).
  Status Add(const ShardRecord& record);

  // Index, footer, fsync, rename, fsync of the directory.
  Status Finish();

  uint64_t num_records() const { return offsets_.size(); }
  uint32_t version() const { return version_; }
  uint64_t bytes() const { return offset_; }
  const std::string& path() const { return path_; }
  // CRC32C of every byte of the file (complete after Finish), for manifests.
  uint32_t file_crc32c() const { return file_crc_; }

 private:
  ShardWriter(std::string path, int fd, uint32_t version);
  Status Write(const void* data, size_t n);
  Status Flush();

  std::string path_;
  std::string partial_;
  int fd_ = -1;
  bool finished_ = false;
  uint32_t version_ = shard::kShardVersion1;
  uint64_t offset_ = 0;
  std::vector<uint64_t> offsets_;
  std::vector<uint8_t> buffer_;
  uint32_t file_crc_ = 0;
};

class FEEDLINE_EXPORT ShardReader {
 public:
  // Opens and verifies header, footer and index (docs/shard_format.md,
  // "What a reader must verify", 1-4). `path` may be an HTTP(S) URL. Errors:
  // NotFound; DataLoss naming the check that failed; InvalidArgument for a
  // foreign file or an unknown version (naming found and supported versions).
  static Result<std::unique_ptr<ShardReader>> Open(const std::string& path,
                                                   const HttpOptions& http = {});
  static Result<std::unique_ptr<ShardReader>> Open(std::unique_ptr<RandomAccessFile> file);
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  // Reads record i with one pread: its fields view `*scratch` (resized to
  // the record's extent). Checks 5-6 of the spec. OutOfRange for
  // i >= num_records().
  Status Read(uint64_t i, std::vector<uint8_t>* scratch, ShardRecord* out) const;
  // Records first..last (inclusive), back to back, with one read: for
  // read-ahead of consecutive records of a remote shard.
  Status ReadRun(uint64_t first, uint64_t last, std::vector<uint8_t>* out) const;
  // Checks 5-6 on record i's bytes already read (exactly its extent, e.g.
  // carved from ReadRun's); the fields view `bytes`.
  Status Parse(uint64_t i, const std::vector<uint8_t>& bytes, ShardRecord* out) const;

  uint64_t num_records() const { return offsets_.size(); }
  uint32_t version() const { return version_; }
  uint64_t file_size() const { return file_size_; }
  uint64_t record_offset(uint64_t i) const { return offsets_[i]; }
  // Bytes Read(i) reads (record header and payload), from the index.
  uint64_t record_extent(uint64_t i) const {
    return (i + 1 < offsets_.size() ? offsets_[i + 1] : index_offset_) - offsets_[i];
  }
  const std::string& path() const { return path_; }
  // CRC32C of the whole file (reads all of it).
  Result<uint32_t> FileCrc32c() const;

 private:
  explicit ShardReader(std::unique_ptr<RandomAccessFile> file);
  Status ReadAt(uint64_t offset, void* out, size_t n) const { return file_->Read(offset, n, out); }
  Status RecordError(uint64_t i, std::string_view reason) const;
  std::string DescribeTruncation() const;

  std::unique_ptr<RandomAccessFile> file_;
  std::string path_;
  uint64_t file_size_;
  uint64_t index_offset_ = 0;
  uint32_t version_ = shard::kShardVersion1;
  std::vector<uint64_t> offsets_;
};

}  // namespace feedline

#endif  // FEEDLINE_SHARD_H_
