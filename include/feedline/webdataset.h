// WebDataset tar shards, read as they are: members whose names share a key
// (the path up to the first '.' of the file name, e.g. "n0153/000017" for
// "n0153/000017.jpg" and "n0153/000017.cls") form one sample; the image is
// the .jpg/.jpeg/.png member and the label is the integer in .cls (-1 when
// absent). Opened for parts (TarOptions::require_image = false), every
// member is a named part of the sample (docs/fields.md). Tars are indexed once at open by walking
// their headers (ustar, GNU long names, PAX path records), with every header checksum and size
// checked against the file; reads are then one pread per sample.
//
// Thread safety: a TarDataset is immutable after Open; reads are safe for
// concurrent use.
#ifndef FEEDLINE_WEBDATASET_H_
#define FEEDLINE_WEBDATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "feedline/export.h"
#include "feedline/file.h"
#include "feedline/sample.h"
#include "feedline/status.h"

namespace feedline {

// One member of a sample: "n0153/000017.json" is ext "json".
struct FEEDLINE_EXPORT TarMember {
  std::string ext;      // the name after the key's '.', lower-cased ("jpg", "seg.png")
  uint64_t offset = 0;  // of its bytes in the tar
  uint64_t size = 0;
};

struct FEEDLINE_EXPORT TarSample {
  uint32_t tar = 0;  // index into TarDataset::paths()
  std::string key;
  uint64_t offset = 0;  // of the image bytes in the tar (the first image member)
  uint64_t size = 0;    // 0 when the sample has no image member
  int64_t label = -1;   // from the .cls member; -1 when absent
  // Every member, in tar order; kept only when opened with
  // require_image = false (parts), empty otherwise.
  std::vector<TarMember> members;
};

struct FEEDLINE_EXPORT TarOptions {
  // True (image classification): every sample must have exactly one image
  // member. False (samples with several fields, docs/fields.md): any
  // members, several images allowed; two members with the same extension
  // are still an error.
  bool require_image = true;
  HttpOptions http;  // for remote tars (https:// or s3://)
};

// WebDataset's shard patterns, expanded as Python's braceexpand (which
// webdataset uses) expands them: "{000..099}" is 000 to 099 with the
// widest end's zero padding, "{a..e}" letters, "{9..0}" counts down,
// "{x,y}" alternatives; groups nest and several multiply, left to right
// ("a{1,2}b{3,4}" is a1b3 a1b4 a2b3 a2b4). Braces that are neither (no
// top-level ',' nor a range) are literal text, as in the shell; "\{" is a
// literal brace. InvalidArgument for an unclosed or stray brace and for
// more than 10^6 names.
FEEDLINE_EXPORT Result<std::vector<std::string>> ExpandBraces(const std::string& pattern);

class FEEDLINE_EXPORT TarDataset {
 public:
  // `paths`: tar files, in order (sample order follows them). Errors name the
  // tar, the member's header offset and the reason.
  static Result<std::shared_ptr<const TarDataset>> Open(std::vector<std::string> paths,
                                                        const TarOptions& options = {});
  // A .tar file, a brace pattern of them (ExpandBraces: local, https:// or
  // s3://), or a directory of .tar files (sorted by name).
  static Result<std::shared_ptr<const TarDataset>> OpenPath(const std::string& path,
                                                            const TarOptions& options = {});
  ~TarDataset();

  uint64_t num_samples() const { return samples_.size(); }
  const TarSample& sample(uint64_t i) const { return samples_[i]; }
  const std::vector<std::string>& paths() const { return paths_; }
  // Reads sample i's image bytes into `out`.
  Status Read(uint64_t i, std::vector<uint8_t>* out) const;
  // Reads n bytes at offset of tar number `tar` (read-ahead runs).
  Status ReadRange(uint32_t tar, uint64_t offset, uint64_t n, uint8_t* out) const;
  // Reads every member of sample i (and the headers between them) into
  // *out as one read: the span ReadParts splits.
  Status ReadSpan(uint64_t i, std::vector<uint8_t>* out) const;
  // Reads every member of sample i (one read) into the sample's scratch and
  // adds one part per member, named by its extension (Sample::AddPart);
  // data() is the first image member, if any.
  Status ReadParts(uint64_t i, Sample& sample) const;
  const TarOptions& options() const { return options_; }

 private:
  std::vector<std::string> paths_;
  std::vector<std::unique_ptr<RandomAccessFile>> files_;
  std::vector<TarSample> samples_;
  TarOptions options_;
};

// Reads sample i of the tars into the sample's bytes; sets label, key and
// location (tar path, sample number, offset). With read-ahead (remote tars:
// OpenSource gives 64 MiB, 8 in flight), samples are fetched ahead of the
// workers in the loader's order, each one ranged read, within max_bytes.
FEEDLINE_EXPORT std::shared_ptr<const SampleOp> MakeTarReadOp(
    std::shared_ptr<const TarDataset> dataset, const ReadAheadOptions& read_ahead = {});
// The same, reading every member as a part (TarDataset::ReadParts), for
// recipes with several fields.
FEEDLINE_EXPORT std::shared_ptr<const SampleOp> MakeTarPartsReadOp(
    std::shared_ptr<const TarDataset> dataset, const ReadAheadOptions& read_ahead = {});

}  // namespace feedline

#endif  // FEEDLINE_WEBDATASET_H_
