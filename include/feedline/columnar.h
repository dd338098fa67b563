// Parquet and Arrow IPC files as datasets, read in place (docs/columnar.md):
// each row is a sample, each top-level column a named part (or, without
// parts, the image and label of an image classification set).
//
// A dataset is one or more files with the same schema (the columns it
// reads): Parquet (`.parquet`, local, http(s) or s3://, read through
// feedline's RandomAccessFile with ranged reads) or Arrow IPC (`.arrow`,
// `.feather`, file or stream format, local and memory-mapped; the files
// `datasets.save_to_disk` writes). Rows are grouped as the files are (a
// Parquet row group, an IPC record batch): the unit of reading. Only the
// columns asked for are read, and of a `{bytes, path}` struct column only
// its children.
//
// Columns become parts by their Arrow type:
//   binary, large_binary, binary_view, fixed_size_binary, and a struct with a
//   binary `bytes` child (the Hugging Face Image/Audio feature): the bytes,
//   encoded data as a file would hold it (kEncoded);
//   string, large_string, string_view: the UTF-8 text (kText);
//   integers and bool: the value as decimal text, and the sample's label
//   when it is the label column (kInteger);
//   list, large_list, fixed_size_list of a fixed-width number: a .npy
//   (version 1.0, C order) of one dimension, or two for a fixed-size list
//   of fixed-size lists (kArray).
// A null value is an error of that row, naming the file, group, row and
// column; so is a read or decode failure of a group (for each of its rows),
// so skip-and-count (LoaderOptions::max_errors) applies per row.
//
// Thread safety: a ColumnarDataset is immutable after Open and safe for
// concurrent use.
#ifndef FEEDLINE_COLUMNAR_H_
#define FEEDLINE_COLUMNAR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "feedline/export.h"
#include "feedline/file.h"
#include "feedline/sample.h"
#include "feedline/status.h"

// The Arrow C stream interface (arrow/c/abi.h), a stable C ABI: any Arrow
// implementation exports it (pyarrow's __arrow_c_stream__).
struct ArrowArrayStream;

namespace feedline {

// True when this build reads Parquet and Arrow IPC (built with Arrow C++,
// cmake/FeedlineArrow.cmake); otherwise opening one says how to get it.
FEEDLINE_EXPORT bool ColumnarSupported();
// "arrow 26.0.1" (the library linked), or "" without it.
FEEDLINE_EXPORT std::string ColumnarLibraryVersion();

enum class ColumnKind { kEncoded, kText, kInteger, kArray, kOther };
FEEDLINE_EXPORT const char* ColumnKindName(
    ColumnKind kind);  // "encoded", "text", "integer", "array", "other"

struct FEEDLINE_EXPORT ColumnInfo {
  std::string name;  // as the file spells it
  std::string type;  // Arrow's ToString(): "struct<bytes: binary, path: string>"
  ColumnKind kind = ColumnKind::kOther;
};

struct FEEDLINE_EXPORT ColumnarOptions {
  // Top-level columns to read, matched without regard to case (part names
  // are lower case). Empty: image classification, the image column
  // ("image", "img", "jpg", "png", "webp", or the one encoded column) and
  // the label column ("label", "labels", "cls", "class", "target", or
  // none), read as the sample's data and label.
  std::vector<std::string> columns;
  // True: each read column is a part named by its lower-cased name
  // (docs/fields.md). False: the image and label columns fill data() and
  // label (the first two `columns`, or found as above).
  bool parts = false;
  HttpOptions http;  // for http(s):// and s3:// files
  // Decoded groups held between samples (the cache), in bytes; the loader
  // takes it out of its memory budget. 0: 256 MiB.
  uint64_t cache_bytes = 0;
  // Threads decoding groups ahead of the workers in the plan's order: 0
  // none. ~0u: 1 for local files, 4 for remote ones.
  uint32_t read_ahead_threads = ~0u;
  // Rows are shuffled within windows of this many groups (the groups
  // themselves in a random order; sampler.h, "Grouped shuffle"), so each
  // group is read once per epoch and the cache holds about a window. 0:
  // as many as half the cache holds (at least 1, at most 64).
  uint32_t shuffle_window = 0;
};

class FEEDLINE_EXPORT ColumnarDataset {
 public:
  virtual ~ColumnarDataset() = default;

  // The files of `path`: a file as it is; a directory or an s3:// prefix:
  // its .parquet files, or else its .arrow files (a save_to_disk folder:
  // the data files state.json names, in its order), sorted by name; a
  // pattern with '*', '?' or '[' in its last component: the local files it
  // matches, sorted. NotFound naming the path when nothing matches.
  static Result<std::vector<std::string>> ListFiles(const std::string& path,
                                                    const HttpOptions& http = {});

  // Opens the files (their footers or IPC schemas), checks that every one
  // has the columns read with the same types, and resolves the image and
  // label columns. Errors name the file and the reason (not a Parquet or
  // Arrow file, a truncated footer, a missing column with the columns it
  // has, a type that differs between files, a type no part can be).
  static Result<std::shared_ptr<const ColumnarDataset>> Open(const std::vector<std::string>& files,
                                                             const ColumnarOptions& options = {});

  // The record batches of an Arrow C stream (a pyarrow Table's, or a
  // datasets.Dataset's, memory-mapped or in memory), taken over (the stream
  // is released) and held without a copy; each batch is a group. `name`
  // stands for the file in messages and in the fingerprint (a datasets
  // fingerprint, say).
  static Result<std::shared_ptr<const ColumnarDataset>> FromArrowStream(
      ArrowArrayStream* stream, const std::string& name, const ColumnarOptions& options = {});

  virtual const std::vector<std::string>& files() const = 0;
  virtual uint64_t num_rows() const = 0;
  // Every top-level column of the first file's schema.
  virtual const std::vector<ColumnInfo>& schema() const = 0;
  // The columns read, in part order (their schema entries).
  virtual const std::vector<ColumnInfo>& columns() const = 0;
  // Rows per group, in dataset order (files in order, groups in each).
  virtual const std::vector<uint64_t>& group_sizes() const = 0;
  // The window `shuffle_window` resolved to (>= 1).
  virtual uint32_t shuffle_window() const = 0;
  // Class names of the label column from the Hugging Face feature metadata
  // (a ClassLabel's "names"), or empty.
  virtual const std::vector<std::string>& classes() const = 0;
  // Digest of the files' names (base names), sizes, row counts per group
  // and the columns read with their types: a resume state saved on another
  // dataset is refused.
  virtual uint64_t Fingerprint() const = 0;

  // Row `row`'s columns into `sample`: parts, or data and label (see
  // ColumnarOptions::parts), and its location (file, row in the file, key:
  // a {bytes, path} struct's path when read, else "row N"), the parts
  // copied into the sample's scratch. Decodes the row's group unless it is
  // the last one this thread read (rows in order: each group once; the
  // thread keeps that group until its next Read of another). For tests and
  // tools; a loader uses MakeColumnarReadOp.
  virtual Status Read(uint64_t row, Sample& sample) const = 0;
};

// The read op of a columnar dataset, with its background work: groups are
// decoded ahead in plan order into a cache of ColumnarOptions::cache_bytes
// (least recently used out first), and each worker keeps the group of its
// current sample alive until its next one, so parts point into the decoded
// columns without a copy. Its ConfigFingerprint holds the shuffle window.
FEEDLINE_EXPORT std::shared_ptr<const SampleOp> MakeColumnarReadOp(
    std::shared_ptr<const ColumnarDataset> dataset);

}  // namespace feedline

#endif  // FEEDLINE_COLUMNAR_H_
