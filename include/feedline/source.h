// Opening any supported data source by path: a dataset packed by `feedline
// pack` (a directory with manifest.json, or its http(s):// URL), WebDataset
// tar shards (a .tar file or a directory holding only .tar files), or an
// ImageFolder tree, or a CSV/JSON Lines list (a .csv or .jsonl file).
#ifndef FEEDLINE_SOURCE_H_
#define FEEDLINE_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "feedline/export.h"
#include "feedline/file.h"
#include "feedline/image_folder.h"
#include "feedline/sample.h"
#include "feedline/status.h"

namespace feedline {

struct FEEDLINE_EXPORT Source {
  enum class Kind { kShards, kTar, kImageFolder, kList, kColumnar };
  Kind kind = Kind::kImageFolder;
  std::shared_ptr<const SampleOp> read_op;  // fills bytes, label, location
  uint64_t num_samples = 0;
  std::vector<std::string> classes;           // empty when the source has none (tars)
  std::shared_ptr<const ImageFolder> folder;  // the listing, for kImageFolder only
  // Read by groups (kColumnar): the sizes and window of a grouped shuffle
  // (SamplerOptions::group_sizes), which the pipeline passes on.
  std::vector<uint64_t> sample_groups;
  uint64_t group_window = 1;
};

FEEDLINE_EXPORT const char* SourceKindName(
    Source::Kind kind);  // "shards", "tar", "folder", "list", "columnar"

class ColumnarDataset;

struct FEEDLINE_EXPORT SourceOptions {
  HttpOptions http;
  // Read-ahead for packed datasets (dataset.h); ~0 = the default: 64 MiB and
  // 8 fetches in flight for URLs, none for local files (the page cache
  // reads ahead there).
  uint64_t read_ahead_bytes = ~uint64_t{0};
  uint32_t read_ahead_threads = 8;
  ImageFolderOptions folder;  // for image folder trees
  // Samples with several fields (docs/fields.md): tars are opened with
  // every member as a named part of its sample, and a sample needs no image
  // member. Image folders always name their file's part by its extension;
  // packed shards hold one image and a label per record.
  bool parts = false;
  // CSV/JSONL lists with parts: the columns that hold file paths
  // (list_dataset.h). Without parts a list is path,label[,key].
  std::vector<std::string> list_file_columns;
  // Parquet / Arrow IPC (columnar.h): the columns to read (with parts: each
  // field's parts; without: image and label, found by name when empty), and
  // the grouped shuffle's window (0: from the cache). The cache is
  // read_ahead_bytes when set (else 256 MiB); columnar_threads decode ahead
  // (~0u: 1 for local files, 4 for remote ones; ColumnarOptions).
  std::vector<std::string> columns;
  uint32_t shuffle_window = 0;
  uint32_t columnar_threads = ~0u;
  // A columnar dataset opened already (ColumnarDataset::FromArrowStream):
  // read instead of `path`, which then only names it.
  std::shared_ptr<const ColumnarDataset> columnar;
};

// Which kind of source `path` is, by the one rule every caller uses (the
// Python face and the doctor ask this too): an http(s) URL that is not a .tar, or a directory
// with manifest.json is packed shards; a .tar file (or a brace pattern of
// them, "train-{000..099}.tar"), or a directory holding .tar files and no
// sub-directories, is WebDataset tars; a .csv or .jsonl file is a list;
// anything else is an ImageFolder tree (so a folder with both .tar files
// and class folders is a folder). An s3:// prefix follows the directory
// rule on its listing (one ListObjectsV2 pass, with `http`); a prefix that
// cannot be listed says shards, and opening it names the problem. Local
// paths: names only; opening the source reports what is wrong.
FEEDLINE_EXPORT Source::Kind DetectSourceKind(const std::string& path,
                                              const HttpOptions& http = {});

// Errors are those of the underlying opener, naming the file.
FEEDLINE_EXPORT Result<Source> OpenSource(const std::string& path,
                                          const SourceOptions& options = {});

}  // namespace feedline

#endif  // FEEDLINE_SOURCE_H_
