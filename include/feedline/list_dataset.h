// CSV and JSON Lines lists as datasets, read as they are (docs/fields.md):
// each row is a sample, each column a named part. A column listed in
// ListOptions::file_columns holds file paths (relative to the list's
// folder, or URLs and s3:// objects), and its part is that file's bytes; every other column's part
// is its value: the text of a CSV cell, or for JSONL a string as it is and any other JSON value
// (number, bool, object, array) as compact JSON text.
//
// CSV: RFC 4180 (a header row names the columns; fields may be quoted with
// '"', with "" for a quote and newlines inside quotes; CRLF or LF); every
// row has the header's number of cells. JSONL: one JSON object per
// non-empty line; a key absent or null in a row is a part that row does not
// have. Rows are parsed at open and held in one arena (the list's text
// once, plus 8 bytes per cell); errors name the list, the line and the
// reason.
//
// Without parts (image classification, `feedline pack`'s convention), a
// list needs a "path" file column and may have an integer "label" column
// (checked at open) and a "key" column.
//
// Thread safety: a ListDataset is immutable after Open; reads are safe for
// concurrent use.
#ifndef FEEDLINE_LIST_DATASET_H_
#define FEEDLINE_LIST_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "feedline/export.h"
#include "feedline/file.h"
#include "feedline/sample.h"
#include "feedline/status.h"

namespace feedline {

struct FEEDLINE_EXPORT ListOptions {
  // Columns whose values are file paths, read as the part's bytes. Names
  // the list does not have are ignored (a field's op names a missing part).
  std::vector<std::string> file_columns;
  // Image classification: "path" is a file column, "label" an integer
  // column (-1 when absent), checked at open.
  bool path_label = false;
  // For a list or files that are URLs or s3:// objects (file.h). A file
  // column's value that is a URL or s3:// name is read as it is; any other
  // relative value is relative to the list's folder or prefix.
  HttpOptions http;
};

class FEEDLINE_EXPORT ListDataset {
 public:
  // A .csv or .jsonl file. InvalidArgument naming the list, the line and
  // the reason for a malformed row, a file column that is not a column, or
  // an empty list.
  static Result<std::shared_ptr<const ListDataset>> Open(const std::string& path,
                                                         const ListOptions& options = {});

  const std::string& path() const { return path_; }
  uint64_t num_rows() const { return rows_; }
  const std::vector<std::string>& columns() const { return columns_; }
  // Row r's value of column c, and whether the row has one.
  bool Has(uint64_t r, size_t c) const;
  std::string_view Value(uint64_t r, size_t c) const;
  // The line of the list row r starts on (from 1), for messages.
  uint64_t line(uint64_t r) const { return lines_[r]; }
  int64_t label(uint64_t r) const { return labels_.empty() ? -1 : labels_[r]; }
  // Row r's "key" column, or "line N" when the list has none.
  std::string Key(uint64_t r) const;
  // The resolved path of file column c in row r.
  std::string FilePath(uint64_t r, size_t c) const;
  // Adds one part per column row r has (file columns read, one after the
  // other, into the sample's scratch); location names the list, the row
  // and its line. Errors name the column and the file.
  Status ReadParts(uint64_t r, Sample& sample) const;
  // Reads row r's "path" file as the sample's data() and sets its label.
  Status ReadPathLabel(uint64_t r, Sample& sample) const;
  uint64_t Fingerprint() const;

 private:
  struct Cell {
    uint32_t offset = 0;  // into arena_ (a list over 4 GiB is refused)
    uint32_t size = 0;
    static constexpr uint32_t kAbsent = ~uint32_t{0};
  };
  Status Finish(const ListOptions& options);

  std::string path_;
  std::string base_;  // the list's folder, for relative paths
  HttpOptions http_;
  std::vector<std::string> columns_;
  std::vector<bool> is_file_;
  std::string arena_;
  std::vector<Cell> cells_;  // rows_ x columns_
  std::vector<uint64_t> lines_;
  std::vector<int64_t> labels_;  // path_label only
  size_t path_column_ = 0, key_column_ = ~size_t{0};
  uint64_t rows_ = 0;
};

// Reads row i of the list: every column as a part (parts = true), or, for
// image classification, the "path" file as the sample's bytes and the
// "label" column as its label.
FEEDLINE_EXPORT std::shared_ptr<const SampleOp> MakeListReadOp(
    std::shared_ptr<const ListDataset> dataset, bool parts);

}  // namespace feedline

#endif  // FEEDLINE_LIST_DATASET_H_
