// A packed dataset: shards plus a manifest (docs/shard_format.md,
// "Datasets"), read through the engine's source-op interface.
//
// Thread safety: a ShardDataset is immutable after Open; Read and the op it
// makes are safe for concurrent use.
#ifndef FEEDLINE_DATASET_H_
#define FEEDLINE_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "feedline/export.h"
#include "feedline/file.h"
#include "feedline/sample.h"
#include "feedline/shard.h"
#include "feedline/status.h"

namespace feedline {

struct FEEDLINE_EXPORT ShardInfo {
  std::string name;  // relative to the dataset directory
  uint64_t records = 0;
  uint64_t bytes = 0;
  uint32_t crc32c = 0;  // of the whole file
};

struct FEEDLINE_EXPORT DatasetManifest {
  std::vector<std::string> classes;
  std::vector<ShardInfo> shards;
  uint64_t records = 0;

  // manifest.json text; Parse names the field that is missing or wrong.
  std::string ToJson() const;
  static Result<DatasetManifest> Parse(std::string_view json);
};

inline constexpr char kManifestName[] = "manifest.json";

class FEEDLINE_EXPORT ShardDataset {
 public:
  // Opens `dir`/manifest.json and every shard in it, checking each shard's
  // size and record count against the manifest (whole-file checksums are
  // `feedline verify`'s job). Errors name the shard and both values.
  // `dir` may be an http(s):// URL; `http` then sets timeouts and retries.
  static Result<std::shared_ptr<const ShardDataset>> Open(const std::string& dir,
                                                          const HttpOptions& http = {});

  uint64_t num_records() const { return manifest_.records; }
  const DatasetManifest& manifest() const { return manifest_; }
  const std::string& dir() const { return dir_; }
  const ShardReader& shard(size_t i) const { return *readers_[i]; }

  // Bytes reading `record` takes (header and payload), from the index.
  uint64_t RecordBytes(uint64_t record) const;
  // Global record number -> (shard, record in shard).
  void Locate(uint64_t record, size_t* shard, uint64_t* local) const;
  Status Read(uint64_t record, std::vector<uint8_t>* scratch, ShardRecord* out) const;

 private:
  std::string dir_;
  DatasetManifest manifest_;
  std::vector<std::unique_ptr<ShardReader>> readers_;
  std::vector<uint64_t> first_record_;  // per shard, prefix sums
};

// Reads record i of the dataset into the sample's bytes; sets label, key and
// location (shard path, record, offset). With read-ahead, records are
// fetched ahead of the workers in the loader's order within max_bytes,
// which the loader takes out of its memory budget (BackgroundWork::ReservedBytes, sample.h).
FEEDLINE_EXPORT std::shared_ptr<const SampleOp> MakeShardReadOp(
    std::shared_ptr<const ShardDataset> dataset, const ReadAheadOptions& read_ahead = {});

}  // namespace feedline

#endif  // FEEDLINE_DATASET_H_
